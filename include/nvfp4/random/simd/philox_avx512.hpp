// nvfp4/random/simd/philox_avx512.hpp: sixteen Philox4x32-10 blocks at once (one per 32-bit lane),
// the AVX-512 kernel behind fill_random_bytes. Same arithmetic as philox4x32_10, lane by lane.
#pragma once

#include "nvfp4/config.hpp"

#if NVFP4_HAS_AVX512

#include <cstdint>

#include "nvfp4/simd/x86_intrinsics.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::simd::avx512 {

/// High and low 32 bits of the 32x32 -> 64 products a[i] * m, for all 16 lanes.
NVFP4_ALWAYS_INLINE void multiply_wide(__m512i a, __m512i m, __m512i& high, __m512i& low) {
  const __m512i even = _mm512_mul_epu32(a, m);                        // lanes 0, 2, ..., 64-bit products
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);  // lanes 1, 3, ...
  high = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  low = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}

/// Writes the 256 random bytes of the 16 Philox blocks with counters (first_block + i, 0) under
/// `key`, block i at out + 16 * i (byte order as random_byte: word w, byte k -> 4 w + k).
inline void philox16_blocks(std::uint64_t first_block, std::uint32_t key0, std::uint32_t key1, std::uint8_t* out) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const auto base_low = static_cast<std::uint32_t>(first_block);
  const __m512i c0_start = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(base_low)), lane);
  // The high word of the 64-bit block index carries when the low word wraps inside the batch.
  const __m512i wrapped = _mm512_maskz_set1_epi32(_mm512_cmplt_epu32_mask(c0_start, _mm512_set1_epi32(static_cast<int>(base_low))), 1);
  __m512i c0 = c0_start;
  __m512i c1 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(first_block >> 32)), wrapped);
  __m512i c2 = _mm512_setzero_si512();
  __m512i c3 = _mm512_setzero_si512();
  const __m512i multiplier0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m512i multiplier1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
  std::uint32_t k0 = key0, k1 = key1;
  for (int round = 0; round < 10; ++round) {
    __m512i high0, low0, high1, low1;
    multiply_wide(c0, multiplier0, high0, low0);
    multiply_wide(c2, multiplier1, high1, low1);
    const __m512i next0 = _mm512_xor_si512(_mm512_xor_si512(high1, c1), _mm512_set1_epi32(static_cast<int>(k0)));
    const __m512i next2 = _mm512_xor_si512(_mm512_xor_si512(high0, c3), _mm512_set1_epi32(static_cast<int>(k1)));
    c0 = next0;
    c1 = low1;
    c2 = next2;
    c3 = low0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // 4x4 transpose inside each 128-bit lane: afterwards block 4 j + k sits in lane j of rows[k].
  const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
  const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
  const __m512i rows[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                           _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
  // Gather the four 128-bit blocks of each output quarter: quarter j = blocks 4 j .. 4 j + 3.
  const __m512i q01 = _mm512_shuffle_i32x4(rows[0], rows[1], 0x44);  // r0.l0 r0.l1 r1.l0 r1.l1
  const __m512i q23 = _mm512_shuffle_i32x4(rows[2], rows[3], 0x44);  // r2.l0 r2.l1 r3.l0 r3.l1
  const __m512i h01 = _mm512_shuffle_i32x4(rows[0], rows[1], 0xEE);  // r0.l2 r0.l3 r1.l2 r1.l3
  const __m512i h23 = _mm512_shuffle_i32x4(rows[2], rows[3], 0xEE);
  // blocks 0..3 = r0.l0 r1.l0 r2.l0 r3.l0; blocks 4..7 = r0.l1 r1.l1 r2.l1 r3.l1; ...
  _mm512_storeu_si512(out + 0, _mm512_shuffle_i32x4(q01, q23, 0x88));
  _mm512_storeu_si512(out + 64, _mm512_shuffle_i32x4(q01, q23, 0xDD));
  _mm512_storeu_si512(out + 128, _mm512_shuffle_i32x4(h01, h23, 0x88));
  _mm512_storeu_si512(out + 192, _mm512_shuffle_i32x4(h01, h23, 0xDD));
}

}  // namespace nvfp4::simd::avx512
NVFP4_END_INTRINSIC_CODE

#endif
