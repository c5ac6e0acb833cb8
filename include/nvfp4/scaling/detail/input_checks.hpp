// nvfp4/scaling/detail/input_checks.hpp: the checks the quantizers' entry points (reference and
// fast alike) run before anything is read or written: an input view's shape and size, a dequantize
// output's shape (docs/errors.md). Where
// the first NaN/Inf is (detail/non_finite.hpp) and whether a rounding mode fits the format
// (check_rounding, scaling/quantize_options.hpp) are shared with transforms/, so they sit lower.
#pragma once

#include <string>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/detail/non_finite.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/quantize_options.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"

namespace nvfp4::detail {

/// Throws unless x is a usable input view (matrix_view::validate) of at most max_element_count
/// elements. Every quantizer entry point runs it first, before any pass over x: a view may have
/// far more elements than memory (a broadcast with zero strides), and a 2^41-element one got a
/// whole amax pass (hours) before the output's allocation refused it (issue 39).
template <class T>
void check_input_view(matrix_view<T> x, const char* what) {
  x.validate(what);
  (void)checked_element_count(x.rows(), x.cols(), errc::invalid_argument, what);
}

/// Throws unless out is a usable view of q's shape.
template <block_scaled_format Format>
void check_dequantize_output(const quantized_tensor<Format>& q, matrix_view<float> out) {
  out.validate("dequantize output");
  require(out.rows() == q.rows() && out.cols() == q.cols(), errc::shape_mismatch,
          "dequantize: output is " + std::to_string(out.rows()) + "x" + std::to_string(out.cols()) + ", tensor is " +
              std::to_string(q.rows()) + "x" + std::to_string(q.cols()));
}

}  // namespace nvfp4::detail
