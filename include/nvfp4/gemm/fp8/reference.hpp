// nvfp4/gemm/fp8/reference.hpp: the reference FP8 and MXFP8 GEMMs, one output at a time in scalar
// code: the tensor core's chain (fp8::mma::step, exact) or, in relaxed mode, the fp32 accumulation
// this machine's relaxed kernels follow: the tile chain of tile_model where they run on BF16 tiles
// (the codes, times 2^e for MXFP8, folded into bf16; FP8 block scaling: one chain per 128-element K
// block), else the per-step chain of fp8::mma::relaxed_step (docs/gemm.md, "Relaxed mode").
#pragma once

#include "nvfp4/gemm/detail/tile_sources.hpp"
#include "nvfp4/gemm/fp8/detail/chain.hpp"
#include "nvfp4/gemm/tile_model.hpp"

namespace nvfp4::detail {

/// Output (i, j)'s tile chain over K elements [k0, k1) of two folded FP8 operands, from +0.
inline float fp8_tile_chain(const tiles::fp8_source& a, const tiles::fp8_source& b, index_t i, index_t j, index_t k0, index_t k1) {
  return tile_model::chain(
      k1 - k0, 0.0f, [&](index_t k) { return a.folded(i, k0 + k); }, [&](index_t k) { return b.folded(j, k0 + k); });
}

/// Output (i, j) of fp8_gemm on BF16 tiles, before the bias and the rounding: the chain over all
/// of K times alpha (per-tensor scales) or through the per-row epilogue, or for block scaling one
/// chain per 128-element K block entering y by options.block_epilogue's order (as the exact path).
inline float fp8_gemm_tile_output(const fp8_tensor& a, const fp8_tensor& b, index_t i, index_t j, const fp8_gemm_options& options) {
  const tiles::fp8_source sa = tiles::source_of(a), sb = tiles::source_of(b);
  const index_t k = a.cols();
  if (a.per_tensor() && b.per_tensor()) return a.scale_inv()[0] * b.scale_inv()[0] * fp8_tile_chain(sa, sb, i, j, 0, k);
  if (row_scaled(a) && row_scaled(b))
    return row_epilogue(fp8_tile_chain(sa, sb, i, j, 0, k), a.scale_inv()[static_cast<std::size_t>(i)],
                        b.scale_inv()[static_cast<std::size_t>(j)]);
  const block_update update = block_update_for(a.block_rows() == 1, b.block_rows() == 1, options.block_epilogue, a.scale_cols());
  float y = 0.0f;
  for (index_t kb = 0; kb * fp8_block_size < k; ++kb) {
    const float partial = fp8_tile_chain(sa, sb, i, j, kb * fp8_block_size, std::min(k, (kb + 1) * fp8_block_size));
    y = apply_block(update, partial, a.block_scale_inv(i / a.block_rows(), kb), b.block_scale_inv(j / b.block_rows(), kb), y);
  }
  return y;
}

/// Whether the relaxed product of two FP8 operands (fp8_tensor, or MXFP8 quantized tensors) runs
/// on BF16 tiles where the machine has them (tiles::fits_tiles on their folded values).
template <class TensorA, class TensorB>
bool fp8_fits_tiles(const TensorA& a, const TensorB& b) {
  const tiles::fp8_source sa = tiles::source_of(a), sb = tiles::source_of(b);
  return tiles::fits_tiles(tiles::scalar_stats(sa, a.rows(), a.cols()), tiles::scalar_stats(sb, b.rows(), b.cols()), a.cols());
}

/// Whether a relaxed FP8 product runs on BF16 tiles on this machine.
template <class TensorA, class TensorB>
bool fp8_relaxed_on_tiles(const TensorA& a, const TensorB& b, const fp8_gemm_options& options) {
  return options.mode == gemm_mode::relaxed && tiles::relaxed_on_tiles(a.rows(), b.rows()) && fp8_fits_tiles(a, b);
}

}  // namespace nvfp4::detail

namespace nvfp4::reference {

/// D = C + A·Bᵀ over the FP8 codes of a [M, K] and b [N, K] (their scales are not applied), K
/// stepped by 32 in order and zero-padded, with the split accumulator of `options` (0: the plain
/// chain MMA-Sim models, D fed back as the next step's c). `c` may be empty (zero) or [M, N].
/// Relaxed on BF16 tiles (see the file comment): C + the tile chain over all of K.
inline void fp8_mma(const fp8_tensor& a, const fp8_tensor& b, matrix_view<const float> c, matrix_view<float> d,
                    const fp8_gemm_options& options = {}) {
  const bool on_tiles = nvfp4::detail::fp8_relaxed_on_tiles(a, b, options);
  const auto sa = nvfp4::detail::tiles::source_of(a), sb = nvfp4::detail::tiles::source_of(b);
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < b.rows(); ++j) {
      const float c0 = c.empty() ? 0.0f : c(i, j);
      if (on_tiles) {
        const float chain = nvfp4::detail::fp8_tile_chain(sa, sb, i, j, 0, a.cols());
        d(i, j) = c.empty() ? chain : c0 + chain;
      } else {
        d(i, j) = nvfp4::detail::fp8_chain_output(a, b, i, j, c0, options);
      }
    }
}

/// D = C + A·Bᵀ for MXFP8 operands (kind::mxf8f6f4, one E8M0 scale per 32 inside each step, the
/// Blackwell step whatever options.core says), K in steps of 32, with the split accumulator of
/// `options` (0: MMA-Sim's plain chain). Relaxed on BF16 tiles: C + the tile chain of the codes
/// times their scales.
template <mxfp8_format FormatA, mxfp8_format FormatB>
void mxfp8_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<const float> c, matrix_view<float> d,
               const fp8_gemm_options& options = {}) {
  const bool on_tiles = nvfp4::detail::fp8_relaxed_on_tiles(a, b, options);
  const auto sa = nvfp4::detail::tiles::source_of(a), sb = nvfp4::detail::tiles::source_of(b);
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < b.rows(); ++j) {
      const float c0 = c.empty() ? 0.0f : c(i, j);
      if (on_tiles) {
        const float chain = nvfp4::detail::fp8_tile_chain(sa, sb, i, j, 0, a.cols());
        d(i, j) = c.empty() ? chain : c0 + chain;
      } else {
        d(i, j) = nvfp4::detail::mxfp8_chain_output(a, b, i, j, c0, options);
      }
    }
}

/// out = epilogue(A·Bᵀ) for FP8 tensors of TE's FP8 recipes:
/// - both per-tensor (current / delayed scaling): acc = the split-accumulated chain from zero, then
///   out = (scale_inv_A * scale_inv_B) * acc (one fp32 product each: a documented choice, cuBLAS's
///   epilogue order is not public);
/// - per-row (one scale per row of A and of B, blocks of 1 x K with K != 128): out = fl(fl(acc *
///   s_B[j]) * s_A[i]), as an H100's cuBLASLt computes torch's rowwise scaling;
/// - block-scaled (Float8BlockScaling, blocks of 128 along K): for each K block, its partial P (the
///   chain over its 128 elements, promoted as options say) enters an fp32 accumulator y from 0 by
///   options.block_epilogue: on the GPU (default) y = fma(P, fl(s_A * s_B), y) when either
///   operand has 128x128 blocks and y = fma(fl(P * s_A), s_B, y) for 1x128 x 1x128 (B's scale
///   first when K is a single block); TE's reference
///   puts the 1x128 operand's scale first in every pair.
/// Then + bias, rounded to Out (float, or bf16 nearest-even). Relaxed on BF16 tiles, acc and each
/// block's P are tile chains (detail::fp8_gemm_tile_output).
template <class Out>
void fp8_gemm(const fp8_tensor& a, const fp8_tensor& b, matrix_view<Out> out, const fp8_gemm_options& options = {}) {
  const bool on_tiles = nvfp4::detail::fp8_relaxed_on_tiles(a, b, options);
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < b.rows(); ++j)
      nvfp4::detail::store_output(
          out, i, j,
          on_tiles ? nvfp4::detail::fp8_gemm_tile_output(a, b, i, j, options) : nvfp4::detail::fp8_gemm_output(a, b, i, j, options),
          options.bias);
}

/// out = A·Bᵀ for MXFP8 operands (the kind::mxf8f6f4 chain from zero, scales inside the MMA,
/// split accumulation as options say; relaxed on BF16 tiles: the tile chain), then + bias,
/// rounded to Out.
template <mxfp8_format FormatA, mxfp8_format FormatB, class Out>
void mxfp8_gemm(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<Out> out,
                const fp8_gemm_options& options = {}) {
  const bool on_tiles = nvfp4::detail::fp8_relaxed_on_tiles(a, b, options);
  const auto sa = nvfp4::detail::tiles::source_of(a), sb = nvfp4::detail::tiles::source_of(b);
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < b.rows(); ++j)
      nvfp4::detail::store_output(out, i, j,
                                  on_tiles ? nvfp4::detail::fp8_tile_chain(sa, sb, i, j, 0, a.cols())
                                           : nvfp4::detail::mxfp8_chain_output(a, b, i, j, 0.0f, options),
                                  options.bias);
}

}  // namespace nvfp4::reference
