// nvfp4/scaling/layout.hpp: scale layouts (docs/numerics_spec.md §3). Compact is row-major
// [rows, scale_cols]; "128x4" is the swizzled layout cuBLAS, cuDNN and CUTLASS block-scaled GEMMs
// read: rows padded to 128, scale columns to 4, each 128x4 tile 512 contiguous bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"

namespace nvfp4 {

/// Scale bytes in the 128x4 swizzled layout, with the compact shape they came from. Read it
/// through accessors, like quantized_tensor: rows() and cols() are the compact (unpadded) shape,
/// bytes() the padded_rows() * padded_cols() bytes, padding zero.
class swizzled_scales {
 public:
  swizzled_scales() = default;
  /// Bytes already in the 128x4 layout (e.g. read from a checkpoint) for a compact [rows, cols]
  /// scale matrix. Throws nvfp4::error(shape_mismatch) unless bytes holds exactly
  /// padded(rows, 128) * padded(cols, 4) bytes, invalid_argument for a negative shape or one
  /// above nvfp4::max_element_count.
  swizzled_scales(index_t rows, index_t cols, std::vector<std::uint8_t> bytes) : rows_(rows), cols_(cols), bytes_(std::move(bytes)) {
    // Past this check both padded sizes are below 2^41, so their product cannot overflow.
    detail::checked_element_count(rows, cols, errc::invalid_argument, "swizzled_scales");
    detail::require(static_cast<index_t>(bytes_.size()) == padded_rows() * padded_cols(), errc::shape_mismatch,
                    "swizzled_scales: " + std::to_string(bytes_.size()) + " bytes for a " + std::to_string(rows) + "x" +
                        std::to_string(cols) + " scale matrix, expected " + std::to_string(padded_rows() * padded_cols()) +
                        " (padded to 128x4 tiles)");
  }

  /// n rounded up to a multiple of `to`.
  static constexpr index_t padded(index_t n, index_t to) { return (n + to - 1) / to * to; }

  index_t rows() const { return rows_; }  ///< compact rows (unpadded)
  index_t cols() const { return cols_; }  ///< compact scale columns (unpadded)
  index_t padded_rows() const { return padded(rows_, 128); }
  index_t padded_cols() const { return padded(cols_, 4); }
  /// padded_rows() * padded_cols() bytes in the 128x4 layout.
  std::span<const std::uint8_t> bytes() const { return bytes_; }
  std::span<std::uint8_t> bytes() { return bytes_; }

 private:
  index_t rows_ = 0;
  index_t cols_ = 0;
  std::vector<std::uint8_t> bytes_;
};

/// Byte offset of compact scale (r, c) in the swizzled buffer of a matrix with `cols` scale
/// columns: (((r/128)*nc + c/4)*32 + r%32)*16 + ((r%128)/32)*4 + c%4, nc = ceil(cols/4).
constexpr index_t swizzled_offset_128x4(index_t r, index_t c, index_t cols) {
  const index_t column_tiles = (cols + 3) / 4;
  return (((r / 128) * column_tiles + c / 4) * 32 + r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

/// Compact [rows, cols] scale bytes -> 128x4 swizzled (padding zero-filled).
inline swizzled_scales swizzle_128x4(std::span<const std::uint8_t> compact, index_t rows, index_t cols) {
  const index_t count = detail::checked_element_count(rows, cols, errc::invalid_argument, "swizzle_128x4");
  detail::require(static_cast<index_t>(compact.size()) == count, errc::shape_mismatch,
                  "swizzle_128x4: " + std::to_string(compact.size()) + " bytes given for a " + std::to_string(rows) + "x" +
                      std::to_string(cols) + " scale matrix");
  if (count == 0) return swizzled_scales(rows, cols, {});  // a zero dimension pads to zero bytes
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(swizzled_scales::padded(rows, 128) * swizzled_scales::padded(cols, 4)), 0);
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c)
      bytes[static_cast<std::size_t>(swizzled_offset_128x4(r, c, cols))] = compact[static_cast<std::size_t>(r * cols + c)];
  return swizzled_scales(rows, cols, std::move(bytes));
}

/// 128x4 swizzled -> compact [rows, cols] (padding dropped).
/// (The byte count was checked when `swizzled` was made.)
inline std::vector<std::uint8_t> unswizzle_128x4(const swizzled_scales& swizzled) {
  const index_t rows = swizzled.rows(), cols = swizzled.cols();
  if (rows == 0 || cols == 0) return {};  // before the loop over rows, which may be many
  const auto bytes = swizzled.bytes();
  std::vector<std::uint8_t> compact(static_cast<std::size_t>(rows * cols));
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c)
      compact[static_cast<std::size_t>(r * cols + c)] = bytes[static_cast<std::size_t>(swizzled_offset_128x4(r, c, cols))];
  return compact;
}

/// The scales of a quantized tensor in the 128x4 swizzled layout, as a GPU GEMM reads them.
template <block_scaled_format Format>
swizzled_scales swizzle_128x4(const quantized_tensor<Format>& q) {
  std::vector<std::uint8_t> compact;
  compact.reserve(q.scales().size());
  for (auto s : q.scales()) compact.push_back(s.bits());
  return swizzle_128x4(compact, q.rows(), q.scale_cols());
}

}  // namespace nvfp4
