// nvfp4/scaling/fp8_tensor.hpp: fp8_tensor, a matrix of FP8 codes (E4M3 or E5M2) with fp32 decode
// scales ("scale_inv" in TransformerEngine) per block: one block for the per-tensor recipes
// (current and delayed scaling), 1x128 or 128x128 blocks for FP8 block scaling.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nvfp4/config.hpp"
#include "nvfp4/detail/enum_names.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e5m2.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"

namespace nvfp4 {

/// The element format of an FP8 tensor.
enum class fp8_format {
  e4m3,  ///< max 448, NaN 0x7F/0xFF, no Inf (forward tensors)
  e5m2   ///< max 57344, IEEE-like Inf/NaN (gradients in TE's HYBRID format)
};
/// Its names in checkpoints, the CLI and Python (one table: nvfp4/detail/enum_names.hpp).
namespace detail {
template <>
struct enum_table<fp8_format> {
  static constexpr enum_entry<fp8_format> entries[] = {{"e4m3", fp8_format::e4m3}, {"e5m2", fp8_format::e5m2}};
};
}  // namespace detail

constexpr const char* fp8_format_name(fp8_format f) { return detail::name_of(f); }

/// The largest finite value of the format (TE's `fp8_max`).
constexpr float fp8_max(fp8_format f) { return f == fp8_format::e4m3 ? e4m3_max : e5m2_max; }

/// Round to nearest even with saturation (the hardware's cvt.rn.satfinite, docs/numerics_spec.md §1).
constexpr std::uint8_t fp8_encode(float x, fp8_format f) {
  return f == fp8_format::e4m3 ? e4m3::from_float(x).bits() : e5m2::from_float(x).bits();
}
/// The exact value of a code.
constexpr float fp8_decode(std::uint8_t code, fp8_format f) {
  return f == fp8_format::e4m3 ? e4m3::from_bits(code).to_float() : e5m2::from_bits(code).to_float();
}

/// FP8 codes, row-major [rows, cols], one byte each, and fp32 decode scales per block of
/// block_rows() x block_cols() elements (row-major [scale_rows, scale_cols]): element (r, c) has
/// the value decode(code(r, c)) * scale_inv(r / block_rows, c / block_cols). A per-tensor tensor
/// has one block covering everything. Like quantized_tensor, a columnwise copy of an M x N source
/// is N x M and holds the source's transpose.
class fp8_tensor {
 public:
  fp8_tensor() = default;

  /// An all-zero tensor. block_rows / block_cols of 0 mean "the whole dimension" (0, 0 is
  /// per-tensor scaling). Scales start at 1.
  fp8_tensor(index_t rows, index_t cols, fp8_format format, index_t block_rows = 0, index_t block_cols = 0,
             quantized_axis axis = quantized_axis::rowwise)
      : rows_(rows), cols_(cols), format_(format), axis_(axis), per_tensor_(block_rows == 0 && block_cols == 0) {
    detail::require(rows >= 0 && cols >= 0 && block_rows >= 0 && block_cols >= 0, errc::invalid_argument,
                    "fp8_tensor: negative shape or block");
    block_rows_ = block_rows == 0 ? std::max<index_t>(rows, 1) : block_rows;
    block_cols_ = block_cols == 0 ? std::max<index_t>(cols, 1) : block_cols;
    codes_.assign(static_cast<std::size_t>(rows * cols), 0);
    scale_inv_.assign(static_cast<std::size_t>(scale_rows() * scale_cols()), 1.0f);
  }

  index_t rows() const { return rows_; }
  index_t cols() const { return cols_; }
  fp8_format format() const { return format_; }
  quantized_axis axis() const { return axis_; }
  bool per_tensor() const { return per_tensor_; }
  index_t block_rows() const { return block_rows_; }
  index_t block_cols() const { return block_cols_; }
  index_t scale_rows() const { return per_tensor_ ? 1 : (rows_ + block_rows_ - 1) / block_rows_; }
  index_t scale_cols() const { return per_tensor_ ? 1 : (cols_ + block_cols_ - 1) / block_cols_; }

  std::span<const std::uint8_t> codes() const { return codes_; }
  std::span<std::uint8_t> codes() { return codes_; }
  std::uint8_t code(index_t r, index_t c) const { return codes_[static_cast<std::size_t>(r * cols_ + c)]; }

  /// Decode scales (TE's scale_inv), row-major [scale_rows, scale_cols].
  std::span<const float> scale_inv() const { return scale_inv_; }
  std::span<float> scale_inv() { return scale_inv_; }
  /// The decode scale of block (block_row, block_col).
  float block_scale_inv(index_t block_row, index_t block_col) const {
    return scale_inv_[static_cast<std::size_t>(block_row * scale_cols() + block_col)];
  }
  /// The decode scale that applies to element (r, c).
  float scale_inv_at(index_t r, index_t c) const { return per_tensor_ ? scale_inv_[0] : block_scale_inv(r / block_rows_, c / block_cols_); }

  /// The value of element (r, c) before its scale is applied (exact).
  float element(index_t r, index_t c) const { return fp8_decode(code(r, c), format_); }

  /// Per-tensor recipes: the amax of the tensor that was quantized (what a delayed-scaling
  /// history records) and the encode scale used (TE's `scale`; scale_inv()[0] is its
  /// reciprocal). For block-scaled tensors: the tensor's amax, and 1.
  float amax() const { return amax_; }
  float scale() const { return scale_; }
  void set_amax(float amax) { amax_ = amax; }
  void set_scale(float scale) { scale_ = scale; }

 private:
  index_t rows_ = 0;
  index_t cols_ = 0;
  fp8_format format_ = fp8_format::e4m3;
  quantized_axis axis_ = quantized_axis::rowwise;
  bool per_tensor_ = true;
  index_t block_rows_ = 1;
  index_t block_cols_ = 1;
  std::vector<std::uint8_t> codes_;
  std::vector<float> scale_inv_;
  float amax_ = 0.0f;
  float scale_ = 1.0f;
};

}  // namespace nvfp4
