// nvfp4/formats/simd/stochastic_rounding_avx512.hpp: the stochastic E2M1 rounding rule of
// formats/stochastic_rounding.hpp on 16 lanes, with the same fp32 operations in the same order.
#pragma once

#include "nvfp4/config.hpp"

#if NVFP4_HAS_AVX512
#include <cstddef>
#include <cstdint>

#include "nvfp4/simd/x86_intrinsics.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::simd::avx512 {

/// Spacing of the E2M1 grid at each magnitude: 2 from 4 up, 1 from 2 up, else 0.5.
NVFP4_ALWAYS_INLINE __m512 e2m1_step(__m512 magnitude) {
  __m512 step = _mm512_set1_ps(0.5f);
  step = _mm512_mask_mov_ps(step, _mm512_cmp_ps_mask(magnitude, _mm512_set1_ps(2.0f), _CMP_GE_OQ), _mm512_set1_ps(1.0f));
  return _mm512_mask_mov_ps(step, _mm512_cmp_ps_mask(magnitude, _mm512_set1_ps(4.0f), _CMP_GE_OQ), _mm512_set1_ps(2.0f));
}

/// E2M1 codes (sign << 3 | magnitude index, one per 32-bit lane) of 16 values stochastically
/// rounded with 16 random bytes: t = fma(r / 256, step(|x|), |x|); q = min(floor(t / step(t)) *
/// step(t), 6). Values must be finite or ±Inf (never NaN).
NVFP4_ALWAYS_INLINE __m512i e2m1_stochastic_codes(__m512 x, __m128i random16) {
  const __m512 magnitude = _mm512_abs_ps(x);
  const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(random16)), _mm512_set1_ps(1.0f / 256.0f));
  const __m512 t = _mm512_fmadd_ps(u, e2m1_step(magnitude), magnitude);
  const __m512 step = e2m1_step(t);
  // t / step == t * (1 / step) exactly: 1 / step is 2 (t < 2: doubling never rounds), 1, or 1/2
  // (t >= 4: halving a normal never rounds), so the product replaces the slow divide.
  __m512 inverse_step = _mm512_set1_ps(2.0f);
  inverse_step = _mm512_mask_mov_ps(inverse_step, _mm512_cmp_ps_mask(t, _mm512_set1_ps(2.0f), _CMP_GE_OQ), _mm512_set1_ps(1.0f));
  inverse_step = _mm512_mask_mov_ps(inverse_step, _mm512_cmp_ps_mask(t, _mm512_set1_ps(4.0f), _CMP_GE_OQ), _mm512_set1_ps(0.5f));
  const __m512 floored = _mm512_roundscale_ps(_mm512_mul_ps(t, inverse_step), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __m512 q = _mm512_min_ps(_mm512_mul_ps(floored, step), _mm512_set1_ps(6.0f));
  // q is a grid point; 2 q is one of 0 1 2 3 4 6 8 12, which indexes the code table.
  const __m512i twice = _mm512_cvttps_epi32(_mm512_add_ps(q, q));
  const __m512i index_of_twice = _mm512_setr_epi32(0, 1, 2, 3, 4, 0, 5, 0, 6, 0, 0, 0, 7, 0, 0, 0);
  const __m512i index = _mm512_permutexvar_epi32(twice, index_of_twice);
  const __m512i sign_bit = _mm512_srli_epi32(_mm512_castps_si512(x), 31);
  return _mm512_or_si512(index, _mm512_slli_epi32(sign_bit, 3));
}

/// Packs 16 codes (one per 32-bit lane) into 8 bytes, element 2i in the low nibble of byte i.
NVFP4_ALWAYS_INLINE void store_packed_codes(__m512i codes, std::uint8_t* out) {
  const __m512i pairs = _mm512_and_si512(_mm512_or_si512(codes, _mm512_srli_epi64(codes, 28)), _mm512_set1_epi64(0xFF));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm512_cvtepi64_epi8(pairs));
}

/// Stochastically rounds x[c] * factors[c / BlockCols] to E2M1 with random[c] and packs the
/// codes two per byte into out, for c below n rounded down to 16; returns that count.
template <int BlockCols>
std::ptrdiff_t encode_e2m1_stochastic_scaled(const float* x, std::ptrdiff_t n, const float* factors,
                                             const std::uint8_t* random, std::uint8_t* out) {
  static_assert(BlockCols % 16 == 0, "16 lanes must share one block's factor");
  std::ptrdiff_t c = 0;
  for (; c + 16 <= n; c += 16) {
    const __m512 scaled = _mm512_mul_ps(_mm512_loadu_ps(x + c), _mm512_set1_ps(factors[c / BlockCols]));
    const __m128i random16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(random + c));
    store_packed_codes(e2m1_stochastic_codes(scaled, random16), out + c / 2);
  }
  return c;
}

/// max |x_i| of 16 floats (exact; the order of a max never matters).
NVFP4_ALWAYS_INLINE float abs_max16(const float* values) {
  return _mm512_reduce_max_ps(_mm512_abs_ps(_mm512_loadu_ps(values)));
}

}  // namespace nvfp4::simd::avx512
NVFP4_END_INTRINSIC_CODE
#endif
