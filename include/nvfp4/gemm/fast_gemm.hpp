// nvfp4/gemm/fast_gemm.hpp: the fast block-scaled MMA, the one dispatch point of the GEMM kernels:
// the AMX kernels where the CPU and the OS allow them (a run-time choice, simd/amx/tiles.hpp) and
// the operands suit them, else the AVX-512 VNNI kernels where the build has them, else the AVX2
// ones, else the portable scalar step. The vector driver unpacks A once, packs B per panel (or
// reads B packed beforehand, packed_b), and runs OpenMP over work items; each output is computed
// start to end by one thread, so results do not depend on the thread count. Each finished output
// goes to a `store(i, j, value)` callback (D, or gemm()'s epilogue). Inputs are checked by
// gemm.hpp; nothing here throws.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "nvfp4/gemm/mma_layout.hpp"
#include "nvfp4/gemm/packing.hpp"
#include "nvfp4/gemm/reference.hpp"
#include "nvfp4/gemm/simd/mma_amx.hpp"
#include "nvfp4/gemm/simd/mma_avx2.hpp"
#include "nvfp4/gemm/simd/mma_avx512.hpp"
#include "nvfp4/gemm/simd/mma_operands_avx512.hpp"
#include "nvfp4/simd/amx/tiles.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4::fast {

namespace detail_gemm {

/// The driver's default output: D.
struct store_to_matrix {
  matrix_view<float> d;
  void operator()(index_t i, index_t j, float value) const { d(i, j) = value; }
};

/// Portable path: the reference step on pre-unpacked rows, parallel over output rows.
template <class Store>
void portable_mma(const gemm_detail::unpacked_operand& a, const gemm_detail::unpacked_operand& b, index_t m, index_t n,
                  matrix_view<const float> c, const Store& store, gemm_mode mode) {
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
      store(i, j, accumulator);
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
/// `packed` is B packed by Isa::pack_tile for all its tiles, [tile][step] (whole panels), or null
/// to pack each panel as it is needed.
template <class Isa, class FormatA, class FormatB, class Store>
void vector_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, const gemm_detail::tile_step* packed,
                matrix_view<const float> c, const Store& store, gemm_mode mode) {
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
    std::vector<gemm_detail::tile_step> own_panel(packed ? 0 : static_cast<std::size_t>(panel_tiles * steps));
    std::vector<float> staged(static_cast<std::size_t>(rows_per_item * panel_cols));
    index_t packed_panel = -1;
#pragma omp for schedule(dynamic, 1)
    for (index_t item = 0; item < items; ++item) {
      const index_t p = item / items_per_panel, i_begin = (item % items_per_panel) * rows_per_item;
      const index_t i_count = std::min(rows_per_item, m - i_begin);
      const int tiles_here = static_cast<int>(std::min<index_t>(panel_tiles, tiles - p * panel_tiles));
      const index_t j0 = p * panel_cols, cols = std::min<index_t>(tiles_here * tile_lanes, n - j0);
      const gemm_detail::tile_step* panel = packed ? packed + p * panel_tiles * steps : own_panel.data();
      if (!packed && packed_panel != p) {
        for (int t = 0; t < tiles_here; ++t) Isa::pack_tile(b, j0 + t * tile_lanes, own_panel.data() + t * steps);
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
              for (int t = 0; t < C; ++t) tile_steps[t] = panel + (t0 + t) * steps + s0;
              float* out = staged.data() + i0 * panel_cols + t0 * tile_lanes;
              if (mode == gemm_mode::exact) Isa::template exact_block<scale_type, R, C>(row_steps, tile_steps, chunk, out, panel_cols);
              else if (prescaled) Isa::template relaxed_block<R, C, true>(row_steps, tile_steps, chunk, out, panel_cols);
              else Isa::template relaxed_block<R, C, false>(row_steps, tile_steps, chunk, out, panel_cols);
            });
          }
      }
      for (index_t i = 0; i < i_count; ++i)
        for (index_t j = 0; j < cols; ++j) store(i_begin + i, j0 + j, staged[static_cast<std::size_t>(i * panel_cols + j)]);
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

/// B packed beforehand for the kernels this process runs (what gemm/packed_weight.hpp keeps):
/// the AMX layout where the AMX kernels run and accept B, else the vector kernels' tiles, else (plain
/// x86-64 builds) the unpacked rows. Whole panels of tiles, [tile][step].
struct packed_b {
  index_t rows = 0, steps = 0;
  std::vector<gemm_detail::tile_step> tiles;
#if NVFP4_HAS_AVX512_VNNI
  std::vector<gemm_detail::amx::tile_block_step> amx_tiles;
#endif
  gemm_detail::unpacked_operand unpacked;
};

}  // namespace detail_gemm

/// Packs B (a [N, K] operand) once for repeated products (see detail_gemm::packed_b).
template <fp4_gemm_format Format>
detail_gemm::packed_b pack_b(const quantized_tensor<Format>& b) {
  detail_gemm::packed_b out;
  out.rows = b.rows();
  out.steps = (b.cols() + mma::step_k - 1) / mma::step_k;
  const index_t tiles = (b.rows() + gemm_detail::tile_lanes - 1) / gemm_detail::tile_lanes;
  const index_t padded_tiles = (tiles + detail_gemm::panel_tiles - 1) / detail_gemm::panel_tiles * detail_gemm::panel_tiles;
  const index_t steps = out.steps;
#if NVFP4_HAS_AVX512_VNNI && NVFP4_AMX_COMPILED
  if (simd::amx::usable() && gemm_detail::amx::eligible(b, b, gemm_mode::exact)) {
    out.amx_tiles.resize(static_cast<std::size_t>(padded_tiles * steps));
    simd::parallel_ranges(tiles, tiles * steps > 64, [&](index_t begin, index_t end) {
      for (index_t t = begin; t < end; ++t)
        gemm_detail::amx::pack_tile(b, t * gemm_detail::tile_lanes, out.amx_tiles.data() + t * steps);
    });
    return out;
  }
#endif
#if NVFP4_HAS_AVX512_VNNI || NVFP4_HAS_AVX2
  out.tiles.resize(static_cast<std::size_t>(padded_tiles * steps));
  simd::parallel_ranges(tiles, tiles * steps > 64, [&](index_t begin, index_t end) {
    for (index_t t = begin; t < end; ++t) {
#if NVFP4_HAS_AVX512_VNNI
      gemm_detail::avx512::pack_tile(b, t * gemm_detail::tile_lanes, out.tiles.data() + t * steps);
#else
      gemm_detail::pack_tile(b, t * gemm_detail::tile_lanes, out.tiles.data() + t * steps);
#endif
    }
  });
#else
  (void)padded_tiles, (void)steps;
  out.unpacked = gemm_detail::unpack(b, b.rows());
#endif
  return out;
}

/// D = C + A·Bᵀ (see nvfp4::block_scaled_mma), bit-identical to the reference, each output handed
/// to store(i, j, value). `packed` is B packed by pack_b(b), or null. `c` may alias what store
/// writes: each output's C is read before its D is stored, by the same thread.
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB, class Store>
void block_scaled_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, const detail_gemm::packed_b* packed,
                      matrix_view<const float> c, const Store& store, gemm_mode mode) {
  const index_t m = a.rows(), n = b.rows();
  if (m == 0 || n == 0) return;
#if NVFP4_HAS_AVX512_VNNI
#if NVFP4_AMX_COMPILED
  const bool packed_for_amx = packed && !packed->amx_tiles.empty();
  if (simd::amx::usable() && gemm_detail::amx::eligible(a, b, mode)) {
    gemm_detail::amx::block_scaled_mma<simd::amx::hardware_tiles>(a, b, packed_for_amx ? packed->amx_tiles.data() : nullptr, c, store,
                                                                  mode);
    return;
  }
#endif
  detail_gemm::vector_mma<detail_gemm::avx512_isa>(a, b, packed && !packed->tiles.empty() ? packed->tiles.data() : nullptr, c, store, mode);
#elif NVFP4_HAS_AVX2
  detail_gemm::vector_mma<detail_gemm::avx2_isa>(a, b, packed && !packed->tiles.empty() ? packed->tiles.data() : nullptr, c, store, mode);
#else
  const auto a_unpacked = gemm_detail::unpack(a, m);
  if (packed && packed->unpacked.rows == n) {
    detail_gemm::portable_mma(a_unpacked, packed->unpacked, m, n, c, store, mode);
  } else {
    const auto b_unpacked = gemm_detail::unpack(b, n);
    detail_gemm::portable_mma(a_unpacked, b_unpacked, m, n, c, store, mode);
  }
#endif
}

/// D = C + A·Bᵀ into d (see nvfp4::block_scaled_mma). `c` may alias `d`.
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
void block_scaled_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<const float> c,
                      matrix_view<float> d, gemm_mode mode) {
  block_scaled_mma(a, b, nullptr, c, detail_gemm::store_to_matrix{d}, mode);
}

}  // namespace nvfp4::fast
