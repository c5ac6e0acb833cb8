// nvfp4/transforms/simd/hadamard16_quantize_avx512.hpp: NVFP4 1x16 quantization straight from
// transformed tiles (simd/hadamard16_avx512.hpp): each lane's 16 outputs are one block of the
// columnwise copy, so block amax, scale and element codes need no transpose; only the packed
// codes are transposed to rows. The fp32 operations are the RN fast path's, lane for lane.
#pragma once

#include "nvfp4/config.hpp"

#if NVFP4_HAS_AVX512
#include <cstddef>
#include <cstdint>

#include "nvfp4/scaling/block_format.hpp"
#include "nvfp4/simd/dispatch.hpp"
#include "nvfp4/simd/x86_intrinsics.hpp"
#include "nvfp4/transforms/simd/hadamard16_avx512.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::simd::avx512 {

/// The E2M1 codes of one tile packed two per byte along each lane: byte k of lane l holds
/// outputs 2k (low nibble) and 2k + 1 of block l; returned as 8 bytes per lane in two registers
/// (bytes 0-3 and 4-7). The block's UE4M3 scale code goes to scale_codes[l].
NVFP4_ALWAYS_INLINE void hadamard16_quantize_tile(const hadamard16_tile& tile, tensor_scale scale, __m512i packed[2],
                                                  std::uint8_t* scale_codes) {
  constexpr minifloat_traits element_traits = nvfp4_1x16::element_type::traits;
  alignas(64) std::uint32_t amax_bits[16];
  alignas(64) float factors[16];
  _mm512_store_si512(amax_bits, hadamard16_lane_abs_max_float_bits(hadamard16_abs_max(_mm512_setzero_si512(), tile)));
  kernels::nvfp4_block_scales(amax_bits, 16, scale, scale_codes, factors);
  const __m512 factor = _mm512_load_ps(factors);
  const __m512i high_half = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m512i bytes[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(tile.rounded_pairs[k], 16));
    const __m512 odd = _mm512_castsi512_ps(_mm512_and_si512(tile.rounded_pairs[k], high_half));
    const __m512i even_code = kernels::encode_bits<element_traits, overflow_policy::saturate>(_mm512_castps_si512(_mm512_mul_ps(even, factor)));
    const __m512i odd_code = kernels::encode_bits<element_traits, overflow_policy::saturate>(_mm512_castps_si512(_mm512_mul_ps(odd, factor)));
    bytes[k] = _mm512_or_si512(even_code, _mm512_slli_epi32(odd_code, 4));
  }
  for (int h = 0; h < 2; ++h)
    packed[h] = _mm512_or_si512(_mm512_or_si512(bytes[4 * h], _mm512_slli_epi32(bytes[4 * h + 1], 8)),
                                _mm512_or_si512(_mm512_slli_epi32(bytes[4 * h + 2], 16), _mm512_slli_epi32(bytes[4 * h + 3], 24)));
}

/// Writes the packed codes of one or two tiles as rows: lane l's 8 bytes (then the second tile's
/// 8) at out + l * out_stride, by a 4x16 transpose of 32-bit words.
NVFP4_ALWAYS_INLINE void hadamard16_store_packed_rows(const __m512i first[2], const __m512i* second, std::uint8_t* out,
                                                      std::ptrdiff_t out_stride) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i t0 = _mm512_unpacklo_epi32(first[0], first[1]), t1 = _mm512_unpackhi_epi32(first[0], first[1]);
  const __m512i t2 = second ? _mm512_unpacklo_epi32(second[0], second[1]) : zero;
  const __m512i t3 = second ? _mm512_unpackhi_epi32(second[0], second[1]) : zero;
  // 128-bit lane q of rows[i] is lane 4 q + i's 16 bytes.
  const __m512i rows[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                           _mm512_unpackhi_epi64(t1, t3)};
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q)
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      __m128i row;
      switch (q) {
        case 0: row = _mm512_castsi512_si128(rows[i]); break;
        case 1: row = _mm512_extracti32x4_epi32(rows[i], 1); break;
        case 2: row = _mm512_extracti32x4_epi32(rows[i], 2); break;
        default: row = _mm512_extracti32x4_epi32(rows[i], 3); break;
      }
      std::uint8_t* destination = out + (4 * q + i) * out_stride;
      if (second) _mm_storeu_si128(reinterpret_cast<__m128i*>(destination), row);
      else _mm_storel_epi64(reinterpret_cast<__m128i*>(destination), row);
    }
}

}  // namespace nvfp4::simd::avx512
NVFP4_END_INTRINSIC_CODE
#endif
