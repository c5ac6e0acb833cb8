// nvfp4/gemm/fp4/detail/fast_gemm.hpp: the fast block-scaled MMA: one driver over any kernel set
// (gemm/fp4/detail/mma_kernels.hpp: AVX-512 VNNI, AVX2, portable), the AMX kernels (own layouts and
// driver, gemm/fp4/simd/mma_amx.hpp) where the dispatch point's run-time choice says so
// (simd/dispatch.hpp: gemm_isa, gemm_isa_for_call) and the operands suit them, and in relaxed
// mode the BF16 tile path (gemm/fp4/detail/tile_path.hpp) where the machine runs it. The driver packs A
// once, packs B per panel (or reads B packed beforehand, packed_b), and hands work items to the
// threads (simd::parallel_dynamic); each output is computed start to end by one thread, so
// results do not depend on the thread count. Each finished output goes to a `store(i, j, value)`
// callback (D, or gemm()'s epilogue). Inputs are checked by gemm.hpp; nothing here throws.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "nvfp4/detail/scratch.hpp"
#include "nvfp4/gemm/fp4/detail/mma_kernels.hpp"
#include "nvfp4/gemm/fp4/detail/mma_layout.hpp"
#include "nvfp4/gemm/fp4/detail/tile_path.hpp"
#include "nvfp4/gemm/fp4/simd/mma_amx.hpp"
#include "nvfp4/gemm/fp4/simd/mma_avx2.hpp"
#include "nvfp4/gemm/fp4/simd/mma_avx512.hpp"
#include "nvfp4/gemm/operands.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/simd/dispatch.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4::detail {

/// The driver's default output: D.
struct store_to_matrix {
  matrix_view<float> d;
  void operator()(index_t i, index_t j, float value) const { d(i, j) = value; }
};

/// A work item: `rows_per_item` rows of A against a panel of `panel_tiles` tiles of B, packed
/// once per item, walked `steps_per_chunk` K steps at a time so that the chunk of the panel and
/// of A's rows both stay in L2 while every register block of the item goes over them. Each
/// output still sees its K steps in order, and the threads only decide who computes an item, so
/// the result is that of one uninterrupted pass for any thread count.
inline constexpr index_t rows_per_item = 128, steps_per_chunk = 16;
inline constexpr int panel_tiles = 8;

/// Packs every tile of B (rows 16t .. 16t + 15) with Packer::pack_tile into out + t * steps, the
/// tiles split among a team when `parallel`.
template <class Packer, class Format, class Step>
void pack_all_tiles(const quantized_tensor<Format>& b, index_t steps, Step* out, bool parallel) {
  const index_t tiles = (b.rows() + tile_lanes - 1) / tile_lanes;
  simd::parallel_ranges(tiles, parallel, [&](index_t begin, index_t end) {
    for (index_t t = begin; t < end; ++t) Packer::pack_tile(b, t * tile_lanes, out + t * steps);
  });
}

/// D = C + A·Bᵀ with kernel set Kernels (see mma_kernels), each output handed to store(i, j,
/// value). `packed` is B packed by Kernels::packers::pack_tile for all its tiles, [tile][step]
/// (whole panels), or null to pack each panel as it is needed.
template <class Kernels, class FormatA, class FormatB, class Store>
void mma_driver(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, const tile_step* packed, matrix_view<const float> c,
                const Store& store, gemm_mode mode) {
  using scale_type = typename FormatA::scale_type;
  using packers = typename Kernels::packers;
  const index_t m = a.rows(), n = b.rows();
  const auto rows = packers::make_broadcast_rows(a);
  const index_t steps = rows.steps;
  // The relaxed kernels' cheaper form needs every scale product in [2^-124, 2^128).
  float b_min, b_max;
  scale_exponent_range(b, b_min, b_max);
  const bool prescaled = std::is_same_v<scale_type, ue4m3> || !(rows.exponent_min <= rows.exponent_max && b_min <= b_max) ||
                         (rows.exponent_min + b_min >= -124 && rows.exponent_max + b_max <= 127);
  const index_t tiles = (n + tile_lanes - 1) / tile_lanes;
  const index_t panels = (tiles + panel_tiles - 1) / panel_tiles;
  const index_t items_per_panel = (m + rows_per_item - 1) / rows_per_item;
  constexpr index_t panel_cols = panel_tiles * tile_lanes;
  // On a team, one panel's row items go to many threads, and each would pack the panel again (at
  // 16 threads, up to 16 times): with more than one item per panel, B is then packed once, by the
  // team, and shared.
  const bool parallel = simd::worth_parallel(m * n * steps);
  scratch<tile_step> shared_tiles;
  if (!packed && items_per_panel > 1 && simd::runs_on_a_team(parallel, panels * items_per_panel)) {
    shared_tiles = scratch<tile_step>(static_cast<std::size_t>(tiles * steps));
    pack_all_tiles<packers>(b, steps, shared_tiles.data(), true);
    packed = shared_tiles.data();
  }
  struct thread_state {
    scratch<tile_step> own_panel;
    scratch<float> staged;
    index_t packed_panel = -1;
  };
  // Work in units of one 64-element step of one output (simd/parallel.hpp's threshold).
  simd::parallel_dynamic(
      panels * items_per_panel, parallel,
      [&] {
        return thread_state{scratch<tile_step>(packed ? 0 : static_cast<std::size_t>(panel_tiles * steps)),
                            scratch<float>(static_cast<std::size_t>(rows_per_item * panel_cols)), -1};
      },
      [&](index_t item, thread_state& state) {
        const index_t p = item / items_per_panel, i_begin = (item % items_per_panel) * rows_per_item;
        const index_t i_count = std::min(rows_per_item, m - i_begin);
        const int tiles_here = static_cast<int>(std::min<index_t>(panel_tiles, tiles - p * panel_tiles));
        const index_t j0 = p * panel_cols, cols = std::min<index_t>(tiles_here * tile_lanes, n - j0);
        const tile_step* panel = packed ? packed + p * panel_tiles * steps : state.own_panel.data();
        if (!packed && state.packed_panel != p) {
          for (int t = 0; t < tiles_here; ++t) packers::pack_tile(b, j0 + t * tile_lanes, state.own_panel.data() + t * steps);
          state.packed_panel = p;
        }
        float* const staged = state.staged.data();
        for (index_t i = 0; i < i_count; ++i)
          for (index_t j = 0; j < panel_cols; ++j) staged[i * panel_cols + j] = (j < cols && !c.empty()) ? c(i_begin + i, j0 + j) : 0.0f;
        for (index_t s0 = 0; s0 < steps; s0 += steps_per_chunk) {
          const index_t chunk = std::min(steps_per_chunk, steps - s0);
          for (int t0 = 0; t0 < tiles_here; t0 += Kernels::block_tiles)
            for (index_t i0 = 0; i0 < i_count; i0 += Kernels::block_rows) {
              const int block_r = static_cast<int>(std::min<index_t>(Kernels::block_rows, i_count - i0));
              const int block_c = std::min(Kernels::block_tiles, tiles_here - t0);
              for_block_shape<Kernels::block_rows, Kernels::block_tiles>(
                  block_r, block_c, [&]<int R, int C>(std::integral_constant<int, R>, std::integral_constant<int, C>) {
                    const row_step* row_steps[R];
                    const tile_step* tile_steps[C];
                    for (int r = 0; r < R; ++r) row_steps[r] = rows.row(i_begin + i0 + r) + s0;
                    for (int t = 0; t < C; ++t) tile_steps[t] = panel + (t0 + t) * steps + s0;
                    float* out = staged + i0 * panel_cols + t0 * tile_lanes;
                    if (mode == gemm_mode::exact)
                      Kernels::template exact_block<scale_type, R, C>(row_steps, tile_steps, chunk, out, panel_cols);
                    else if (prescaled)
                      Kernels::template relaxed_block<scale_type, R, C, true>(row_steps, tile_steps, chunk, out, panel_cols);
                    else
                      Kernels::template relaxed_block<scale_type, R, C, false>(row_steps, tile_steps, chunk, out, panel_cols);
                  });
            }
        }
        for (index_t i = 0; i < i_count; ++i)
          for (index_t j = 0; j < cols; ++j) store(i_begin + i, j0 + j, staged[i * panel_cols + j]);
      });
}

/// The kernel set of this build's compile-time choice (simd::gemm_isa).
using compiled_mma_kernels = mma_kernels<simd::gemm_isa>;

/// B packed beforehand for the kernels this process runs (what gemm/fp4/packed_weight.hpp keeps): the
/// AMX layout where the AMX kernels run and accept B, else the tiles of the compiled kernel set.
/// Whole panels of tiles, [tile][step].
struct packed_b {
  index_t rows = 0, steps = 0;
  std::vector<tile_step> tiles;
  std::vector<amx::tile_block_step> amx_tiles;
};

/// The AMX set's part of block_scaled_mma_fast and pack_b (Amx is mma_kernels<isa::amx_bf16>,
/// named through a template parameter so that builds without it never look inside).
template <class Amx, class FormatA, class FormatB, class Store>
bool run_amx(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, const packed_b* packed, matrix_view<const float> c,
             const Store& store, gemm_mode mode) {
  if (!Amx::eligible(a, b, mode)) return false;
  const bool packed_for_amx = packed && !packed->amx_tiles.empty();
  Amx::run(a, b, packed_for_amx ? packed->amx_tiles.data() : nullptr, c, store, mode);
  return true;
}
template <class Amx, class Format>
bool pack_b_amx(const quantized_tensor<Format>& b, index_t padded_tiles, packed_b& out) {
  if (!Amx::eligible(b, b, gemm_mode::exact)) return false;
  out.amx_tiles.resize(static_cast<std::size_t>(padded_tiles * out.steps));
  const index_t tiles = (b.rows() + tile_lanes - 1) / tile_lanes;
  pack_all_tiles<Amx>(b, out.steps, out.amx_tiles.data(), simd::worth_parallel(tiles * out.steps * tile_lanes));
  return true;
}

/// Packs B (a [N, K] operand) once for repeated products (see packed_b).
template <fp4_gemm_format Format>
packed_b pack_b(const quantized_tensor<Format>& b) {
  packed_b out;
  out.rows = b.rows();
  out.steps = (b.cols() + fp4::mma::step_k - 1) / fp4::mma::step_k;
  const index_t tiles = (b.rows() + tile_lanes - 1) / tile_lanes;
  const index_t padded_tiles = (tiles + panel_tiles - 1) / panel_tiles * panel_tiles;
  if constexpr (has_mma_kernels<isa::amx_bf16>) {
    if (simd::gemm_isa_for_call() == isa::amx_bf16 && pack_b_amx<mma_kernels<isa::amx_bf16>>(b, padded_tiles, out)) return out;
  }
  out.tiles.resize(static_cast<std::size_t>(padded_tiles * out.steps));
  pack_all_tiles<compiled_mma_kernels::packers>(b, out.steps, out.tiles.data(), simd::worth_parallel(tiles * out.steps * tile_lanes));
  return out;
}

/// The fast path of nvfp4::block_scaled_mma: D = C + A·Bᵀ, bit-identical to the reference, each
/// output handed to store(i, j, value), with the kernels the dispatch point picks for this call.
/// `packed` is B packed by pack_b(b), or null. `c` may alias what store writes: each output's C is
/// read before its D is stored, by the same thread.
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB, class Store>
void block_scaled_mma_fast(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, const packed_b* packed,
                           matrix_view<const float> c, const Store& store, gemm_mode mode) {
  if (a.rows() == 0 || b.rows() == 0) return;
  static_assert(has_mma_kernels<simd::gemm_isa>);
  // Relaxed: on BF16 tiles where the machine runs them and the folded operands fit (tile_path.hpp).
  if (mode == gemm_mode::relaxed && tiles::relaxed_on_tiles(a.rows(), b.rows()) &&
      fp4_mma_on_tiles<simd::amx::hardware_tiles>(a, b, c, store))
    return;
  // The run-time choice: AMX where the CPU and the OS allow it and the operands suit it.
  if constexpr (has_mma_kernels<isa::amx_bf16>) {
    if (simd::gemm_isa_for_call() == isa::amx_bf16 && run_amx<mma_kernels<isa::amx_bf16>>(a, b, packed, c, store, mode)) return;
  }
  mma_driver<compiled_mma_kernels>(a, b, packed && !packed->tiles.empty() ? packed->tiles.data() : nullptr, c, store, mode);
}

}  // namespace nvfp4::detail
