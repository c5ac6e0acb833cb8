// nvfp4/recipes/policies/float8_block_scaling.hpp: the policy of float8_block_scaling (TE's
// Float8BlockScaling): quantize_fp8_blockwise of each tensor and of its transpose with the role's
// block shape and scale options; fp8_gemm with the recipe's split-accumulator flags.
#pragma once

#include "nvfp4/recipes/float8_block_scaling.hpp"
#include "nvfp4/recipes/policies/fp8_operands.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"

namespace nvfp4 {

class float8_block_scaling_policy : public policy_base {
 public:
  using recipe_type = float8_block_scaling;
  static constexpr const char* name = "Float8BlockScaling";
  static constexpr const char* short_name = "fp8_block";
  static constexpr bool quantized = true;
  static constexpr bool takes_amax_rule = false;
  using weight_operands = fp8_weight_operands;
  using saved_input = fp8_saved_input;

  explicit float8_block_scaling_policy(const float8_block_scaling& r) : recipe_(r) {}
  const float8_block_scaling& recipe() const { return recipe_; }

  void quantize_weight(const linear_context&, matrix_view<const float> w, bool columnwise, bool, weight_operands& out) const {
    out.row.plain = copy(tensor_role::weight, w, false);
    if (columnwise) out.col = copy(tensor_role::weight, w, true);
  }
  void pack_fprop_operand(const linear_context&, weight_operands& w) const { w.row.pack(); }
  void fprop(const linear_context& c, matrix_view<const float> x, const weight_operands& w, matrix_view<float> y, saved_input* saved,
             bool) const {
    detail::fp8_fprop(c, copy(tensor_role::input, x, false), w, y, recipe_.fp8_gemm_fprop);
    if (saved) saved->x_col = copy(tensor_role::input, x, true);
  }
  void bprop(const linear_context& c, matrix_view<const float> dy, const weight_operands& w, const saved_input& saved,
             matrix_view<float> dx, matrix_view<float> dw) const {
    detail::fp8_bprop(c, recipe_, copy(tensor_role::grad_output, dy, false), copy(tensor_role::grad_output, dy, true), w, saved, dx, dw);
  }

 private:
  /// A role's rowwise copy of v, or its columnwise copy (of vᵀ).
  fp8_tensor copy(tensor_role role, matrix_view<const float> v, bool columnwise) const {
    const fp8_format f = role_format(recipe_.fp8_format, role);
    return columnwise ? quantize_fp8_blockwise(v.transposed(), f, recipe_.block_shape(role), recipe_.scale_options(role), quantized_axis::columnwise)
                      : quantize_fp8_blockwise(v, f, recipe_.block_shape(role), recipe_.scale_options(role));
  }
  float8_block_scaling recipe_;
};

}  // namespace nvfp4
