// nvfp4/scaling/detail/source_tiles.hpp: the memory walk of the FP8 block and MXFP8 quantizers
// (scaling/detail/fp8_block_tiles.hpp, mxfp8_tiles.hpp): a source with contiguous rows (float or
// bf16) cut into tiles of Rows x Cols elements, each copied once into a float buffer (bf16
// widened exactly, zero past the source's edge: zero changes no block amax) where a tile kernel
// makes the rowwise copy (blocks along the source's rows), the columnwise one (the copy of
// sourceᵀ: blocks down the source's columns) or both from it, so a tensor both of whose copies a
// recipe needs is read from memory once. Tiles are the work items of the library's threads (each
// output byte belongs to one tile), so the bytes do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "nvfp4/config.hpp"
#include "nvfp4/detail/scratch.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/simd/panels.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4::detail::source_tiles {

/// The next tile's lines, prefetched a few at a time while this tile is worked on (step() once
/// per row or column group of the kernel): a tile's row pieces, up to 128 at once, are more
/// streams than the hardware prefetchers follow. (Dev Zen 3, FP8 blocks, one thread: the tile
/// copies took a third of the time without it; a burst of prefetches ahead of the copy did less
/// than these spread over the work.)
struct prefetcher {
  const char* row = nullptr;  ///< the next row piece to prefetch
  index_t stride = 0;         ///< bytes between rows
  index_t row_bytes = 0;      ///< bytes of a row piece
  index_t rows = 0;           ///< row pieces left
  index_t per_step = 0;       ///< row pieces per step()
  /// Spreads what is left over `steps` calls of step().
  void spread_over(index_t steps) { per_step = (rows + steps - 1) / std::max<index_t>(steps, 1); }
  NVFP4_ALWAYS_INLINE void step() {
    for (index_t n = std::min(per_step, rows); n > 0; --n, --rows, row += stride)
      for (index_t b = 0; b < row_bytes; b += 64) NVFP4_PREFETCH(row + b);
  }
  void rest() {
    per_step = rows;
    step();
  }
};

/// One tile in its buffer: rows x cols live elements of a Rows x Cols float tile (rows `stride`
/// floats apart, zero past the live part), at (i0, j0) of the source.
struct tile_view {
  const float* data;
  index_t stride, rows, cols, i0, j0;
  const float* row(index_t i) const { return data + i * stride; }
};

/// Walks a rows x cols source (element (i, j) at source[i * row_stride + j], T float or bf16) in
/// Rows x Cols tiles on the library's threads, calling kernel(tile_view, prefetcher&) on each
/// (kernel calls step() as it goes and rest() is called after it).
template <index_t Rows, index_t Cols, class T, class Kernel>
void walk(const T* source, index_t row_stride, index_t rows, index_t cols, bool parallel, const Kernel& kernel) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>);
  // One cache line more than a row, so that a column of the tile does not map to one L1 set.
  constexpr index_t stride = Cols + 16;
  const index_t tiles_i = (rows + Rows - 1) / Rows, tiles_j = (cols + Cols - 1) / Cols;
  simd::parallel_ranges(tiles_i * tiles_j, parallel, [&](index_t begin, index_t end) {
    scratch<float> buffer(static_cast<std::size_t>(Rows * stride));
    for (index_t t = begin; t < end; ++t) {
      const index_t i0 = t / tiles_j * Rows, j0 = t % tiles_j * Cols;
      const index_t n_i = std::min(Rows, rows - i0), n_j = std::min(Cols, cols - j0);
      for (index_t i = 0; i < Rows; ++i) {
        float* const row = buffer.data() + i * stride;
        const index_t live = i < n_i ? n_j : 0;
        const T* const from = source + (i0 + i) * row_stride + j0;
        if constexpr (std::is_same_v<T, float>) {
          if (live > 0) std::memcpy(row, from, static_cast<std::size_t>(live) * sizeof(float));
        } else {
          if (live > 0) simd::fast_panels::widen(from, live, row);
        }
        std::fill(row + live, row + Cols, 0.0f);
      }
      prefetcher next;
      if (t + 1 < end) {
        const index_t next_i0 = (t + 1) / tiles_j * Rows, next_j0 = (t + 1) % tiles_j * Cols;
        next.row = reinterpret_cast<const char*>(source + next_i0 * row_stride + next_j0);
        next.stride = row_stride * static_cast<index_t>(sizeof(T));
        next.row_bytes = std::min(Cols, cols - next_j0) * static_cast<index_t>(sizeof(T));
        next.rows = std::min(Rows, rows - next_i0);
      }
      kernel(tile_view{buffer.data(), stride, n_i, n_j, i0, j0}, next);
      next.rest();
    }
  });
}

}  // namespace nvfp4::detail::source_tiles
