// nvfp4/recipes/policies/nvfp4_block_scaling.hpp: the policy of nvfp4_block_scaling (TE's
// NVFP4BlockScaling): quantize_activation(X), quantize_weight(W), quantize_gradient(dY), each with
// the layer's amax rule, the gradients' recipe seed replaced by the layer's gradient_seed(step);
// fprop nvfp4_gemm(X rowwise, W rowwise), dgrad nvfp4_gemm(dY rowwise, W columnwise), wgrad
// nvfp4_gemm(dY columnwise, X columnwise). Without 4over6, row scaling or an amax rule the copies
// are made by the same quantizers' into forms, in storage kept from step to step (a step then
// touches no fresh memory for them); the bits are those of the three functions.
#pragma once

#include <algorithm>
#include <utility>

#include "nvfp4/recipes/nvfp4_packed_operand.hpp"
#include "nvfp4/recipes/nvfp4_recipe.hpp"
#include "nvfp4/recipes/policies/fprop_operand.hpp"
#include "nvfp4/recipes/policies/policy.hpp"
#include "nvfp4/simd/parallel.hpp"

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

  explicit nvfp4_block_scaling_policy(const nvfp4_block_scaling& r) : recipe_(r) {}
  const nvfp4_block_scaling& recipe() const { return recipe_; }

  template <quantizer_input T>
  void quantize_weight(const linear_context& c, matrix_view<const T> w, bool columnwise, bool, weight_operands& out) {
    if (c.nvfp4_amax() || recipe_.uses_4over6(tensor_role::weight)) {
      if (columnwise) {
        operand_pair ws = nvfp4::quantize_weight(w, recipe_, c.nvfp4_amax());
        out.row.plain = std::move(ws.rowwise);
        out.col = std::move(ws.columnwise);
      } else {
        out.row.plain = quantize_weight_rowwise(w, recipe_, c.nvfp4_amax());
      }
      return;
    }
    // quantize_weight's copies: 16x16 tiles (1x16 if disabled) against W's amax, round to nearest.
    const float w_amax = amax(w);
    copy_of(w, w_amax, {}, out.row.plain);
    if (columnwise) copy_of(w.transposed(), w_amax, {.axis = quantized_axis::columnwise}, out.col);
  }
  void pack_fprop_operand(const linear_context&, weight_operands& w) const { w.row.pack(); }
  template <quantizer_input T>
  void fprop(const linear_context& c, matrix_view<const T> x, const weight_operands& w, matrix_view<float> y, saved_input* saved, bool) {
    const auto gemm = [&](const nvfp4_operand& x_row) {
      w.row.run([&](const auto& b) { nvfp4_gemm(x_row, b, y, c.mode, c.bias); });
    };
    if (c.nvfp4_amax() || recipe_.row_scaled_activation || recipe_.uses_4over6(tensor_role::input)) {
      if (saved) {
        operand_pair xs = quantize_activation(x, recipe_, c.nvfp4_amax());
        gemm(xs.rowwise);
        saved->x_col = std::move(xs.columnwise);
      } else {
        gemm(quantize_activation_rowwise(x, recipe_, c.nvfp4_amax()));
      }
      return;
    }
    // quantize_activation's copies: 1x16 round to nearest; the columnwise one along M, with RHT
    // (its own amax) unless disabled.
    const float x_amax = amax(x);
    if (saved) columnwise_of(x, x_amax, {}, saved->x_col);
    plain(row_);
    quantize_with_amax_into(x, x_amax, row_.tensor);
    gemm(row_);
  }
  template <quantizer_input T>
  void bprop(const linear_context& c, matrix_view<const T> dy, const weight_operands& w, const saved_input& saved, matrix_view<float> dx,
             matrix_view<float> dw) {
    nvfp4_block_scaling step_recipe = recipe_;
    step_recipe.seed = c.gradient_seed;
    if (c.nvfp4_amax()) {
      const operand_pair gs = quantize_gradient(dy, step_recipe, c.nvfp4_amax());
      nvfp4_gemm(gs.rowwise, w.col, dx, c.mode);
      nvfp4_gemm(gs.columnwise, saved.x_col, dw, c.mode);
      return;
    }
    // quantize_gradient's copies: SR (round to nearest if disabled), streams derived_seed(seed, 0)
    // rowwise and 1 columnwise.
    const float dy_amax = amax(dy);
    const auto rounding = recipe_.disable_stochastic_rounding ? rounding_mode::nearest_even : rounding_mode::stochastic;
    columnwise_of(dy, dy_amax, {.rounding = rounding, .seed = detail::derived_seed(step_recipe.seed, 1)}, col_);
    plain(row_);
    quantize_with_amax_into(dy, dy_amax, row_.tensor, {.rounding = rounding, .seed = detail::derived_seed(step_recipe.seed, 0)});
    nvfp4_gemm(row_, w.col, dx, c.mode);
    nvfp4_gemm(col_, saved.x_col, dw, c.mode);
  }

 private:
  /// A per-tensor operand's fields besides its tensor (bound 448, no row amaxes).
  static void plain(nvfp4_operand& op) {
    op.e4m3_max = 448.0f;
    op.row_amax.clear();
  }
  /// W's (or Wᵀ's) copy into op: 16x16 tiles stored as the 1x16 layout they are, or 1x16.
  template <quantizer_input T>
  void copy_of(matrix_view<const T> w, float w_amax, const quantize_options& options, nvfp4_operand& op) {
    plain(op);
    if (recipe_.disable_2d_quantization) return quantize_with_amax_into(w, w_amax, op.tensor, options);
    quantize_with_amax_into(w, w_amax, tiles_, options);
    if (op.tensor.rows() != tiles_.rows() || op.tensor.cols() != tiles_.cols() || op.tensor.axis() != tiles_.axis())
      op.tensor = nvfp4_tensor(tiles_.rows(), tiles_.cols(), tiles_.axis());
    // The same bytes (a tile's scale is stored on each of its 16 rows): copied by rows on the
    // library's threads, as a serial copy of 9 MiB would stand out at 16 threads.
    const auto data = tiles_.data();
    const auto scales = tiles_.scales();
    const auto data_out = op.tensor.data();
    const auto scales_out = op.tensor.scales();
    const index_t rows = tiles_.rows();
    const std::size_t data_row = data.size() / static_cast<std::size_t>(std::max<index_t>(rows, 1));
    const std::size_t scale_row = scales.size() / static_cast<std::size_t>(std::max<index_t>(rows, 1));
    simd::parallel_ranges(rows, simd::worth_parallel(rows * tiles_.cols()), [&](index_t begin, index_t end) {
      const auto b0 = static_cast<std::size_t>(begin), b1 = static_cast<std::size_t>(end);
      std::copy(data.begin() + b0 * data_row, data.begin() + b1 * data_row, data_out.begin() + b0 * data_row);
      std::copy(scales.begin() + b0 * scale_row, scales.begin() + b1 * scale_row, scales_out.begin() + b0 * scale_row);
    });
    op.tensor.set_tensor_scale(tiles_.amax(), tiles_.encode_scale(), tiles_.decode_scale());
  }
  /// The wgrad copy of x (along M) into op, as quantize_activation / quantize_gradient make it.
  template <quantizer_input T>
  void columnwise_of(matrix_view<const T> x, float x_amax, quantize_options options, nvfp4_operand& op) {
    plain(op);
    options.axis = quantized_axis::columnwise;
    if (recipe_.disable_rht) return quantize_with_amax_into(x.transposed(), x_amax, op.tensor, options);
    quantize_columnwise_rht_into(x, recipe_.rht, options, op.tensor, rht_);
  }

  nvfp4_block_scaling recipe_;
  // Kept from step to step: the copies the GEMMs read once (X's or dY's rowwise, dY's
  // columnwise), W's tiles before their relabelling, the RHT's bf16 transform.
  nvfp4_operand row_, col_;
  nvfp4_tile_tensor tiles_;
  columnwise_rht rht_;
};

}  // namespace nvfp4
