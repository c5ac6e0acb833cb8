// nvfp4/recipes/fp8_operands.hpp: what the per-tensor and block FP8 policies (current, delayed,
// block scaling) quantize and keep: W's rowwise copy (fprop's B, packable) and columnwise copy
// (dgrad's B), X's columnwise copy (wgrad's B), dY's two copies (dgrad's and wgrad's A); and the
// three GEMMs every FP8 recipe runs on them, with the recipe's split-accumulator flags.
#pragma once

#include "nvfp4/gemm/fp8/gemm.hpp"
#include "nvfp4/gemm/fp8/packed_weight.hpp"
#include "nvfp4/recipes/fprop_operand.hpp"
#include "nvfp4/recipes/policy.hpp"

namespace nvfp4 {

struct fp8_weight_operands {
  fprop_operand<fp8_tensor, fp8_packed_weight<fp8_tensor>> row;
  fp8_tensor col;
};
struct fp8_saved_input {
  fp8_tensor x_col;
};
struct fp8_gradient_operands {
  fp8_tensor row, col;  // dgrad's A (dY), wgrad's A (dYᵀ)
};

/// The FP8 policies' GEMMs for a recipe with fp8_gemm_fprop / _dgrad / _wgrad (TE's MMParams):
/// fprop's with the bias in its epilogue.
template <class Recipe>
struct fp8_gemms {
  static void fprop(const linear_context& c, const Recipe& r, const fp8_tensor& x8, const fp8_weight_operands& w, matrix_view<float> y) {
    w.row.run([&](const auto& b) { fp8_gemm(x8, b, y, c.fp8_options(r.fp8_gemm_fprop, c.bias)); });
  }
  static void dgrad(const linear_context& c, const Recipe& r, const fp8_gradient_operands& g, const fp8_weight_operands& w,
                    matrix_view<float> dx) {
    fp8_gemm(g.row, w.col, dx, c.fp8_options(r.fp8_gemm_dgrad));
  }
  static void wgrad(const linear_context& c, const Recipe& r, const fp8_gradient_operands& g, const fp8_saved_input& x,
                    matrix_view<float> dw) {
    fp8_gemm(g.col, x.x_col, dw, c.fp8_options(r.fp8_gemm_wgrad));
  }
};

}  // namespace nvfp4
