// nvfp4/scaling/stochastic_quantize.hpp: the fast path of block-scaled quantization with
// stochastic rounding (NUMERICS.md §5). Until a SIMD kernel lands it runs the reference.
#pragma once

#include "nvfp4/scaling/reference.hpp"

namespace nvfp4::detail {

/// Same contract as nvfp4::quantize_with_amax with options.rounding == stochastic.
template <block_scaled_format Format, quantizer_input T>
quantized_tensor<Format> quantize_stochastic_with_amax(matrix_view<const T> x, float global_amax,
                                                       const quantize_options& options) {
  return reference::quantize_with_amax<Format>(x, global_amax, options);
}

}  // namespace nvfp4::detail
