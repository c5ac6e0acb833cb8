// nvfp4/simd/fp32_rounding.hpp: a barrier that makes the compiler round a float where the rule
// says so, for the recipes' arithmetic that must match a GPU's separately rounded operations.
#pragma once

#include "nvfp4/simd/scalar/ops.hpp"

namespace nvfp4::simd {

/// x, with the compiler made to round it to float here: a product passed through this is never
/// fused into a following addition (GPU kernels round each operation, __fmul_rn / __fadd_rn;
/// GCC's default -ffp-contract=fast would otherwise be free to fuse them into an FMA). The scalar
/// lane operation's barrier (simd/scalar/ops.hpp), for code outside the kernels.
inline float materialize(float x) { return scalar::ops::materialize(x); }

}  // namespace nvfp4::simd
