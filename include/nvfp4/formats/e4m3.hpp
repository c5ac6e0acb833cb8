// nvfp4/formats/e4m3.hpp: E4M3 ("float8_e4m3fn": max 448, NaN = 0x7F/0xFF, no Inf) and UE4M3,
// the unsigned view of it that NVFP4 uses for its block scales (docs/numerics_spec.md §1).
#pragma once

#include "nvfp4/formats/minifloat.hpp"

namespace nvfp4 {

inline constexpr minifloat_traits e4m3_traits{.exponent_bits = 4,
                                              .mantissa_bits = 3,
                                              .bias = 7,
                                              .has_sign = true,
                                              .has_inf = false,
                                              .has_nan = true,
                                              .max_code = 0x7E,
                                              .nan_code = 0x7F};

/// UE4M3: E4M3 with the sign bit ignored (a scale byte 0x80..0xFF reads as its low 7 bits).
inline constexpr minifloat_traits ue4m3_traits{.exponent_bits = 4,
                                               .mantissa_bits = 3,
                                               .bias = 7,
                                               .has_sign = false,
                                               .has_inf = false,
                                               .has_nan = true,
                                               .max_code = 0x7E,
                                               .nan_code = 0x7F};

using e4m3 = minifloat<e4m3_traits>;
using ue4m3 = minifloat<ue4m3_traits>;

inline constexpr float e4m3_max = 448.0f;

}  // namespace nvfp4
