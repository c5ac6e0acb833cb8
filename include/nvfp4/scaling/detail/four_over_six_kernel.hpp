// nvfp4/scaling/detail/four_over_six_kernel.hpp: the vector kernel of 4over6 quantization, written
// once over the lane operations of simd/dispatch.hpp (AVX-512: 16 blocks side by side, AVX2: 8).
// Each lane walks its own block's 16 elements in order, so its error sums keep the reference's
// order; every operation of the error is rounded on its own (Ops::materialize keeps the compiler
// from fusing the squared difference into the sum). Scales come from the scalar rule
// (four_over_six_block_scales), elements are encoded by encode_codes. Bit-identical to
// reference::quantize_4over6_with_amax; scaling/four_over_six.hpp runs it where
// simd::four_over_six_isa says so.
#pragma once

#include <cstdint>

#include "nvfp4/scaling/bulk_codecs.hpp"
#include "nvfp4/scaling/four_over_six_rules.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/quantize_options.hpp"

namespace nvfp4::detail {

/// Columns of one group of the kernel: Ops::width blocks of 16.
template <class Ops>
inline constexpr index_t four_over_six_group_cols = index_t{16} * Ops::width;

/// Quantizes the full groups [0, groups) of the rows [r0, r0 + BlockRows) of x (1x16 blocks, or
/// 16x16 tiles when BlockRows is 16), one block per lane. `data` and `scales` point at row r0 of
/// the output (strides in bytes).
template <class Ops, int BlockRows, class T>
void four_over_six_groups(matrix_view<const T> x, index_t r0, index_t groups, float global_amax, tensor_scale ts, four_over_six_error mode,
                          int e4m3_max, std::uint8_t* data, index_t data_stride, std::uint8_t* scales, index_t scale_stride) {
  using vf = typename Ops::vf;
  constexpr int lanes = Ops::width, block_cols = 16;
  alignas(64) float element[BlockRows][block_cols][lanes];  // [row][k][block]
  alignas(64) float scaled[2][block_cols * lanes];
  alignas(64) std::uint8_t codes[2][BlockRows][block_cols * lanes];
  alignas(64) float scale_value[2][lanes], factor[2][lanes], amax_lanes[lanes], error_lanes[2][lanes];
  ue4m3 scale_code[2][lanes];
  alignas(64) static constexpr float e2m1_values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                                        -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  const vf amax_vector = Ops::set(global_amax);
  const vf denominator = Ops::set(6.0f * static_cast<float>(e4m3_max));
  for (index_t g = 0; g < groups; ++g) {
    const index_t c0 = g * four_over_six_group_cols<Ops>;
    // Transpose: lane b holds block b's element k, as floats; the block amaxes.
    for (int r = 0; r < BlockRows; ++r)
      for (int b = 0; b < lanes; ++b)
        for (int k = 0; k < block_cols; ++k) element[r][k][b] = to_float32(x(r0 + r, c0 + b * block_cols + k));
    vf block_amax = Ops::set(0.0f);
    for (int r = 0; r < BlockRows; ++r)
      for (int k = 0; k < block_cols; ++k) block_amax = Ops::max(block_amax, Ops::abs(Ops::load(element[r][k])));
    Ops::store(amax_lanes, block_amax);
    for (int b = 0; b < lanes; ++b) {
      const four_over_six_scales s = four_over_six_block_scales(amax_lanes[b], ts);
      scale_code[0][b] = s.map4;
      scale_code[1][b] = s.map6;
      scale_value[0][b] = s.map4.to_float();
      scale_value[1][b] = s.map6.to_float();
      factor[0][b] = s.factor4;
      factor[1][b] = s.factor6;
    }
    vf error[2][BlockRows];
    for (int r = 0; r < BlockRows; ++r) {
      // Both candidates' codes: E2M1(x * factor), one product each, through the encoder.
      for (int c = 0; c < 2; ++c) {
        const vf f = Ops::load(factor[c]);
        for (int k = 0; k < block_cols; ++k) Ops::store(scaled[c] + k * lanes, Ops::mul(Ops::load(element[r][k]), f));
        encode_codes<e2m1_traits>(scaled[c], block_cols * lanes, codes[c][r]);
      }
      // Errors: x̂ = ((e2m1 * scale) * amax) / (6 * E4M3_MAX), d = x̂ - x, |d| or d * d, summed in k order.
      for (int c = 0; c < 2; ++c) {
        const vf s = Ops::load(scale_value[c]);
        vf sum = Ops::set(0.0f);
        for (int k = 0; k < block_cols; ++k) {
          const vf q = Ops::lookup16(Ops::load_bytes(codes[c][r] + k * lanes), e2m1_values);
          const vf dequantized = Ops::div(Ops::mul(Ops::mul(q, s), amax_vector), denominator);
          const vf diff = Ops::sub(dequantized, Ops::load(element[r][k]));
          const vf term = mode == four_over_six_error::mse ? Ops::materialize(Ops::mul(diff, diff)) : Ops::abs(diff);
          sum = Ops::add(sum, term);
        }
        error[c][r] = sum;
      }
    }
    // 16x16 tiles: the rows' errors as TE's warp reduction adds them (a tree over the rows).
    for (int c = 0; c < 2; ++c)
      for (int width = BlockRows / 2; width >= 1; width /= 2)
        for (int i = 0; i < width; ++i) error[c][i] = Ops::add(error[c][i], error[c][i + width]);
    Ops::store(error_lanes[0], error[0][0]);
    Ops::store(error_lanes[1], error[1][0]);
    for (int r = 0; r < BlockRows; ++r) {
      std::uint8_t* out = data + r * data_stride + c0 / 2;
      std::uint8_t* scale_out = scales + r * scale_stride + c0 / block_cols;
      for (int b = 0; b < lanes; ++b) {
        const int c = error_lanes[0][b] < error_lanes[1][b] ? 0 : 1;  // map-to-4 only when strictly better
        scale_out[b] = scale_code[c][b].bits();
        for (int k = 0; k < block_cols; k += 2)
          out[b * block_cols / 2 + k / 2] = static_cast<std::uint8_t>(codes[c][r][k * lanes + b] | (codes[c][r][(k + 1) * lanes + b] << 4));
      }
    }
  }
}

}  // namespace nvfp4::detail
