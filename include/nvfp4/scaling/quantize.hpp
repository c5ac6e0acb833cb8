// nvfp4/scaling/quantize.hpp: the public quantize / dequantize / amax entry points. They check
// their inputs, then run the fastest kernel this build has (see nvfp4/simd/dispatch.hpp); the
// result is bit-identical to nvfp4::reference in every case and for any thread count.
#pragma once

#include <vector>

#include "nvfp4/scaling/fast_quantize.hpp"
#include "nvfp4/scaling/reference.hpp"
#include "nvfp4/scaling/stochastic_quantize.hpp"

namespace nvfp4 {

/// max |x| over the tensor, exact. Throws non_finite_error naming the first NaN/Inf.
template <quantizer_input T>
float amax(matrix_view<const T> x) {
  x.validate("amax input");
  // One pass finds the amax and whether a NaN/Inf is there; only then is the input rescanned to
  // say where the first one is.
  const std::uint32_t bits = fast::abs_max_bits(x);
  if (bits >= simd::float_inf_bits) detail::throw_first_non_finite(x, "input");
  return detail::bits_float(bits);
}

/// Quantizes x (blocks along its rows) with the tensor scale taken from `global_amax`, which the
/// caller computed over the whole source (e.g. shared by the rowwise and columnwise copies).
/// NaN/Inf must have been rejected by the caller (amax() does that).
template <block_scaled_format Format, quantizer_input T>
quantized_tensor<Format> quantize_with_amax(matrix_view<const T> x, float global_amax,
                                            const quantize_options& options = {}) {
  x.validate("quantize input");
  if (options.rounding == rounding_mode::stochastic) {
    return detail::quantize_stochastic_with_amax<Format>(x, global_amax, options);
  }
  return fast::quantize_with_amax<Format>(x, global_amax, options);
}

/// Quantizes x to Format: NVFP4 (§2) or MX (§7). Pass x.transposed() for the columnwise copy.
template <block_scaled_format Format, quantizer_input T>
quantized_tensor<Format> quantize(matrix_view<const T> x, const quantize_options& options = {}) {
  x.validate("quantize input");
  const float global_amax = amax(x);  // rejects NaN/Inf before anything is produced
  return quantize_with_amax<Format>(x, global_amax, options);
}

/// Both copies TransformerEngine's quantizer produces: x blocked along rows, and xᵀ (the
/// columnwise copy). They share the tensor amax, so the tensor scale is the same.
template <block_scaled_format Format>
struct quantized_pair {
  quantized_tensor<Format> rowwise;
  quantized_tensor<Format> columnwise;
};

template <block_scaled_format Format, quantizer_input T>
quantized_pair<Format> quantize_rowwise_and_columnwise(matrix_view<const T> x, quantize_options options = {}) {
  x.validate("quantize input");
  const float global_amax = amax(x);
  options.axis = quantized_axis::rowwise;
  auto rowwise = quantize_with_amax<Format>(x, global_amax, options);
  options.axis = quantized_axis::columnwise;
  auto columnwise = quantize_with_amax<Format>(x.transposed(), global_amax, options);
  return {std::move(rowwise), std::move(columnwise)};
}

/// Dequantizes q into out (same shape): x̂ = (element * block scale) * S_dec.
template <block_scaled_format Format>
void dequantize(const quantized_tensor<Format>& q, matrix_view<float> out) {
  detail::check_dequantize_output(q, out);
  fast::dequantize(q, out);
}

/// Dequantizes q into a new row-major [rows, cols] buffer.
template <block_scaled_format Format>
std::vector<float> dequantize(const quantized_tensor<Format>& q) {
  std::vector<float> out(static_cast<std::size_t>(q.rows() * q.cols()));
  dequantize(q, matrix_view<float>::row_major(out.data(), q.rows(), q.cols()));
  return out;
}

}  // namespace nvfp4
