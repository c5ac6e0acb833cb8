// nvfp4/scaling/quantized_tensor.hpp: quantized_tensor<Format>, a block-scaled matrix that owns
// its packed elements, its block scales (compact layout), its amax and its tensor scale.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "nvfp4/config.hpp"
#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/detail/enum_names.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/scaling/block_format.hpp"

namespace nvfp4 {

/// Which copy of the source matrix x a quantized tensor holds.
enum class quantized_axis {
  rowwise,    ///< x itself, blocks along its rows
  columnwise  ///< xᵀ (blocks along x's columns), the "transposed" copy a Wgrad GEMM reads
};
/// Its names in checkpoints, the CLI and Python (one table: nvfp4/detail/enum_names.hpp).
namespace detail {
template <>
struct enum_table<quantized_axis> {
  static constexpr enum_entry<quantized_axis> entries[] = {{"rowwise", quantized_axis::rowwise},
                                                           {"columnwise", quantized_axis::columnwise}};
};
}  // namespace detail

/// A matrix quantized to Format. Its shape is that of the matrix it holds: for a columnwise copy
/// of an M x N source, rows() == N and cols() == M. Blocks run along rows: element (r, c) has the
/// scale at (r, c / block_cols), for every format (a 16x16 tile's scale is stored on each of its
/// 16 rows, which is what the GEMM kernels read).
///
/// Storage: `data()` is row-major with `data_row_stride()` storage units per row; for FP4 each
/// unit is an e2m1x2 (element 2i in the low nibble); a row of odd length ends in a zero nibble.
/// `scales()` is row-major [rows, scale_cols] with scale_cols = ceil(cols / block_cols).
template <block_scaled_format Format>
class quantized_tensor {
 public:
  using format = Format;
  using element_type = typename Format::element_type;
  using scale_type = typename Format::scale_type;
  using storage_type = typename Format::storage_type;

  quantized_tensor() = default;

  /// An all-zero tensor of the given shape (elements zero, scales zero, amax zero, tensor scale
  /// one), ready to be filled by a quantizer. Throws invalid_argument for a negative shape or one
  /// above nvfp4::max_element_count.
  quantized_tensor(index_t rows, index_t cols, quantized_axis axis = quantized_axis::rowwise) : rows_(rows), cols_(cols), axis_(axis) {
    detail::checked_element_count(rows, cols, errc::invalid_argument, "quantized_tensor");
    data_.assign(static_cast<std::size_t>(rows * data_row_stride()), storage_type{});
    scales_.assign(static_cast<std::size_t>(rows * scale_cols()), scale_type::from_bits(0));
  }

  /// A tensor from raw bytes laid out as data() and scales() are (e.g. read from a checkpoint or
  /// made by a GPU kernel): data_bytes is [rows, data_row_stride()], scale_bytes [rows,
  /// scale_cols()]. The tensor scale pair is set from `amax` by the format's rule when given.
  /// Throws nvfp4::error(shape_mismatch) when a byte count does not fit the shape.
  static quantized_tensor from_bytes(index_t rows, index_t cols, std::span<const std::uint8_t> data_bytes,
                                     std::span<const std::uint8_t> scale_bytes, quantized_axis axis = quantized_axis::rowwise) {
    quantized_tensor q(rows, cols, axis);
    detail::require(data_bytes.size() == q.data_.size(), errc::shape_mismatch,
                    "quantized_tensor::from_bytes: " + std::to_string(data_bytes.size()) + " data bytes for a " + std::to_string(rows) +
                        "x" + std::to_string(cols) + " tensor, expected " + std::to_string(q.data_.size()));
    detail::require(scale_bytes.size() == q.scales_.size(), errc::shape_mismatch,
                    "quantized_tensor::from_bytes: " + std::to_string(scale_bytes.size()) + " scale bytes, expected " +
                        std::to_string(q.scales_.size()));
    for (std::size_t i = 0; i < data_bytes.size(); ++i) q.data_[i] = storage_type::from_bits(data_bytes[i]);
    for (std::size_t i = 0; i < scale_bytes.size(); ++i) q.scales_[i] = scale_type::from_bits(scale_bytes[i]);
    return q;
  }

  index_t rows() const { return rows_; }
  index_t cols() const { return cols_; }
  quantized_axis axis() const { return axis_; }
  /// Storage units per row of data().
  index_t data_row_stride() const { return (cols_ + Format::elements_per_storage - 1) / Format::elements_per_storage; }
  index_t scale_cols() const { return (cols_ + Format::block_cols - 1) / Format::block_cols; }

  std::span<const storage_type> data() const { return data_; }
  std::span<storage_type> data() { return data_; }
  std::span<const scale_type> scales() const { return scales_; }
  std::span<scale_type> scales() { return scales_; }

  /// Element (r, c) as its format's value type.
  element_type element(index_t r, index_t c) const {
    const storage_type unit = data_[static_cast<std::size_t>(r * data_row_stride() + c / Format::elements_per_storage)];
    if constexpr (Format::is_fp4) {
      return unit[static_cast<int>(c & 1)];
    } else {
      return unit;
    }
  }
  scale_type scale(index_t r, index_t block_col) const { return scales_[static_cast<std::size_t>(r * scale_cols() + block_col)]; }

  /// max |x| over the source tensor (for a columnwise copy with a transform: after it).
  float amax() const { return amax_; }
  /// The FP32 second-level scale: S_enc (x * S_enc fills the scale range) and S_dec = 1 / S_enc.
  /// Both are 1 for MX formats.
  float encode_scale() const { return encode_scale_; }
  float decode_scale() const { return decode_scale_; }

  void set_tensor_scale(float amax, float encode_scale, float decode_scale) {
    amax_ = amax;
    encode_scale_ = encode_scale;
    decode_scale_ = decode_scale;
  }

 private:
  index_t rows_ = 0;
  index_t cols_ = 0;
  quantized_axis axis_ = quantized_axis::rowwise;
  std::vector<storage_type> data_;
  std::vector<scale_type> scales_;
  float amax_ = 0.0f;
  float encode_scale_ = 1.0f;
  float decode_scale_ = 1.0f;
};

using nvfp4_tensor = quantized_tensor<nvfp4_1x16>;
using nvfp4_tile_tensor = quantized_tensor<nvfp4_16x16>;
using mxfp4_tensor = quantized_tensor<mxfp4>;
using mxfp8_tensor = quantized_tensor<mxfp8>;

}  // namespace nvfp4
