// nvfp4/recipes/policies/nvfp4_block_scaling.hpp: the policy of nvfp4_block_scaling (TE's
// NVFP4BlockScaling): quantize_activation(X), quantize_weight(W), quantize_gradient(dY), each with
// the layer's amax rule, the gradients' recipe seed replaced by the layer's gradient_seed(step);
// fprop nvfp4_gemm(X rowwise, W rowwise), dgrad nvfp4_gemm(dY rowwise, W columnwise), wgrad
// nvfp4_gemm(dY columnwise, X columnwise).
#pragma once

#include <utility>

#include "nvfp4/recipes/nvfp4_packed_operand.hpp"
#include "nvfp4/recipes/nvfp4_recipe.hpp"
#include "nvfp4/recipes/policies/fprop_operand.hpp"
#include "nvfp4/recipes/policies/policy.hpp"

namespace nvfp4 {

class nvfp4_block_scaling_policy : public policy_base {
 public:
  using recipe_type = nvfp4_block_scaling;
  static constexpr const char* name = "NVFP4BlockScaling";
  static constexpr const char* short_name = "nvfp4";
  static constexpr bool quantized = true;
  static constexpr bool takes_amax_rule = true;

  struct weight_operands {
    fprop_operand<nvfp4_operand, nvfp4_packed_operand> row;
    nvfp4_operand col;
  };
  struct saved_input {
    nvfp4_operand x_col;
  };

  explicit nvfp4_block_scaling_policy(const nvfp4_block_scaling& r) : recipe_(r) {}
  const nvfp4_block_scaling& recipe() const { return recipe_; }

  void quantize_weight(const linear_context& c, matrix_view<const float> w, bool columnwise, bool, weight_operands& out) const {
    if (columnwise) {
      operand_pair ws = nvfp4::quantize_weight(w, recipe_, c.nvfp4_amax());
      out.row.plain = std::move(ws.rowwise);
      out.col = std::move(ws.columnwise);
    } else {
      out.row.plain = quantize_weight_rowwise(w, recipe_, c.nvfp4_amax());
    }
  }
  void pack_fprop_operand(const linear_context&, weight_operands& w) const { w.row.pack(); }
  void fprop(const linear_context& c, matrix_view<const float> x, const weight_operands& w, matrix_view<float> y, saved_input* saved,
             bool) const {
    const auto gemm = [&](const nvfp4_operand& x_row) {
      w.row.run([&](const auto& b) { nvfp4_gemm(x_row, b, y, c.mode, c.bias); });
    };
    if (saved) {
      operand_pair xs = quantize_activation(x, recipe_, c.nvfp4_amax());
      gemm(xs.rowwise);
      saved->x_col = std::move(xs.columnwise);
    } else {
      gemm(quantize_activation_rowwise(x, recipe_, c.nvfp4_amax()));
    }
  }
  void bprop(const linear_context& c, matrix_view<const float> dy, const weight_operands& w, const saved_input& saved,
             matrix_view<float> dx, matrix_view<float> dw) const {
    nvfp4_block_scaling step_recipe = recipe_;
    step_recipe.seed = c.gradient_seed;
    const operand_pair gs = quantize_gradient(dy, step_recipe, c.nvfp4_amax());
    nvfp4_gemm(gs.rowwise, w.col, dx, c.mode);
    nvfp4_gemm(gs.columnwise, saved.x_col, dw, c.mode);
  }

 private:
  nvfp4_block_scaling recipe_;
};

}  // namespace nvfp4
