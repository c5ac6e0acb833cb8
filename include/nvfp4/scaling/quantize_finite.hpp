// nvfp4/scaling/quantize_finite.hpp: quantize_with_amax_into for a tensor its caller has already
// found finite, in the pass that gave its amax (a layer's NaN / Inf check, or amax() itself):
// no pass of its own over x before the encoding, where quantize_with_amax_into makes one to name
// the first NaN / Inf. The NVFP4 role quantizers (recipes/nvfp4_recipe.hpp) use it, so a tensor is
// read once for its check and amax and once per encoding.
#pragma once

#include <cmath>
#include <string>

#include "nvfp4/scaling/quantize.hpp"

namespace nvfp4 {

/// quantize_with_amax_into(x, global_amax, out, options) for x whose every value the caller found
/// finite: the same bytes, one pass over x fewer. Throws invalid_argument for an invalid view or
/// one of more than max_element_count elements, an amax that is not a finite number >= 0 or a
/// rounding the format does not take, before anything of out is written. x holding NaN or Inf breaks the precondition: its codes are then
/// unspecified (no error is raised; quantize_with_amax_into is the checked form).
template <block_scaled_format Format, quantizer_input T>
void quantize_finite_with_amax_into(matrix_view<const T> x, float global_amax, quantized_tensor<Format>& out,
                                    const quantize_options& options = {}) {
  detail::check_input_view(x, "quantize input");  // the size check before anything (scaling/detail/input_checks.hpp)
  detail::require(std::isfinite(global_amax) && global_amax >= 0.0f, errc::invalid_argument,
                  "quantize_finite_with_amax: amax " + detail::number_text(global_amax) + " is not a finite number >= 0");
  detail::check_rounding<Format>(options);
  if (out.rows() != x.rows() || out.cols() != x.cols() || out.axis() != options.axis)
    out = quantized_tensor<Format>(x.rows(), x.cols(), options.axis);
  detail::quantize_with_amax_fast<Format>(x, global_amax, options, out);
}

}  // namespace nvfp4
