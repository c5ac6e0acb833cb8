// nvfp4/scaling/simd/four_over_six_avx512.hpp: the AVX-512 kernel of 4over6 quantization, and the
// stub the other builds compile (simd/dispatch.hpp's four_over_six_isa says which one runs).
// Sixteen blocks side by side, one per lane: each lane walks its block's 16 elements in order, so
// its error sums keep the reference's order; every operation of the error is one rounding (the
// *_round intrinsics, which the compiler cannot fuse).
// Scales come from the scalar rule (detail::four_over_six_block_scales), elements are encoded by
// encode_codes. Bit-identical to reference::quantize_4over6_with_amax.
#pragma once

#include <cstdint>

#include "nvfp4/config.hpp"
#include "nvfp4/scaling/bulk_codecs.hpp"
#include "nvfp4/scaling/four_over_six_rules.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/quantize_options.hpp"
#include "nvfp4/simd/dispatch.hpp"

#if NVFP4_HAS_AVX512
#include "nvfp4/simd/x86_intrinsics.hpp"
#endif

namespace nvfp4::detail {

#if NVFP4_HAS_AVX512
NVFP4_BEGIN_INTRINSIC_CODE

/// Quantizes the full 256-column groups [0, groups) of the rows [r0, r0 + BlockRows) of x (1x16
/// blocks, or 16x16 tiles when BlockRows is 16): 16 blocks per group, one per lane. `data` and
/// `scales` point at row r0 of the output (strides in bytes).
template <int BlockRows, class T>
void four_over_six_groups(matrix_view<const T> x, index_t r0, index_t groups, float global_amax, tensor_scale ts,
                          four_over_six_error mode, int e4m3_max, std::uint8_t* data, index_t data_stride, std::uint8_t* scales,
                          index_t scale_stride) {
  constexpr int lanes = 16, round = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  alignas(64) float element[BlockRows][lanes][lanes];  // [row][k][block]
  alignas(64) float scaled[2][lanes * lanes];
  alignas(64) std::uint8_t codes[2][BlockRows][lanes * lanes];
  alignas(64) float scale_value[2][lanes], factor[2][lanes];
  ue4m3 scale_code[2][lanes];
  alignas(64) static constexpr float e2m1_values[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                                        -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  const __m512 e2m1_table = _mm512_load_ps(e2m1_values);
  const __m512 amax_vector = _mm512_set1_ps(global_amax);
  const __m512 denominator = _mm512_set1_ps(6.0f * static_cast<float>(e4m3_max));
  const __m512 sign_clear = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  for (index_t g = 0; g < groups; ++g) {
    const index_t c0 = g * lanes * lanes;
    // Transpose: lane b holds block b's element k, as floats; the block amaxes.
    __m512 block_amax = _mm512_setzero_ps();
    for (int r = 0; r < BlockRows; ++r)
      for (int b = 0; b < lanes; ++b)
        for (int k = 0; k < lanes; ++k) element[r][k][b] = to_float32(x(r0 + r, c0 + b * lanes + k));
    for (int r = 0; r < BlockRows; ++r)
      for (int k = 0; k < lanes; ++k) block_amax = _mm512_max_ps(block_amax, _mm512_and_ps(_mm512_load_ps(element[r][k]), sign_clear));
    alignas(64) float amax_lanes[lanes];
    _mm512_store_ps(amax_lanes, block_amax);
    for (int b = 0; b < lanes; ++b) {
      const four_over_six_scales s = four_over_six_block_scales(amax_lanes[b], ts);
      scale_code[0][b] = s.map4;
      scale_code[1][b] = s.map6;
      scale_value[0][b] = s.map4.to_float();
      scale_value[1][b] = s.map6.to_float();
      factor[0][b] = s.factor4;
      factor[1][b] = s.factor6;
    }
    __m512 error[2][BlockRows];
    for (int r = 0; r < BlockRows; ++r) {
      // Both candidates' codes: E2M1(x * factor), one product each, through the encoder.
      for (int c = 0; c < 2; ++c) {
        const __m512 f = _mm512_load_ps(factor[c]);
        for (int k = 0; k < lanes; ++k)
          _mm512_store_ps(scaled[c] + k * lanes, _mm512_mul_round_ps(_mm512_load_ps(element[r][k]), f, round));
        encode_codes<e2m1_traits>(scaled[c], lanes * lanes, codes[c][r]);
      }
      // Errors: x̂ = ((e2m1 * scale) * amax) / (6 * E4M3_MAX), d = x̂ - x, |d| or d * d, summed in k order.
      for (int c = 0; c < 2; ++c) {
        const __m512 s = _mm512_load_ps(scale_value[c]);
        __m512 sum = _mm512_setzero_ps();
        for (int k = 0; k < lanes; ++k) {
          const __m512i code = _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(codes[c][r] + k * lanes)));
          const __m512 q = _mm512_permutexvar_ps(code, e2m1_table);
          const __m512 dequantized =
              _mm512_div_round_ps(_mm512_mul_round_ps(_mm512_mul_round_ps(q, s, round), amax_vector, round), denominator, round);
          const __m512 diff = _mm512_sub_round_ps(dequantized, _mm512_load_ps(element[r][k]), round);
          const __m512 term = mode == four_over_six_error::mse ? _mm512_mul_round_ps(diff, diff, round) : _mm512_and_ps(diff, sign_clear);
          sum = _mm512_add_round_ps(sum, term, round);
        }
        error[c][r] = sum;
      }
    }
    // 16x16 tiles: the rows' errors as TE's warp reduction adds them (a tree over the rows).
    for (int c = 0; c < 2; ++c)
      for (int width = BlockRows / 2; width >= 1; width /= 2)
        for (int i = 0; i < width; ++i) error[c][i] = _mm512_add_round_ps(error[c][i], error[c][i + width], round);
    const __mmask16 pick4 = _mm512_cmp_ps_mask(error[0][0], error[1][0], _CMP_LT_OQ);
    for (int r = 0; r < BlockRows; ++r) {
      std::uint8_t* out = data + r * data_stride + c0 / 2;
      std::uint8_t* scale_out = scales + r * scale_stride + c0 / lanes;
      for (int b = 0; b < lanes; ++b) {
        const int c = (pick4 >> b & 1) ? 0 : 1;
        scale_out[b] = scale_code[c][b].bits();
        for (int k = 0; k < lanes; k += 2)
          out[b * lanes / 2 + k / 2] = static_cast<std::uint8_t>(codes[c][r][k * lanes + b] | (codes[c][r][(k + 1) * lanes + b] << 4));
      }
    }
  }
}

NVFP4_END_INTRINSIC_CODE
#else
template <int BlockRows, class T>
void four_over_six_groups(matrix_view<const T>, index_t, index_t, float, tensor_scale, four_over_six_error, int, std::uint8_t*, index_t,
                          std::uint8_t*, index_t) {}
#endif

}  // namespace nvfp4::detail
