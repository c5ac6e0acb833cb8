// nvfp4/transforms/simd/hadamard_avx512.hpp: the Hadamard transform of 8 blocks at once (one per
// double lane) by the fast Walsh-Hadamard transform, and the double -> bf16 RNE rounding on 8
// lanes. Exact whenever the guard passes; lanes it rejects are redone by the exact reference.
#pragma once

#include "nvfp4/config.hpp"

#if NVFP4_HAS_AVX512

#include <cstdint>
#include <type_traits>

#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/simd/x86_intrinsics.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::simd::avx512 {

/// Eight consecutive inputs widened to double (exact).
template <class T>
NVFP4_ALWAYS_INLINE __m512d load8_as_double(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm512_cvtps_pd(_mm256_loadu_ps(p));
  } else {
    const __m256i widened = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16);
    return _mm512_cvtps_pd(_mm256_castsi256_ps(widened));
  }
}

/// bf16 bits of 8 doubles, each rounded once to nearest even: the lane-wise twin of
/// detail::bf16_bits_from_double_rne (same integer steps).
NVFP4_ALWAYS_INLINE __m128i bf16_bits_from_double_rne(__m512d y) {
  const __m512i bits = _mm512_castpd_si512(y);
  const __m512i sign = _mm512_slli_epi64(_mm512_srli_epi64(bits, 63), 15);
  const __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll));
  const __mmask8 zero = _mm512_cmpeq_epi64_mask(magnitude, _mm512_setzero_si512());
  const __m512i one = _mm512_set1_epi64(1);
  const __m512i mantissa = _mm512_or_si512(_mm512_and_si512(magnitude, _mm512_set1_epi64(0xFFFFFFFFFFFFFll)), _mm512_set1_epi64(1ll << 52));
  const __m512i msb = _mm512_sub_epi64(_mm512_srli_epi64(magnitude, 52), _mm512_set1_epi64(1023));
  const __m512i lsb = _mm512_max_epi64(_mm512_sub_epi64(msb, _mm512_set1_epi64(7)), _mm512_set1_epi64(-133));
  const __m512i shift = _mm512_min_epi64(_mm512_add_epi64(_mm512_sub_epi64(lsb, msb), _mm512_set1_epi64(52)), _mm512_set1_epi64(54));
  __m512i kept = _mm512_srlv_epi64(mantissa, shift);
  const __m512i rest = _mm512_and_si512(mantissa, _mm512_sub_epi64(_mm512_sllv_epi64(one, shift), one));
  const __m512i half = _mm512_sllv_epi64(one, _mm512_sub_epi64(shift, one));
  const __mmask8 up = _mm512_cmpgt_epu64_mask(rest, half) |
                      (_mm512_cmpeq_epi64_mask(rest, half) & _mm512_test_epi64_mask(kept, one));
  kept = _mm512_mask_add_epi64(kept, up, kept, one);
  __m512i code = _mm512_sub_epi64(_mm512_add_epi64(_mm512_slli_epi64(_mm512_add_epi64(lsb, _mm512_set1_epi64(134)), 7), kept),
                                  _mm512_set1_epi64(128));
  code = _mm512_min_epi64(code, _mm512_set1_epi64(0x7F80));
  code = _mm512_mask_mov_epi64(code, zero, _mm512_setzero_si512());
  return _mm512_cvtepi64_epi16(_mm512_or_si512(code, sign));
}

/// The butterflies of the unnormalized Walsh-Hadamard transform from span H up: afterwards
/// v[j] = Σ_i (-1)^popcount(i & j) v_in[i], with only additions and subtractions.
template <int N, int H>
NVFP4_ALWAYS_INLINE void fwht_stages(__m512d* v) {
  if constexpr (H < N) {
#pragma GCC unroll 16
    for (int p = 0; p < N / 2; ++p) {
      const int k = p / H * 2 * H + p % H;  // the lower index of the p-th butterfly pair
      const __m512d a = v[k], b = v[k + H];
      v[k] = _mm512_add_pd(a, b);
      v[k + H] = _mm512_sub_pd(a, b);
    }
    fwht_stages<N, 2 * H>(v);
  }
}

/// What the 8-lane kernel needs to know about the transform.
struct hadamard_kernel_params {
  const double* signs;  ///< s_i as +-1.0, n entries
  bool inverse;         ///< x = y * Tᵀ instead of y = x * T
  bool exact_scale;     ///< 1/sqrt(n) is 2^-k
  double scale;         ///< 2^-k, or RN(1/sqrt(n))
  double guard_ratio;   ///< the lane is exact when max|x| <= guard_ratio * min nonzero |x|
};

/// Transforms 8 blocks of N elements: block `lane` is source[i * i_stride + lane], i < N.
/// Writes the bf16 bits of output j of block `lane` to out_bits[j * 8 + lane]. Returns the lanes
/// whose result may be inexact (exponent spread beyond the guard) or whose input holds NaN/Inf;
/// `non_finite` gets the latter. The double sums are exact for every other lane: all partial sums
/// are multiples of the smallest input ulp and below 2^53 of it.
template <int N, class T>
inline __mmask8 hadamard_panel8(const T* source, std::ptrdiff_t i_stride, const hadamard_kernel_params& params,
                                std::uint16_t* out_bits, __mmask8& non_finite) {
  __m512d v[N];
  const __m512d infinity = _mm512_set1_pd(__builtin_inf());
  __m512d largest = _mm512_setzero_pd(), smallest = infinity;
  __mmask8 bad = 0;
#pragma GCC unroll 16
  for (int i = 0; i < N; ++i) {
    const __m512d x = load8_as_double(source + i * i_stride);
    const __m512d magnitude = _mm512_abs_pd(x);
    bad |= _mm512_cmp_pd_mask(magnitude, infinity, _CMP_NLT_UQ);
    largest = _mm512_max_pd(largest, magnitude);
    smallest = _mm512_mask_min_pd(smallest, _mm512_cmp_pd_mask(magnitude, _mm512_setzero_pd(), _CMP_NEQ_UQ), smallest, magnitude);
    v[i] = params.inverse ? x : _mm512_mul_pd(x, _mm512_set1_pd(params.signs[i]));
  }
  fwht_stages<N, 1>(v);
  const __m512d scale = _mm512_set1_pd(params.scale);
#pragma GCC unroll 16
  for (int j = 0; j < N; ++j) {
    __m512d y = params.inverse ? _mm512_mul_pd(v[j], _mm512_set1_pd(params.signs[j])) : v[j];
    // + 0.0: an exact zero sum is +0 in the reference, where the butterflies can leave -0.
    y = _mm512_add_pd(_mm512_mul_pd(y, scale), _mm512_setzero_pd());
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out_bits + 8 * j), bf16_bits_from_double_rne(y));
  }
  non_finite = bad;
  const __mmask8 exact = _mm512_cmp_pd_mask(largest, _mm512_mul_pd(smallest, _mm512_set1_pd(params.guard_ratio)), _CMP_LE_OQ);
  return static_cast<__mmask8>(~exact | bad);
}

}  // namespace nvfp4::simd::avx512
NVFP4_END_INTRINSIC_CODE
#endif
