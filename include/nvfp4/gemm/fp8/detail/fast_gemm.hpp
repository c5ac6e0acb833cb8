// nvfp4/gemm/fp8/detail/fast_gemm.hpp: the fast FP8 / MXFP8 GEMM and its step kernel sets (which
// one runs: simd/dispatch.hpp's fp8_gemm_isa). The driver splits the output into items (64 rows x
// a panel of 32 tiles of 16 columns; A's rows are staged once per item, so a wide panel stages
// them less often; 32 tiles beat 16: docs/benchmarks.md, "Figures behind code choices"),
// packs a panel's tiles as it goes on one thread, all of B's tiles once up front on a team (or
// reads B's tiles packed beforehand: operand_rows::packed_tiles), and walks K in chunks of whole promotion granules so that a chunk
// of the panel and of the item's staged rows stay in cache while every block of 8 rows x 4 tiles
// goes over them; each output's accumulator lives in the item's buffer between chunks, so every
// output still sees its K steps in order. The vector kernels (gemm/fp8/detail/step_kernels.hpp,
// written once over Ops) run on AVX-512 or AVX2 where the build has them (gemm/fp8/simd/ binds
// each ISA); elsewhere each output goes through the scalar step. One thread computes an output
// start to end (simd::parallel_dynamic), so the result does not depend on the thread count.
#pragma once

#include <algorithm>
#include <vector>

#include "nvfp4/gemm/fp8/detail/layout.hpp"
#include "nvfp4/gemm/fp8/simd/mma_avx2.hpp"
#include "nvfp4/gemm/fp8/simd/mma_avx512.hpp"
#include "nvfp4/simd/dispatch.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4::fp8_gemm_detail {

/// The step kernels of one ISA: staging(mode) and run_steps(blk, s0, s1, acc, stride). The
/// AVX-512 and AVX2 sets are lane_step_kernels over their Ops (gemm/fp8/detail/step_kernels.hpp,
/// bound in gemm/fp8/simd/); simd/dispatch.hpp's fp8_gemm_isa says which set runs.
template <isa Isa>
struct fp8_step_kernels;

/// The portable set: each output through the scalar step.
template <>
struct fp8_step_kernels<isa::scalar> {
  static constexpr staged_parts staging(gemm_mode) { return {}; }
  static void run_steps(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
    for (int r = 0; r < blk.rows; ++r)
      for (int t = 0; t < blk.tile_count; ++t)
        for (int lane = 0; lane < blk.tiles[t]->columns; ++lane) {
          float& c = acc[r * stride + t * lanes + lane];
          for (index_t s = s0; s < s1; ++s) c = scalar_step(blk, r, t, lane, s, c);
        }
  }
};

/// Runs steps [s0, s1) of the block: acc[r * stride + t * 16 + lane] is the accumulator of output
/// (i0 + r, j0[t] + lane), fed back as each step's c.
inline void run_steps(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
  fp8_step_kernels<simd::fp8_gemm_isa>::run_steps(blk, s0, s1, acc, stride);
}

inline constexpr int block_rows = 8, block_tiles = 4;
inline constexpr index_t rows_per_item = 64, tiles_per_panel = 32, chunk_steps = 8;
inline constexpr index_t panel_columns = tiles_per_panel * lanes;

/// The calling thread's packed tiles of B for a team (see for_each_chunk), kept from call to call.
inline std::vector<column_tile>& kept_tiles() {
  static thread_local std::vector<column_tile> tiles;
  return tiles;
}

/// Calls run(block, s0, s1, acc, stride) over every block and K chunk: init(i, j0, acc, count)
/// sets the accumulators of outputs (i, j0 .. j0 + count - 1) (padding columns start at 0),
/// chunks are whole multiples of `granule` steps (so a promotion or a scale block never straddles
/// two), and store(i, j0, acc, count) receives the final accumulators of such a row segment.
/// Row segments, not single outputs: the epilogue is then a loop over contiguous floats.
template <class Init, class Run, class Store>
void for_each_chunk(const operand_rows& a, const operand_rows& b, fp8::mma::tensor_core core, gemm_mode mode, index_t granule, Init&& init,
                    Run&& run, Store&& store) {
  const index_t m = a.rows, n = b.rows, steps = a.steps;
  if (m == 0 || n == 0) return;
  const index_t tiles = (n + lanes - 1) / lanes, panels = (tiles + tiles_per_panel - 1) / tiles_per_panel;
  const index_t row_groups = (m + rows_per_item - 1) / rows_per_item;
  const index_t items = panels * row_groups;
  const index_t chunk = granule <= 0 ? chunk_steps : granule * std::max<index_t>(1, chunk_steps / granule);
  // Work in units of about a nanosecond: an FP8 step of one output is about 16.
  const bool parallel = simd::worth_parallel(m * n * steps * 16);
  // On a team, B's tiles are packed once, split over the threads, into the calling thread's kept
  // storage, and every thread reads them there: packed per thread as it goes, each panel would
  // be packed by every thread that takes one of its items (all of them, at 16 threads), work that
  // does not shrink with the thread count. One thread packs panel by panel (no whole copy of B).
  const column_tile* shared_tiles = b.packed_tiles;
  if (!shared_tiles && simd::runs_on_a_team(parallel, items)) {
    // A reference, captured by the lambda below: the workers must write the calling thread's
    // storage (a thread_local named inside the lambda would be each worker's own).
    std::vector<column_tile>& kept = kept_tiles();
    if (kept.size() < static_cast<std::size_t>(tiles)) kept.resize(static_cast<std::size_t>(tiles));
    const staged_parts parts = fp8_step_kernels<simd::fp8_gemm_isa>::staging(mode);
    simd::parallel_ranges(tiles, true, [&](index_t begin, index_t end) {
      for (index_t t = begin; t < end; ++t) pack_tile(b, t * lanes, kept[static_cast<std::size_t>(t)], parts);
    });
    shared_tiles = kept.data();
  }
  struct thread_buffers {
    std::vector<column_tile>* panel;
    std::vector<float>* acc;
    row_staging* staged;
    index_t packed = -1;
  };
  simd::parallel_dynamic(
      items, parallel,
      [] {
        // Per-thread buffers kept across calls: touching fresh memory costs more than the work here.
        static thread_local std::vector<column_tile> panel(static_cast<std::size_t>(tiles_per_panel));
        static thread_local std::vector<float> acc(static_cast<std::size_t>(rows_per_item * panel_columns));
        static thread_local row_staging staged;
        return thread_buffers{&panel, &acc, &staged, -1};
      },
      [&](index_t item, thread_buffers& buffers) {
        std::vector<column_tile>& panel = *buffers.panel;
        std::vector<float>& acc = *buffers.acc;
        row_staging& staged = *buffers.staged;
        const index_t p = item / row_groups, i_begin = (item % row_groups) * rows_per_item;
        const index_t t_begin = p * tiles_per_panel, t_count = std::min(tiles, t_begin + tiles_per_panel) - t_begin;
        const int item_rows = static_cast<int>(std::min(rows_per_item, m - i_begin));
        const column_tile* const panel_tiles = shared_tiles ? shared_tiles + t_begin : panel.data();
        if (!shared_tiles && buffers.packed != p) {
          for (index_t t = 0; t < t_count; ++t)
            pack_tile(b, (t_begin + t) * lanes, panel[static_cast<std::size_t>(t)], fp8_step_kernels<simd::fp8_gemm_isa>::staging(mode));
          buffers.packed = p;
        }
        const index_t j_begin = t_begin * lanes, columns = std::min(t_count * lanes, n - j_begin);
        for (int r = 0; r < item_rows; ++r) {
          float* const row = acc.data() + r * panel_columns;
          init(i_begin + r, j_begin, row, columns);
          std::fill(row + columns, row + panel_columns, 0.0f);
        }
        for (index_t c0 = 0; c0 < steps; c0 += chunk) {
          const index_t c1 = std::min(steps, c0 + chunk);
          stage_rows(a, i_begin, item_rows, c0, c1, fp8_step_kernels<simd::fp8_gemm_isa>::staging(mode), staged);
          for (index_t t0 = 0; t0 < t_count; t0 += block_tiles)
            for (int r0 = 0; r0 < item_rows; r0 += block_rows) {
              step_block blk{&a,   &staged, r0, std::min(block_rows, item_rows - r0),
                             &b,   {},      {}, static_cast<int>(std::min<index_t>(block_tiles, t_count - t0)),
                             core, mode};
              for (int t = 0; t < blk.tile_count; ++t) {
                blk.tiles[t] = panel_tiles + t0 + t;
                blk.j0[t] = (t_begin + t0 + t) * lanes;
              }
              run(blk, c0, c1, acc.data() + r0 * panel_columns + t0 * lanes, panel_columns);
            }
        }
        for (int r = 0; r < item_rows; ++r) store(i_begin + r, j_begin, acc.data() + r * panel_columns, columns);
      });
}

/// For every accumulator of the block: body(r, t, lane, index into the block's buffer).
template <class Body>
void for_each_lane(const step_block& blk, index_t stride, Body&& body) {
  for (int r = 0; r < blk.rows; ++r)
    for (int t = 0; t < blk.tile_count; ++t)
      for (int lane = 0; lane < lanes; ++lane) body(r, t, lane, r * stride + t * lanes + lane);
}

/// The split-accumulated chain over steps [s0, s1), which must start at a promotion boundary
/// (see detail::promoted_chain): with promotion every `per_promotion` steps the chain restarts
/// from zero and its result is added to acc in fp32; 0: one chain continuing from acc.
inline void promoted_block(const step_block& blk, index_t s0, index_t s1, index_t per_promotion, float* acc, index_t stride) {
  if (per_promotion == 0) {
    run_steps(blk, s0, s1, acc, stride);
    return;
  }
  float partial[block_rows * block_tiles * lanes];
  constexpr index_t partial_stride = block_tiles * lanes;
  for (index_t p0 = s0; p0 < s1; p0 += per_promotion) {
    for (float& v : partial) v = 0.0f;
    run_steps(blk, p0, std::min(s1, p0 + per_promotion), partial, partial_stride);
    for_each_lane(blk, stride, [&](int r, int t, int lane, index_t at) { acc[at] += partial[r * partial_stride + t * lanes + lane]; });
  }
}

}  // namespace nvfp4::fp8_gemm_detail
