// nvfp4/scaling/layout.hpp: scale layouts (NUMERICS.md §3). Compact is row-major
// [rows, scale_cols]; "128x4" is the swizzled layout cuBLAS, cuDNN and CUTLASS block-scaled GEMMs
// read: rows padded to 128, scale columns to 4, each 128x4 tile 512 contiguous bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"

namespace nvfp4 {

/// Scale bytes in the 128x4 swizzled layout, with the compact shape they came from.
struct swizzled_scales {
  index_t rows = 0;  ///< compact rows (unpadded)
  index_t cols = 0;  ///< compact scale columns (unpadded)
  std::vector<std::uint8_t> bytes;  ///< padded_rows * padded_cols bytes

  static constexpr index_t padded(index_t n, index_t to) { return (n + to - 1) / to * to; }
  index_t padded_rows() const { return padded(rows, 128); }
  index_t padded_cols() const { return padded(cols, 4); }
};

/// Byte offset of compact scale (r, c) in the swizzled buffer of a matrix with `cols` scale
/// columns: (((r/128)*nc + c/4)*32 + r%32)*16 + ((r%128)/32)*4 + c%4, nc = ceil(cols/4).
constexpr index_t swizzled_offset_128x4(index_t r, index_t c, index_t cols) {
  const index_t column_tiles = (cols + 3) / 4;
  return (((r / 128) * column_tiles + c / 4) * 32 + r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

/// Compact [rows, cols] scale bytes -> 128x4 swizzled (padding zero-filled).
inline swizzled_scales swizzle_128x4(std::span<const std::uint8_t> compact, index_t rows, index_t cols) {
  detail::require(rows >= 0 && cols >= 0, errc::invalid_argument, "swizzle_128x4: negative shape");
  detail::require(static_cast<index_t>(compact.size()) == rows * cols, errc::shape_mismatch,
                  "swizzle_128x4: " + std::to_string(compact.size()) + " bytes given for a " +
                      std::to_string(rows) + "x" + std::to_string(cols) + " scale matrix");
  swizzled_scales out{rows, cols, {}};
  out.bytes.assign(static_cast<std::size_t>(out.padded_rows() * out.padded_cols()), 0);
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c)
      out.bytes[static_cast<std::size_t>(swizzled_offset_128x4(r, c, cols))] = compact[static_cast<std::size_t>(r * cols + c)];
  return out;
}

/// 128x4 swizzled -> compact [rows, cols] (padding dropped).
inline std::vector<std::uint8_t> unswizzle_128x4(const swizzled_scales& swizzled) {
  detail::require(static_cast<index_t>(swizzled.bytes.size()) == swizzled.padded_rows() * swizzled.padded_cols(),
                  errc::shape_mismatch, "unswizzle_128x4: byte count does not match the padded shape");
  std::vector<std::uint8_t> compact(static_cast<std::size_t>(swizzled.rows * swizzled.cols));
  for (index_t r = 0; r < swizzled.rows; ++r)
    for (index_t c = 0; c < swizzled.cols; ++c)
      compact[static_cast<std::size_t>(r * swizzled.cols + c)] =
          swizzled.bytes[static_cast<std::size_t>(swizzled_offset_128x4(r, c, swizzled.cols))];
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
