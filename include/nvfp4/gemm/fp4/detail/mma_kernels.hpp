// nvfp4/gemm/fp4/detail/mma_kernels.hpp: what a kernel set of the block-scaled MMA offers the driver
// (gemm/fp4/detail/fast_gemm.hpp), and the portable set: every output lane through the reference's own §6
// step. The vector sets specialize mma_kernels in gemm/fp4/simd/ (AVX-512 VNNI, AVX2); the dispatch
// point (simd/dispatch.hpp) says which one a call runs.
#pragma once

#include <cstdint>
#include <type_traits>

#include "nvfp4/config.hpp"
#include "nvfp4/gemm/fp4/detail/mma_layout.hpp"
#include "nvfp4/gemm/fp4/detail/packing.hpp"
#include "nvfp4/simd/scalar/ops.hpp"

namespace nvfp4::detail {

/// The kernel set of one ISA. A set has:
/// - `block_rows`, `block_tiles`: the register block, R rows of A by C tiles of 16 columns of B;
/// - `packers`: operand_packers<Ops> of its ISA (make_broadcast_rows, pack_tile);
/// - `exact_block<ScaleType, R, C>` and `relaxed_block<ScaleType, R, C, Prescaled>`: `steps` K
///   steps of an R x C block, rows[r][s] against tiles[c][s], accumulating into out (R rows of
///   16 C floats, out_stride apart), bit-identical to fp4::mma::step / fp4::mma::relaxed_step per output.
/// Only the sets a build can run are defined; `has_mma_kernels<isa>` says which.
template <isa Isa>
struct mma_kernels;

template <isa Isa>
concept has_mma_kernels = requires {
  mma_kernels<Isa>::block_rows;
};

/// Calls block(R, C) with R = min(rows, MaxRows) and C = min(tiles, MaxTiles) as compile-time
/// constants (rows, tiles >= 1): the register block of a kernel set's driver, smaller at the edges.
template <int MaxRows, int MaxTiles, class Block>
NVFP4_ALWAYS_INLINE void for_block_shape(int rows, int tiles, Block&& block) {
  if constexpr (MaxRows >= 1 && MaxTiles >= 1) {
    if (rows < MaxRows) return for_block_shape<MaxRows - 1, MaxTiles>(rows, tiles, block);
    if (tiles < MaxTiles) return for_block_shape<MaxRows, MaxTiles - 1>(rows, tiles, block);
    block(std::integral_constant<int, MaxRows>{}, std::integral_constant<int, MaxTiles>{});
  }
}

/// The portable set: one output lane at a time through the reference's §6 step (exact) or its
/// relaxed step, on the same layouts as the vector sets.
template <>
struct mma_kernels<isa::scalar> {
  static constexpr int block_rows = 1, block_tiles = 1;
  using packers = operand_packers<simd::scalar::ops>;

  template <class ScaleType, int R, int C>
  static void exact_block(const row_step* const* rows, const tile_step* const* tiles, index_t steps, float* out, index_t out_stride) {
    lane_by_lane<ScaleType, gemm_mode::exact, R, C>(rows, tiles, steps, out, out_stride);
  }

  template <class ScaleType, int R, int C, bool /*Prescaled*/>
  static void relaxed_block(const row_step* const* rows, const tile_step* const* tiles, index_t steps, float* out, index_t out_stride) {
    lane_by_lane<ScaleType, gemm_mode::relaxed, R, C>(rows, tiles, steps, out, out_stride);
  }

 private:
  template <class ScaleType, gemm_mode Mode, int R, int C>
  static void lane_by_lane(const row_step* const* rows, const tile_step* const* tiles, index_t steps, float* out, index_t out_stride) {
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c)
        for (int lane = 0; lane < tile_lanes; ++lane) {
          float& accumulator = out[r * out_stride + c * tile_lanes + lane];
          for (index_t s = 0; s < steps; ++s) accumulator = step_of_lane<ScaleType, Mode>(rows[r][s], tiles[c][s], lane, accumulator);
        }
  }
};

}  // namespace nvfp4::detail
