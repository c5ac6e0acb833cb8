// nvfp4/recipes/policies/mxfp8_block_scaling.hpp: the policy of mxfp8_block_scaling (TE's
// MXFP8BlockScaling): quantize_mxfp8_te of each tensor and of its transpose; mxfp8_gemm as
// Blackwell runs it. X and W are E4M3 for both formats TE allows (E4M3, HYBRID); dY in the
// recipe's backward format. Every copy is written into storage kept from step to step (the
// layer's W operands and saved X, this policy's X and dY copies).
#pragma once

#include <type_traits>
#include <utility>

#include "nvfp4/gemm/fp8/gemm.hpp"
#include "nvfp4/gemm/fp8/packed_weight.hpp"
#include "nvfp4/recipes/mxfp8_block_scaling.hpp"
#include "nvfp4/recipes/policies/fprop_operand.hpp"
#include "nvfp4/recipes/policies/policy.hpp"
#include "nvfp4/scaling/mxfp8_quantize.hpp"

namespace nvfp4 {

class mxfp8_block_scaling_policy : public policy_base {
 public:
  using recipe_type = mxfp8_block_scaling;
  static constexpr const char* name = "MXFP8BlockScaling";
  static constexpr const char* short_name = "mxfp8";
  static constexpr bool quantized = true;
  static constexpr bool takes_amax_rule = false;

  struct weight_operands {
    fprop_operand<quantized_tensor<mxfp8>, fp8_packed_weight<quantized_tensor<mxfp8>>> row;
    quantized_tensor<mxfp8> col;
  };
  struct saved_input {
    quantized_tensor<mxfp8> x_col;
  };

  explicit mxfp8_block_scaling_policy(const mxfp8_block_scaling& r) : recipe_(r) {}
  const mxfp8_block_scaling& recipe() const { return recipe_; }

  void quantize_weight(const linear_context&, matrix_view<const float> w, bool columnwise, bool, weight_operands& out) const {
    quantize_mxfp8_te_into(w, out.row.plain);
    if (columnwise) quantize_mxfp8_te_into(w.transposed(), out.col, quantized_axis::columnwise);
  }
  void pack_fprop_operand(const linear_context&, weight_operands& w) const { w.row.pack(); }
  void fprop(const linear_context& c, matrix_view<const float> x, const weight_operands& w, matrix_view<float> y, saved_input* saved,
             bool) {
    quantize_mxfp8_te_into(x, x_row_);
    w.row.run([&](const auto& b) { mxfp8_gemm(x_row_, b, y, options(c, c.bias)); });
    if (saved) quantize_mxfp8_te_into(x.transposed(), saved->x_col, quantized_axis::columnwise);
  }
  void bprop(const linear_context& c, matrix_view<const float> dy, const weight_operands& w, const saved_input& saved,
             matrix_view<float> dx, matrix_view<float> dw) {
    if (backward_format(recipe_.fp8_format) == fp8_format::e4m3) {
      bprop_in<mxfp8>(c, dy, w, saved, dx, dw);
    } else {
      bprop_in<mxfp8_e5m2>(c, dy, w, saved, dx, dw);
    }
  }

 private:
  static fp8_gemm_options options(const linear_context& c, std::span<const float> bias = {}) {
    return {.core = fp8::mma::tensor_core::blackwell, .mode = c.mode, .promotion_interval = 0, .bias = bias};
  }
  template <class Format>
  void bprop_in(const linear_context& c, matrix_view<const float> dy, const weight_operands& w, const saved_input& saved,
                matrix_view<float> dx, matrix_view<float> dw) {
    auto& [g8, g8t] = gradient_copies<Format>();
    quantize_mxfp8_te_into(dy, g8);
    quantize_mxfp8_te_into(dy.transposed(), g8t, quantized_axis::columnwise);
    mxfp8_gemm(g8, w.col, dx, options(c));
    mxfp8_gemm(g8t, saved.x_col, dw, options(c));
  }
  template <class Format>
  std::pair<quantized_tensor<Format>, quantized_tensor<Format>>& gradient_copies() {
    if constexpr (std::is_same_v<Format, mxfp8>) {
      return g_e4m3_;
    } else {
      return g_e5m2_;
    }
  }
  mxfp8_block_scaling recipe_;
  // Kept from step to step: X's rowwise copy (fprop), dY's rowwise and columnwise copies in the
  // backward format.
  quantized_tensor<mxfp8> x_row_;
  std::pair<quantized_tensor<mxfp8>, quantized_tensor<mxfp8>> g_e4m3_;
  std::pair<quantized_tensor<mxfp8_e5m2>, quantized_tensor<mxfp8_e5m2>> g_e5m2_;
};

}  // namespace nvfp4
