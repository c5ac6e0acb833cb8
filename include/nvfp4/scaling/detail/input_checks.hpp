// nvfp4/scaling/detail/input_checks.hpp: the checks the quantizers' entry points (reference and
// fast alike) run before anything is written: where the first NaN/Inf is, and a dequantize
// output's shape (docs/errors.md).
#pragma once

#include <cmath>
#include <string>

#include "nvfp4/error.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/quantize_options.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"

namespace nvfp4::detail {

/// Throws non_finite_error for the first NaN/Inf in row-major order.
template <class T>
void throw_first_non_finite(matrix_view<const T> x, const char* what) {
  for (index_t r = 0; r < x.rows(); ++r)
    for (index_t c = 0; c < x.cols(); ++c) {
      const float v = to_float32(x(r, c));
      if (!std::isfinite(v)) throw non_finite_error(what, r, c, v);
    }
}

/// Throws unless out is a usable view of q's shape.
template <block_scaled_format Format>
void check_dequantize_output(const quantized_tensor<Format>& q, matrix_view<float> out) {
  out.validate("dequantize output");
  require(out.rows() == q.rows() && out.cols() == q.cols(), errc::shape_mismatch,
          "dequantize: output is " + std::to_string(out.rows()) + "x" + std::to_string(out.cols()) + ", tensor is " +
              std::to_string(q.rows()) + "x" + std::to_string(q.cols()));
}

/// Throws unless stochastic rounding, when asked for, has E2M1 elements to round to.
template <block_scaled_format Format>
void check_rounding(const quantize_options& options) {
  require(options.rounding != rounding_mode::stochastic || Format::is_fp4, errc::unsupported,
          "stochastic rounding is defined for E2M1 elements only");
}

}  // namespace nvfp4::detail
