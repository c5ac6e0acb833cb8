// nvfp4/gemm/fp4/detail/tile_path.hpp: the relaxed FP4 MMA on BF16 tiles (gemm/detail/tile_gemm.hpp):
// A's and B's E2M1 values times their block scales folded into bf16 once, fp32 tiles over all of
// K, D = C + the tile chain (one fp32 addition where a C is given). Taken by
// block_scaled_mma_fast in relaxed mode where the machine runs the tiles and the folded operands
// fit them; reference::block_scaled_mma computes the same through tile_model (reference.hpp).
#pragma once

#include "nvfp4/gemm/detail/tile_gemm.hpp"
#include "nvfp4/gemm/detail/tile_sources.hpp"
#include "nvfp4/gemm/operands.hpp"

namespace nvfp4::detail {

/// D = C + A·Bᵀ by the tile chain, each output handed to store(i, j, value), with tile unit
/// Tiles (simd::amx::hardware_tiles, or a model of it in tests). False, with nothing written,
/// when the folded operands do not fit the tiles (tiles::fits_tiles).
template <class Tiles, class FormatA, class FormatB, class Store>
bool fp4_mma_on_tiles(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<const float> c,
                      const Store& store) {
  tiles::packed_operand pa, pb;
  tiles::pack(tiles::fp4_source<FormatA>{a}, a.rows(), a.cols(), false, pa);
  if (!pa.stats.representable) return false;
  tiles::pack(tiles::fp4_source<FormatB>{b}, b.rows(), b.cols(), true, pb);
  if (!tiles::fits_tiles(pa.stats, pb.stats, a.cols())) return false;
  const bool has_c = !c.empty();
  tiles::run<Tiles>(pa, pb, 0, tiles::no_block_merge{}, [&](index_t i, index_t j0, const float* values, index_t count) {
    for (index_t t = 0; t < count; ++t) store(i, j0 + t, has_c ? c(i, j0 + t) + values[t] : values[t]);
  });
  return true;
}

}  // namespace nvfp4::detail
