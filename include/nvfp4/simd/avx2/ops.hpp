// nvfp4/simd/avx2/ops.hpp: the AVX2 (x86-64-v3) lane operations the vector kernels of
// nvfp4/simd/vector_kernels.hpp are written in: 8 float / int32 lanes, compares into lane masks.
#pragma once

#include <cstdint>
#include <cstring>

#include "nvfp4/config.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/simd/x86_intrinsics.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::simd::avx2 {

struct ops {
  static constexpr const char* name = "avx2";
  static constexpr int width = 8;
  using vf = __m256;
  using vi = __m256i;
  using vm = __m256i;

  static NVFP4_ALWAYS_INLINE vf load(const float* p) { return _mm256_loadu_ps(p); }
  static NVFP4_ALWAYS_INLINE vi load_bits(const std::uint32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static NVFP4_ALWAYS_INLINE void store(float* p, vf v) { _mm256_storeu_ps(p, v); }
  /// 8 bf16 values as the bits of the floats they widen to.
  static NVFP4_ALWAYS_INLINE vi load_bf16_bits(const bf16* p) {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16);
  }
  static NVFP4_ALWAYS_INLINE vf set(float v) { return _mm256_set1_ps(v); }
  static NVFP4_ALWAYS_INLINE vi set_int(std::uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }
  static NVFP4_ALWAYS_INLINE vi as_int(vf v) { return _mm256_castps_si256(v); }
  static NVFP4_ALWAYS_INLINE vf as_float(vi v) { return _mm256_castsi256_ps(v); }
  static NVFP4_ALWAYS_INLINE vf to_float(vi v) { return _mm256_cvtepi32_ps(v); }

  static NVFP4_ALWAYS_INLINE vi bit_and(vi a, vi b) { return _mm256_and_si256(a, b); }
  static NVFP4_ALWAYS_INLINE vi bit_or(vi a, vi b) { return _mm256_or_si256(a, b); }
  static NVFP4_ALWAYS_INLINE vi add(vi a, vi b) { return _mm256_add_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE vi sub(vi a, vi b) { return _mm256_sub_epi32(a, b); }
  template <int Bits>
  static NVFP4_ALWAYS_INLINE vi shift_right(vi a) { return _mm256_srli_epi32(a, Bits); }
  template <int Bits>
  static NVFP4_ALWAYS_INLINE vi shift_left(vi a) { return _mm256_slli_epi32(a, Bits); }
  /// Signed int32 max/min/compare (the kernels only compare values in [0, 2^31)).
  static NVFP4_ALWAYS_INLINE vi max(vi a, vi b) { return _mm256_max_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE vi min(vi a, vi b) { return _mm256_min_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE vm greater(vi a, vi b) { return _mm256_cmpgt_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE vi select(vm m, vi if_true, vi if_false) {
    return _mm256_blendv_epi8(if_false, if_true, m);
  }
  static NVFP4_ALWAYS_INLINE std::uint32_t reduce_max(vi a) {
    __m128i m = _mm_max_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4E));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xB1));
    return static_cast<std::uint32_t>(_mm_cvtsi128_si32(m));
  }

  static NVFP4_ALWAYS_INLINE vf add(vf a, vf b) { return _mm256_add_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf div(vf a, vf b) { return _mm256_div_ps(a, b); }
  /// min(a, b) for non-NaN a, b.
  static NVFP4_ALWAYS_INLINE vf min(vf a, vf b) { return _mm256_min_ps(a, b); }

  /// 8 codes (0..15, one per lane) -> 4 bytes, lane 2i in the low nibble of byte i.
  static NVFP4_ALWAYS_INLINE void store_nibbles(std::uint8_t* out, vi codes) {
    // Odd code of each 64-bit pair moves from bit 32 to bit 4; the four pair bytes are then
    // gathered into the low 32-bit lanes and narrowed.
    const vi pairs = _mm256_or_si256(codes, _mm256_srli_epi64(codes, 28));
    const vi packed = _mm256_permutevar8x32_epi32(pairs, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(packed), _mm256_castsi256_si128(packed));
    const std::uint32_t bytes = static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm_packus_epi16(words, words)));
    std::memcpy(out, &bytes, 4);
  }
  /// 8 codes (0..255) -> 8 bytes.
  static NVFP4_ALWAYS_INLINE void store_bytes(std::uint8_t* out, vi codes) {
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(words, words));
  }
  /// 4 bytes of packed nibbles -> 8 codes.
  static NVFP4_ALWAYS_INLINE vi load_nibbles(const std::uint8_t* in) {
    std::int32_t word;
    std::memcpy(&word, in, 4);
    const vi bytes = _mm256_cvtepu8_epi64(_mm_cvtsi32_si128(word));
    const vi low = _mm256_and_si256(bytes, _mm256_set1_epi64x(0x0F));
    const vi high = _mm256_slli_epi64(_mm256_and_si256(bytes, _mm256_set1_epi64x(0xF0)), 28);
    return _mm256_or_si256(low, high);
  }
  /// 8 bytes -> 8 codes.
  static NVFP4_ALWAYS_INLINE vi load_bytes(const std::uint8_t* in) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in)));
  }
  /// table[code & 15] per lane, for a 16-entry table: two 8-entry permutes, picked by bit 3.
  static NVFP4_ALWAYS_INLINE vf lookup16(vi codes, const float* table) {
    const vf low = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table), codes);
    const vf high = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table + 8), codes);
    return _mm256_blendv_ps(low, high, _mm256_castsi256_ps(_mm256_slli_epi32(codes, 28)));
  }
  /// table[code] per lane (any table size).
  static NVFP4_ALWAYS_INLINE vf gather(vi codes, const float* table) {
    return _mm256_i32gather_ps(table, codes, 4);
  }
};

}  // namespace nvfp4::simd::avx2
NVFP4_END_INTRINSIC_CODE
