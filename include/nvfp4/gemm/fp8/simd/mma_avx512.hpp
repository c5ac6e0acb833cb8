// nvfp4/gemm/simd/fp8_mma_avx512.hpp: AVX-512 kernels of the FP8 / MXFP8 tensor-core steps, 16
// output columns per vector and up to four rows per block, bit-identical to mma8::step and
// mma8::relaxed_step.
//
// Exact step (docs/numerics_spec.md §9): per lane E_max = max(E_c, max_k(e_a + e_b) + s_a + s_b) (the pair
// maximum is skipped when the row and column maxima cannot reach E_c); each product a_k * b_k is
// exact in fp32, multiplied by 2^(F - E_max + s_a + s_b) (a normal float, so exact) and truncated
// to an integer (vcvttps2dq): that is the term truncated to a multiple of 2^(E_max - F), counted
// in those units. Where that power of two is not a normal float every term is 0, and the factor
// 0 gives it: above 2^127 means E_max - s_a - s_b < F - 127, so no product is nonzero (a nonzero
// FP8 product is at least 2^-32 and E_max bounds every product's exponent plus s_a + s_b); below
// 2^-126 every |product| (under 2^32) times it is below 1.
// The integer sums are exact: below 2^20 on Hopper (F = 13), two halves of 16 terms below 2^31 on
// Blackwell (F = 25), added in double. The result is the sum times 2^(E_max - F), cut to 13
// fraction bits (Hopper: exact in fp32, then the low 10 bits cleared) or converted to fp32 toward
// zero (Blackwell), an overflow giving Inf. Lanes whose step has a NaN / Inf code, a NaN scale or
// a non-finite c go through the scalar step.
//
// Relaxed step: the pair dot product of mma8::relaxed_step, by VDPBF16PS where the build has
// AVX512_BF16 (one rounding per pair product, odd element first, as the instruction does), else
// by two FMAs per pair in the same order; then c + partial where the block is plain (unscaled, no
// NaN / Inf), fma(partial, 2^s_a * 2^s_b, c) where it is finite (the product of two exact powers
// of two rounds as the model's float(2^(s_a + s_b))), else the general step with its fallback.
#pragma once

#include <algorithm>
#include <cstdint>

#include "nvfp4/config.hpp"
#include "nvfp4/gemm/detail/fp8_layout.hpp"

#if NVFP4_HAS_AVX512

#include "nvfp4/simd/x86_intrinsics.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::fp8_gemm_detail::simd_fp8 {

/// Lanes whose step the vector path does not handle (NaN / Inf codes, NaN scales, non-finite c),
/// redone by the scalar step from the lane's c before the step.
template <int R, int C>
NVFP4_ALWAYS_INLINE void scalar_lanes(const step_block& blk, index_t s, const __m512 (&c_before)[R][C], const __mmask16 (&mask)[R][C],
                                      float* acc, index_t stride) {
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < C; ++t) {
      if (!mask[r][t]) continue;
      alignas(64) float before[16];
      _mm512_store_ps(before, c_before[r][t]);
      for (int lane = 0; lane < blk.tiles[t]->columns; ++lane)
        if (mask[r][t] >> lane & 1) acc[r * stride + t * lanes + lane] = scalar_step(blk, r, t, lane, s, before[lane]);
    }
}

/// E_c = max(floor(log2 |c|), -126) from the bits (0 gives -126), and the non-finite lanes.
NVFP4_ALWAYS_INLINE __m512i accumulator_exponent(__m512 c, __mmask16& non_finite) {
  const __m512i biased = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(c), 23), _mm512_set1_epi32(0xFF));
  non_finite = _mm512_cmpeq_epi32_mask(biased, _mm512_set1_epi32(0xFF));
  return _mm512_sub_epi32(_mm512_max_epi32(biased, _mm512_set1_epi32(1)), _mm512_set1_epi32(127));
}

/// The step's result from the exact integer sums (units of 2^(E_max - F)).
template <bool Hopper>
NVFP4_ALWAYS_INLINE __m512 finish(__m512i sum_low, __m512i sum_high, __m512i c_units, __m512i unit) {
  if constexpr (Hopper) {
    const __m512i total = _mm512_add_epi32(_mm512_add_epi32(sum_low, sum_high), c_units);  // below 2^21
    const __m512 exact = _mm512_scalef_ps(_mm512_cvtepi32_ps(total), _mm512_cvtepi32_ps(unit));
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(exact), _mm512_set1_epi32(~0x3FF)));
  } else {
    __m256 halves[2];
    for (int h = 0; h < 2; ++h) {
      const auto half = [h](__m512i v) { return h == 0 ? _mm512_castsi512_si256(v) : _mm512_extracti64x4_epi64(v, 1); };
      const __m512d total =
          _mm512_add_pd(_mm512_add_pd(_mm512_cvtepi32_pd(half(sum_low)), _mm512_cvtepi32_pd(half(sum_high))), _mm512_cvtepi32_pd(half(c_units)));
      const __m512d exact = _mm512_scalef_pd(total, _mm512_cvtepi32_pd(half(unit)));
      const __mmask8 overflow = _mm512_cmp_pd_mask(_mm512_abs_pd(exact), _mm512_set1_pd(0x1p128), _CMP_GE_OQ);
      const __m256 rounded = _mm512_cvt_roundpd_ps(exact, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m256 infinity = _mm256_or_ps(_mm256_and_ps(rounded, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(__builtin_inff()));
      halves[h] = _mm256_mask_blend_ps(overflow, rounded, infinity);
    }
    return _mm512_insertf32x8(_mm512_castps256_ps512(halves[0]), halves[1], 1);
  }
}

template <int R, int C, bool Hopper>
void exact_steps(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
  constexpr int fraction = Hopper ? 13 : 25;
  for (index_t s = s0; s < s1; ++s) {
    staged_row_step rs[R];
    for (int r = 0; r < R; ++r) rs[r] = staged_row_at(blk, r, s);
    const float* b_value[C];
    const std::int8_t* b_exponent[C];
    __m512 c_before[R][C];
    __m512i e_max[R][C], scale_sum[R][C];
    __mmask16 fallback[R][C];
    bool pair_max_needed = false;
    for (int t = 0; t < C; ++t) {
      const column_tile& tile = *blk.tiles[t];
      b_value[t] = tile.value.data() + s * mma8::step_k * lanes;
      b_exponent[t] = tile.exponent.data() + s * mma8::step_k * lanes;
      const __m512i col_max = _mm512_loadu_si512(tile.max_exponent.data() + s * lanes);
      const __m512i col_scale = _mm512_loadu_si512(tile.scale_exponent.data() + s * lanes);
      for (int r = 0; r < R; ++r) {
        c_before[r][t] = _mm512_loadu_ps(acc + r * stride + t * lanes);
        __mmask16 non_finite;
        e_max[r][t] = accumulator_exponent(c_before[r][t], non_finite);
        scale_sum[r][t] = _mm512_add_epi32(col_scale, _mm512_set1_epi32(rs[r].scale_exponent));
        fallback[r][t] = static_cast<__mmask16>(non_finite | tile.special[static_cast<std::size_t>(s)] | (rs[r].special ? 0xFFFF : 0));
        const __m512i bound = _mm512_add_epi32(_mm512_add_epi32(col_max, _mm512_set1_epi32(rs[r].max_exponent)), scale_sum[r][t]);
        pair_max_needed = pair_max_needed || _mm512_cmpgt_epi32_mask(bound, e_max[r][t]) != 0;
      }
    }
    // E_max is c's exponent unless a product can reach above it: then the pair maximum decides.
    if (pair_max_needed) {
      __m512i pair_max[R][C];
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < C; ++t) pair_max[r][t] = _mm512_set1_epi32(-1024);
      for (int k = 0; k < mma8::step_k; ++k)
        for (int t = 0; t < C; ++t) {
          const __m512i eb = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b_exponent[t] + k * lanes)));
          for (int r = 0; r < R; ++r)
            pair_max[r][t] = _mm512_max_epi32(pair_max[r][t], _mm512_add_epi32(eb, _mm512_set1_epi32(rs[r].exponent[k])));
        }
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < C; ++t) e_max[r][t] = _mm512_max_epi32(e_max[r][t], _mm512_add_epi32(pair_max[r][t], scale_sum[r][t]));
    }
    // Products scale by 2^(F - E_max + s_a + s_b), c by 2^(F - E_max); both truncate to integers.
    // The products' factor is a float multiplier (vmulps runs at twice vscalefps's rate on Zen 4),
    // 0 where it is not a normal float: every term is 0 there (header comment).
    __m512 product_factor[R][C];
    __m512i sum_low[R][C], sum_high[R][C];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < C; ++t) {
        const __m512i shift = _mm512_sub_epi32(_mm512_set1_epi32(fraction), e_max[r][t]);
        const __m512i product_exponent = _mm512_add_epi32(shift, scale_sum[r][t]);
        const __mmask16 normal = _mm512_cmpgt_epi32_mask(product_exponent, _mm512_set1_epi32(-127)) &
                                 _mm512_cmplt_epi32_mask(product_exponent, _mm512_set1_epi32(128));
        product_factor[r][t] = _mm512_castsi512_ps(
            _mm512_maskz_slli_epi32(normal, _mm512_add_epi32(product_exponent, _mm512_set1_epi32(127)), 23));
        sum_low[r][t] = _mm512_setzero_si512();
        sum_high[r][t] = _mm512_setzero_si512();
      }
    // Two halves of 16 terms: each half's integer sum stays below 2^31 even with F = 25.
    for (int k = 0; k < mma8::step_k / 2; ++k)
      for (int t = 0; t < C; ++t) {
        const __m512 b = _mm512_loadu_ps(b_value[t] + k * lanes);
        for (int r = 0; r < R; ++r) {
          const __m512 q = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(rs[r].value[k]), b), product_factor[r][t]);
          sum_low[r][t] = _mm512_add_epi32(sum_low[r][t], _mm512_cvttps_epi32(q));
        }
      }
    for (int k = mma8::step_k / 2; k < mma8::step_k; ++k)
      for (int t = 0; t < C; ++t) {
        const __m512 b = _mm512_loadu_ps(b_value[t] + k * lanes);
        for (int r = 0; r < R; ++r) {
          const __m512 q = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(rs[r].value[k]), b), product_factor[r][t]);
          sum_high[r][t] = _mm512_add_epi32(sum_high[r][t], _mm512_cvttps_epi32(q));
        }
      }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < C; ++t) {
        const __m512 c_shift = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_set1_epi32(fraction), e_max[r][t]));
        const __m512i c_units = _mm512_cvttps_epi32(_mm512_scalef_ps(c_before[r][t], c_shift));
        const __m512i unit = _mm512_sub_epi32(e_max[r][t], _mm512_set1_epi32(fraction));
        _mm512_storeu_ps(acc + r * stride + t * lanes, finish<Hopper>(sum_low[r][t], sum_high[r][t], c_units, unit));
      }
    scalar_lanes<R, C>(blk, s, c_before, fallback, acc, stride);
  }
}

/// The step's pair dot products of R rows against C tiles into partial (mma8::relaxed_step's
/// partial sum).
template <int R, int C>
NVFP4_ALWAYS_INLINE void relaxed_partials(const step_block& blk, const staged_row_step (&rs)[R], index_t s, __m512 (&partial)[R][C]) {
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < C; ++t) partial[r][t] = _mm512_setzero_ps();
#if defined(__AVX512BF16__)
  const std::uint32_t* b_pair[C];
  for (int t = 0; t < C; ++t) b_pair[t] = blk.tiles[t]->pair.data() + s * (mma8::step_k / 2) * lanes;
  for (int q = 0; q < mma8::step_k / 2; ++q) {
    __m512bh b[C];
    for (int t = 0; t < C; ++t) b[t] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b_pair[t] + q * lanes));
    for (int r = 0; r < R; ++r) {
      const __m512bh a = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(rs[r].pair[q])));
      for (int t = 0; t < C; ++t) partial[r][t] = _mm512_dpbf16_ps(partial[r][t], a, b[t]);
    }
  }
#else
  const float* b_value[C];
  for (int t = 0; t < C; ++t) b_value[t] = blk.tiles[t]->value.data() + s * mma8::step_k * lanes;
  for (int k = 0; k < mma8::step_k; k += 2) {
    __m512 odd[C], even[C];
    for (int t = 0; t < C; ++t) {
      odd[t] = _mm512_loadu_ps(b_value[t] + (k + 1) * lanes);
      even[t] = _mm512_loadu_ps(b_value[t] + k * lanes);
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < C; ++t) {
        partial[r][t] = _mm512_fmadd_ps(_mm512_set1_ps(rs[r].value[k + 1]), odd[t], partial[r][t]);
        partial[r][t] = _mm512_fmadd_ps(_mm512_set1_ps(rs[r].value[k]), even[t], partial[r][t]);
      }
  }
#endif
}

template <int R, int C>
void relaxed_steps(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
  if (plain_block(blk)) {
    // Every per-tensor FP8 block without NaN / Inf: c + partial per step, nothing else to test.
    for (index_t s = s0; s < s1; ++s) {
      staged_row_step rs[R];
      for (int r = 0; r < R; ++r) rs[r] = staged_row_at(blk, r, s);
      __m512 partial[R][C];
      relaxed_partials<R, C>(blk, rs, s, partial);
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < C; ++t) {
          float* const out = acc + r * stride + t * lanes;
          _mm512_storeu_ps(out, _mm512_add_ps(partial[r][t], _mm512_loadu_ps(out)));
        }
    }
    return;
  }
  // The plain and finite loops stay two loops: one template over both (if constexpr on the
  // scale) compiled to slower code (docs/benchmarks.md, "Figures behind code choices").
  if (finite_block(blk)) {
    // MXFP8 without NaN / Inf: fma(partial, 2^(s_a + s_b), c), nothing to redo.
    for (index_t s = s0; s < s1; ++s) {
      staged_row_step rs[R];
      for (int r = 0; r < R; ++r) rs[r] = staged_row_at(blk, r, s);
      __m512 partial[R][C];
      relaxed_partials<R, C>(blk, rs, s, partial);
      // Row r's scale at row_scale[r * steps], read where it is used (held across the partial
      // sums, the row scales took the registers of B's pairs).
      const float* const row_scale = blk.a->scale_value.data() + blk.a->at(blk.i0(), s);
      for (int t = 0; t < C; ++t) {
        const __m512 col_scale = _mm512_loadu_ps(blk.tiles[t]->scale_value.data() + s * lanes);
        for (int r = 0; r < R; ++r) {
          float* const out = acc + r * stride + t * lanes;
          const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(row_scale[r * blk.a->steps]), col_scale);
          _mm512_storeu_ps(out, _mm512_fmadd_ps(partial[r][t], scale, _mm512_loadu_ps(out)));
        }
      }
    }
    return;
  }
  for (index_t s = s0; s < s1; ++s) {
    staged_row_step rs[R];
    for (int r = 0; r < R; ++r) rs[r] = staged_row_at(blk, r, s);
    __m512 partial[R][C];
    relaxed_partials<R, C>(blk, rs, s, partial);
    __m512 c_before[R][C];
    __mmask16 fallback[R][C];
    for (int t = 0; t < C; ++t) {
      const __m512i col_scale = _mm512_loadu_si512(blk.tiles[t]->scale_exponent.data() + s * lanes);
      for (int r = 0; r < R; ++r) {
        c_before[r][t] = _mm512_loadu_ps(acc + r * stride + t * lanes);
        fallback[r][t] = static_cast<__mmask16>(blk.tiles[t]->special[static_cast<std::size_t>(s)] | (rs[r].special ? 0xFFFF : 0));
        const __m512 scale =
            _mm512_scalef_ps(_mm512_set1_ps(1.0f), _mm512_cvtepi32_ps(_mm512_add_epi32(col_scale, _mm512_set1_epi32(rs[r].scale_exponent))));
        _mm512_storeu_ps(acc + r * stride + t * lanes, _mm512_fmadd_ps(partial[r][t], scale, c_before[r][t]));
      }
    }
    scalar_lanes<R, C>(blk, s, c_before, fallback, acc, stride);
  }
}

/// The exact kernel keeps more per output than the relaxed one: at most 4 rows x 1 tile a call.
template <int R>
void exact_rows(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
  for (int t = 0; t < blk.tile_count; ++t) {
    step_block one = blk;
    one.tiles[0] = blk.tiles[t];
    one.j0[0] = blk.j0[t];
    one.tile_count = 1;
    if (blk.core == mma8::tensor_core::hopper) {
      exact_steps<R, 1, true>(one, s0, s1, acc + t * lanes, stride);
    } else {
      exact_steps<R, 1, false>(one, s0, s1, acc + t * lanes, stride);
    }
  }
}

/// relaxed_steps<blk.rows, C>, for 1 <= blk.rows <= R.
template <int C, int R>
void relaxed_rows(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
  if constexpr (R > 1) {
    if (blk.rows < R) return relaxed_rows<C, R - 1>(blk, s0, s1, acc, stride);
  }
  relaxed_steps<R, C>(blk, s0, s1, acc, stride);
}

/// Runs steps [s0, s1) of the block with the AVX-512 kernels (acc as in fp8_gemm_detail::run_steps).
inline void run_steps(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
  if (blk.mode == gemm_mode::relaxed) {
    // Up to 8 rows by 2 tiles, or 4 rows by 3-4 tiles: 16 accumulators either way, and the wide
    // block loads one row pair per 4 VDPBF16PS instead of per 2 (faster: docs/benchmarks.md, "Figures behind code choices").
    if (blk.tile_count <= 2) {
      if (blk.tile_count == 2) {
        relaxed_rows<2, 8>(blk, s0, s1, acc, stride);
      } else {
        relaxed_rows<1, 8>(blk, s0, s1, acc, stride);
      }
      return;
    }
    for (int r0 = 0; r0 < blk.rows; r0 += 4) {
      step_block part = blk;
      part.row_offset = blk.row_offset + r0;
      part.rows = std::min(4, blk.rows - r0);
      if (blk.tile_count == 4) {
        relaxed_rows<4, 4>(part, s0, s1, acc + r0 * stride, stride);
      } else {
        relaxed_rows<3, 4>(part, s0, s1, acc + r0 * stride, stride);
      }
    }
    return;
  }
  for (int r0 = 0; r0 < blk.rows; r0 += 4) {
    step_block part = blk;
    part.row_offset = blk.row_offset + r0;
    part.rows = std::min(4, blk.rows - r0);
    float* out = acc + r0 * stride;
    switch (part.rows) {
      case 4: exact_rows<4>(part, s0, s1, out, stride); break;
      case 3: exact_rows<3>(part, s0, s1, out, stride); break;
      case 2: exact_rows<2>(part, s0, s1, out, stride); break;
      default: exact_rows<1>(part, s0, s1, out, stride); break;
    }
  }
}

}  // namespace nvfp4::fp8_gemm_detail::simd_fp8

namespace nvfp4::fp8_gemm_detail {

template <isa Isa>
struct fp8_step_kernels;

/// The AVX-512 step kernels (simd/dispatch.hpp's fp8_gemm_isa picks them).
template <>
struct fp8_step_kernels<isa::avx512> {
  /// The staged parts the kernels read: values and exponents for the exact step; bf16 pairs for
  /// the relaxed one where VDPBF16PS runs it, else values.
  static constexpr staged_parts staging(gemm_mode mode) {
    if (mode == gemm_mode::exact) return {.value = true, .exponent = true};
#if defined(__AVX512BF16__)
    return {.pair = true};
#else
    return {.value = true};
#endif
  }
  static void run_steps(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
    simd_fp8::run_steps(blk, s0, s1, acc, stride);
  }
};

}  // namespace nvfp4::fp8_gemm_detail

#endif  // NVFP4_HAS_AVX512
NVFP4_END_INTRINSIC_CODE
