// nvfp4/gemm/fp4/reference.hpp: the reference block-scaled FP4 GEMM, one output and one K step at a
// time through fp4::mma::step (exact) or the plain fp32 accumulation of the relaxed mode.
#pragma once

#include "nvfp4/gemm/fp4/mma_model.hpp"
#include "nvfp4/gemm/operands.hpp"
#include "nvfp4/scaling/matrix_view.hpp"

namespace nvfp4::detail {
/// The 64 doubled E2M1 values and 4 group scales of row r, step s (zero elements and zero scale
/// bytes past K).
template <class Format>
void load_mma_step(const quantized_tensor<Format>& q, index_t r, index_t s, int* values, fp4::mma::scale_parts* scales) {
  for (int k = 0; k < fp4::mma::step_k; ++k) {
    const index_t col = s * fp4::mma::step_k + k;
    values[k] = col < q.cols() ? fp4::mma::e2m1_doubled(q.element(r, col).bits()) : 0;
  }
  for (int g = 0; g < fp4::mma::groups_per_step; ++g) {
    const index_t block = (s * fp4::mma::step_k + g * fp4::mma::group_k) / Format::block_cols;
    scales[g] = block < q.scale_cols() ? fp4::mma::decompose(q.scale(r, block))
                                        : fp4::mma::padding_scale<typename Format::scale_type>();
  }
}
}  // namespace nvfp4::detail

namespace nvfp4::reference {

/// D = C + A·Bᵀ in the scaled domain (no tensor scales, no epilogue), K stepped by 64 in order and
/// zero-padded to a multiple of 64 (§6 step 8). `c` may be empty (zero accumulator) or [M, N].
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
  requires fp4_gemm_pair<FormatA, FormatB>
void block_scaled_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b,
                      matrix_view<const float> c, matrix_view<float> d, gemm_mode mode = gemm_mode::exact) {
  nvfp4::detail::check_gemm_operands(a, b);
  const index_t steps = (a.cols() + fp4::mma::step_k - 1) / fp4::mma::step_k;
  int a_values[fp4::mma::step_k], b_values[fp4::mma::step_k];
  fp4::mma::scale_parts a_scales[fp4::mma::groups_per_step], b_scales[fp4::mma::groups_per_step];
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < b.rows(); ++j) {
      float accumulator = c.empty() ? 0.0f : c(i, j);
      for (index_t s = 0; s < steps; ++s) {
        nvfp4::detail::load_mma_step(a, i, s, a_values, a_scales);
        nvfp4::detail::load_mma_step(b, j, s, b_values, b_scales);
        accumulator = mode == gemm_mode::exact
                          ? fp4::mma::step(a_values, b_values, a_scales, b_scales, accumulator)
                          : fp4::mma::relaxed_step(a_values, b_values, a_scales, b_scales, accumulator);
      }
      d(i, j) = accumulator;
    }
}

}  // namespace nvfp4::reference
