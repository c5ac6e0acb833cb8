// nvfp4/gemm/fast_gemm.hpp: the fast block-scaled MMA, the one dispatch point of the GEMM kernels:
// the AVX-512 VNNI kernels where the build has them, else the AVX2 ones, else the portable scalar
// step. The vector driver unpacks A once, packs B per panel, and runs OpenMP over work items; each
// output is computed start to end by one thread, so results do not depend on the thread count.
// Inputs are checked by gemm.hpp; nothing here throws.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "nvfp4/gemm/mma_layout.hpp"
#include "nvfp4/gemm/packing.hpp"
#include "nvfp4/gemm/reference.hpp"
#include "nvfp4/gemm/simd/mma_avx2.hpp"
#include "nvfp4/gemm/simd/mma_avx512.hpp"
#include "nvfp4/gemm/simd/mma_operands_avx512.hpp"

namespace nvfp4::fast {

namespace detail_gemm {

/// Portable path: the reference step on pre-unpacked rows, parallel over output rows.
inline void portable_mma(const gemm_detail::unpacked_operand& a, const gemm_detail::unpacked_operand& b, index_t m,
                         index_t n, matrix_view<const float> c, matrix_view<float> d, gemm_mode mode) {
  mma::scale_parts a_scales[mma::groups_per_step], b_scales[mma::groups_per_step];
#pragma omp parallel for schedule(static) private(a_scales, b_scales) if (m * n * a.steps > 4096)
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      float accumulator = c.empty() ? 0.0f : c(i, j);
      for (index_t s = 0; s < a.steps; ++s) {
        const std::int8_t* a_values = a.row_values(i) + s * mma::step_k;
        const std::int8_t* b_values = b.row_values(j) + s * mma::step_k;
        for (int g = 0; g < mma::groups_per_step; ++g) {
          a_scales[g] = a.row_scales(i)[s * mma::groups_per_step + g];
          b_scales[g] = b.row_scales(j)[s * mma::groups_per_step + g];
        }
        accumulator = mode == gemm_mode::exact ? mma::step(a_values, b_values, a_scales, b_scales, accumulator)
                                               : mma::relaxed_step(a_values, b_values, a_scales, b_scales, accumulator);
      }
      d(i, j) = accumulator;
    }
}

/// A work item: `rows_per_item` rows of A against a panel of `panel_tiles` tiles of B, packed
/// once per item, walked `steps_per_chunk` K steps at a time so that the chunk of the panel and
/// of A's rows both stay in L2 while every register block of the item goes over them. Each
/// output still sees its K steps in order, and OpenMP only decides which thread computes an item,
/// so the result is that of one uninterrupted pass for any thread count.
inline constexpr index_t rows_per_item = 128, steps_per_chunk = 16;
inline constexpr int panel_tiles = 8;

/// Calls block(R, C) with R = rows and C = tiles as compile-time constants (1 <= rows <=
/// MaxRows, 1 <= tiles <= MaxTiles <= 2).
template <int MaxRows, int MaxTiles, class Block>
void for_block_shape(int rows, int tiles, Block&& block) {
  if constexpr (MaxRows >= 1) {
    if (rows < MaxRows) return for_block_shape<MaxRows - 1, MaxTiles>(rows, tiles, block);
    if constexpr (MaxTiles >= 2)
      if (tiles >= 2) return block(std::integral_constant<int, MaxRows>{}, std::integral_constant<int, 2>{});
    block(std::integral_constant<int, MaxRows>{}, std::integral_constant<int, 1>{});
  }
}

/// The vector path: `Isa` is the kernel namespace's tag (its block shape, kernels and packers).
template <class Isa, class FormatA, class FormatB>
void vector_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<const float> c,
                matrix_view<float> d, gemm_mode mode) {
  using scale_type = typename FormatA::scale_type;
  using gemm_detail::tile_lanes;
  const index_t m = a.rows(), n = b.rows();
  const auto rows = Isa::make_broadcast_rows(a);
  const index_t steps = rows.steps;
  // The relaxed kernels' cheaper form needs every scale product in [2^-124, 2^128).
  float b_min, b_max;
  gemm_detail::scale_exponent_range(b, b_min, b_max);
  const bool prescaled = std::is_same_v<scale_type, ue4m3> || !(rows.exponent_min <= rows.exponent_max && b_min <= b_max) ||
                         (rows.exponent_min + b_min >= -124 && rows.exponent_max + b_max <= 127);
  const index_t tiles = (n + tile_lanes - 1) / tile_lanes;
  const index_t panels = (tiles + panel_tiles - 1) / panel_tiles;
  const index_t items_per_panel = (m + rows_per_item - 1) / rows_per_item;
  const index_t items = panels * items_per_panel;
  constexpr index_t panel_cols = panel_tiles * tile_lanes;
#pragma omp parallel if (items > 1 && m * n * steps > 16384)
  {
    std::vector<gemm_detail::tile_step> panel(static_cast<std::size_t>(panel_tiles * steps));
    std::vector<float> staged(static_cast<std::size_t>(rows_per_item * panel_cols));
    index_t packed_panel = -1;
#pragma omp for schedule(dynamic, 1)
    for (index_t item = 0; item < items; ++item) {
      const index_t p = item / items_per_panel, i_begin = (item % items_per_panel) * rows_per_item;
      const index_t i_count = std::min(rows_per_item, m - i_begin);
      const int tiles_here = static_cast<int>(std::min<index_t>(panel_tiles, tiles - p * panel_tiles));
      const index_t j0 = p * panel_cols, cols = std::min<index_t>(tiles_here * tile_lanes, n - j0);
      if (packed_panel != p) {
        for (int t = 0; t < tiles_here; ++t) Isa::pack_tile(b, j0 + t * tile_lanes, panel.data() + t * steps);
        packed_panel = p;
      }
      for (index_t i = 0; i < i_count; ++i)
        for (index_t j = 0; j < panel_cols; ++j)
          staged[static_cast<std::size_t>(i * panel_cols + j)] = (j < cols && !c.empty()) ? c(i_begin + i, j0 + j) : 0.0f;
      for (index_t s0 = 0; s0 < steps; s0 += steps_per_chunk) {
        const index_t chunk = std::min(steps_per_chunk, steps - s0);
        for (int t0 = 0; t0 < tiles_here; t0 += Isa::block_tiles)
          for (index_t i0 = 0; i0 < i_count; i0 += Isa::block_rows) {
            const int block_r = static_cast<int>(std::min<index_t>(Isa::block_rows, i_count - i0));
            const int block_c = std::min(Isa::block_tiles, tiles_here - t0);
            for_block_shape<Isa::block_rows, Isa::block_tiles>(block_r, block_c, [&]<int R, int C>(std::integral_constant<int, R>, std::integral_constant<int, C>) {
              const gemm_detail::row_step* row_steps[R];
              const gemm_detail::tile_step* tile_steps[C];
              for (int r = 0; r < R; ++r) row_steps[r] = rows.row(i_begin + i0 + r) + s0;
              for (int t = 0; t < C; ++t) tile_steps[t] = panel.data() + (t0 + t) * steps + s0;
              float* out = staged.data() + i0 * panel_cols + t0 * tile_lanes;
              if (mode == gemm_mode::exact) Isa::template exact_block<scale_type, R, C>(row_steps, tile_steps, chunk, out, panel_cols);
              else if (prescaled) Isa::template relaxed_block<R, C, true>(row_steps, tile_steps, chunk, out, panel_cols);
              else Isa::template relaxed_block<R, C, false>(row_steps, tile_steps, chunk, out, panel_cols);
            });
          }
      }
      for (index_t i = 0; i < i_count; ++i)
        for (index_t j = 0; j < cols; ++j) d(i_begin + i, j0 + j) = staged[static_cast<std::size_t>(i * panel_cols + j)];
    }
  }
}

#if NVFP4_HAS_AVX512_VNNI
struct avx512_isa {
  static constexpr int block_rows = gemm_detail::avx512::block_rows, block_tiles = gemm_detail::avx512::block_tiles;
  template <class Format>
  static auto make_broadcast_rows(const quantized_tensor<Format>& q) { return gemm_detail::avx512::make_broadcast_rows(q); }
  template <class Format>
  static void pack_tile(const quantized_tensor<Format>& q, index_t j0, gemm_detail::tile_step* out) {
    gemm_detail::avx512::pack_tile(q, j0, out);
  }
  template <class ScaleType, int R, int C, class... Args>
  static void exact_block(Args... args) { gemm_detail::avx512::exact_block<ScaleType, R, C>(args...); }
  template <int R, int C, bool Prescaled, class... Args>
  static void relaxed_block(Args... args) { gemm_detail::avx512::relaxed_block<R, C, Prescaled>(args...); }
};
#elif NVFP4_HAS_AVX2
struct avx2_isa {
  static constexpr int block_rows = gemm_detail::avx2::block_rows, block_tiles = gemm_detail::avx2::block_tiles;
  template <class Format>
  static auto make_broadcast_rows(const quantized_tensor<Format>& q) { return gemm_detail::make_broadcast_rows(q); }
  template <class Format>
  static void pack_tile(const quantized_tensor<Format>& q, index_t j0, gemm_detail::tile_step* out) {
    gemm_detail::pack_tile(q, j0, out);
  }
  template <class ScaleType, int R, int C, class... Args>
  static void exact_block(Args... args) { gemm_detail::avx2::exact_block<ScaleType, R, C>(args...); }
  template <int R, int C, bool Prescaled, class... Args>
  static void relaxed_block(Args... args) { gemm_detail::avx2::relaxed_block<R, C, Prescaled>(args...); }
};
#endif

}  // namespace detail_gemm

/// D = C + A·Bᵀ (see nvfp4::block_scaled_mma), bit-identical to the reference. `c` may alias `d`:
/// each output's C is read before its D is written, by the same thread.
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
void block_scaled_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b,
                      matrix_view<const float> c, matrix_view<float> d, gemm_mode mode) {
  const index_t m = a.rows(), n = b.rows();
  if (m == 0 || n == 0) return;
#if NVFP4_HAS_AVX512_VNNI
  detail_gemm::vector_mma<detail_gemm::avx512_isa>(a, b, c, d, mode);
#elif NVFP4_HAS_AVX2
  detail_gemm::vector_mma<detail_gemm::avx2_isa>(a, b, c, d, mode);
#else
  const auto a_unpacked = gemm_detail::unpack(a, m);
  const auto b_unpacked = gemm_detail::unpack(b, n);
  detail_gemm::portable_mma(a_unpacked, b_unpacked, m, n, c, d, mode);
#endif
}

}  // namespace nvfp4::fast
