// nvfp4/recipes/nvfp4_block_scaling.hpp: the policy of nvfp4_block_scaling (TE's NVFP4BlockScaling;
// the recipe struct and its field table sit with NVFP4's role rules in recipes/nvfp4_recipe.hpp,
// whose quantizers take it): quantize_activation(X), quantize_weight(W), quantize_gradient(dY),
// each with the layer's amax rule, the gradients' recipe seed replaced by the layer's
// gradient_seed(step); fprop nvfp4_gemm(X rowwise, W rowwise), dgrad nvfp4_gemm(dY rowwise, W
// columnwise), wgrad nvfp4_gemm(dY columnwise, X columnwise). The copies are written by the role
// quantizers' into forms (recipes/nvfp4_recipe.hpp, NVFP4's rules in one place) into storage kept
// from step to step, with the tensor amax the layer's NaN / Inf pass found (linear_context).
#pragma once

#include "nvfp4/recipes/fprop_operand.hpp"
#include "nvfp4/recipes/nvfp4_packed_operand.hpp"
#include "nvfp4/recipes/nvfp4_recipe.hpp"
#include "nvfp4/recipes/policy.hpp"

namespace nvfp4 {

class nvfp4_block_scaling_policy : public policy_base {
 public:
  using recipe_type = nvfp4_block_scaling;
  static constexpr const char* name = "NVFP4BlockScaling";
  static constexpr const char* short_name = "nvfp4";
  static constexpr bool quantized = true;
  static constexpr bool takes_amax_rule = true;
  /// A bf16 layer hands X, W and dY over as bf16 (the same values in half the bytes; the RHT'd
  /// columnwise copy of X then takes the fused transform-and-quantize path).
  static constexpr bool reads_bf16 = true;

  struct weight_operands {
    fprop_operand<nvfp4_operand, nvfp4_packed_operand> row;
    nvfp4_operand col;
  };
  struct saved_input {
    nvfp4_operand x_col;
  };
  using input_operand = nvfp4_operand;
  struct gradient_operands {
    nvfp4_operand row, col;  // dgrad's A (dY), wgrad's A (dYᵀ, RHT'd unless disabled)
  };

  explicit nvfp4_block_scaling_policy(const nvfp4_block_scaling& r) : recipe_(r) {}
  const nvfp4_block_scaling& recipe() const { return recipe_; }

  template <quantizer_input T>
  void quantize_weight(const linear_context& c, matrix_view<const T> w, bool columnwise, bool, weight_operands& out) {
    quantize_weight_into(w, recipe_, c.nvfp4_amax(), out.row.plain, columnwise ? &out.col : nullptr, storage_, c.tensor_amax);
  }
  void pack_fprop_operand(const linear_context&, weight_operands& w) const { w.row.pack(); }
  template <quantizer_input T>
  const input_operand& quantize_input(const linear_context& c, matrix_view<const T> x, saved_input* saved, bool) {
    quantize_activation_into(x, recipe_, c.nvfp4_amax(), x_row_, saved ? &saved->x_col : nullptr, storage_, c.tensor_amax);
    return x_row_;
  }
  /// dY's copies with the layer's gradient seed of this backward in place of the recipe's seed.
  template <quantizer_input T>
  const gradient_operands& quantize_gradient(const linear_context& c, matrix_view<const T> dy) {
    nvfp4_block_scaling step_recipe = recipe_;
    step_recipe.seed = c.gradient_seed;
    quantize_gradient_into(dy, step_recipe, c.nvfp4_amax(), g_.row, g_.col, storage_, c.tensor_amax);
    return g_;
  }
  void fprop(const linear_context& c, const input_operand& x, const weight_operands& w, matrix_view<float> y) const {
    w.row.run([&](const auto& b) { nvfp4_gemm(x, b, y, c.mode, c.bias); });
  }
  void dgrad(const linear_context& c, const gradient_operands& g, const weight_operands& w, matrix_view<float> dx) const {
    nvfp4_gemm(g.row, w.col, dx, c.mode);
  }
  void wgrad(const linear_context& c, const gradient_operands& g, const saved_input& x, matrix_view<float> dw) const {
    nvfp4_gemm(g.col, x.x_col, dw, c.mode);
  }

 private:
  nvfp4_block_scaling recipe_;
  // Kept from step to step: the copies the GEMMs read once (X's rowwise, dY's two) and the role
  // quantizers' storage.
  nvfp4_operand x_row_;
  gradient_operands g_;
  nvfp4_role_storage storage_;
};

}  // namespace nvfp4
