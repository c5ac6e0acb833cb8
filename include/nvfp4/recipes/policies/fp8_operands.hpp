// nvfp4/recipes/policies/fp8_operands.hpp: what the per-tensor and block FP8 policies (current,
// delayed, block scaling) keep: W's rowwise copy (fprop's B, packable) and columnwise copy (dgrad's
// B), X's columnwise copy (wgrad's B).
#pragma once

#include "nvfp4/gemm/fp8/gemm.hpp"
#include "nvfp4/gemm/fp8/packed_weight.hpp"
#include "nvfp4/recipes/policies/fprop_operand.hpp"
#include "nvfp4/recipes/policies/policy.hpp"

namespace nvfp4 {

struct fp8_weight_operands {
  fprop_operand<fp8_tensor, fp8_packed_weight<fp8_tensor>> row;
  fp8_tensor col;
};
struct fp8_saved_input {
  fp8_tensor x_col;
};

namespace detail {
/// fprop's FP8 GEMM (bias added in its epilogue), dgrad's and wgrad's, as every FP8 recipe runs them.
inline void fp8_fprop(const linear_context& c, const fp8_tensor& x8, const fp8_weight_operands& w, matrix_view<float> y, const mm_params& p) {
  w.row.run([&](const auto& b) { fp8_gemm(x8, b, y, c.fp8_options(p, c.bias)); });
}
template <class Recipe>
void fp8_bprop(const linear_context& c, const Recipe& r, const fp8_tensor& g8, const fp8_tensor& g8t, const fp8_weight_operands& w,
               const fp8_saved_input& saved, matrix_view<float> dx, matrix_view<float> dw) {
  fp8_gemm(g8, w.col, dx, c.fp8_options(r.fp8_gemm_dgrad));
  fp8_gemm(g8t, saved.x_col, dw, c.fp8_options(r.fp8_gemm_wgrad));
}
}  // namespace detail

}  // namespace nvfp4
