// nvfp4/gemm/fp4/simd/mma_avx2.hpp: the AVX2 kernels of the block-scaled MMA, on the layouts of
// gemm/fp4/detail/mma_layout.hpp (a 16-lane tile is two 8-lane halves). vpmaddubsw multiplies B's offset
// bytes with a broadcast word of A into 16-bit pair sums (at most 2·24·12 = 576, so the four quads
// of a group add up in 16 bits without saturating), vpmaddwd folds them into the group's 32-bit
// sums. The relaxed and exact steps are those of the AVX-512 kernels (see simd/mma_avx512.hpp);
// without AVX-512's rounding override and vgetexp, round toward zero corrects a round-to-nearest
// conversion and exponents come from the float bits.
#pragma once

#include "nvfp4/config.hpp"

#if NVFP4_HAS_AVX2

#include <cstdint>
#include <cstring>

#include "nvfp4/gemm/fp4/detail/mma_kernels.hpp"
#include "nvfp4/gemm/fp4/detail/mma_layout.hpp"
#include "nvfp4/gemm/fp4/detail/packing.hpp"
#include "nvfp4/simd/avx2/ops.hpp"
#include "nvfp4/simd/x86_intrinsics.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::detail {

template <>
struct mma_kernels<isa::avx2> {
  using packers = operand_packers<simd::avx2::ops>;

  /// Register blocks: R rows of A by one tile (two 8-lane halves); 16 registers leave no room for more.
  static constexpr int block_rows = 2, block_tiles = 1;

  /// 4·P_g (Σ a2·b2) of group g for 8 lanes (half h of the tile), from A's 4 broadcast quads.
  static __m256i group_sum(const row_step& ra, const tile_step& tb, int g, int h, const __m256i (&a_quads)[4]) {
    __m256i pairs = _mm256_setzero_si256();
    for (int q = 0; q < 4; ++q) {
      const __m256i b = _mm256_load_si256(reinterpret_cast<const __m256i*>(tb.bytes[g * 4 + q] + 32 * h));
      pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(b, a_quads[q]));
    }
    return _mm256_add_epi32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)), _mm256_set1_epi32(ra.correction[g]));
  }

  static void broadcast_quads(const row_step& ra, int g, __m256i (&a_quads)[4]) {
    for (int q = 0; q < 4; ++q) {
      std::int32_t word;
      std::memcpy(&word, ra.values + g * 16 + q * 4, 4);
      a_quads[q] = _mm256_set1_epi32(word);
    }
  }

  /// Relaxed mode, as mma_kernels<isa::avx512_vnni>::relaxed_block.
  template <class ScaleType, int R, int C, bool Prescaled>
  static void relaxed_block(const row_step* const* rows, const tile_step* const* tiles, index_t steps, float* out, index_t out_stride) {
    static_assert(C == 1);
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h) acc[r][h] = _mm256_loadu_ps(out + r * out_stride + 8 * h);
    for (index_t s = 0; s < steps; ++s) {
      const tile_step& tb = tiles[0][s];
      for (int r = 0; r < R; ++r) {
        const row_step& ra = rows[r][s];
        for (int g = 0; g < 4; ++g) {
          __m256i a_quads[4];
          broadcast_quads(ra, g, a_quads);
          for (int h = 0; h < 2; ++h) {
            const __m256 sum = _mm256_cvtepi32_ps(group_sum(ra, tb, g, h, a_quads));
            const __m256 scale_b = _mm256_load_ps(tb.value[g] + 8 * h);
            if constexpr (Prescaled) {
              acc[r][h] = _mm256_fmadd_ps(sum, _mm256_mul_ps(_mm256_set1_ps(ra.quarter[g]), scale_b), acc[r][h]);
            } else {
              const __m256 group_sum = _mm256_mul_ps(sum, _mm256_set1_ps(0.25f));
              acc[r][h] = _mm256_fmadd_ps(group_sum, _mm256_mul_ps(_mm256_set1_ps(row_scale_value<ScaleType>(ra, g)), scale_b), acc[r][h]);
            }
          }
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h) _mm256_storeu_ps(out + r * out_stride + 8 * h, acc[r][h]);
  }

  /// 4 exact doubles rounded toward zero to fp32 (|x| < 2^128): round to nearest, then one step
  /// toward zero (the bit pattern minus one, for either sign) where that overshot.
  static __m128 round_toward_zero_4(__m256d x) {
    const __m128 nearest = _mm256_cvtpd_ps(x);
    const __m256d magnitude = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFF));
    const __m256d overshot = _mm256_cmp_pd(_mm256_and_pd(_mm256_cvtps_pd(nearest), magnitude), _mm256_and_pd(x, magnitude), _CMP_GT_OQ);
    const __m128i overshot32 =
        _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(overshot), _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7)));
    return _mm_castsi128_ps(_mm_add_epi32(_mm_castps_si128(nearest), overshot32));
  }

  /// floor(log2 |x|) from the bits: -127 for zero and subnormals (stricter than §6's -126 for the
  /// lower bound; the upper bound is kept by scales_allow_fast_step), 128 for Inf and NaN.
  static __m256 exponent_of(__m256 x) {
    const __m256i field = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 23), _mm256_set1_epi32(0xFF));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(field, _mm256_set1_epi32(127)));
  }

  /// Exact mode, as mma_kernels<isa::avx512_vnni>::exact_block: the five terms in double where truncation
  /// removes nothing, the scalar §6 step for the other lanes.
  template <class ScaleType, int R, int C>
  static void exact_block(const row_step* const* rows, const tile_step* const* tiles, index_t steps, float* out, index_t out_stride) {
    static_assert(C == 1);
    for (int r = 0; r < R; ++r) {
      __m256 acc[2] = {_mm256_loadu_ps(out + r * out_stride), _mm256_loadu_ps(out + r * out_stride + 8)};
      for (index_t s = 0; s < steps; ++s) {
        const tile_step& tb = tiles[0][s];
        const row_step& ra = rows[r][s];
        __m256d sum[2][2];
        for (int h = 0; h < 2; ++h) {
          sum[h][0] = _mm256_cvtps_pd(_mm256_castps256_ps128(acc[h]));
          sum[h][1] = _mm256_cvtps_pd(_mm256_extractf128_ps(acc[h], 1));
        }
        for (int g = 0; g < 4; ++g) {
          __m256i a_quads[4];
          broadcast_quads(ra, g, a_quads);
          const __m256d quarter_a = _mm256_set1_pd(static_cast<double>(ra.quarter[g]));
          for (int h = 0; h < 2; ++h) {
            const __m256i p = group_sum(ra, tb, g, h, a_quads);
            for (int part = 0; part < 2; ++part) {
              const __m128i p4 = part == 0 ? _mm256_castsi256_si128(p) : _mm256_extracti128_si256(p, 1);
              const __m256d weight = _mm256_mul_pd(quarter_a, _mm256_cvtps_pd(_mm_load_ps(tb.value[g] + 8 * h + 4 * part)));
              sum[h][part] = _mm256_fmadd_pd(_mm256_cvtepi32_pd(p4), weight, sum[h][part]);
            }
          }
        }
        const bool scales_ok = scales_allow_fast_step(ra, tb);
        for (int h = 0; h < 2; ++h) {
          const __m256 fast = _mm256_set_m128(round_toward_zero_4(sum[h][1]), round_toward_zero_4(sum[h][0]));
          int ok = 0;
          if (scales_ok) {
            const __m256 exponent = exponent_of(acc[h]);
            const __m256 floor = _mm256_add_ps(_mm256_set1_ps(ra.exponent_max), _mm256_load_ps(tb.accumulator_floor + 8 * h));
            const __m256 ceiling = _mm256_add_ps(_mm256_set1_ps(ra.exponent_min), _mm256_load_ps(tb.accumulator_ceiling + 8 * h));
            const __m256 inside = _mm256_and_ps(_mm256_cmp_ps(exponent, floor, _CMP_GE_OQ), _mm256_cmp_ps(exponent, ceiling, _CMP_LE_OQ));
            ok = _mm256_movemask_ps(_mm256_or_ps(inside, _mm256_cmp_ps(acc[h], _mm256_setzero_ps(), _CMP_EQ_OQ)));
          }
          if (ok == 0xFF) {
            acc[h] = fast;
          } else {
            alignas(32) float result[8], c[8];
            _mm256_store_ps(result, fast);
            _mm256_store_ps(c, acc[h]);
            for (int l = 0; l < 8; ++l)
              if (!((ok >> l) & 1)) result[l] = step_of_lane<ScaleType, gemm_mode::exact>(ra, tb, 8 * h + l, c[l]);
            acc[h] = _mm256_load_ps(result);
          }
        }
      }
      _mm256_storeu_ps(out + r * out_stride, acc[0]);
      _mm256_storeu_ps(out + r * out_stride + 8, acc[1]);
    }
  }
};

}  // namespace nvfp4::detail
NVFP4_END_INTRINSIC_CODE

#endif  // NVFP4_HAS_AVX2
