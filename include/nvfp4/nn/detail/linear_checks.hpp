// nvfp4/nn/detail/linear_checks.hpp: what nn::linear does the same way for every recipe around
// its policy: the argument checks made before anything changes, and the copies in the layer's
// dtype (X, W, dY in; Y, dX out) with NaN / Inf refused as the quantizers refuse them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/recipes/no_quantization.hpp"
#include "nvfp4/scaling/matrix_view.hpp"

namespace nvfp4::nn::detail {

using nvfp4::detail::require;

inline std::string shape(index_t r, index_t c) { return std::to_string(r) + "x" + std::to_string(c); }

/// rows * cols for a result buffer, refused (invalid_argument) above max_element_count.
inline std::size_t output_size(index_t rows, index_t cols) {
  return static_cast<std::size_t>(nvfp4::detail::checked_element_count(std::max<index_t>(rows, 0), cols, errc::invalid_argument, "linear output"));
}

/// A row-major [rows, cols] view of `buffer`, grown as needed (layer buffers are reused from step
/// to step: touching fresh memory costs more than the copies).
inline matrix_view<float> scratch(index_t rows, index_t cols, std::vector<float>& buffer) {
  const auto size = output_size(rows, cols);
  if (buffer.size() < size) buffer.resize(size);
  return matrix_view<float>::row_major(buffer.data(), rows, cols);
}

inline float in_dtype(float value, high_precision dtype) {
  return dtype == high_precision::bf16 ? bf16::from_float(value).to_float() : value;
}

/// A row-major copy of v in the dtype, in `buffer`; rejects NaN / Inf (non_finite_error) unless
/// `allow_non_finite` (a recipe TE runs such tensors under: they are copied as they are).
inline matrix_view<const float> to_dtype(matrix_view<const float> v, const char* what, std::vector<float>& buffer, high_precision dtype,
                                         bool allow_non_finite = false) {
  const matrix_view<float> out = scratch(v.rows(), v.cols(), buffer);
  for (index_t r = 0; r < v.rows(); ++r)
    for (index_t c = 0; c < v.cols(); ++c) {
      const float value = v(r, c);
      if (!allow_non_finite && !std::isfinite(value)) throw non_finite_error(what, r, c, value);
      out(r, c) = in_dtype(value, dtype);
    }
  return out;
}

/// to = from rounded to the dtype.
inline void write_in_dtype(matrix_view<const float> from, matrix_view<float> to, high_precision dtype) {
  for (index_t r = 0; r < from.rows(); ++r)
    for (index_t c = 0; c < from.cols(); ++c) to(r, c) = in_dtype(from(r, c), dtype);
}

/// forward's and infer's checks of X [M, in], Y [M, out], W [out, in] and b [out] (or none).
inline void check_forward_call(index_t in, index_t out, bool has_bias, matrix_view<const float> weight, std::span<const float> bias,
                               matrix_view<const float> x, matrix_view<float> y, const char* who) {
  x.validate("linear input");
  y.validate("linear output");
  require(x.cols() == in, errc::shape_mismatch,
          std::string(who) + ": X has " + std::to_string(x.cols()) + " columns, the layer " + std::to_string(in) + " inputs");
  require(y.rows() == x.rows() && y.cols() == out, errc::shape_mismatch,
          std::string(who) + ": Y is " + shape(y.rows(), y.cols()) + ", expected " + shape(x.rows(), out));
  weight.validate("linear weight");
  require(weight.rows() == out && weight.cols() == in, errc::shape_mismatch,
          std::string(who) + ": W is " + shape(weight.rows(), weight.cols()) + ", expected " + shape(out, in));
  const std::size_t expected = has_bias ? static_cast<std::size_t>(out) : 0;
  require(bias.size() == expected, errc::shape_mismatch,
          std::string(who) + ": b has " + std::to_string(bias.size()) + " values, expected " + std::to_string(expected) +
              (has_bias ? "" : " (the layer has no bias)"));
  require(bias.empty() || bias.data() != nullptr, errc::null_pointer, std::string(who) + ": b is a null pointer");
}

/// backward's checks: a forward of `rows` rows saved; dY [rows, out], dX [rows, in], dW [out, in], db.
inline void check_backward_call(index_t in, index_t out, bool has_bias, bool saved, index_t rows, matrix_view<const float> dy,
                                matrix_view<float> dx, matrix_view<float> dw, std::span<float> db) {
  dy.validate("linear output gradient");
  dx.validate("linear input gradient");
  require(saved, errc::invalid_argument, "linear::backward: no forward to differentiate (call forward first)");
  require(dy.rows() == rows && dy.cols() == out, errc::shape_mismatch,
          "linear::backward: dY is " + shape(dy.rows(), dy.cols()) + ", expected " + shape(rows, out));
  require(dx.rows() == rows && dx.cols() == in, errc::shape_mismatch,
          "linear::backward: dX is " + shape(dx.rows(), dx.cols()) + ", expected " + shape(rows, in));
  dw.validate("linear weight gradient");
  require(dw.rows() == out && dw.cols() == in, errc::shape_mismatch,
          "linear::backward: dW is " + shape(dw.rows(), dw.cols()) + ", expected " + shape(out, in));
  require(db.size() == (has_bias ? static_cast<std::size_t>(out) : 0), errc::shape_mismatch,
          "linear::backward: db has " + std::to_string(db.size()) + " values, expected " + std::to_string(has_bias ? out : 0));
}

}  // namespace nvfp4::nn::detail
