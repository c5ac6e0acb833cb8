// nvfp4/detail/column_bands.hpp: the memory walk of the columnwise kernels, written once:
// a view with contiguous columns (the columnwise copy of a row-major source, x = sourceᵀ) read
// in bands of whole blocks (16 or 32 elements along a view row), so that each block lies across
// the lanes of as many registers (one load per source row) and nothing but the results needs a
// transpose. Used by the NVFP4 1x16 columnwise quantizer (scaling/detail/fast_quantize.hpp), TE's
// MXFP8 one (scaling/mxfp8_quantize.hpp) and the columnwise Hadamard walks
// (transforms/detail/hadamard_walks.hpp), so it sits below both layers: it takes any strided view
// (data(), rows(), cols(), row_stride(), col_stride(), as scaling/matrix_view.hpp has) and only
// moves bytes.
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

#include "nvfp4/config.hpp"

namespace nvfp4::detail {

/// A band walk over x (x.row_stride() == 1): bands of `band_blocks` blocks of `block` columns (the
/// last band of x may hold fewer; columns past the last whole block are left to the caller),
/// every view row below `vector_rows` (a multiple of `lanes`), split into work items of
/// `chunk_rows` view rows times `group_bands` bands. An item's results are whole cache lines of
/// each of its view rows where the output rows are line-aligned (the NVFP4 copy with 32-row bands:
/// 512 data bytes and 64 scale bytes of a row per item), so threads do not share lines. (Items of
/// whole bands, all view rows each, shared every scale line among four threads and ran slower
/// than the copies made by transposing: docs/benchmarks.md, "Figures behind code choices".) For each band of an item, then each vector of
/// `lanes` view rows r0, run() calls
///   step(r0, c0, blocks, source, stride)
/// where element (r0 + lane, c0 + block * k + i) of x, for k < blocks, is
/// source[(block * k + i) * stride + lane].
/// - source points into a copy: the band's source row pieces, copied one after another into rows
///   one cache line longer than the piece. Source rows whose length is a multiple of 4 KiB map a
///   column to one L1 set, and 16-32 of them at once exceed its ways; the copy's rows fall in
///   different sets.
/// - While a band is walked, the next band's lines are prefetched in memory order, so its copy
///   reads them from cache.
template <class T>
class column_band_walk {
 public:
  static constexpr index_t chunk_rows = 256, group_bands = 32;

  /// x: a view of T elements with contiguous columns (x.row_stride() == 1).
  template <class View>
  column_band_walk(const View& x, index_t lanes, index_t block, index_t band_blocks)
      : data_(x.data()),
        row_stride_(x.row_stride()),
        col_stride_(x.col_stride()),
        lanes_(lanes),
        block_(block),
        vector_rows_(x.rows() / lanes * lanes),
        band_rows_(block * band_blocks),
        whole_rows_(x.cols() / block * block),
        groups_((whole_rows_ / band_rows_ + (whole_rows_ % band_rows_ != 0) + group_bands - 1) / group_bands) {}

  /// The view rows the walk covers: those below the last whole vector.
  index_t vector_rows() const { return vector_rows_; }
  /// The first column of view row r that the walk leaves to its caller: past the last whole block
  /// for the rows it covers, 0 for the rows past the last vector. x.cols() where it leaves nothing.
  index_t first_column_left(index_t r) const { return r < vector_rows_ ? whole_rows_ : 0; }
  /// Work items: chunks of view rows times groups of bands, chunk-major.
  index_t items() const { return (vector_rows_ + chunk_rows - 1) / chunk_rows * groups_; }

  /// Walks items [first_item, last_item) (one thread's share), calling step as described above.
  template <class Step>
  void run(index_t first_item, index_t last_item, Step&& step) const {
    std::vector<T> copy(static_cast<std::size_t>(band_rows_ * copy_stride));
    for (index_t item = first_item; item < last_item; ++item) {
      const index_t chunk = item / groups_ * chunk_rows, n = std::min(chunk_rows, vector_rows_ - chunk);
      const index_t row_bytes = n * static_cast<index_t>(sizeof(T)), lines_per_row = (row_bytes + line_bytes - 1) / line_bytes;
      const index_t first_row = item % groups_ * group_bands * band_rows_;
      const index_t end_row = std::min(whole_rows_, first_row + group_bands * band_rows_);
      for (index_t c0 = first_row; c0 < end_row; c0 += band_rows_) {
        const index_t rows_here = std::min(band_rows_, end_row - c0);
        for (index_t i = 0; i < rows_here; ++i)
          std::memcpy(copy.data() + i * copy_stride, element(chunk, c0 + i), static_cast<std::size_t>(row_bytes));
        const index_t next_rows = std::min(band_rows_, end_row - c0 - rows_here);
        const index_t next_lines = next_rows * lines_per_row, steps = n / lanes_;
        const index_t lines_per_step = (next_lines + steps - 1) / steps;
        index_t next_line = 0;
        for (index_t r = 0; r < n; r += lanes_) {
          for (const index_t end = std::min(next_line + lines_per_step, next_lines); next_line < end; ++next_line)
            NVFP4_PREFETCH(reinterpret_cast<const char*>(element(chunk, c0 + band_rows_ + next_line / lines_per_row)) +
                           next_line % lines_per_row * line_bytes);
          step(chunk + r, c0, static_cast<int>(rows_here / block_), copy.data() + r, copy_stride);
        }
      }
    }
  }

 private:
  static constexpr index_t line_bytes = 64;
  static constexpr index_t copy_stride = chunk_rows + line_bytes / static_cast<index_t>(sizeof(T));
  const T* element(index_t r, index_t c) const { return data_ + r * row_stride_ + c * col_stride_; }
  const T* data_;
  index_t row_stride_, col_stride_;
  index_t lanes_, block_, vector_rows_, band_rows_, whole_rows_, groups_;
};

}  // namespace nvfp4::detail
