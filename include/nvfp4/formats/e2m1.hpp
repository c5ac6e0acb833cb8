// nvfp4/formats/e2m1.hpp: E2M1 (FP4), the NVFP4 / MXFP4 element: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6},
// no Inf, no NaN (docs/numerics_spec.md §1). The code is sign<<3 | index into the magnitudes.
#pragma once

#include "nvfp4/formats/minifloat.hpp"

namespace nvfp4 {

inline constexpr minifloat_traits e2m1_traits{.exponent_bits = 2,
                                              .mantissa_bits = 1,
                                              .bias = 1,
                                              .has_sign = true,
                                              .has_inf = false,
                                              .has_nan = false,
                                              .max_code = 0x7,
                                              .nan_code = 0x7};

/// One E2M1 value in the low nibble of a byte.
using e2m1 = minifloat<e2m1_traits>;

/// The largest E2M1 magnitude.
inline constexpr float e2m1_max = 6.0f;

}  // namespace nvfp4
