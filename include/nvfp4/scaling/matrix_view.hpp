// nvfp4/scaling/matrix_view.hpp: matrix_view<T>, a non-owning strided 2-D view whose shape
// carries its layout (row-major, column-major, or any strides, e.g. a transposed view).
#pragma once

#include <string>
#include <type_traits>

#include "nvfp4/config.hpp"
#include "nvfp4/error.hpp"

namespace nvfp4 {

template <class T>
class matrix_view {
 public:
  using value_type = std::remove_const_t<T>;

  constexpr matrix_view() = default;
  /// A view with explicit strides, in elements.
  constexpr matrix_view(T* data, index_t rows, index_t cols, index_t row_stride, index_t col_stride)
      : data_(data), rows_(rows), cols_(cols), row_stride_(row_stride), col_stride_(col_stride) {}

  static constexpr matrix_view row_major(T* data, index_t rows, index_t cols) { return matrix_view(data, rows, cols, cols, 1); }
  static constexpr matrix_view column_major(T* data, index_t rows, index_t cols) { return matrix_view(data, rows, cols, 1, rows); }

  /// A const view of the same data.
  constexpr operator matrix_view<const T>() const requires(!std::is_const_v<T>) {
    return matrix_view<const T>(data_, rows_, cols_, row_stride_, col_stride_);
  }

  constexpr T* data() const { return data_; }
  constexpr index_t rows() const { return rows_; }
  constexpr index_t cols() const { return cols_; }
  constexpr index_t size() const { return rows_ * cols_; }
  constexpr bool empty() const { return rows_ == 0 || cols_ == 0; }
  constexpr index_t row_stride() const { return row_stride_; }
  constexpr index_t col_stride() const { return col_stride_; }
  /// True when each row is contiguous in memory (what the fast paths want).
  constexpr bool rows_contiguous() const { return col_stride_ == 1; }

  constexpr T& operator()(index_t r, index_t c) const { return data_[r * row_stride_ + c * col_stride_]; }
  constexpr T* row(index_t r) const { return data_ + r * row_stride_; }

  /// The transpose, as a view of the same memory.
  constexpr matrix_view transposed() const { return matrix_view(data_, cols_, rows_, col_stride_, row_stride_); }

  /// Throws nvfp4::error unless the view is usable: non-negative shape, non-null data when not
  /// empty. `what` names the operand in the message.
  void validate(const char* what) const {
    detail::require(rows_ >= 0 && cols_ >= 0, errc::invalid_argument, std::string(what) + ": negative shape");
    detail::require(empty() || data_ != nullptr, errc::null_pointer,
                    std::string(what) + ": null data for a " + std::to_string(rows_) + "x" + std::to_string(cols_) + " matrix");
  }

 private:
  T* data_ = nullptr;
  index_t rows_ = 0;
  index_t cols_ = 0;
  index_t row_stride_ = 0;
  index_t col_stride_ = 1;
};

}  // namespace nvfp4
