// nvfp4/simd/avx512/ops.hpp: the AVX-512 (F/BW/VL/DQ) lane operations the vector kernels of
// nvfp4/simd/vector_kernels.hpp are written in: 16 float / int32 lanes, compares into masks.
#pragma once

#include <cstdint>

#include "nvfp4/config.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/simd/x86_intrinsics.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::simd::avx512 {

struct ops {
  static constexpr const char* name = "avx512";
  static constexpr int width = 16;
  using vf = __m512;
  using vi = __m512i;
  using vm = __mmask16;

  static NVFP4_ALWAYS_INLINE vf load(const float* p) { return _mm512_loadu_ps(p); }
  static NVFP4_ALWAYS_INLINE vi load_bits(const std::uint32_t* p) { return _mm512_loadu_si512(p); }
  static NVFP4_ALWAYS_INLINE void store(float* p, vf v) { _mm512_storeu_ps(p, v); }
  /// 16 bf16 values as the bits of the floats they widen to.
  static NVFP4_ALWAYS_INLINE vi load_bf16_bits(const bf16* p) {
    const __m256i halves = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16);
  }
  static NVFP4_ALWAYS_INLINE vf set(float v) { return _mm512_set1_ps(v); }
  static NVFP4_ALWAYS_INLINE vi set_int(std::uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
  static NVFP4_ALWAYS_INLINE vi as_int(vf v) { return _mm512_castps_si512(v); }
  static NVFP4_ALWAYS_INLINE vf as_float(vi v) { return _mm512_castsi512_ps(v); }
  static NVFP4_ALWAYS_INLINE vf to_float(vi v) { return _mm512_cvtepi32_ps(v); }

  static NVFP4_ALWAYS_INLINE vi bit_and(vi a, vi b) { return _mm512_and_si512(a, b); }
  static NVFP4_ALWAYS_INLINE vi bit_or(vi a, vi b) { return _mm512_or_si512(a, b); }
  static NVFP4_ALWAYS_INLINE vi add(vi a, vi b) { return _mm512_add_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE vi sub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
  template <int Bits>
  static NVFP4_ALWAYS_INLINE vi shift_right(vi a) { return _mm512_srli_epi32(a, Bits); }
  template <int Bits>
  static NVFP4_ALWAYS_INLINE vi shift_left(vi a) { return _mm512_slli_epi32(a, Bits); }
  /// Signed int32 max/min/compare (the kernels only compare values in [0, 2^31)).
  static NVFP4_ALWAYS_INLINE vi max(vi a, vi b) { return _mm512_max_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE vi min(vi a, vi b) { return _mm512_min_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE vm greater(vi a, vi b) { return _mm512_cmpgt_epi32_mask(a, b); }
  static NVFP4_ALWAYS_INLINE vi select(vm m, vi if_true, vi if_false) {
    return _mm512_mask_blend_epi32(m, if_false, if_true);
  }
  static NVFP4_ALWAYS_INLINE std::uint32_t reduce_max(vi a) {
    return static_cast<std::uint32_t>(_mm512_reduce_max_epi32(a));
  }

  static NVFP4_ALWAYS_INLINE vf add(vf a, vf b) { return _mm512_add_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf div(vf a, vf b) { return _mm512_div_ps(a, b); }
  /// min(a, b) for non-NaN a, b.
  static NVFP4_ALWAYS_INLINE vf min(vf a, vf b) { return _mm512_min_ps(a, b); }

  /// 16 codes (0..15, one per lane) -> 8 bytes, lane 2i in the low nibble of byte i.
  static NVFP4_ALWAYS_INLINE void store_nibbles(std::uint8_t* out, vi codes) {
    // In each 64-bit lane the odd code sits at bit 32; shifting the pair right by 28 puts it at
    // bit 4, over the even code.
    const vi pairs = _mm512_or_si512(codes, _mm512_srli_epi64(codes, 28));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm512_cvtepi64_epi8(pairs));
  }
  /// 16 codes (0..255) -> 16 bytes.
  static NVFP4_ALWAYS_INLINE void store_bytes(std::uint8_t* out, vi codes) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(codes));
  }
  /// 8 bytes of packed nibbles -> 16 codes.
  static NVFP4_ALWAYS_INLINE vi load_nibbles(const std::uint8_t* in) {
    const vi bytes = _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in)));
    const vi low = _mm512_and_si512(bytes, _mm512_set1_epi64(0x0F));
    const vi high = _mm512_slli_epi64(_mm512_and_si512(bytes, _mm512_set1_epi64(0xF0)), 28);
    return _mm512_or_si512(low, high);
  }
  /// 16 bytes -> 16 codes.
  static NVFP4_ALWAYS_INLINE vi load_bytes(const std::uint8_t* in) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
  }
  /// table[code & 15] per lane, for a 16-entry table.
  static NVFP4_ALWAYS_INLINE vf lookup16(vi codes, const float* table) {
    return _mm512_permutexvar_ps(codes, _mm512_loadu_ps(table));
  }
  /// table[code] per lane (any table size).
  static NVFP4_ALWAYS_INLINE vf gather(vi codes, const float* table) {
    return _mm512_i32gather_ps(codes, table, 4);
  }

  /// dst[i * dst_stride + c] = src[c * src_stride + i], i < 16, c < 16: one 16x16 block.
  static NVFP4_ALWAYS_INLINE void transpose_16x16(const float* src, index_t src_stride, float* dst,
                                                  index_t dst_stride) {
    __m512 r[16];
    __m512 t[16];
    for (int c = 0; c < 16; ++c) r[c] = _mm512_loadu_ps(src + c * src_stride);
    // Interleave 32-bit, then 64-bit elements within 128-bit lanes, then move 128-bit lanes twice.
    for (int k = 0; k < 16; k += 2) {
      t[k] = _mm512_unpacklo_ps(r[k], r[k + 1]);
      t[k + 1] = _mm512_unpackhi_ps(r[k], r[k + 1]);
    }
    for (int k = 0; k < 16; k += 4) {
      r[k] = _mm512_shuffle_ps(t[k], t[k + 2], 0x44);
      r[k + 1] = _mm512_shuffle_ps(t[k], t[k + 2], 0xEE);
      r[k + 2] = _mm512_shuffle_ps(t[k + 1], t[k + 3], 0x44);
      r[k + 3] = _mm512_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
    }
    for (int k = 0; k < 4; ++k) {
      t[k] = _mm512_shuffle_f32x4(r[k], r[k + 4], 0x88);
      t[k + 4] = _mm512_shuffle_f32x4(r[k], r[k + 4], 0xDD);
      t[k + 8] = _mm512_shuffle_f32x4(r[k + 8], r[k + 12], 0x88);
      t[k + 12] = _mm512_shuffle_f32x4(r[k + 8], r[k + 12], 0xDD);
    }
    for (int k = 0; k < 8; ++k) {
      r[k] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0x88);
      r[k + 8] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0xDD);
    }
    for (int k = 0; k < 16; ++k) _mm512_storeu_ps(dst + k * dst_stride, r[k]);
  }
};

}  // namespace nvfp4::simd::avx512
NVFP4_END_INTRINSIC_CODE
