// nvfp4/scaling/detail/input_checks.hpp: the checks the quantizers' entry points (reference and
// fast alike) run before anything is written: a dequantize output's shape (docs/errors.md). Where
// the first NaN/Inf is (detail/non_finite.hpp) and whether a rounding mode fits the format
// (check_rounding, scaling/quantize_options.hpp) are shared with transforms/, so they sit lower.
#pragma once

#include <string>

#include "nvfp4/detail/non_finite.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/quantize_options.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"

namespace nvfp4::detail {

/// Throws unless out is a usable view of q's shape.
template <block_scaled_format Format>
void check_dequantize_output(const quantized_tensor<Format>& q, matrix_view<float> out) {
  out.validate("dequantize output");
  require(out.rows() == q.rows() && out.cols() == q.cols(), errc::shape_mismatch,
          "dequantize: output is " + std::to_string(out.rows()) + "x" + std::to_string(out.cols()) + ", tensor is " +
              std::to_string(q.rows()) + "x" + std::to_string(q.cols()));
}

}  // namespace nvfp4::detail
