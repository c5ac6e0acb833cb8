// nvfp4/scaling/quantize.hpp: the public quantize / dequantize / amax entry points. They check
// their inputs, then run the fastest kernel this build has (see nvfp4/simd/dispatch.hpp); the
// result is bit-identical to nvfp4::reference in every case and for any thread count.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "nvfp4/scaling/detail/fast_quantize.hpp"
#include "nvfp4/scaling/reference.hpp"

namespace nvfp4 {

namespace detail {
/// amax() without the view check: one pass finds the amax and whether a NaN/Inf is there; only
/// then is the input rescanned to say where the first one is.
template <quantizer_input T>
float checked_amax(matrix_view<const T> x) {
  if (x.empty()) return 0.0f;  // before any loop over the other dimension (it may be huge)
  const std::uint32_t bits = amax_bits_fast(x);
  if (bits >= float_inf_bits) throw_first_non_finite(x, "input");
  return bits_float(bits);
}
}  // namespace detail

/// max |x| over the tensor, exact (docs/numerics_spec.md §2 step 1). Throws non_finite_error naming the
/// first NaN/Inf.
template <quantizer_input T>
float amax(matrix_view<const T> x) {
  detail::check_input_view(x, "amax input");
  return detail::checked_amax(x);
}

/// Whether every element of x is finite (no NaN, no Inf): one pass of amax's fast kernel, for
/// callers that check before they read in place. Throws invalid_argument for an invalid view.
template <quantizer_input T>
bool all_finite(matrix_view<const T> x) {
  detail::check_input_view(x, "all_finite input");
  return x.empty() || detail::amax_bits_fast(x) < detail::float_inf_bits;
}

/// Quantizes x (blocks along its rows) with the tensor scale taken from `global_amax`, which the
/// caller computed over the whole source (e.g. shared by the rowwise and columnwise copies).
/// Throws invalid_argument when global_amax is NaN, Inf or negative, non_finite_error naming the
/// first NaN/Inf of x (one extra pass over x, as amax()). An amax below the data's largest |x|
/// is accepted, as TE's delayed scaling uses one: the blocks above it saturate (block scale 448,
/// elements ±6), docs/numerics_spec.md §2.
template <block_scaled_format Format, quantizer_input T>
quantized_tensor<Format> quantize_with_amax(matrix_view<const T> x, float global_amax, const quantize_options& options = {}) {
  detail::check_input_view(x, "quantize input");
  detail::require(std::isfinite(global_amax) && global_amax >= 0.0f, errc::invalid_argument,
                  "quantize_with_amax: amax " + detail::number_text(global_amax) + " is not a finite number >= 0");
  detail::check_rounding<Format>(options);
  (void)detail::checked_amax(x);  // throws non_finite_error naming the first NaN/Inf
  return detail::quantize_with_amax_fast<Format>(x, global_amax, options);
}

/// Quantizes x to Format: NVFP4 (§2) or MX (§7). Pass x.transposed() for the columnwise copy.
template <block_scaled_format Format, quantizer_input T>
quantized_tensor<Format> quantize(matrix_view<const T> x, const quantize_options& options = {}) {
  detail::check_input_view(x, "quantize input");
  detail::check_rounding<Format>(options);
  const float global_amax = detail::checked_amax(x);  // rejects NaN/Inf before anything is produced
  return detail::quantize_with_amax_fast<Format>(x, global_amax, options);
}

/// quantize() into `out`, a tensor the caller keeps and reuses (shape x.rows() x x.cols(), axis
/// options.axis, any content): out ends up with the bytes and tensor scale quantize(x, options)
/// would return, written over its storage; nothing is allocated or zero-filled (the form for a
/// hot loop that quantizes same-shape tensors again and again). Throws shape_mismatch when out's
/// shape or axis differ, and what quantize() throws, before anything of out is written.
template <block_scaled_format Format, quantizer_input T>
void quantize_into(matrix_view<const T> x, quantized_tensor<Format>& out, const quantize_options& options = {}) {
  detail::check_input_view(x, "quantize input");
  if (out.rows() != x.rows() || out.cols() != x.cols() ||
      out.axis() != options.axis)  // (the message is built only then: a hot loop calls this)
    throw error(errc::shape_mismatch, "quantize_into: the output is " + std::to_string(out.rows()) + "x" + std::to_string(out.cols()) +
                                          (out.axis() == quantized_axis::rowwise ? " rowwise" : " columnwise") + ", the input " +
                                          std::to_string(x.rows()) + "x" + std::to_string(x.cols()) +
                                          (options.axis == quantized_axis::rowwise ? " rowwise" : " columnwise") + ": they must match");
  detail::check_rounding<Format>(options);
  const float global_amax = detail::checked_amax(x);
  detail::quantize_with_amax_fast<Format>(x, global_amax, options, out);
}

/// quantize_with_amax(x, global_amax, options) into `out`, a tensor the caller keeps: its storage
/// is reused where it already has x's shape and options.axis (nothing allocated or zero-filled),
/// else it is made anew. Throws as quantize_with_amax, before anything of out is written.
template <block_scaled_format Format, quantizer_input T>
void quantize_with_amax_into(matrix_view<const T> x, float global_amax, quantized_tensor<Format>& out,
                             const quantize_options& options = {}) {
  detail::check_input_view(x, "quantize input");
  detail::require(std::isfinite(global_amax) && global_amax >= 0.0f, errc::invalid_argument,
                  "quantize_with_amax: amax " + detail::number_text(global_amax) + " is not a finite number >= 0");
  detail::check_rounding<Format>(options);
  (void)detail::checked_amax(x);  // throws non_finite_error naming the first NaN/Inf
  if (out.rows() != x.rows() || out.cols() != x.cols() || out.axis() != options.axis)
    out = quantized_tensor<Format>(x.rows(), x.cols(), options.axis);
  detail::quantize_with_amax_fast<Format>(x, global_amax, options, out);
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
  detail::check_input_view(x, "quantize input");
  detail::check_rounding<Format>(options);
  const float global_amax = detail::checked_amax(x);
  options.axis = quantized_axis::rowwise;
  auto rowwise = detail::quantize_with_amax_fast<Format>(x, global_amax, options);
  options.axis = quantized_axis::columnwise;
  auto columnwise = detail::quantize_with_amax_fast<Format>(x.transposed(), global_amax, options);
  return {std::move(rowwise), std::move(columnwise)};
}

/// Dequantizes q into out (same shape): x̂ = (element * block scale) * S_dec.
template <block_scaled_format Format>
void dequantize(const quantized_tensor<Format>& q, matrix_view<float> out) {
  detail::check_dequantize_output(q, out);
  detail::dequantize_fast(q, out);
}

/// dequantize() into the caller's buffer, by the name of quantize_into (the same function as
/// dequantize(q, out)).
template <block_scaled_format Format>
void dequantize_into(const quantized_tensor<Format>& q, matrix_view<float> out) {
  dequantize(q, out);
}

/// Dequantizes q into a new row-major [rows, cols] buffer.
template <block_scaled_format Format>
std::vector<float> dequantize(const quantized_tensor<Format>& q) {
  std::vector<float> out(static_cast<std::size_t>(q.rows() * q.cols()));
  dequantize(q, matrix_view<float>::row_major(out.data(), q.rows(), q.cols()));
  return out;
}

}  // namespace nvfp4
