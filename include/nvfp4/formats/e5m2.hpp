// nvfp4/formats/e5m2.hpp: E5M2 (FP8 with IEEE-like Inf and NaN, max 57344), docs/numerics_spec.md §1.
#pragma once

#include "nvfp4/formats/minifloat.hpp"

namespace nvfp4 {

inline constexpr minifloat_traits e5m2_traits{.exponent_bits = 5,
                                              .mantissa_bits = 2,
                                              .bias = 15,
                                              .has_sign = true,
                                              .has_inf = true,
                                              .has_nan = true,
                                              .max_code = 0x7B,
                                              .nan_code = 0x7E};

using e5m2 = minifloat<e5m2_traits>;

inline constexpr float e5m2_max = 57344.0f;

}  // namespace nvfp4
