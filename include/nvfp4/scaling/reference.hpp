// nvfp4/scaling/reference.hpp: the scalar reference quantizer and dequantizer. Reads like
// docs/numerics_spec.md §2 and §7, one element at a time; every fast path is tested bit-for-bit against it.
#pragma once

#include <algorithm>
#include <cmath>

#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/formats/stochastic_rounding.hpp"
#include "nvfp4/random/philox.hpp"
#include "nvfp4/scaling/block_format.hpp"
#include "nvfp4/scaling/detail/input_checks.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/quantize_options.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"
#include "nvfp4/scaling/scale_rules.hpp"

namespace nvfp4 {

namespace reference {

/// max |x| over the tensor (§2 step 1), exact. Throws non_finite_error on NaN/Inf.
template <quantizer_input T>
float amax(matrix_view<const T> x) {
  detail::check_input_view(x, "amax input");
  float result = 0.0f;
  for (index_t r = 0; r < x.rows(); ++r)
    for (index_t c = 0; c < x.cols(); ++c) {
      const float v = to_float32(x(r, c));
      if (!std::isfinite(v)) throw non_finite_error("input", r, c, v);
      result = std::max(result, std::fabs(v));
    }
  return result;
}

/// Quantizes x to Format, blocks along x's rows (pass x.transposed() for the columnwise copy).
/// NVFP4: the tensor scale comes from `global_amax` (the amax of the whole source tensor).
template <block_scaled_format Format, quantizer_input T>
quantized_tensor<Format> quantize_with_amax(matrix_view<const T> x, float global_amax, const quantize_options& options = {}) {
  detail::check_input_view(x, "quantize input");
  const bool stochastic = options.rounding == rounding_mode::stochastic;
  detail::check_rounding<Format>(options);
  quantized_tensor<Format> q(x.rows(), x.cols(), options.axis);
  tensor_scale ts{1.0f, 1.0f};
  if constexpr (Format::has_tensor_scale) ts = nvfp4_tensor_scale(global_amax);
  q.set_tensor_scale(global_amax, ts.encode, ts.decode);

  constexpr int block_rows = Format::block_rows;
  constexpr int block_cols = Format::block_cols;
  using element_type = typename Format::element_type;
  for (index_t r0 = 0; r0 < x.rows(); r0 += block_rows) {
    const index_t r1 = std::min<index_t>(r0 + block_rows, x.rows());
    for (index_t block = 0; block < q.scale_cols(); ++block) {
      const index_t c0 = block * block_cols;
      const index_t c1 = std::min<index_t>(c0 + block_cols, x.cols());
      // Zero padding past the edge never changes a block amax, so it is simply not visited.
      float block_amax = 0.0f;
      for (index_t r = r0; r < r1; ++r)
        for (index_t c = c0; c < c1; ++c) block_amax = std::max(block_amax, std::fabs(to_float32(x(r, c))));

      typename Format::scale_type scale;
      float factor;
      if constexpr (Format::has_tensor_scale) {
        scale = nvfp4_block_scale(block_amax, ts.encode);
        factor = nvfp4_block_encode_factor(scale, ts.decode);
      } else {
        scale = mx_block_scale<element_type>(block_amax, options.mx_rule);
        factor = mx_block_encode_factor(scale);
      }
      for (index_t r = r0; r < r1; ++r) {
        q.scales()[static_cast<std::size_t>(r * q.scale_cols() + block)] = scale;
        for (index_t c = c0; c < c1; ++c) {
          const float scaled = to_float32(x(r, c)) * factor;
          element_type e;
          if constexpr (Format::is_fp4) {
            // The random stream is keyed by the element's row-major index in this matrix.
            e = stochastic ? e2m1_from_float_stochastic(scaled, random_byte(options.seed, static_cast<std::uint64_t>(r * x.cols() + c)))
                           : element_type::from_float(scaled);
          } else {
            e = element_type::from_float(scaled);
          }
          auto& unit = q.data()[static_cast<std::size_t>(r * q.data_row_stride() + c / Format::elements_per_storage)];
          if constexpr (Format::is_fp4) {
            unit = unit.with(c & 1, e);
          } else {
            unit = e;
          }
        }
      }
    }
  }
  return q;
}

/// Quantizes x to Format (§2 / §7), the tensor amax taken over x itself.
template <block_scaled_format Format, quantizer_input T>
quantized_tensor<Format> quantize(matrix_view<const T> x, const quantize_options& options = {}) {
  // Qualified calls: nvfp4::amax / quantize_with_amax (the fast paths) are found by ADL too.
  const float global_amax = reference::amax(x);  // also rejects NaN/Inf, before anything is written
  return reference::quantize_with_amax<Format>(x, global_amax, options);
}

/// Dequantizes into out (same shape as q): x̂ = (element * block scale) * S_dec (§2 step 6; the
/// first product is exact, so one rounding happens).
template <block_scaled_format Format>
void dequantize(const quantized_tensor<Format>& q, matrix_view<float> out) {
  detail::check_dequantize_output(q, out);
  for (index_t r = 0; r < q.rows(); ++r)
    for (index_t c = 0; c < q.cols(); ++c) {
      const float block_value = q.element(r, c).to_float() * q.scale(r, c / Format::block_cols).to_float();
      out(r, c) = Format::has_tensor_scale ? block_value * q.decode_scale() : block_value;
    }
}

}  // namespace reference
}  // namespace nvfp4
