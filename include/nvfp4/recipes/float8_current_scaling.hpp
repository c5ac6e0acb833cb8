// nvfp4/recipes/float8_current_scaling.hpp: TransformerEngine's Float8CurrentScaling recipe (TE
// common/recipe/__init__.py): FP8 with one scale per tensor computed from the tensor's own amax
// at every quantization (scaling/fp8_quantize.hpp, quantize_fp8_current), and its policy: X, W in
// the forward format, dY in the backward one; each columnwise copy is quantize_fp8_with_scale of
// the transpose with the same scale; fp8_gemm with the recipe's split-accumulator flags. Every copy
// is written into storage kept from step to step (the layer's W operands and saved X, this
// policy's X and dY copies).
#pragma once

#include <tuple>

#include "nvfp4/recipes/fp8_operands.hpp"
#include "nvfp4/recipes/policy.hpp"
#include "nvfp4/recipes/recipe_common.hpp"
#include "nvfp4/recipes/recipe_fields.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"

namespace nvfp4 {

/// Float8CurrentScaling with TE's field names and defaults. TE builds its quantizers with
/// force_pow_2_scales = use_power_2_scales and amax_epsilon 0 (TE pytorch/quantization.py).
struct float8_current_scaling {
  recipe_format fp8_format = recipe_format::hybrid;
  bool use_power_2_scales = false;  ///< TE: env NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES, default off
  mm_params fp8_gemm_fprop{.use_split_accumulator = false};
  mm_params fp8_gemm_dgrad{.use_split_accumulator = true};
  mm_params fp8_gemm_wgrad{.use_split_accumulator = true};

  static constexpr auto fields() {
    using R = float8_current_scaling;
    return std::tuple{
        field_row("fp8_format", &R::fp8_format, field_origin::te, "E4M3 forward; HYBRID: E4M3 forward, E5M2 gradients"),
        field_row("use_power_2_scales", &R::use_power_2_scales, field_origin::te, "scales rounded down to a power of two"),
        field_row("fp8_gemm_fprop", &R::fp8_gemm_fprop, field_origin::te, "fprop GEMM's MMParams (default: fast accumulation)"),
        field_row("fp8_gemm_dgrad", &R::fp8_gemm_dgrad, field_origin::te, "dgrad GEMM's MMParams (default: split accumulator)"),
        field_row("fp8_gemm_wgrad", &R::fp8_gemm_wgrad, field_origin::te, "wgrad GEMM's MMParams (default: split accumulator)")};
  }

  /// TE's __post_init__ checks: no pure E5M2.
  void validate() const { detail::reject_pure_e5m2(fp8_format, "float8_current_scaling"); }
};

/// The policy of float8_current_scaling (see the header comment): its role quantizers; the copies
/// and GEMMs are fp8_family_policy's.
class float8_current_scaling_policy : public policy_base,
                                      public fp8_family_policy<float8_current_scaling, fp8_tensor, fp8_gemm_with_mm_params> {
 public:
  static constexpr const char* name = "Float8CurrentScaling";
  static constexpr const char* short_name = "fp8_current";
  static constexpr bool quantized = true;
  static constexpr bool takes_amax_rule = false;

  using fp8_family_policy::fp8_family_policy;

  void quantize_weight(const linear_context&, matrix_view<const float> w, bool columnwise, bool, weight_operands& out) const {
    const fp8_format f = forward_format(recipe_.fp8_format);
    quantize_fp8_current_into(w, f, {.power_2_scale = recipe_.use_power_2_scales}, out.row.plain);
    if (columnwise) quantize_fp8_with_scale_into(w.transposed(), f, out.row.plain.scale(), out.col, quantized_axis::columnwise);
  }
  const input_operand& quantize_input(const linear_context&, matrix_view<const float> x, saved_input* saved, bool) {
    const fp8_format f = forward_format(recipe_.fp8_format);
    quantize_fp8_current_into(x, f, {.power_2_scale = recipe_.use_power_2_scales}, x_row_);
    if (saved) quantize_fp8_with_scale_into(x.transposed(), f, x_row_.scale(), saved->x_col, quantized_axis::columnwise);
    return x_row_;
  }
  const gradient_operands& quantize_gradient(const linear_context&, matrix_view<const float> dy) {
    const fp8_format f = backward_format(recipe_.fp8_format);
    quantize_fp8_current_into(dy, f, {.power_2_scale = recipe_.use_power_2_scales}, g_.row);
    quantize_fp8_with_scale_into(dy.transposed(), f, g_.row.scale(), g_.col, quantized_axis::columnwise);
    return g_;
  }

 private:
  fp8_tensor x_row_;     // X's rowwise copy (fprop): kept from step to step
  gradient_operands g_;  // dY's two copies (dgrad, wgrad): kept from step to step
};

}  // namespace nvfp4
