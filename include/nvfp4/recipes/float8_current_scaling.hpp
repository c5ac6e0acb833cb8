// nvfp4/recipes/float8_current_scaling.hpp: TransformerEngine's Float8CurrentScaling recipe (TE
// common/recipe/__init__.py): FP8 with one scale per tensor computed from the tensor's own amax
// at every quantization (scaling/fp8_quantize.hpp, quantize_fp8_current).
#pragma once

#include "nvfp4/recipes/recipe_common.hpp"

namespace nvfp4 {

/// Float8CurrentScaling with TE's field names and defaults. TE builds its quantizers with
/// force_pow_2_scales = use_power_2_scales and amax_epsilon 0 (TE pytorch/quantization.py).
struct float8_current_scaling {
  recipe_format fp8_format = recipe_format::hybrid;
  bool use_power_2_scales = false;  ///< TE: env NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES, default off
  mm_params fp8_gemm_fprop{.use_split_accumulator = false};
  mm_params fp8_gemm_dgrad{.use_split_accumulator = true};
  mm_params fp8_gemm_wgrad{.use_split_accumulator = true};

  /// TE's __post_init__ checks: no pure E5M2.
  void validate() const { detail::reject_pure_e5m2(fp8_format, "float8_current_scaling"); }
};

}  // namespace nvfp4
