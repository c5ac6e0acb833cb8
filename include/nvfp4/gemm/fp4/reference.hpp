// nvfp4/gemm/fp4/reference.hpp: the reference block-scaled FP4 GEMM, one output and one K step at a
// time through fp4::mma::step (exact) or, in relaxed mode, the fp32 accumulation this machine's
// relaxed kernels follow: the tile chain of tile_model where they run on BF16 tiles, else the
// group-term chain of fp4::mma::relaxed_step (docs/gemm.md, "Relaxed mode").
#pragma once

#include "nvfp4/gemm/detail/tile_sources.hpp"
#include "nvfp4/gemm/fp4/mma_model.hpp"
#include "nvfp4/gemm/operands.hpp"
#include "nvfp4/gemm/tile_model.hpp"
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
    scales[g] = block < q.scale_cols() ? fp4::mma::decompose(q.scale(r, block)) : fp4::mma::padding_scale<typename Format::scale_type>();
  }
}
}  // namespace nvfp4::detail

namespace nvfp4::reference {

/// The relaxed MMA as the BF16 tiles compute it (tile_model::chain over the values times their
/// block scales, from +0 over all of K, then + C in fp32 where a C is given), whatever this
/// machine runs; only for operands whose folded values fit the tiles (fp4_fits_tiles).
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
requires fp4_gemm_pair<FormatA, FormatB>
void block_scaled_mma_on_tiles(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<const float> c,
                               matrix_view<float> d) {
  nvfp4::detail::check_gemm_operands(a, b);
  const nvfp4::detail::tiles::fp4_source<FormatA> sa{a};
  const nvfp4::detail::tiles::fp4_source<FormatB> sb{b};
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < b.rows(); ++j) {
      const float chain = tile_model::chain(
          a.cols(), 0.0f, [&](index_t k) { return sa.folded(i, k); }, [&](index_t k) { return sb.folded(j, k); });
      d(i, j) = c.empty() ? chain : c(i, j) + chain;
    }
}

/// Whether the relaxed MMA of a and b runs on BF16 tiles where the machine has them: every value
/// times its block scale an exact normal bf16, and no product or sum leaving fp32's normal range
/// (nvfp4::detail::tiles::fits_tiles), checked here in scalar code.
template <class FormatA, class FormatB>
bool fp4_fits_tiles(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b) {
  using namespace nvfp4::detail::tiles;
  return fits_tiles(scalar_stats(fp4_source<FormatA>{a}, a.rows(), a.cols()), scalar_stats(fp4_source<FormatB>{b}, b.rows(), b.cols()),
                    a.cols());
}

/// D = C + A·Bᵀ in the scaled domain (no tensor scales, no epilogue). Exact: K stepped by 64 in
/// order and zero-padded to a multiple of 64 (§6 step 8). Relaxed: block_scaled_mma_on_tiles where
/// this machine runs the relaxed GEMMs on BF16 tiles for this shape (tiles::relaxed_on_tiles) and
/// the operands fit them, else every group
/// term fused-multiply-added into an fp32 accumulator from C in K order (fp4::mma::relaxed_step).
/// `c` may be empty (zero accumulator) or [M, N].
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
requires fp4_gemm_pair<FormatA, FormatB>
void block_scaled_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<const float> c,
                      matrix_view<float> d, gemm_mode mode = gemm_mode::exact) {
  nvfp4::detail::check_gemm_operands(a, b);
  if (mode == gemm_mode::relaxed && nvfp4::detail::tiles::relaxed_on_tiles(a.rows(), b.rows()) && fp4_fits_tiles(a, b)) {
    block_scaled_mma_on_tiles(a, b, c, d);
    return;
  }
  const index_t steps = (a.cols() + fp4::mma::step_k - 1) / fp4::mma::step_k;
  int a_values[fp4::mma::step_k], b_values[fp4::mma::step_k];
  fp4::mma::scale_parts a_scales[fp4::mma::groups_per_step], b_scales[fp4::mma::groups_per_step];
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < b.rows(); ++j) {
      float accumulator = c.empty() ? 0.0f : c(i, j);
      for (index_t s = 0; s < steps; ++s) {
        nvfp4::detail::load_mma_step(a, i, s, a_values, a_scales);
        nvfp4::detail::load_mma_step(b, j, s, b_values, b_scales);
        accumulator = mode == gemm_mode::exact ? fp4::mma::step(a_values, b_values, a_scales, b_scales, accumulator)
                                               : fp4::mma::relaxed_step(a_values, b_values, a_scales, b_scales, accumulator);
      }
      d(i, j) = accumulator;
    }
}

}  // namespace nvfp4::reference
