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

#include "nvfp4/scaling/detail/four_over_six_kernel.hpp"
#include "nvfp4/scaling/four_over_six_rules.hpp"
#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/simd/dispatch.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4 {

namespace reference {

/// 4over6 quantization of x (blocks along its rows: 1x16 for nvfp4_1x16, 16x16 tiles for
/// nvfp4_16x16; pass x.transposed() for the columnwise copy) with the tensor scale from
/// `global_amax` and the bound options.e4m3_max. Per block: both candidates (each element
/// E2M1(x * factor), round to nearest even), their errors summed element by element in order
/// (16x16: each row's sum, then a tree over the 16 rows, TE's warp reduction), and map-to-4 kept
/// only when its error is strictly smaller. The tensor records global_amax and its S_enc / S_dec,
/// so dequantize() is right for it.
template <block_scaled_format Format, quantizer_input T>
requires(std::is_same_v<Format, nvfp4_1x16> || std::is_same_v<Format, nvfp4_16x16>) quantized_tensor<Format> quantize_4over6_with_amax(
    matrix_view<const T> x, float global_amax, const four_over_six_options& options = {}, quantized_axis axis = quantized_axis::rowwise) {
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
          error4[r - r0] += nvfp4::detail::four_over_six_element_error(e2m1::from_float(v * s.factor4), s.map4, global_amax, denominator, v,
                                                                       options.error);
          error6[r - r0] += nvfp4::detail::four_over_six_element_error(e2m1::from_float(v * s.factor6), s.map6, global_amax, denominator, v,
                                                                       options.error);
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
          unit = unit.with(c & 1, e);
        }
      }
    }
  return q;
}

}  // namespace reference

/// 4over6 quantization (see reference::quantize_4over6_with_amax), bit-identical to the reference
/// for any thread count: bands of block rows are split across threads; within a band, groups of
/// full blocks (16 on AVX-512, 8 on AVX2) go through the vector kernel
/// (scaling/detail/four_over_six_kernel.hpp) where the build has one, the rest through the
/// reference. NaN/Inf must have been rejected by the caller (amax() does that); throws
/// invalid_argument for a bound other than 256 / 448.
template <block_scaled_format Format, quantizer_input T>
requires(std::is_same_v<Format, nvfp4_1x16> || std::is_same_v<Format, nvfp4_16x16>) quantized_tensor<Format> quantize_4over6_with_amax(
    matrix_view<const T> x, float global_amax, const four_over_six_options& options = {}, quantized_axis axis = quantized_axis::rowwise) {
  detail::check_input_view(x, "quantize input");
  detail::check_four_over_six(options);
  constexpr int block_rows = Format::block_rows;
  quantized_tensor<Format> q(x.rows(), x.cols(), axis);
  const tensor_scale ts = detail::four_over_six_tensor_scale(global_amax, options.e4m3_max);
  q.set_tensor_scale(global_amax, ts.encode, ts.decode);
  if (x.empty()) return q;
  auto* const data = reinterpret_cast<std::uint8_t*>(q.data().data());
  auto* const scales = reinterpret_cast<std::uint8_t*>(q.scales().data());
  const index_t data_stride = q.data_row_stride(), scale_stride = q.scale_cols();
  const index_t bands = (x.rows() + block_rows - 1) / block_rows;
  // The dispatch point's choice: the vector kernel over the build's lane operations, or none.
  constexpr index_t group_cols = detail::four_over_six_group_cols<simd::ops>;
  const index_t groups = simd::four_over_six_isa != isa::scalar ? x.cols() / group_cols : 0;
  simd::parallel_ranges(bands, simd::worth_parallel(x.size()), [&](index_t begin, index_t end) {
    for (index_t band = begin; band < end; ++band) {
      const index_t r0 = band * block_rows, rows = std::min<index_t>(block_rows, x.rows() - r0);
      const index_t vector_cols = rows == block_rows ? groups * group_cols : 0;
      if (vector_cols > 0)
        detail::four_over_six_groups<simd::ops, block_rows>(x, r0, groups, global_amax, ts, options.error, options.e4m3_max,
                                                            data + r0 * data_stride, data_stride, scales + r0 * scale_stride, scale_stride);
      if (vector_cols == x.cols()) continue;
      // The rest of the band (partial groups, a partial band) through the reference.
      const matrix_view<const T> rest(&x(r0, vector_cols), rows, x.cols() - vector_cols, x.row_stride(), x.col_stride());
      const auto part = reference::quantize_4over6_with_amax<Format>(rest, global_amax, options);
      const auto* part_data = reinterpret_cast<const std::uint8_t*>(part.data().data());
      const auto* part_scales = reinterpret_cast<const std::uint8_t*>(part.scales().data());
      for (index_t r = 0; r < rows; ++r) {
        std::copy_n(part_data + r * part.data_row_stride(), part.data_row_stride(), data + (r0 + r) * data_stride + vector_cols / 2);
        std::copy_n(part_scales + r * part.scale_cols(), part.scale_cols(), scales + (r0 + r) * scale_stride + vector_cols / 16);
      }
    }
  });
  return q;
}

/// 4over6 quantization with the tensor amax taken over x. Throws non_finite_error on NaN/Inf.
template <block_scaled_format Format, quantizer_input T>
requires(std::is_same_v<Format, nvfp4_1x16> || std::is_same_v<Format, nvfp4_16x16>) quantized_tensor<Format> quantize_4over6(
    matrix_view<const T> x, const four_over_six_options& options = {}, quantized_axis axis = quantized_axis::rowwise) {
  detail::check_input_view(x, "quantize input");
  const float global_amax = amax(x);
  return quantize_4over6_with_amax<Format>(x, global_amax, options, axis);
}

}  // namespace nvfp4
