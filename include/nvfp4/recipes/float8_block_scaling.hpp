// nvfp4/recipes/float8_block_scaling.hpp: TransformerEngine's Float8BlockScaling recipe (TE
// common/recipe/__init__.py, DeepSeek-V3 style): FP8 with fp32 scales per 1x128 block ("1D") or
// per 128x128 block ("2D"), power-of-two scales by default, split accumulation in every GEMM.
#pragma once

#include <string>

#include "nvfp4/recipes/recipe_common.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"

namespace nvfp4 {

/// Float8BlockScaling with TE's field names and defaults (TE reads NVTE_FP8_BLOCK_SCALING_FP32_SCALES
/// to turn power-of-two scales off; here set the QParams).
struct float8_block_scaling {
  recipe_format fp8_format = recipe_format::e4m3;
  fp8_scale_options fp8_quant_fwd_inp{.power_2_scale = true, .amax_epsilon = 0.0f};
  fp8_scale_options fp8_quant_fwd_weight{.power_2_scale = true, .amax_epsilon = 0.0f};
  fp8_scale_options fp8_quant_bwd_grad{.power_2_scale = true, .amax_epsilon = 0.0f};
  int x_block_scaling_dim = 1;     ///< 1: 1x128 blocks, 2: 128x128
  int w_block_scaling_dim = 2;
  int grad_block_scaling_dim = 1;
  mm_params fp8_gemm_fprop{.use_split_accumulator = true};
  mm_params fp8_gemm_dgrad{.use_split_accumulator = true};
  mm_params fp8_gemm_wgrad{.use_split_accumulator = true};

  /// TE's __post_init__ checks.
  void validate() const {
    const auto dim_ok = [](int d) { return d == 1 || d == 2; };
    detail::require(dim_ok(x_block_scaling_dim), errc::invalid_argument, "float8_block_scaling: only 1D or 2D blocks supported for x");
    detail::require(dim_ok(w_block_scaling_dim), errc::invalid_argument, "float8_block_scaling: only 1D or 2D blocks supported for w");
    detail::require(dim_ok(grad_block_scaling_dim), errc::invalid_argument,
                    "float8_block_scaling: only 1D or 2D blocks supported for grad");
    detail::require(!(x_block_scaling_dim == 2 && w_block_scaling_dim == 2), errc::invalid_argument,
                    "float8_block_scaling: 2D by 2D block GEMM not supported (x and w)");
    detail::require(!(x_block_scaling_dim == 2 && grad_block_scaling_dim == 2), errc::invalid_argument,
                    "float8_block_scaling: 2D by 2D block GEMM not supported (x and grad)");
    detail::require(!(w_block_scaling_dim == 2 && grad_block_scaling_dim == 2), errc::invalid_argument,
                    "float8_block_scaling: 2D by 2D block GEMM not supported (w and grad)");
    detail::require(fp8_gemm_fprop.use_split_accumulator, errc::invalid_argument,
                    "float8_block_scaling: split accumulator required for fprop");
    detail::require(fp8_gemm_dgrad.use_split_accumulator, errc::invalid_argument,
                    "float8_block_scaling: split accumulator required for dgrad");
    detail::require(fp8_gemm_wgrad.use_split_accumulator, errc::invalid_argument,
                    "float8_block_scaling: split accumulator required for wgrad");
    detail::reject_pure_e5m2(fp8_format, "float8_block_scaling");
  }

  /// The block shape and scale options of a role.
  fp8_block_shape block_shape(tensor_role role) const {
    const int dim = role == tensor_role::input ? x_block_scaling_dim
                                               : (role == tensor_role::weight ? w_block_scaling_dim : grad_block_scaling_dim);
    return dim == 1 ? fp8_block_shape::block_1x128 : fp8_block_shape::block_128x128;
  }
  const fp8_scale_options& scale_options(tensor_role role) const {
    return role == tensor_role::input ? fp8_quant_fwd_inp : (role == tensor_role::weight ? fp8_quant_fwd_weight : fp8_quant_bwd_grad);
  }
};

}  // namespace nvfp4
