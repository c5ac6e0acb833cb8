// nvfp4/gemm/simd/fp8_mma_avx2.hpp: AVX2 kernels of the FP8 / MXFP8 tensor-core steps, bit-identical
// to mma8::step and mma8::relaxed_step: the method of the AVX-512 kernels
// (gemm/simd/fp8_mma_avx512.hpp, whose header comment derives it) on 8-lane vectors, two per
// 16-column tile. AVX2 has no vscalefps, so the powers of two are built from exponent bits:
// - a product's factor 2^(F - E_max + s_a + s_b) as a float, where it is a normal number, else 0
//   (every term is 0 there, as the AVX-512 kernel's header comment shows); NaN / Inf codes, NaN
//   scales and non-finite accumulators go through the scalar step;
// - the accumulator's factor 2^(F - E_max) and the result's 2^(E_max - F) in double, where every
//   one of them is a normal number and every product of them with the integer sums is exact;
// - Blackwell's conversion toward zero is the nearest conversion (vcvtpd2ps under the default
//   MXCSR) stepped back one ulp where it went up in magnitude; Hopper's result is the nearest
//   conversion with the low 10 bits cleared, as in the AVX-512 kernel.
// The relaxed step is mma8::relaxed_step's pair order with two FMAs per pair, its scale 2^(s_a +
// s_b) built the same way, or, where no row or tile of the block has a NaN / Inf code or a NaN
// scale, as the float product 2^s_a * 2^s_b (which rounds as the model's float(2^(s_a + s_b))).
#pragma once

#include <algorithm>
#include <cstdint>

#include "nvfp4/config.hpp"
#include "nvfp4/gemm/detail/fp8_layout.hpp"

#if NVFP4_HAS_AVX2

#include "nvfp4/simd/x86_intrinsics.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::fp8_gemm_detail {

template <isa Isa>
struct fp8_step_kernels;

/// The AVX2 step kernels (simd/dispatch.hpp's fp8_gemm_isa picks them where AVX-512 is absent).
template <>
struct fp8_step_kernels<isa::avx2> {
  /// The staged parts the kernels below read: values, and exponents for the exact step.
  static constexpr staged_parts staging(gemm_mode mode) { return {.value = true, .exponent = mode == gemm_mode::exact}; }
  /// Runs steps [s0, s1) of the block (acc as in fp8_gemm_detail::run_steps), one tile at a time:
  /// the exact kernel takes two rows a call, the relaxed one four (16 ymm registers).
  static void run_steps(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
    const int rows_per_call = blk.mode == gemm_mode::exact ? 2 : 4;
    for (int t = 0; t < blk.tile_count; ++t) {
      step_block one = blk;
      one.tiles[0] = blk.tiles[t];
      one.j0[0] = blk.j0[t];
      one.tile_count = 1;
      for (int r0 = 0; r0 < blk.rows; r0 += rows_per_call) {
        one.row_offset = blk.row_offset + r0;
        one.rows = std::min(rows_per_call, blk.rows - r0);
        float* const out = acc + r0 * stride + t * lanes;
        if (blk.mode == gemm_mode::relaxed) {
          switch (one.rows) {
            case 4: relaxed_steps<4>(one, s0, s1, out, stride); break;
            case 3: relaxed_steps<3>(one, s0, s1, out, stride); break;
            case 2: relaxed_steps<2>(one, s0, s1, out, stride); break;
            default: relaxed_steps<1>(one, s0, s1, out, stride); break;
          }
        } else if (blk.core == mma8::tensor_core::hopper) {
          if (one.rows == 2) exact_steps<2, true>(one, s0, s1, out, stride); else exact_steps<1, true>(one, s0, s1, out, stride);
        } else {
          if (one.rows == 2) exact_steps<2, false>(one, s0, s1, out, stride); else exact_steps<1, false>(one, s0, s1, out, stride);
        }
      }
    }
  }

 private:
  static constexpr int halves = lanes / 8;  ///< 8-lane vectors per tile

  /// 2^e as a float where -126 <= e <= 127 (else 0), and the lanes where it is (a movemask).
  static NVFP4_ALWAYS_INLINE __m256 float_power_of_two(__m256i e, int& in_range) {
    const __m256i ok = _mm256_and_si256(_mm256_cmpgt_epi32(e, _mm256_set1_epi32(-127)), _mm256_cmpgt_epi32(_mm256_set1_epi32(128), e));
    in_range = _mm256_movemask_ps(_mm256_castsi256_ps(ok));
    return _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23), ok));
  }
  /// 2^e as four doubles (|e| < 1023).
  static NVFP4_ALWAYS_INLINE __m256d double_power_of_two(__m128i e) {
    return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(e), _mm256_set1_epi64x(1023)), 52));
  }
  static NVFP4_ALWAYS_INLINE __m128i low_half(__m256i v) { return _mm256_castsi256_si128(v); }
  static NVFP4_ALWAYS_INLINE __m128i high_half(__m256i v) { return _mm256_extracti128_si256(v, 1); }
  /// The low 32 bits of each 64-bit lane (a compare mask of doubles as four int32 masks).
  static NVFP4_ALWAYS_INLINE __m128i narrow_mask(__m256d mask) {
    return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(mask), _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0)));
  }

  /// Lanes whose step the vector path does not handle, redone by the scalar step from c before it.
  template <int R>
  static void scalar_lanes(const step_block& blk, index_t s, const __m256 (&c_before)[R][halves], const int (&mask)[R][halves], float* acc,
                           index_t stride) {
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < halves; ++h) {
        if (!mask[r][h]) continue;
        alignas(32) float before[8];
        _mm256_store_ps(before, c_before[r][h]);
        for (int lane = 0; lane < 8; ++lane) {
          const int column = h * 8 + lane;
          if ((mask[r][h] >> lane & 1) && column < blk.tiles[0]->columns)
            acc[r * stride + column] = scalar_step(blk, r, 0, column, s, before[lane]);
        }
      }
  }

  /// The step's result from the exact integer sums (units of 2^(E_max - F)) for 8 lanes.
  template <bool Hopper>
  static NVFP4_ALWAYS_INLINE __m256 finish(__m256i sum_low, __m256i sum_high, __m256i c_units, __m256i unit) {
    __m128 part[2];
    if constexpr (Hopper) {
      const __m256i total = _mm256_add_epi32(_mm256_add_epi32(sum_low, sum_high), c_units);  // below 2^21
      for (int h = 0; h < 2; ++h) {
        const auto half = [h](__m256i v) { return h == 0 ? low_half(v) : high_half(v); };
        part[h] = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtepi32_pd(half(total)), double_power_of_two(half(unit))));
      }
      const __m256 nearest = _mm256_set_m128(part[1], part[0]);
      return _mm256_castsi256_ps(_mm256_and_si256(_mm256_castps_si256(nearest), _mm256_set1_epi32(~0x3FF)));
    } else {
      const __m256d magnitude_bits = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFF));
      for (int h = 0; h < 2; ++h) {
        const auto half = [h](__m256i v) { return h == 0 ? low_half(v) : high_half(v); };
        const __m256d total =
            _mm256_add_pd(_mm256_add_pd(_mm256_cvtepi32_pd(half(sum_low)), _mm256_cvtepi32_pd(half(sum_high))), _mm256_cvtepi32_pd(half(c_units)));
        const __m256d exact = _mm256_mul_pd(total, double_power_of_two(half(unit)));
        const __m256d exact_magnitude = _mm256_and_pd(exact, magnitude_bits);
        const __m128 nearest = _mm256_cvtpd_ps(exact);
        const __m256d went_up = _mm256_cmp_pd(_mm256_and_pd(_mm256_cvtps_pd(nearest), magnitude_bits), exact_magnitude, _CMP_GT_OQ);
        // Adding the all-ones mask steps the magnitude down one ulp (Inf to the largest float).
        const __m128 toward_zero = _mm_castsi128_ps(_mm_add_epi32(_mm_castps_si128(nearest), narrow_mask(went_up)));
        const __m128i overflow = narrow_mask(_mm256_cmp_pd(exact_magnitude, _mm256_set1_pd(0x1p128), _CMP_GE_OQ));
        const __m128 infinity = _mm_or_ps(_mm_and_ps(toward_zero, _mm_set1_ps(-0.0f)), _mm_set1_ps(__builtin_inff()));
        part[h] = _mm_blendv_ps(toward_zero, infinity, _mm_castsi128_ps(overflow));
      }
      return _mm256_set_m128(part[1], part[0]);
    }
  }

  template <int R, bool Hopper>
  static void exact_steps(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
    constexpr int fraction = Hopper ? 13 : 25;
    const column_tile& tile = *blk.tiles[0];
    for (index_t s = s0; s < s1; ++s) {
      staged_row_step rs[R];
      for (int r = 0; r < R; ++r) rs[r] = staged_row_at(blk, r, s);
      const float* const b_value = tile.value.data() + s * mma8::step_k * lanes;
      const std::int8_t* const b_exponent = tile.exponent.data() + s * mma8::step_k * lanes;
      const unsigned special_columns = tile.special[static_cast<std::size_t>(s)];
      __m256 c_before[R][halves];
      __m256i e_max[R][halves], scale_sum[R][halves];
      int fallback[R][halves];
      bool pair_max_needed = false;
      for (int h = 0; h < halves; ++h) {
        const __m256i col_max = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile.max_exponent.data() + s * lanes + h * 8));
        const __m256i col_scale = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile.scale_exponent.data() + s * lanes + h * 8));
        for (int r = 0; r < R; ++r) {
          c_before[r][h] = _mm256_loadu_ps(acc + r * stride + h * 8);
          // E_c = max(floor(log2 |c|), -126) from the bits (0 gives -126); exponent 255: non-finite.
          const __m256i biased = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(c_before[r][h]), 23), _mm256_set1_epi32(0xFF));
          const int non_finite = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(biased, _mm256_set1_epi32(0xFF))));
          e_max[r][h] = _mm256_sub_epi32(_mm256_max_epi32(biased, _mm256_set1_epi32(1)), _mm256_set1_epi32(127));
          scale_sum[r][h] = _mm256_add_epi32(col_scale, _mm256_set1_epi32(rs[r].scale_exponent));
          fallback[r][h] = non_finite | static_cast<int>(special_columns >> (8 * h) & 0xFF) | (rs[r].special ? 0xFF : 0);
          const __m256i bound = _mm256_add_epi32(_mm256_add_epi32(col_max, _mm256_set1_epi32(rs[r].max_exponent)), scale_sum[r][h]);
          pair_max_needed = pair_max_needed || _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(bound, e_max[r][h]))) != 0;
        }
      }
      // E_max is c's exponent unless a product can reach above it: then the pair maximum decides.
      if (pair_max_needed) {
        __m256i pair_max[R][halves];
        for (int r = 0; r < R; ++r)
          for (int h = 0; h < halves; ++h) pair_max[r][h] = _mm256_set1_epi32(-1024);
        for (int k = 0; k < mma8::step_k; ++k)
          for (int h = 0; h < halves; ++h) {
            const __m256i eb = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b_exponent + k * lanes + h * 8)));
            for (int r = 0; r < R; ++r)
              pair_max[r][h] = _mm256_max_epi32(pair_max[r][h], _mm256_add_epi32(eb, _mm256_set1_epi32(rs[r].exponent[k])));
          }
        for (int r = 0; r < R; ++r)
          for (int h = 0; h < halves; ++h) e_max[r][h] = _mm256_max_epi32(e_max[r][h], _mm256_add_epi32(pair_max[r][h], scale_sum[r][h]));
      }
      // Products scale by 2^(F - E_max + s_a + s_b) and truncate to integers.
      __m256 factor[R][halves];
      __m256i sum_low[R][halves], sum_high[R][halves];
      for (int r = 0; r < R; ++r)
        for (int h = 0; h < halves; ++h) {
          int in_range;  // out of range: factor 0, every term 0
          factor[r][h] = float_power_of_two(_mm256_add_epi32(_mm256_sub_epi32(_mm256_set1_epi32(fraction), e_max[r][h]), scale_sum[r][h]), in_range);
          sum_low[r][h] = _mm256_setzero_si256();
          sum_high[r][h] = _mm256_setzero_si256();
        }
      // Two halves of 16 terms, as in the AVX-512 kernel (each half's sum stays below 2^31).
      for (int k = 0; k < mma8::step_k / 2; ++k)
        for (int h = 0; h < halves; ++h) {
          const __m256 b = _mm256_loadu_ps(b_value + k * lanes + h * 8);
          for (int r = 0; r < R; ++r) {
            const __m256 q = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(rs[r].value[k]), b), factor[r][h]);
            sum_low[r][h] = _mm256_add_epi32(sum_low[r][h], _mm256_cvttps_epi32(q));
          }
        }
      for (int k = mma8::step_k / 2; k < mma8::step_k; ++k)
        for (int h = 0; h < halves; ++h) {
          const __m256 b = _mm256_loadu_ps(b_value + k * lanes + h * 8);
          for (int r = 0; r < R; ++r) {
            const __m256 q = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(rs[r].value[k]), b), factor[r][h]);
            sum_high[r][h] = _mm256_add_epi32(sum_high[r][h], _mm256_cvttps_epi32(q));
          }
        }
      for (int r = 0; r < R; ++r)
        for (int h = 0; h < halves; ++h) {
          // c in units of 2^(E_max - F), truncated: c * 2^(F - E_max) is exact in double.
          const __m256i c_shift = _mm256_sub_epi32(_mm256_set1_epi32(fraction), e_max[r][h]);
          const __m256 c = c_before[r][h];
          const __m128i c_low = _mm256_cvttpd_epi32(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(c)), double_power_of_two(low_half(c_shift))));
          const __m128i c_high = _mm256_cvttpd_epi32(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(c, 1)), double_power_of_two(high_half(c_shift))));
          const __m256i unit = _mm256_sub_epi32(e_max[r][h], _mm256_set1_epi32(fraction));
          _mm256_storeu_ps(acc + r * stride + h * 8, finish<Hopper>(sum_low[r][h], sum_high[r][h], _mm256_set_m128i(c_high, c_low), unit));
        }
      scalar_lanes<R>(blk, s, c_before, fallback, acc, stride);
    }
  }

  /// The step's pair dot products of R rows against the tile into partial (mma8::relaxed_step's
  /// partial sum: the odd element of each pair first).
  template <int R>
  static NVFP4_ALWAYS_INLINE void relaxed_partials(const column_tile& tile, const staged_row_step (&rs)[R], index_t s,
                                                   __m256 (&partial)[R][halves]) {
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < halves; ++h) partial[r][h] = _mm256_setzero_ps();
    const float* const b_value = tile.value.data() + s * mma8::step_k * lanes;
    for (int k = 0; k < mma8::step_k; k += 2) {
      __m256 odd[halves], even[halves];
      for (int h = 0; h < halves; ++h) {
        odd[h] = _mm256_loadu_ps(b_value + (k + 1) * lanes + h * 8);
        even[h] = _mm256_loadu_ps(b_value + k * lanes + h * 8);
      }
      for (int r = 0; r < R; ++r) {
        const __m256 a_odd = _mm256_set1_ps(rs[r].value[k + 1]), a_even = _mm256_set1_ps(rs[r].value[k]);
        for (int h = 0; h < halves; ++h) {
          partial[r][h] = _mm256_fmadd_ps(a_odd, odd[h], partial[r][h]);
          partial[r][h] = _mm256_fmadd_ps(a_even, even[h], partial[r][h]);
        }
      }
    }
  }

  template <int R>
  static void relaxed_steps(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
    const column_tile& tile = *blk.tiles[0];
    if (plain_block(blk)) {
      // Unscaled steps without NaN / Inf (operand_rows::plain, column_tile::plain): c + partial.
      for (index_t s = s0; s < s1; ++s) {
        staged_row_step rs[R];
        for (int r = 0; r < R; ++r) rs[r] = staged_row_at(blk, r, s);
        __m256 partial[R][halves];
        relaxed_partials<R>(tile, rs, s, partial);
        for (int r = 0; r < R; ++r)
          for (int h = 0; h < halves; ++h) {
            float* const out = acc + r * stride + h * 8;
            _mm256_storeu_ps(out, _mm256_add_ps(partial[r][h], _mm256_loadu_ps(out)));
          }
      }
      return;
    }
    if (finite_block(blk)) {
      // MXFP8 without NaN / Inf: fma(partial, 2^s_a * 2^s_b, c), nothing to redo.
      for (index_t s = s0; s < s1; ++s) {
        staged_row_step rs[R];
        for (int r = 0; r < R; ++r) rs[r] = staged_row_at(blk, r, s);
        __m256 partial[R][halves];
        relaxed_partials<R>(tile, rs, s, partial);
        const float* const row_scale = blk.a->scale_value.data() + blk.a->at(blk.i0(), s);  // row r at r * steps
        for (int h = 0; h < halves; ++h) {
          const __m256 col_scale = _mm256_loadu_ps(tile.scale_value.data() + s * lanes + h * 8);
          for (int r = 0; r < R; ++r) {
            float* const out = acc + r * stride + h * 8;
            const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(row_scale[r * blk.a->steps]), col_scale);
            _mm256_storeu_ps(out, _mm256_fmadd_ps(partial[r][h], scale, _mm256_loadu_ps(out)));
          }
        }
      }
      return;
    }
    for (index_t s = s0; s < s1; ++s) {
      staged_row_step rs[R];
      for (int r = 0; r < R; ++r) rs[r] = staged_row_at(blk, r, s);
      __m256 partial[R][halves];
      relaxed_partials<R>(tile, rs, s, partial);
      __m256 c_before[R][halves];
      int fallback[R][halves];
      const unsigned special_columns = tile.special[static_cast<std::size_t>(s)];
      for (int h = 0; h < halves; ++h) {
        const __m256i col_scale = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile.scale_exponent.data() + s * lanes + h * 8));
        for (int r = 0; r < R; ++r) {
          c_before[r][h] = _mm256_loadu_ps(acc + r * stride + h * 8);
          int in_range;
          const __m256 scale = float_power_of_two(_mm256_add_epi32(col_scale, _mm256_set1_epi32(rs[r].scale_exponent)), in_range);
          fallback[r][h] = (~in_range & 0xFF) | static_cast<int>(special_columns >> (8 * h) & 0xFF) | (rs[r].special ? 0xFF : 0);
          _mm256_storeu_ps(acc + r * stride + h * 8, _mm256_fmadd_ps(partial[r][h], scale, c_before[r][h]));
        }
      }
      scalar_lanes<R>(blk, s, c_before, fallback, acc, stride);
    }
  }
};

}  // namespace nvfp4::fp8_gemm_detail
NVFP4_END_INTRINSIC_CODE

#endif  // NVFP4_HAS_AVX2
