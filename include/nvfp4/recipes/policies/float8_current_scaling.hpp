// nvfp4/recipes/policies/float8_current_scaling.hpp: the policy of float8_current_scaling (TE's
// Float8CurrentScaling): quantize_fp8_current per tensor (X, W in the forward format, dY in the
// backward one); each columnwise copy is quantize_fp8_with_scale of the transpose with the same
// scale; fp8_gemm with the recipe's split-accumulator flags. Every copy is written into storage
// kept from step to step (the layer's W operands and saved X, this policy's dY copies).
#pragma once

#include "nvfp4/recipes/float8_current_scaling.hpp"
#include "nvfp4/recipes/policies/fp8_operands.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"

namespace nvfp4 {

class float8_current_scaling_policy : public policy_base {
 public:
  using recipe_type = float8_current_scaling;
  static constexpr const char* name = "Float8CurrentScaling";
  static constexpr const char* short_name = "fp8_current";
  static constexpr bool quantized = true;
  static constexpr bool takes_amax_rule = false;
  using weight_operands = fp8_weight_operands;
  using saved_input = fp8_saved_input;

  explicit float8_current_scaling_policy(const float8_current_scaling& r) : recipe_(r) {}
  const float8_current_scaling& recipe() const { return recipe_; }

  void quantize_weight(const linear_context&, matrix_view<const float> w, bool columnwise, bool, weight_operands& out) const {
    const fp8_format f = forward_format(recipe_.fp8_format);
    quantize_fp8_current_into(w, f, {.power_2_scale = recipe_.use_power_2_scales}, out.row.plain);
    if (columnwise) quantize_fp8_with_scale_into(w.transposed(), f, out.row.plain.scale(), out.col, quantized_axis::columnwise);
  }
  void pack_fprop_operand(const linear_context&, weight_operands& w) const { w.row.pack(); }
  void fprop(const linear_context& c, matrix_view<const float> x, const weight_operands& w, matrix_view<float> y, saved_input* saved,
             bool) {
    const fp8_format f = forward_format(recipe_.fp8_format);
    quantize_fp8_current_into(x, f, {.power_2_scale = recipe_.use_power_2_scales}, row_);
    detail::fp8_fprop(c, row_, w, y, recipe_.fp8_gemm_fprop);
    if (saved) quantize_fp8_with_scale_into(x.transposed(), f, row_.scale(), saved->x_col, quantized_axis::columnwise);
  }
  void bprop(const linear_context& c, matrix_view<const float> dy, const weight_operands& w, const saved_input& saved,
             matrix_view<float> dx, matrix_view<float> dw) {
    const fp8_format f = backward_format(recipe_.fp8_format);
    quantize_fp8_current_into(dy, f, {.power_2_scale = recipe_.use_power_2_scales}, row_);
    quantize_fp8_with_scale_into(dy.transposed(), f, row_.scale(), col_, quantized_axis::columnwise);
    detail::fp8_bprop(c, recipe_, row_, col_, w, saved, dx, dw);
  }

 private:
  float8_current_scaling recipe_;
  fp8_tensor row_, col_;  // X's rowwise copy (fprop), dY's two (dgrad, wgrad): kept from step to step
};

}  // namespace nvfp4
