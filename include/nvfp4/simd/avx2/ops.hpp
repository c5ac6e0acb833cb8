// nvfp4/simd/avx2/ops.hpp: the AVX2 (x86-64-v3: AVX2 + FMA + F16C) lane operations: 8 float /
// int32 lanes, 4 double lanes, compares into all-ones lane masks. Same functions and results as
// simd/scalar/ops.hpp, which documents each one. Empty unless compiled for AVX2.
#pragma once

#include "nvfp4/config.hpp"

#if NVFP4_HAS_AVX2

#include <cstdint>
#include <cstring>

#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/simd/x86_intrinsics.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::simd::avx2 {

struct ops {
  static constexpr const char* name = "avx2";
  static constexpr int width = 8;
  static constexpr int double_width = 4;
  using vf = __m256;
  using vi = __m256i;
  using vm = __m256i;
  using vd = __m256d;
  using vdm = __m256d;

  // ---- memory ------------------------------------------------------------------------------
  static NVFP4_ALWAYS_INLINE vf load(const float* p) { return _mm256_loadu_ps(p); }
  static NVFP4_ALWAYS_INLINE void store(float* p, vf v) { _mm256_storeu_ps(p, v); }
  static NVFP4_ALWAYS_INLINE vi load_bits(const std::uint32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static NVFP4_ALWAYS_INLINE void store_bits(std::uint32_t* p, vi v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static NVFP4_ALWAYS_INLINE void store_bits_partial(std::uint32_t* p, vi v, int count) {
    _mm256_maskstore_epi32(reinterpret_cast<int*>(p), _mm256_cmpgt_epi32(_mm256_set1_epi32(count), lane_index()), v);
  }
  static NVFP4_ALWAYS_INLINE vi load_bf16_bits(const bf16* p) {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16);
  }
  static NVFP4_ALWAYS_INLINE vi load_bytes(const std::uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static NVFP4_ALWAYS_INLINE void store_bytes(std::uint8_t* p, vi codes) {
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(words, words));
  }
  static NVFP4_ALWAYS_INLINE vi load_signed_bytes(const std::int8_t* p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static NVFP4_ALWAYS_INLINE vi load_nibbles(const std::uint8_t* packed, index_t first) {
    std::int32_t word;
    std::memcpy(&word, packed + first / 2, 4);
    const vi bytes = _mm256_cvtepu8_epi64(_mm_cvtsi32_si128(word));
    const vi low = _mm256_and_si256(bytes, _mm256_set1_epi64x(0x0F));
    const vi high = _mm256_slli_epi64(_mm256_and_si256(bytes, _mm256_set1_epi64x(0xF0)), 28);
    return _mm256_or_si256(low, high);
  }
  static NVFP4_ALWAYS_INLINE void store_nibbles(std::uint8_t* packed, index_t first, vi codes) {
    // Odd code of each 64-bit pair moves from bit 32 to bit 4; the four pair bytes are then
    // gathered into the low 32-bit lanes and narrowed.
    const vi pairs = _mm256_or_si256(codes, _mm256_srli_epi64(codes, 28));
    const vi gathered = _mm256_permutevar8x32_epi32(pairs, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(gathered), _mm256_castsi256_si128(gathered));
    const std::uint32_t bytes = static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm_packus_epi16(words, words)));
    std::memcpy(packed + first / 2, &bytes, 4);
  }
  static NVFP4_ALWAYS_INLINE vi narrow_to_words(vi a, vi b) { return _mm256_packus_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE void widen_words(vi words, vi& first, vi& second) {
    first = _mm256_unpacklo_epi16(words, _mm256_setzero_si256());
    second = _mm256_unpackhi_epi16(words, _mm256_setzero_si256());
  }
  static NVFP4_ALWAYS_INLINE void store_nibble_words_x4(std::uint8_t* packed, const vi (&words)[4]) {
    // As the AVX-512 packing: narrowed to bytes in 128-bit halves, byte pairs summed as
    // low + 16 * high and narrowed again; half H's word w is output word 2w + H, so the two
    // halves' words interleave.
    const vi pair_weights = _mm256_set1_epi16(0x1001);
    const vi low = _mm256_maddubs_epi16(_mm256_packus_epi16(words[0], words[1]), pair_weights);
    const vi high = _mm256_maddubs_epi16(_mm256_packus_epi16(words[2], words[3]), pair_weights);
    const vi bytes = _mm256_packus_epi16(low, high);
    const __m128i half0 = _mm256_castsi256_si128(bytes), half1 = _mm256_extracti128_si256(bytes, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(packed), _mm_unpacklo_epi16(half0, half1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(packed + 16), _mm_unpackhi_epi16(half0, half1));
  }
  static NVFP4_ALWAYS_INLINE void store_lanes2(std::uint8_t* out, index_t stride, vi a, vi b) {
    // 128-bit half q of t0 holds lanes 4q, 4q + 1 (a, b each), of t1 lanes 4q + 2, 4q + 3.
    const vi t0 = _mm256_unpacklo_epi32(a, b), t1 = _mm256_unpackhi_epi32(a, b);
    for (int q = 0; q < 2; ++q) {
      const __m128i low = q == 0 ? _mm256_castsi256_si128(t0) : _mm256_extracti128_si256(t0, 1);
      const __m128i high = q == 0 ? _mm256_castsi256_si128(t1) : _mm256_extracti128_si256(t1, 1);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + (4 * q) * stride), low);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + (4 * q + 1) * stride), _mm_unpackhi_epi64(low, low));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + (4 * q + 2) * stride), high);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + (4 * q + 3) * stride), _mm_unpackhi_epi64(high, high));
    }
  }
  static NVFP4_ALWAYS_INLINE void store_lanes4(std::uint8_t* out, index_t stride, vi a, vi b, vi c, vi d) {
    const vi t0 = _mm256_unpacklo_epi32(a, b), t1 = _mm256_unpackhi_epi32(a, b);
    const vi t2 = _mm256_unpacklo_epi32(c, d), t3 = _mm256_unpackhi_epi32(c, d);
    // 128-bit half q of rows[i] is lane 4q + i's 16 bytes.
    const vi rows[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2), _mm256_unpacklo_epi64(t1, t3),
                        _mm256_unpackhi_epi64(t1, t3)};
    for (int i = 0; i < 4; ++i) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i * stride), _mm256_castsi256_si128(rows[i]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (4 + i) * stride), _mm256_extracti128_si256(rows[i], 1));
    }
  }

  static NVFP4_ALWAYS_INLINE vi decode_nibbles(const std::uint8_t* packed, const std::uint8_t* table) {
    const vi words = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(packed)));
    const vi nibbles = _mm256_or_si256(_mm256_and_si256(words, _mm256_set1_epi16(0x000F)),
                                       _mm256_and_si256(_mm256_slli_epi16(words, 4), _mm256_set1_epi16(0x0F00)));
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table))), nibbles);
  }

  // ---- constants and conversions -----------------------------------------------------------
  static NVFP4_ALWAYS_INLINE vf set(float v) { return _mm256_set1_ps(v); }
  static NVFP4_ALWAYS_INLINE vi set_int(std::uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }
  static NVFP4_ALWAYS_INLINE vi lane_index() { return _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); }
  static NVFP4_ALWAYS_INLINE vi as_int(vf v) { return _mm256_castps_si256(v); }
  static NVFP4_ALWAYS_INLINE vf as_float(vi v) { return _mm256_castsi256_ps(v); }
  static NVFP4_ALWAYS_INLINE vf to_float(vi v) { return _mm256_cvtepi32_ps(v); }
  static NVFP4_ALWAYS_INLINE vi truncate(vf v) { return _mm256_cvttps_epi32(v); }
  // No vscalefps: both scale exactly in double (a normal power of two), then round once.
  static NVFP4_ALWAYS_INLINE vf to_float_scaled(vi v, vi e) {
    vd low, high;
    powers_of_two_double(e, low, high);
    return _mm256_set_m128(_mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(v, 1)), high)),
                           _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(v)), low)));
  }
  static NVFP4_ALWAYS_INLINE vi truncate_scaled(vf x, vi e) {
    vd low, high;
    powers_of_two_double(e, low, high);
    const __m128i x_low = _mm256_cvttpd_epi32(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)), low));
    const __m128i x_high = _mm256_cvttpd_epi32(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)), high));
    return _mm256_set_m128i(x_high, x_low);
  }

  // ---- 32-bit integer lanes ----------------------------------------------------------------
  static NVFP4_ALWAYS_INLINE vi bit_and(vi a, vi b) { return _mm256_and_si256(a, b); }
  static NVFP4_ALWAYS_INLINE vi bit_or(vi a, vi b) { return _mm256_or_si256(a, b); }
  static NVFP4_ALWAYS_INLINE vi bit_xor(vi a, vi b) { return _mm256_xor_si256(a, b); }
  static NVFP4_ALWAYS_INLINE vi add(vi a, vi b) { return _mm256_add_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE vi sub(vi a, vi b) { return _mm256_sub_epi32(a, b); }
  template <int Bits>
  static NVFP4_ALWAYS_INLINE vi shift_right(vi a) {
    return _mm256_srli_epi32(a, Bits);
  }
  template <int Bits>
  static NVFP4_ALWAYS_INLINE vi shift_left(vi a) {
    return _mm256_slli_epi32(a, Bits);
  }
  static NVFP4_ALWAYS_INLINE vi max(vi a, vi b) { return _mm256_max_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE vi min(vi a, vi b) { return _mm256_min_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE vm greater(vi a, vi b) { return _mm256_cmpgt_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE vi max_unsigned(vi a, vi b) { return _mm256_max_epu32(a, b); }
  static NVFP4_ALWAYS_INLINE vi min_unsigned(vi a, vi b) { return _mm256_min_epu32(a, b); }
  static NVFP4_ALWAYS_INLINE vi max_u16(vi a, vi b) { return _mm256_max_epu16(a, b); }
  static NVFP4_ALWAYS_INLINE vi sum_bytes(vi a) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), a), _mm256_set1_epi16(1));
  }
  static NVFP4_ALWAYS_INLINE void mul_wide(vi a, vi b, vi& high, vi& low) {
    const vi even = _mm256_mul_epu32(a, b);                                               // lanes 0, 2, ...
    const vi odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(b, 32));  // lanes 1, 3, ...
    high = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
    low = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  }
  static NVFP4_ALWAYS_INLINE std::uint32_t reduce_max(vi a) {
    __m128i m = _mm_max_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4E));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xB1));
    return static_cast<std::uint32_t>(_mm_cvtsi128_si32(m));
  }
  static NVFP4_ALWAYS_INLINE vi reduce_max_each(const vi (&rows)[width]) {
    // As the AVX-512 tree: within 128-bit halves by 32-bit then 64-bit interleaves (u[i] half H:
    // rows 4i..4i+3, each over its half H), then across the halves.
    vi t[4], u[2];
    for (int i = 0; i < 4; ++i)
      t[i] = _mm256_max_epi32(_mm256_unpacklo_epi32(rows[2 * i], rows[2 * i + 1]), _mm256_unpackhi_epi32(rows[2 * i], rows[2 * i + 1]));
    for (int i = 0; i < 2; ++i)
      u[i] = _mm256_max_epi32(_mm256_unpacklo_epi64(t[2 * i], t[2 * i + 1]), _mm256_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    return _mm256_max_epi32(_mm256_permute2x128_si256(u[0], u[1], 0x20), _mm256_permute2x128_si256(u[0], u[1], 0x31));
  }
  static NVFP4_ALWAYS_INLINE vi select(vm m, vi if_true, vi if_false) { return _mm256_blendv_epi8(if_false, if_true, m); }
  static NVFP4_ALWAYS_INLINE vf select(vm m, vf if_true, vf if_false) {
    return _mm256_blendv_ps(if_false, if_true, _mm256_castsi256_ps(m));
  }
  static NVFP4_ALWAYS_INLINE unsigned mask_bits(vm m) { return static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(m))); }

  // ---- float lanes -------------------------------------------------------------------------
  static NVFP4_ALWAYS_INLINE vf add(vf a, vf b) { return _mm256_add_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf div(vf a, vf b) { return _mm256_div_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf fmadd(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
  static NVFP4_ALWAYS_INLINE vf materialize(vf a) {
    __asm__("" : "+x"(a));
    return a;
  }
  static NVFP4_ALWAYS_INLINE vf min(vf a, vf b) { return _mm256_min_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf max(vf a, vf b) { return _mm256_max_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf floor(vf a) { return _mm256_floor_ps(a); }
  static NVFP4_ALWAYS_INLINE vf abs(vf a) { return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF))); }
  static NVFP4_ALWAYS_INLINE vm greater_equal(vf a, vf b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_GE_OQ)); }
  static NVFP4_ALWAYS_INLINE vm less(vf a, vf b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_LT_OQ)); }

  // ---- tables ------------------------------------------------------------------------------
  /// Two 8-entry permutes, picked by bit 3 of the code.
  static NVFP4_ALWAYS_INLINE vf lookup16(vi codes, const float* table) {
    const vf low = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table), codes);
    const vf high = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table + 8), codes);
    return _mm256_blendv_ps(low, high, _mm256_castsi256_ps(_mm256_slli_epi32(codes, 28)));
  }
  static NVFP4_ALWAYS_INLINE vi lookup16(vi codes, const std::uint32_t* table) {
    const vf low = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(load_bits(table), codes));
    const vf high = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(load_bits(table + 8), codes));
    return _mm256_castps_si256(_mm256_blendv_ps(low, high, _mm256_castsi256_ps(_mm256_slli_epi32(codes, 28))));
  }
  static NVFP4_ALWAYS_INLINE vf gather(vi codes, const float* table) { return _mm256_i32gather_ps(table, codes, 4); }

  // ---- the one transpose -------------------------------------------------------------------
  static NVFP4_ALWAYS_INLINE void transpose(vi (&rows)[width]) {
    vi t[8], u[8];
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_epi32(rows[2 * i], rows[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_epi32(rows[2 * i], rows[2 * i + 1]);
    }
    // u[4i + k], 128-bit half H: rows 4i..4i+3 of column 4H + k.
    for (int i = 0; i < 2; ++i) {
      u[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
      u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
      u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
      u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int k = 0; k < 4; ++k) {
      rows[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
      rows[4 + k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
    }
  }

  // ---- double lanes ------------------------------------------------------------------------
  static NVFP4_ALWAYS_INLINE vd load_double(const float* p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
  static NVFP4_ALWAYS_INLINE vd load_double(const bf16* p) {
    const __m128i widened = _mm_slli_epi32(_mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), 16);
    return _mm256_cvtps_pd(_mm_castsi128_ps(widened));
  }
  static NVFP4_ALWAYS_INLINE vd set_double(double v) { return _mm256_set1_pd(v); }
  static NVFP4_ALWAYS_INLINE void widen_to_double(vi v, vd& low, vd& high) {
    low = _mm256_cvtepi32_pd(_mm256_castsi256_si128(v));
    high = _mm256_cvtepi32_pd(_mm256_extracti128_si256(v, 1));
  }
  static NVFP4_ALWAYS_INLINE void powers_of_two_double(vi e, vd& low, vd& high) {
    const auto power = [](__m128i half) {
      return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(half), _mm256_set1_epi64x(1023)), 52));
    };
    low = power(_mm256_castsi256_si128(e));
    high = power(_mm256_extracti128_si256(e, 1));
  }
  static NVFP4_ALWAYS_INLINE vf narrow_toward_zero(vd low, vd high) {
    // No rounding-mode override: the nearest conversion (default MXCSR), stepped back one ulp
    // where it went up in magnitude (adding the all-ones compare mask to the bits; Inf becomes
    // the largest float), then Inf where |v| >= 2^128.
    const auto narrow = [](vd v) {
      const vd magnitude_bits = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFF));
      const vd magnitude = _mm256_and_pd(v, magnitude_bits);
      const __m128 nearest = _mm256_cvtpd_ps(v);
      const vd went_up = _mm256_cmp_pd(_mm256_and_pd(_mm256_cvtps_pd(nearest), magnitude_bits), magnitude, _CMP_GT_OQ);
      const __m128 toward_zero = _mm_castsi128_ps(_mm_add_epi32(_mm_castps_si128(nearest), low_words(went_up)));
      const __m128i overflow = low_words(_mm256_cmp_pd(magnitude, _mm256_set1_pd(0x1p128), _CMP_GE_OQ));
      const __m128 infinity = _mm_or_ps(_mm_and_ps(toward_zero, _mm_set1_ps(-0.0f)), _mm_set1_ps(__builtin_inff()));
      return _mm_blendv_ps(toward_zero, infinity, _mm_castsi128_ps(overflow));
    };
    return _mm256_set_m128(narrow(high), narrow(low));
  }
  static NVFP4_ALWAYS_INLINE vd add(vd a, vd b) { return _mm256_add_pd(a, b); }
  static NVFP4_ALWAYS_INLINE vd sub(vd a, vd b) { return _mm256_sub_pd(a, b); }
  static NVFP4_ALWAYS_INLINE vd mul(vd a, vd b) { return _mm256_mul_pd(a, b); }
  static NVFP4_ALWAYS_INLINE vd min(vd a, vd b) { return _mm256_min_pd(a, b); }
  static NVFP4_ALWAYS_INLINE vd max(vd a, vd b) { return _mm256_max_pd(a, b); }
  static NVFP4_ALWAYS_INLINE vd abs(vd a) { return _mm256_and_pd(a, _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFF))); }
  static NVFP4_ALWAYS_INLINE vd bit_and(vd a, vd b) { return _mm256_and_pd(a, b); }
  static NVFP4_ALWAYS_INLINE vd select(vdm m, vd if_true, vd if_false) { return _mm256_blendv_pd(if_false, if_true, m); }
  static NVFP4_ALWAYS_INLINE vdm less(vd a, vd b) { return _mm256_cmp_pd(a, b, _CMP_LT_OQ); }
  static NVFP4_ALWAYS_INLINE vdm less_equal(vd a, vd b) { return _mm256_cmp_pd(a, b, _CMP_LE_OQ); }
  static NVFP4_ALWAYS_INLINE vdm equal(vd a, vd b) { return _mm256_cmp_pd(a, b, _CMP_EQ_OQ); }
  static NVFP4_ALWAYS_INLINE unsigned mask_bits(vdm m) { return static_cast<unsigned>(_mm256_movemask_pd(m)); }
  static NVFP4_ALWAYS_INLINE void store_bf16_of_exact(std::uint16_t* out, vd v) {
    // Exact to float (8 significant bits; 2^128 and beyond become Inf), whose top half is the code.
    const __m128i bits = _mm_srli_epi32(_mm_castps_si128(_mm256_cvtpd_ps(v)), 16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi32(bits, bits));
  }

 private:
  /// The low 32 bits of each 64-bit lane (a compare mask of doubles as four int32 masks).
  static NVFP4_ALWAYS_INLINE __m128i low_words(vd mask) {
    return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(mask), _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0)));
  }
};

}  // namespace nvfp4::simd::avx2
NVFP4_END_INTRINSIC_CODE

#endif  // NVFP4_HAS_AVX2
