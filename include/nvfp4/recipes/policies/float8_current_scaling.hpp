// nvfp4/recipes/policies/float8_current_scaling.hpp: the policy of float8_current_scaling (TE's
// Float8CurrentScaling): quantize_fp8_current per tensor (X, W in the forward format, dY in the
// backward one); each columnwise copy is quantize_fp8_with_scale of the transpose with the same
// scale; fp8_gemm with the recipe's split-accumulator flags.
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
    out.row.plain = quantize_fp8_current(w, f, {.power_2_scale = recipe_.use_power_2_scales});
    if (columnwise) out.col = quantize_fp8_with_scale(w.transposed(), f, out.row.plain.scale(), quantized_axis::columnwise);
  }
  void pack_fprop_operand(const linear_context&, weight_operands& w) const { w.row.pack(); }
  void fprop(const linear_context& c, matrix_view<const float> x, const weight_operands& w, matrix_view<float> y, saved_input* saved,
             bool) const {
    const fp8_format f = forward_format(recipe_.fp8_format);
    const fp8_tensor x8 = quantize_fp8_current(x, f, {.power_2_scale = recipe_.use_power_2_scales});
    detail::fp8_fprop(c, x8, w, y, recipe_.fp8_gemm_fprop);
    if (saved) saved->x_col = quantize_fp8_with_scale(x.transposed(), f, x8.scale(), quantized_axis::columnwise);
  }
  void bprop(const linear_context& c, matrix_view<const float> dy, const weight_operands& w, const saved_input& saved,
             matrix_view<float> dx, matrix_view<float> dw) const {
    const fp8_format f = backward_format(recipe_.fp8_format);
    const fp8_tensor g8 = quantize_fp8_current(dy, f, {.power_2_scale = recipe_.use_power_2_scales});
    const fp8_tensor g8t = quantize_fp8_with_scale(dy.transposed(), f, g8.scale(), quantized_axis::columnwise);
    detail::fp8_bprop(c, recipe_, g8, g8t, w, saved, dx, dw);
  }

 private:
  float8_current_scaling recipe_;
};

}  // namespace nvfp4
