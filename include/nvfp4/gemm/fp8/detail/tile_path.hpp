// nvfp4/gemm/fp8/detail/tile_path.hpp: the relaxed FP8 and MXFP8 GEMMs on BF16 tiles
// (gemm/detail/tile_gemm.hpp): the codes (times 2^e for MXFP8) folded into bf16 once, fp32 tiles
// over all of K, then the FP8 epilogues of detail/chain.hpp; FP8 block scaling accumulates each
// 128-element K block in its own tile and scales its partial into the output once per block, in
// the exact path's order of roundings. Taken by the public GEMMs in relaxed mode where the machine
// runs the tiles and the folded operands fit them; gemm/fp8/reference.hpp computes the same
// through tile_model.
#pragma once

#include "nvfp4/detail/scratch.hpp"
#include "nvfp4/gemm/detail/tile_gemm.hpp"
#include "nvfp4/gemm/detail/tile_sources.hpp"
#include "nvfp4/gemm/fp8/detail/chain.hpp"
#include "nvfp4/simd/dispatch.hpp"

namespace nvfp4::detail {

/// Packs A and B of a relaxed FP8 product for the tiles; false when their folded values do not
/// fit (tiles::fits_tiles), B then left unpacked.
template <class TensorA, class TensorB>
bool pack_fp8_for_tiles(const TensorA& a, const TensorB& b, tiles::packed_operand& pa, tiles::packed_operand& pb) {
  tiles::pack(tiles::source_of(a), a.rows(), a.cols(), false, pa);
  if (!pa.stats.representable) return false;
  tiles::pack(tiles::source_of(b), b.rows(), b.cols(), true, pb);
  return tiles::fits_tiles(pa.stats, pb.stats, a.cols());
}

/// y[r][c] = apply_block(Update, partial[r][c], sa[r], sb[c], y[r][c]) for a 16 x 16 output tile
/// (row-major): one K block's partial into the output, on this build's vector lanes (an
/// auto-vectorized loop came out as 256-bit code with the row scales spilled, g++ 13
/// -march=sapphirerapids), the order of roundings chosen once per call.
template <block_update Update>
NVFP4_ALWAYS_INLINE void merge_block_partial(const float* NVFP4_RESTRICT partial, const float* NVFP4_RESTRICT sa,
                                             const float* NVFP4_RESTRICT sb, float* NVFP4_RESTRICT y) {
  using ops = simd::ops;
  constexpr int lanes = tiles::lanes;
  static_assert(lanes % ops::width == 0);
  for (int c0 = 0; c0 < lanes; c0 += ops::width) {
    const typename ops::vf b = ops::load(sb + c0);
    for (int r = 0; r < lanes; ++r) {
      const typename ops::vf a = ops::set(sa[r]), p = ops::load(partial + r * lanes + c0), o = ops::load(y + r * lanes + c0);
      if constexpr (Update == block_update::a_first)
        ops::store(y + r * lanes + c0, ops::fmadd(ops::mul(p, a), b, o));
      else if constexpr (Update == block_update::b_first)
        ops::store(y + r * lanes + c0, ops::fmadd(ops::mul(p, b), a, o));
      else
        ops::store(y + r * lanes + c0, ops::fmadd(p, ops::mul(a, b), o));
    }
  }
}

/// fp8_gemm's relaxed product on tile unit Tiles; false, with nothing written, where the operands
/// do not fit the tiles. Inputs checked by the caller.
template <class Tiles, class Out>
bool fp8_gemm_on_tiles(const fp8_tensor& a, const fp8_tensor& b, matrix_view<Out> out, const fp8_gemm_options& options) {
  tiles::packed_operand pa, pb;
  if (!pack_fp8_for_tiles(a, b, pa, pb)) return false;
  const std::span<const float> bias = options.bias;
  if (a.per_tensor() && b.per_tensor()) {
    const float alpha = a.scale_inv()[0] * b.scale_inv()[0];
    tiles::run<Tiles>(pa, pb, 0, tiles::no_block_merge{}, [&](index_t i, index_t j0, const float* v, index_t count) {
      store_output_row<true>(out, i, j0, v, count, alpha, bias);
    });
    return true;
  }
  if (row_scaled(a) && row_scaled(b)) {
    const std::span<const float> sa = a.scale_inv(), sb = b.scale_inv();
    tiles::run<Tiles>(pa, pb, 0, tiles::no_block_merge{}, [&](index_t i, index_t j0, const float* v, index_t count) {
      for (index_t t = 0; t < count; ++t)
        store_output(out, i, j0 + t, row_epilogue(v[t], sa[static_cast<std::size_t>(i)], sb[static_cast<std::size_t>(j0 + t)]), bias);
    });
    return true;
  }
  // Block scaling: one tile chain per K block of 128 (4 tile steps), its partial scaled into y.
  // Each K block's decode scales of every row of A and of B, looked up once per call ([k block]
  // [row], 1 past the rows: those outputs are padding, never stored), so that the merge is plain
  // 16-lane loops.
  const block_update update = block_update_for(a.block_rows() == 1, b.block_rows() == 1, options.block_epilogue, a.scale_cols());
  constexpr int lanes = tiles::lanes;
  const index_t k_blocks = a.scale_cols(), m_padded = pa.blocks * lanes, n_padded = pb.blocks * lanes;
  scratch<float> scale_a(static_cast<std::size_t>(k_blocks * m_padded)), scale_b(static_cast<std::size_t>(k_blocks * n_padded));
  for (index_t kb = 0; kb < k_blocks; ++kb) {
    for (index_t i = 0; i < m_padded; ++i)
      scale_a[static_cast<std::size_t>(kb * m_padded + i)] = i < a.rows() ? a.block_scale_inv(i / a.block_rows(), kb) : 1.0f;
    for (index_t j = 0; j < n_padded; ++j)
      scale_b[static_cast<std::size_t>(kb * n_padded + j)] = j < b.rows() ? b.block_scale_inv(j / b.block_rows(), kb) : 1.0f;
  }
  const auto merge = [&](index_t rb, index_t cb, index_t kb, const float* partial, float* y) {
    const float* const sa = scale_a.data() + kb * m_padded + rb * lanes;
    const float* const sb = scale_b.data() + kb * n_padded + cb * lanes;
    switch (update) {
      case block_update::a_first:
        merge_block_partial<block_update::a_first>(partial, sa, sb, y);
        break;
      case block_update::b_first:
        merge_block_partial<block_update::b_first>(partial, sa, sb, y);
        break;
      default:
        merge_block_partial<block_update::combined>(partial, sa, sb, y);
    }
  };
  tiles::run<Tiles>(pa, pb, fp8_block_size / tiles::step_k, merge, [&](index_t i, index_t j0, const float* v, index_t count) {
    store_output_row<false>(out, i, j0, v, count, 1.0f, bias);
  });
  return true;
}

/// mxfp8_gemm's relaxed product on tile unit Tiles; false, with nothing written, where the
/// operands do not fit the tiles.
template <class Tiles, class FormatA, class FormatB, class Out>
bool mxfp8_gemm_on_tiles(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<Out> out,
                         const fp8_gemm_options& options) {
  tiles::packed_operand pa, pb;
  if (!pack_fp8_for_tiles(a, b, pa, pb)) return false;
  tiles::run<Tiles>(pa, pb, 0, tiles::no_block_merge{}, [&](index_t i, index_t j0, const float* v, index_t count) {
    store_output_row<false>(out, i, j0, v, count, 1.0f, options.bias);
  });
  return true;
}

/// fp8_mma's / mxfp8_mma's relaxed product on tile unit Tiles: D = C + the tile chain (C empty:
/// the chain); false, with nothing written, where the operands do not fit the tiles.
template <class Tiles, class TensorA, class TensorB>
bool mma_on_tiles(const TensorA& a, const TensorB& b, matrix_view<const float> c, matrix_view<float> d) {
  tiles::packed_operand pa, pb;
  if (!pack_fp8_for_tiles(a, b, pa, pb)) return false;
  const bool has_c = !c.empty();
  tiles::run<Tiles>(pa, pb, 0, tiles::no_block_merge{}, [&](index_t i, index_t j0, const float* v, index_t count) {
    for (index_t t = 0; t < count; ++t) d(i, j0 + t) = has_c ? c(i, j0 + t) + v[t] : v[t];
  });
  return true;
}

}  // namespace nvfp4::detail
