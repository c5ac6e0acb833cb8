// nvfp4/scaling/four_over_six.hpp: NVFP4 "4over6" quantization as TransformerEngine does it (TE
// common/cast/nvfp4/quantize_4over6_nvfp4.cuh, and its reference NVFP4QuantizerRef): every block
// is quantized twice, with the normal scale ("map to 6") and with the scale expanded 1.5x ("map to
// 4", so E2M1's 4 reaches what 6 reached), and keeps the candidate whose dequantized values are
// closer to the input (MAE or MSE, summed in TE's order; ties keep map-to-6). The tensor scale uses
// 256 instead of 448 as the E4M3 bound by default (room for the 1.5x expansion).
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "nvfp4/scaling/fp32_rounding.hpp"
#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4 {

/// The error a 4over6 block choice minimises.
enum class four_over_six_error {
  mae,  ///< sum of |x̂ - x|
  mse   ///< sum of (x̂ - x)^2
};

struct four_over_six_options {
  four_over_six_error error = four_over_six_error::mae;
  /// The E4M3 bound of the tensor scale: 256 (TE's default for 4over6 tensors) or 448.
  int e4m3_max = 256;
};

namespace detail {

inline void check_four_over_six(const four_over_six_options& options) {
  require(options.e4m3_max == 256 || options.e4m3_max == 448, errc::invalid_argument,
          "4over6: e4m3_max must be 256 or 448, got " + std::to_string(options.e4m3_max));
}

/// TE's compute_global_encode_scaling_factor_FP4<E4M3_MAX>: (E4M3_MAX * 6) / amax clamped to
/// FLT_MAX, 1 when amax or the result is 0 (docs/numerics_spec.md §2 step 2 with the bound E4M3_MAX).
inline tensor_scale four_over_six_tensor_scale(float amax, int e4m3_max) {
  float encode = static_cast<float>(e4m3_max) * 6.0f / amax;
  encode = std::min(encode, FLT_MAX);
  if (amax == 0.0f || encode == 0.0f) encode = 1.0f;
  return {encode, 1.0f / encode};
}

/// The two candidate scales of a block (TE's compute_scale_pair): base = block_amax / 6 * S_enc
/// (a division, then a product), map4 = E4M3(min(1.5 * base, 448)), map6 = E4M3(min(base, 448)),
/// and each one's element factor min(1 / (scale * S_dec), FLT_MAX).
struct four_over_six_scales {
  ue4m3 map4, map6;
  float factor4, factor6;
};
inline four_over_six_scales four_over_six_block_scales(float block_amax, tensor_scale ts) {
  const float base = block_amax / 6.0f * ts.encode;
  four_over_six_scales s;
  s.map4 = ue4m3::from_float(std::min(base * 1.5f, 448.0f));
  s.map6 = ue4m3::from_float(std::min(base, 448.0f));
  s.factor4 = std::min(1.0f / (s.map4.to_float() * ts.decode), FLT_MAX);
  s.factor6 = std::min(1.0f / (s.map6.to_float() * ts.decode), FLT_MAX);
  return s;
}

/// One element's contribution to a candidate's error (TE's accumulate_dequant_error): x̂ =
/// ((e2m1 * scale) * amax) / (6 * E4M3_MAX), diff = x̂ - x, then |diff| or diff^2, each step one
/// fp32 rounding.
inline float four_over_six_element_error(e2m1 q, ue4m3 scale, float global_amax, float denominator, float x,
                                         four_over_six_error mode) {
  const float dequantized = materialize(materialize(q.to_float() * scale.to_float()) * global_amax) / denominator;
  const float diff = dequantized - x;
  return mode == four_over_six_error::mse ? materialize(diff * diff) : std::fabs(diff);
}

/// Sums 16 row errors in the order of TE's warp reduction (shfl_down by 8, 4, 2, 1): a tree.
inline float four_over_six_tree_sum(float (&e)[16]) {
  for (int width = 8; width >= 1; width /= 2)
    for (int i = 0; i < width; ++i) e[i] = e[i] + e[i + width];
  return e[0];
}

}  // namespace detail

namespace reference {

/// 4over6 quantization of x (blocks along its rows: 1x16 for nvfp4_1x16, 16x16 tiles for
/// nvfp4_16x16; pass x.transposed() for the columnwise copy) with the tensor scale from
/// `global_amax` and the bound options.e4m3_max. Per block: both candidates (each element
/// E2M1(x * factor), round to nearest even), their errors summed element by element in order
/// (16x16: each row's sum, then a tree over the 16 rows, TE's warp reduction), and map-to-4 kept
/// only when its error is strictly smaller. The tensor records global_amax and its S_enc / S_dec,
/// so dequantize() is right for it.
template <block_scaled_format Format, quantizer_input T>
  requires(std::is_same_v<Format, nvfp4_1x16> || std::is_same_v<Format, nvfp4_16x16>)
quantized_tensor<Format> quantize_4over6_with_amax(matrix_view<const T> x, float global_amax,
                                                   const four_over_six_options& options = {},
                                                   quantized_axis axis = quantized_axis::rowwise) {
  nvfp4::detail::check_four_over_six(options);
  quantized_tensor<Format> q(x.rows(), x.cols(), axis);
  const tensor_scale ts = nvfp4::detail::four_over_six_tensor_scale(global_amax, options.e4m3_max);
  q.set_tensor_scale(global_amax, ts.encode, ts.decode);
  const float denominator = 6.0f * static_cast<float>(options.e4m3_max);
  constexpr int block_rows = Format::block_rows, block_cols = Format::block_cols;
  for (index_t r0 = 0; r0 < x.rows(); r0 += block_rows)
    for (index_t block = 0; block < q.scale_cols(); ++block) {
      const index_t c0 = block * block_cols;
      const index_t r1 = std::min<index_t>(r0 + block_rows, x.rows()), c1 = std::min<index_t>(c0 + block_cols, x.cols());
      float block_amax = 0.0f;
      for (index_t r = r0; r < r1; ++r)
        for (index_t c = c0; c < c1; ++c) block_amax = std::max(block_amax, std::fabs(to_float32(x(r, c))));
      const auto s = nvfp4::detail::four_over_six_block_scales(block_amax, ts);
      // Per row of the block: each candidate's error over its 16 elements (zero padding included:
      // a padded zero quantizes to zero, so it adds nothing).
      float error4[16] = {}, error6[16] = {};
      for (index_t r = r0; r < r1; ++r)
        for (index_t c = c0; c < c1; ++c) {
          const float v = to_float32(x(r, c));
          error4[r - r0] += nvfp4::detail::four_over_six_element_error(e2m1::from_float(v * s.factor4), s.map4, global_amax, denominator,
                                                                      v, options.error);
          error6[r - r0] += nvfp4::detail::four_over_six_element_error(e2m1::from_float(v * s.factor6), s.map6, global_amax, denominator,
                                                                      v, options.error);
        }
      const bool pick4 = block_rows == 1 ? error4[0] < error6[0]
                                         : nvfp4::detail::four_over_six_tree_sum(error4) < nvfp4::detail::four_over_six_tree_sum(error6);
      const ue4m3 scale = pick4 ? s.map4 : s.map6;
      const float factor = pick4 ? s.factor4 : s.factor6;
      for (index_t r = r0; r < r1; ++r) {
        q.scales()[static_cast<std::size_t>(r * q.scale_cols() + block)] = scale;
        for (index_t c = c0; c < c1; ++c) {
          const e2m1 e = e2m1::from_float(to_float32(x(r, c)) * factor);
          auto& unit = q.data()[static_cast<std::size_t>(r * q.data_row_stride() + c / 2)];
          unit = (c & 1) ? e2m1x2(unit.low(), e) : e2m1x2(e, unit.high());
        }
      }
    }
  return q;
}

}  // namespace reference

/// 4over6 quantization (see reference::quantize_4over6_with_amax), bit-identical to the reference
/// for any thread count: block rows are split across threads. NaN/Inf must have been rejected by
/// the caller (amax() does that); throws invalid_argument for a bound other than 256 / 448.
template <block_scaled_format Format, quantizer_input T>
  requires(std::is_same_v<Format, nvfp4_1x16> || std::is_same_v<Format, nvfp4_16x16>)
quantized_tensor<Format> quantize_4over6_with_amax(matrix_view<const T> x, float global_amax,
                                                   const four_over_six_options& options = {},
                                                   quantized_axis axis = quantized_axis::rowwise) {
  x.validate("quantize input");
  detail::check_four_over_six(options);
  constexpr index_t block_rows = Format::block_rows;
  const index_t bands = (x.rows() + block_rows - 1) / block_rows;
  if (bands <= 1 || x.size() < simd::parallel_threshold_elements) return reference::quantize_4over6_with_amax<Format>(x, global_amax, options, axis);
  quantized_tensor<Format> q(x.rows(), x.cols(), axis);
  simd::parallel_ranges(bands, true, [&](index_t begin, index_t end) {
    const index_t r0 = begin * block_rows, r1 = std::min(end * block_rows, x.rows());
    const matrix_view<const T> band(&x(r0, 0), r1 - r0, x.cols(), x.row_stride(), x.col_stride());
    const auto part = reference::quantize_4over6_with_amax<Format>(band, global_amax, options, axis);
    std::copy(part.data().begin(), part.data().end(), q.data().begin() + r0 * q.data_row_stride());
    std::copy(part.scales().begin(), part.scales().end(), q.scales().begin() + r0 * q.scale_cols());
    if (begin == 0) q.set_tensor_scale(part.amax(), part.encode_scale(), part.decode_scale());
  });
  return q;
}

/// 4over6 quantization with the tensor amax taken over x. Throws non_finite_error on NaN/Inf.
template <block_scaled_format Format, quantizer_input T>
  requires(std::is_same_v<Format, nvfp4_1x16> || std::is_same_v<Format, nvfp4_16x16>)
quantized_tensor<Format> quantize_4over6(matrix_view<const T> x, const four_over_six_options& options = {},
                                         quantized_axis axis = quantized_axis::rowwise) {
  x.validate("quantize input");
  const float global_amax = amax(x);
  return quantize_4over6_with_amax<Format>(x, global_amax, options, axis);
}

}  // namespace nvfp4
