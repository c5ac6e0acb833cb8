// nvfp4/gemm/simd/mma_avx512.hpp: the AVX-512 VNNI kernel of the block-scaled MMA. Each lane of a
// register is one output column j of a 16-column tile: vpdpbusd accumulates a group's exact sum
// for 16 outputs at once, and the fused step of §6 (align to the largest exponent, truncate to 35
// fractional bits, add exactly, round toward zero) runs in double precision, where every term and
// every partial sum is an exact integer multiple of the unit (< 2^47), so it is bit-exact.
#pragma once

#include "nvfp4/config.hpp"

#if NVFP4_HAS_AVX512_VNNI

#include <cstdint>
#include <cstring>
#include <vector>

#include "nvfp4/gemm/packing.hpp"
#include "nvfp4/simd/x86_intrinsics.hpp"

// GCC 12 flags its own AVX-512 intrinsics as reading uninitialized values (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace nvfp4::gemm_detail::avx512 {

inline constexpr int tile_n = 16;           // output columns per register
inline constexpr int max_tile_rows = 4;     // output rows sharing each loaded B register
inline constexpr int element_offset = 12;   // B bytes hold b2 + 12 >= 0 (vpdpbusd wants them unsigned)

/// One 16-column tile of B, rearranged for vpdpbusd: for step s, group g, quad q (4 elements),
/// 64 bytes = lane l holds elements g*16 + q*4 .. +3 of row j0 + l. `magnitudes` holds |b2| the
/// same way (to tell a group whose products are all zero from one that cancels), and the group
/// scales are spread per lane.
struct packed_b_tile {
  std::vector<std::uint8_t> offset_values;  // [steps][4 groups][4 quads][64]
  std::vector<std::uint8_t> magnitudes;     // same layout
  std::vector<double> m_eighths;            // [steps][4][16]
  std::vector<double> exponents;            // [steps][4][16], -1e9 for zero scales
  std::vector<float> values;                // [steps][4][16]
  std::vector<double> weights;              // [steps][4][16]
  std::vector<std::uint16_t> nan_lanes;     // [steps]: lanes with a NaN scale in that step
};

inline packed_b_tile pack_b_tile(const unpacked_operand& b, index_t j0) {
  const index_t steps = b.steps;
  packed_b_tile t;
  t.offset_values.resize(static_cast<std::size_t>(steps * 16 * 64));
  t.magnitudes.resize(t.offset_values.size());
  t.m_eighths.resize(static_cast<std::size_t>(steps * 4 * tile_n));
  t.exponents.resize(t.m_eighths.size());
  t.values.resize(t.m_eighths.size());
  t.weights.resize(t.m_eighths.size());
  t.nan_lanes.assign(static_cast<std::size_t>(steps), 0);
  for (index_t s = 0; s < steps; ++s)
    for (int lane = 0; lane < tile_n; ++lane) {
      const std::int8_t* row = b.row_values(j0 + lane) + s * mma::step_k;
      const group_scale* scales = b.row_scales(j0 + lane) + s * mma::groups_per_step;
      for (int g = 0; g < 4; ++g) {
        for (int q = 0; q < 4; ++q)
          for (int e = 0; e < 4; ++e) {
            const std::int8_t v = row[g * 16 + q * 4 + e];
            const std::size_t at = static_cast<std::size_t>(((s * 4 + g) * 4 + q) * 64 + lane * 4 + e);
            t.offset_values[at] = static_cast<std::uint8_t>(v + element_offset);
            t.magnitudes[at] = static_cast<std::uint8_t>(v < 0 ? -v : v);
          }
        const std::size_t at = static_cast<std::size_t>((s * 4 + g) * tile_n + lane);
        t.m_eighths[at] = scales[g].m_eighths;
        t.exponents[at] = scales[g].effective_exponent;
        t.values[at] = scales[g].value;
        t.weights[at] = scales[g].weight;
        if (scales[g].parts.is_nan) t.nan_lanes[static_cast<std::size_t>(s)] |= static_cast<std::uint16_t>(1u << lane);
      }
    }
  return t;
}

/// Rounds an exact double sum toward zero to fp32 as §6 step 6 does: |S| >= 2^128 is ±Inf (the
/// conversion alone would give FLT_MAX), an exact zero is +0.
inline __m256 round_toward_zero_8(__m512d exact) {
  __m256 result = _mm512_cvt_roundpd_ps(exact, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask8 overflow = _mm512_cmp_pd_mask(_mm512_abs_pd(exact), _mm512_set1_pd(0x1p128), _CMP_GE_OQ);
  const __m256 signed_inf = _mm256_or_ps(_mm256_set1_ps(__builtin_inff()), _mm256_and_ps(result, _mm256_set1_ps(-0.0f)));
  result = _mm256_mask_blend_ps(overflow, result, signed_inf);
  const __mmask8 is_zero = _mm512_cmp_pd_mask(exact, _mm512_setzero_pd(), _CMP_EQ_OQ);
  return _mm256_mask_blend_ps(is_zero, result, _mm256_setzero_ps());
}

/// The fused step's common case, for 8 lanes: when every non-zero term's lowest bit and c's lie
/// at or above 2^(E_max - 35), truncation removes nothing and the five terms add up exactly in
/// double (all are multiples of that unit, and the sum is below 2^49 units), so S is a plain fma
/// chain. Returns the lanes where that holds (the others need fused_step_8). E_max here counts
/// every group with a non-zero scale, also those whose products are all zero, which can only
/// make the test stricter: where it passes, both units give the same exact sum.
inline __mmask8 exact_fast_step_8(__m256 c, const __m256i* p4, const double* a_w, const double* a_e, const double* b_w,
                                  const double* b_e, __m256* out) {
  const __m512d c_d = _mm512_cvtps_pd(c);
  const __mmask8 c_is_zero = _mm512_cmp_pd_mask(c_d, _mm512_setzero_pd(), _CMP_EQ_OQ);
  const __m512d c_exponent = _mm512_max_pd(_mm512_getexp_pd(c_d), _mm512_set1_pd(-126.0));
  __m512d max_exponent = _mm512_mask_blend_pd(c_is_zero, c_exponent, _mm512_set1_pd(mma::zero_exponent));
  __m512d min_term_exponent = _mm512_set1_pd(1e9);
  __m512d sum = c_d;
  for (int g = 0; g < 4; ++g) {
    const __m512d e = _mm512_add_pd(_mm512_set1_pd(a_e[g]), _mm512_loadu_pd(b_e + g * tile_n));
    max_exponent = _mm512_max_pd(max_exponent, e);  // zero scales sit near -1e9: no effect
    const __mmask8 nonzero = _mm256_cmpneq_epi32_mask(p4[g], _mm256_setzero_si256());
    min_term_exponent = _mm512_mask_min_pd(min_term_exponent, nonzero, min_term_exponent, e);
    const __m512d weight = _mm512_mul_pd(_mm512_set1_pd(a_w[g]), _mm512_loadu_pd(b_w + g * tile_n));
    sum = _mm512_fmadd_pd(_mm512_cvtepi32_pd(p4[g]), weight, sum);
  }
  // A group term is a multiple of 2^(E_g - 8) (4 P_g times m_a m_b in 64ths), c of
  // 2^(E_c - 23): both are whole units of 2^(E_max - 35) when E_max - E_g <= 27 and
  // E_max - E_c <= 12.
  const __mmask8 terms_ok = _mm512_cmp_pd_mask(_mm512_sub_pd(max_exponent, min_term_exponent),
                                               _mm512_set1_pd(mma::fraction_bits - 8), _CMP_LE_OQ);
  const __mmask8 c_ok = static_cast<__mmask8>(
      c_is_zero | _mm512_cmp_pd_mask(_mm512_sub_pd(max_exponent, c_exponent), _mm512_set1_pd(mma::fraction_bits - 23),
                                     _CMP_LE_OQ));
  *out = round_toward_zero_8(sum);
  return static_cast<__mmask8>(terms_ok & c_ok);
}

/// The fused §6 step for 8 lanes (outputs) of one row: c is the accumulator, p4[g] the exact
/// doubled-squared group sums (4 * P_g), all_zero[g] the lanes whose group had no non-zero product.
inline __m256 fused_step_8(__m256 c, const __m256i* p4, const __mmask8* all_zero, const double* a_m, const double* a_e,
                           const double* b_m, const double* b_e) {
  const __m512d c_d = _mm512_cvtps_pd(c);
  const __m512d zero_exponent = _mm512_set1_pd(mma::zero_exponent);
  const __mmask8 c_is_zero = _mm512_cmp_pd_mask(c_d, _mm512_setzero_pd(), _CMP_EQ_OQ);
  __m512d max_exponent = _mm512_max_pd(_mm512_getexp_pd(c_d), _mm512_set1_pd(-126.0));
  max_exponent = _mm512_mask_blend_pd(c_is_zero, max_exponent, zero_exponent);
  __m512d group_exponent[4];
  for (int g = 0; g < 4; ++g) {
    // E_g = e_a + e_b, which E8M0 scales take far below -139; a zero scale (exponent -1e9)
    // or an all-zero group gets -139.
    __m512d e = _mm512_add_pd(_mm512_set1_pd(a_e[g]), _mm512_loadu_pd(b_e + g * tile_n));
    const __mmask8 zero_scale = _mm512_cmp_pd_mask(e, _mm512_set1_pd(-1e8), _CMP_LT_OQ);
    e = _mm512_mask_blend_pd(static_cast<__mmask8>(all_zero[g] | zero_scale), e, zero_exponent);
    group_exponent[g] = e;
    max_exponent = _mm512_max_pd(max_exponent, e);
  }
  const __m512d unit_shift = _mm512_sub_pd(_mm512_set1_pd(mma::fraction_bits), max_exponent);  // 35 - E_max
  constexpr int truncate = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
  __m512d sum = _mm512_roundscale_pd(_mm512_scalef_pd(c_d, unit_shift), truncate);
  for (int g = 0; g < 4; ++g) {
    const __m512d m = _mm512_mul_pd(_mm512_set1_pd(a_m[g]), _mm512_loadu_pd(b_m + g * tile_n));
    const __m512d term = _mm512_mul_pd(_mm512_cvtepi32_pd(p4[g]), m);  // 4 P_g * 64 m_a m_b: exact
    // term * 2^(E_g - 8) / 2^(E_max - 35): the 8 undoes the factors 4 and 64 above.
    const __m512d shift = _mm512_add_pd(_mm512_sub_pd(group_exponent[g], _mm512_set1_pd(8.0)), unit_shift);
    sum = _mm512_add_pd(sum, _mm512_roundscale_pd(_mm512_scalef_pd(term, shift), truncate));
  }
  // The sum is a whole number of units; the result is a multiple of 2^(E_max - 35), and only
  // an exact 0 sum can give a zero.
  return round_toward_zero_8(_mm512_scalef_pd(sum, _mm512_sub_pd(max_exponent, _mm512_set1_pd(mma::fraction_bits))));
}

/// Computes rows [i0, i0 + rows) x columns [j0, j0 + n_valid) of D over all steps.
template <int Rows>
void tile_kernel(const unpacked_operand& a, const std::int32_t* a_sums, const packed_b_tile& bt, index_t i0,
                 index_t j0, index_t n_valid, matrix_view<const float> c, matrix_view<float> d, bool exact) {
  const index_t steps = a.steps;
  __m512 acc[Rows];
  for (int r = 0; r < Rows; ++r) {
    if (c.empty()) {
      acc[r] = _mm512_setzero_ps();
    } else {
      alignas(64) float row[16] = {};
      for (index_t l = 0; l < n_valid; ++l) row[l] = c(i0 + r, j0 + l);
      acc[r] = _mm512_load_ps(row);
    }
  }
  const __m512i canonical_nan = _mm512_set1_epi32(0x7FFFFFFF);
  for (index_t s = 0; s < steps; ++s) {
    __m512i p[Rows][4];
    for (int r = 0; r < Rows; ++r)
      for (int g = 0; g < 4; ++g) p[r][g] = _mm512_setzero_si512();
    const std::uint8_t* b_bytes = bt.offset_values.data() + s * 16 * 64;
    for (int g = 0; g < 4; ++g)
      for (int q = 0; q < 4; ++q) {
        const __m512i b = _mm512_loadu_si512(b_bytes + (g * 4 + q) * 64);
        for (int r = 0; r < Rows; ++r) {
          std::int32_t word;
          std::memcpy(&word, a.row_values(i0 + r) + s * 64 + g * 16 + q * 4, 4);
          p[r][g] = _mm512_dpbusd_epi32(p[r][g], b, _mm512_set1_epi32(word));
        }
      }
    const double* b_m = bt.m_eighths.data() + s * 4 * tile_n;
    const double* b_e = bt.exponents.data() + s * 4 * tile_n;
    const float* b_v = bt.values.data() + s * 4 * tile_n;
    for (int r = 0; r < Rows; ++r) {
      const group_scale* a_scales = a.row_scales(i0 + r) + s * 4;
      const std::int32_t* sums = a_sums + ((i0 + r) * steps + s) * 4;
      __m512i p4[4];
      for (int g = 0; g < 4; ++g)  // undo the +12 offset of B: Σ a2 (b2 + 12) - 12 Σ a2
        p4[g] = _mm512_sub_epi32(p[r][g], _mm512_set1_epi32(element_offset * sums[g]));
      if (!exact) {
        for (int g = 0; g < 4; ++g) {
          const __m512 group_sum = _mm512_mul_ps(_mm512_cvtepi32_ps(p4[g]), _mm512_set1_ps(0.25f));
          const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(a_scales[g].value), _mm512_loadu_ps(b_v + g * tile_n));
          acc[r] = _mm512_fmadd_ps(group_sum, scale, acc[r]);
        }
        continue;
      }
      double a_m[4], a_e[4], a_w[4];
      bool a_nan = false;
      for (int g = 0; g < 4; ++g) {
        a_m[g] = a_scales[g].m_eighths;
        a_e[g] = a_scales[g].effective_exponent;
        a_w[g] = a_scales[g].weight;
        a_nan = a_nan || a_scales[g].parts.is_nan;
      }
      const double* b_w = bt.weights.data() + s * 4 * tile_n;
      __m256i p4_half[2][4];
      for (int g = 0; g < 4; ++g) {
        p4_half[0][g] = _mm512_castsi512_si256(p4[g]);
        p4_half[1][g] = _mm512_extracti64x4_epi64(p4[g], 1);
      }
      const __m256 c_half[2] = {_mm512_castps512_ps256(acc[r]),
                                _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r]), 1))};
      __m256 halves[2];
      __mmask8 fast_ok[2];
      for (int h = 0; h < 2; ++h)
        fast_ok[h] = exact_fast_step_8(c_half[h], p4_half[h], a_w, a_e, b_w + 8 * h, b_e + 8 * h, &halves[h]);
      if ((fast_ok[0] & fast_ok[1]) != 0xFF) {
        // Some lane truncates: run the full step, which needs to tell groups whose products are
        // all zero (alignment exponent -139) from cancelling ones (their scales' exponent).
        __mmask16 all_zero[4];
        for (int g = 0; g < 4; ++g) {
          all_zero[g] = _mm512_cmpeq_epi32_mask(p4[g], _mm512_setzero_si512());
          if (all_zero[g]) {
            __m512i count = _mm512_setzero_si512();
            for (int q = 0; q < 4; ++q) {
              std::int32_t word;
              std::memcpy(&word, a.row_values(i0 + r) + s * 64 + g * 16 + q * 4, 4);
              const __m512i a_abs = _mm512_abs_epi8(_mm512_set1_epi32(word));
              count = _mm512_dpbusd_epi32(count, _mm512_loadu_si512(bt.magnitudes.data() + (s * 16 + g * 4 + q) * 64), a_abs);
            }
            all_zero[g] &= _mm512_cmpeq_epi32_mask(count, _mm512_setzero_si512());
          }
        }
        for (int h = 0; h < 2; ++h) {
          __mmask8 zero_half[4];
          for (int g = 0; g < 4; ++g) zero_half[g] = static_cast<__mmask8>(all_zero[g] >> (8 * h));
          halves[h] = fused_step_8(c_half[h], p4_half[h], zero_half, a_m, a_e, b_m + 8 * h, b_e + 8 * h);
        }
      }
      __m512 result = _mm512_insertf32x8(_mm512_castps256_ps512(halves[0]), halves[1], 1);
      // §6 step 7: NaN scales or a NaN c give the canonical NaN; an infinite c passes through.
      const __mmask16 c_inf = _mm512_fpclass_ps_mask(acc[r], 0x18);
      const __mmask16 c_nan = _mm512_cmp_ps_mask(acc[r], acc[r], _CMP_UNORD_Q);
      result = _mm512_mask_blend_ps(c_inf, result, acc[r]);
      const __mmask16 nan_lanes = static_cast<__mmask16>(c_nan | bt.nan_lanes[static_cast<std::size_t>(s)] | (a_nan ? 0xFFFF : 0));
      acc[r] = _mm512_mask_blend_ps(nan_lanes, result, _mm512_castsi512_ps(canonical_nan));
    }
  }
  for (int r = 0; r < Rows; ++r) {
    alignas(64) float row[16];
    _mm512_store_ps(row, acc[r]);
    for (index_t l = 0; l < n_valid; ++l) d(i0 + r, j0 + l) = row[l];
  }
}

}  // namespace nvfp4::gemm_detail::avx512

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // NVFP4_HAS_AVX512_VNNI
