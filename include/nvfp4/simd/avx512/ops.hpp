// nvfp4/simd/avx512/ops.hpp: the AVX-512 (F/BW/VL/DQ) lane operations: 16 float / int32 lanes,
// 8 double lanes, compares into masks. Same functions and results as simd/scalar/ops.hpp, which
// documents each one. Empty unless the translation unit is compiled for AVX-512.
#pragma once

#include "nvfp4/config.hpp"

#if NVFP4_HAS_AVX512

#include <algorithm>
#include <cstdint>

#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/formats/e2m1.hpp"
#include "nvfp4/simd/x86_intrinsics.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::simd::avx512 {

/// The E2M1 code (round to nearest even, saturating) of every key of ops::e2m1_codes_as_words:
/// entry 2b + f for the b-th two-mantissa-bit bucket from 0.25 up, f = 0 for the bucket's first
/// value and 1 for the rest of it; beyond 8, the largest code.
struct e2m1_key_table {
  static constexpr std::uint16_t first_key = (127 - 2) << 3;  // the key of 0.25
  static constexpr std::uint16_t last_index = 39;             // buckets up to [7, 8)
  alignas(64) std::uint16_t codes[64];
  constexpr e2m1_key_table() : codes{} {
    for (int i = 0; i < 64; ++i) {
      const int bucket = std::min(i, int{last_index}) / 2;
      const std::uint32_t start = (static_cast<std::uint32_t>(125 + bucket / 4) << 23) | (static_cast<std::uint32_t>(bucket % 4) << 21);
      const std::uint32_t value = i > last_index ? nvfp4::detail::float_bits(8.0f) : start + static_cast<std::uint32_t>(i % 2);
      codes[i] = nvfp4::detail::encode_minifloat<e2m1_traits>(nvfp4::detail::bits_float(value), overflow_policy::saturate);
    }
  }
};
inline constexpr e2m1_key_table e2m1_keys{};

struct ops {
  static constexpr const char* name = "avx512";
  static constexpr int width = 16;
  static constexpr int double_width = 8;
  using vf = __m512;
  using vi = __m512i;
  using vm = __mmask16;
  using vd = __m512d;
  using vdm = __mmask8;

  // ---- memory ------------------------------------------------------------------------------
  static NVFP4_ALWAYS_INLINE vf load(const float* p) { return _mm512_loadu_ps(p); }
  static NVFP4_ALWAYS_INLINE void store(float* p, vf v) { _mm512_storeu_ps(p, v); }
  static NVFP4_ALWAYS_INLINE vi load_bits(const std::uint32_t* p) { return _mm512_loadu_si512(p); }
  static NVFP4_ALWAYS_INLINE void store_bits(std::uint32_t* p, vi v) { _mm512_storeu_si512(p, v); }
  static NVFP4_ALWAYS_INLINE void store_bits_partial(std::uint32_t* p, vi v, int count) {
    _mm512_mask_storeu_epi32(p, static_cast<__mmask16>((1u << count) - 1), v);
  }
  static NVFP4_ALWAYS_INLINE vi load_bf16_bits(const bf16* p) {
    const __m256i halves = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16);
  }
  static NVFP4_ALWAYS_INLINE vi load_bytes(const std::uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static NVFP4_ALWAYS_INLINE void store_bytes(std::uint8_t* p, vi codes) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(codes));
  }
  static NVFP4_ALWAYS_INLINE vi load_signed_bytes(const std::int8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static NVFP4_ALWAYS_INLINE vi load_nibbles(const std::uint8_t* packed, index_t first) {
    const vi bytes = _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed + first / 2)));
    const vi low = _mm512_and_si512(bytes, _mm512_set1_epi64(0x0F));
    const vi high = _mm512_slli_epi64(_mm512_and_si512(bytes, _mm512_set1_epi64(0xF0)), 28);
    return _mm512_or_si512(low, high);
  }
  static NVFP4_ALWAYS_INLINE void store_nibbles(std::uint8_t* packed, index_t first, vi codes) {
    // In each 64-bit lane the odd code sits at bit 32; shifting the pair right by 28 puts it at
    // bit 4, over the even code.
    const vi pairs = _mm512_or_si512(codes, _mm512_srli_epi64(codes, 28));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(packed + first / 2), _mm512_cvtepi64_epi8(pairs));
  }
  static NVFP4_ALWAYS_INLINE vi narrow_to_words(vi a, vi b) { return _mm512_packus_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE void widen_words(vi words, vi& first, vi& second) {
    first = _mm512_unpacklo_epi16(words, _mm512_setzero_si512());
    second = _mm512_unpackhi_epi16(words, _mm512_setzero_si512());
  }
  static NVFP4_ALWAYS_INLINE void store_nibble_words_x4(std::uint8_t* packed, const vi (&words)[4]) {
    // Narrowed to bytes in 128-bit lanes (lane L: elements 4L..4L+3 of each of the 8 vectors),
    // each byte pair summed as low + 16 * high, narrowed again; lane L's word w is then output
    // word 4w + L, which one word permutation puts in place.
    const vi pair_weights = _mm512_set1_epi16(0x1001);
    const vi low = _mm512_maddubs_epi16(_mm512_packus_epi16(words[0], words[1]), pair_weights);
    const vi high = _mm512_maddubs_epi16(_mm512_packus_epi16(words[2], words[3]), pair_weights);
    const vi order = _mm512_set_epi16(31, 23, 15, 7, 30, 22, 14, 6, 29, 21, 13, 5, 28, 20, 12, 4,  //
                                      27, 19, 11, 3, 26, 18, 10, 2, 25, 17, 9, 1, 24, 16, 8, 0);
    _mm512_storeu_si512(packed, _mm512_permutexvar_epi16(order, _mm512_packus_epi16(low, high)));
  }
  static NVFP4_ALWAYS_INLINE vi e2m1_codes_as_words(vf a, vf b) {
    // Every E2M1 rounding threshold (0.25, 0.75, 1.25, ... 5) has at most two mantissa bits, so
    // a float's code is fixed by its exponent, its top two mantissa bits and whether any bit
    // below them is set: bits >> 20 with its last bit replaced by that, 12 bits with the sign,
    // which fit 16-bit lanes, two vectors per register. Below 0.25 the key saturates to the
    // table's first entry (0.25 itself: code 0), above 8 to its last.
    const vi one = _mm512_set1_epi32(1), below_key = _mm512_set1_epi32(0xFFFFF);
    const auto key = [&](vf v) {
      const vi bits = _mm512_castps_si512(v);
      const vi shifted = _mm512_srli_epi32(bits, 20);
      return _mm512_mask_or_epi32(shifted, _mm512_test_epi32_mask(bits, below_key), shifted, one);
    };
    const vi keys = _mm512_packus_epi32(key(a), key(b));
    const vi index =
        _mm512_min_epu16(_mm512_subs_epu16(_mm512_and_si512(keys, _mm512_set1_epi16(0x7FF)), _mm512_set1_epi16(e2m1_key_table::first_key)),
                         _mm512_set1_epi16(e2m1_key_table::last_index));
    const vi magnitude = _mm512_permutex2var_epi16(_mm512_load_si512(e2m1_keys.codes), index, _mm512_load_si512(e2m1_keys.codes + 32));
    // code | (sign at bit 3): the key's sign, bit 11, shifted right by 8.
    return _mm512_ternarylogic_epi32(magnitude, _mm512_srli_epi16(keys, 8), _mm512_set1_epi16(8), 0xF8);
  }
  static NVFP4_ALWAYS_INLINE void store_lanes2(std::uint8_t* out, index_t stride, vi a, vi b) {
    // 128-bit lane q of t0 holds lanes 4q, 4q + 1 (a, b each), of t1 lanes 4q + 2, 4q + 3.
    const vi t0 = _mm512_unpacklo_epi32(a, b), t1 = _mm512_unpackhi_epi32(a, b);
    for (int q = 0; q < 4; ++q) {
      const __m128i low = extract128(t0, q), high = extract128(t1, q);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + (4 * q) * stride), low);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + (4 * q + 1) * stride), _mm_unpackhi_epi64(low, low));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + (4 * q + 2) * stride), high);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + (4 * q + 3) * stride), _mm_unpackhi_epi64(high, high));
    }
  }
  static NVFP4_ALWAYS_INLINE void store_lanes4(std::uint8_t* out, index_t stride, vi a, vi b, vi c, vi d) {
    const vi t0 = _mm512_unpacklo_epi32(a, b), t1 = _mm512_unpackhi_epi32(a, b);
    const vi t2 = _mm512_unpacklo_epi32(c, d), t3 = _mm512_unpackhi_epi32(c, d);
    // 128-bit lane q of rows[i] is lane 4q + i's 16 bytes.
    const vi rows[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                        _mm512_unpackhi_epi64(t1, t3)};
    if (stride == 16) {  // contiguous: gather each output quarter (lanes 4j .. 4j + 3) into one register
      const vi q01 = _mm512_shuffle_i32x4(rows[0], rows[1], 0x44), q23 = _mm512_shuffle_i32x4(rows[2], rows[3], 0x44);
      const vi h01 = _mm512_shuffle_i32x4(rows[0], rows[1], 0xEE), h23 = _mm512_shuffle_i32x4(rows[2], rows[3], 0xEE);
      _mm512_storeu_si512(out, _mm512_shuffle_i32x4(q01, q23, 0x88));
      _mm512_storeu_si512(out + 64, _mm512_shuffle_i32x4(q01, q23, 0xDD));
      _mm512_storeu_si512(out + 128, _mm512_shuffle_i32x4(h01, h23, 0x88));
      _mm512_storeu_si512(out + 192, _mm512_shuffle_i32x4(h01, h23, 0xDD));
      return;
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q)
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (4 * q + i) * stride), extract128(rows[i], q));
  }

  static NVFP4_ALWAYS_INLINE vi decode_nibbles(const std::uint8_t* packed, const std::uint8_t* table) {
    const vi words = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(packed)));
    const vi nibbles = _mm512_or_si512(_mm512_and_si512(words, _mm512_set1_epi16(0x000F)),
                                       _mm512_and_si512(_mm512_slli_epi16(words, 4), _mm512_set1_epi16(0x0F00)));
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table))), nibbles);
  }

  // ---- constants and conversions -----------------------------------------------------------
  static NVFP4_ALWAYS_INLINE vf set(float v) { return _mm512_set1_ps(v); }
  static NVFP4_ALWAYS_INLINE vi set_int(std::uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
  static NVFP4_ALWAYS_INLINE vi lane_index() { return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
  static NVFP4_ALWAYS_INLINE vi as_int(vf v) { return _mm512_castps_si512(v); }
  static NVFP4_ALWAYS_INLINE vf as_float(vi v) { return _mm512_castsi512_ps(v); }
  static NVFP4_ALWAYS_INLINE vf to_float(vi v) { return _mm512_cvtepi32_ps(v); }
  static NVFP4_ALWAYS_INLINE vi truncate(vf v) { return _mm512_cvttps_epi32(v); }
  static NVFP4_ALWAYS_INLINE vf to_float_scaled(vi v, vi e) { return _mm512_scalef_ps(_mm512_cvtepi32_ps(v), _mm512_cvtepi32_ps(e)); }
  static NVFP4_ALWAYS_INLINE vi truncate_scaled(vf x, vi e) {
    // Rounded in float first: exact wherever x * 2^e is a normal float, and below that (a
    // subnormal) it truncates to 0 either way.
    return _mm512_cvttps_epi32(_mm512_scalef_ps(x, _mm512_cvtepi32_ps(e)));
  }

  // ---- 32-bit integer lanes ----------------------------------------------------------------
  static NVFP4_ALWAYS_INLINE vi bit_and(vi a, vi b) { return _mm512_and_si512(a, b); }
  static NVFP4_ALWAYS_INLINE vi bit_or(vi a, vi b) { return _mm512_or_si512(a, b); }
  static NVFP4_ALWAYS_INLINE vi bit_xor(vi a, vi b) { return _mm512_xor_si512(a, b); }
  static NVFP4_ALWAYS_INLINE vi add(vi a, vi b) { return _mm512_add_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE vi sub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
  template <int Bits>
  static NVFP4_ALWAYS_INLINE vi shift_right(vi a) {
    return _mm512_srli_epi32(a, Bits);
  }
  template <int Bits>
  static NVFP4_ALWAYS_INLINE vi shift_left(vi a) {
    return _mm512_slli_epi32(a, Bits);
  }
  static NVFP4_ALWAYS_INLINE vi max(vi a, vi b) { return _mm512_max_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE vi min(vi a, vi b) { return _mm512_min_epi32(a, b); }
  static NVFP4_ALWAYS_INLINE vm greater(vi a, vi b) { return _mm512_cmpgt_epi32_mask(a, b); }
  static NVFP4_ALWAYS_INLINE vi max_unsigned(vi a, vi b) { return _mm512_max_epu32(a, b); }
  static NVFP4_ALWAYS_INLINE vi min_unsigned(vi a, vi b) { return _mm512_min_epu32(a, b); }
  static NVFP4_ALWAYS_INLINE vi max_u16(vi a, vi b) { return _mm512_max_epu16(a, b); }
  static NVFP4_ALWAYS_INLINE vi sum_bytes(vi a) {
    return _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_set1_epi8(1), a), _mm512_set1_epi16(1));
  }
  static NVFP4_ALWAYS_INLINE void mul_wide(vi a, vi b, vi& high, vi& low) {
    const vi even = _mm512_mul_epu32(a, b);                                               // lanes 0, 2, ...
    const vi odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(b, 32));  // lanes 1, 3, ...
    high = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
    low = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  }
  static NVFP4_ALWAYS_INLINE std::uint32_t reduce_max(vi a) { return static_cast<std::uint32_t>(_mm512_reduce_max_epi32(a)); }
  static NVFP4_ALWAYS_INLINE vi reduce_max_each(const vi (&rows)[width]) {
    // Halve each row four times, two rows per step: within 128-bit lanes by 32-bit then 64-bit
    // interleaves (u[i] lane L: rows 4i..4i+3, each over its lane L), then across lanes. (A form
    // with one shuffle and two blends per step instead of two shuffles measured 2% slower.)
    vi t[8], u[4];
    for (int i = 0; i < 8; ++i)
      t[i] = _mm512_max_epi32(_mm512_unpacklo_epi32(rows[2 * i], rows[2 * i + 1]), _mm512_unpackhi_epi32(rows[2 * i], rows[2 * i + 1]));
    for (int i = 0; i < 4; ++i)
      u[i] = _mm512_max_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]), _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    const auto halve = [](vi a, vi b) {
      return _mm512_max_epi32(_mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    };
    return halve(halve(u[0], u[1]), halve(u[2], u[3]));
  }
  static NVFP4_ALWAYS_INLINE vi select(vm m, vi if_true, vi if_false) { return _mm512_mask_blend_epi32(m, if_false, if_true); }
  static NVFP4_ALWAYS_INLINE vf select(vm m, vf if_true, vf if_false) { return _mm512_mask_blend_ps(m, if_false, if_true); }
  static NVFP4_ALWAYS_INLINE unsigned mask_bits(vm m) { return m; }

  // ---- float lanes -------------------------------------------------------------------------
  static NVFP4_ALWAYS_INLINE vf add(vf a, vf b) { return _mm512_add_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf div(vf a, vf b) { return _mm512_div_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf fmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
  static NVFP4_ALWAYS_INLINE vf materialize(vf a) {
    __asm__("" : "+v"(a));
    return a;
  }
  static NVFP4_ALWAYS_INLINE vf min(vf a, vf b) { return _mm512_min_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf max(vf a, vf b) { return _mm512_max_ps(a, b); }
  static NVFP4_ALWAYS_INLINE vf floor(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
  static NVFP4_ALWAYS_INLINE vf abs(vf a) { return _mm512_abs_ps(a); }
  static NVFP4_ALWAYS_INLINE vm greater_equal(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
  static NVFP4_ALWAYS_INLINE vm less(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }

  // ---- tables ------------------------------------------------------------------------------
  static NVFP4_ALWAYS_INLINE vf lookup16(vi codes, const float* table) { return _mm512_permutexvar_ps(codes, _mm512_loadu_ps(table)); }
  static NVFP4_ALWAYS_INLINE vi lookup16(vi codes, const std::uint32_t* table) {
    return _mm512_permutexvar_epi32(codes, _mm512_loadu_si512(table));
  }
  static NVFP4_ALWAYS_INLINE vf gather(vi codes, const float* table) { return _mm512_i32gather_ps(codes, table, 4); }

  // ---- the one transpose -------------------------------------------------------------------
  static NVFP4_ALWAYS_INLINE void transpose(vi (&rows)[width]) {
    vi t[16], u[16];
    // Interleave 32-bit, then 64-bit words within 128-bit lanes, then move 128-bit lanes twice.
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_epi32(rows[2 * i], rows[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_epi32(rows[2 * i], rows[2 * i + 1]);
    }
    // u[4i + k], 128-bit lane L: rows 4i..4i+3 of column 4L + k.
    for (int i = 0; i < 4; ++i) {
      u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
      u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
      u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
      u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int k = 0; k < 4; ++k) {
      const vi low01 = _mm512_shuffle_i32x4(u[k], u[4 + k], _MM_SHUFFLE(1, 0, 1, 0));
      const vi high01 = _mm512_shuffle_i32x4(u[k], u[4 + k], _MM_SHUFFLE(3, 2, 3, 2));
      const vi low23 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], _MM_SHUFFLE(1, 0, 1, 0));
      const vi high23 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], _MM_SHUFFLE(3, 2, 3, 2));
      rows[0 + k] = _mm512_shuffle_i32x4(low01, low23, _MM_SHUFFLE(2, 0, 2, 0));
      rows[4 + k] = _mm512_shuffle_i32x4(low01, low23, _MM_SHUFFLE(3, 1, 3, 1));
      rows[8 + k] = _mm512_shuffle_i32x4(high01, high23, _MM_SHUFFLE(2, 0, 2, 0));
      rows[12 + k] = _mm512_shuffle_i32x4(high01, high23, _MM_SHUFFLE(3, 1, 3, 1));
    }
  }

  // ---- double lanes ------------------------------------------------------------------------
  static NVFP4_ALWAYS_INLINE vd load_double(const float* p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
  static NVFP4_ALWAYS_INLINE vd load_double(const bf16* p) {
    const __m256i widened = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16);
    return _mm512_cvtps_pd(_mm256_castsi256_ps(widened));
  }
  static NVFP4_ALWAYS_INLINE vd set_double(double v) { return _mm512_set1_pd(v); }
  static NVFP4_ALWAYS_INLINE void widen_to_double(vi v, vd& low, vd& high) {
    low = _mm512_cvtepi32_pd(_mm512_castsi512_si256(v));
    high = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(v, 1));
  }
  static NVFP4_ALWAYS_INLINE void powers_of_two_double(vi e, vd& low, vd& high) {
    const auto power = [](__m256i half) {
      return _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(_mm512_cvtepi32_epi64(half), _mm512_set1_epi64(1023)), 52));
    };
    low = power(_mm512_castsi512_si256(e));
    high = power(_mm512_extracti64x4_epi64(e, 1));
  }
  static NVFP4_ALWAYS_INLINE vf narrow_toward_zero(vd low, vd high) {
    const auto narrow = [](vd v) {
      const __mmask8 overflow = _mm512_cmp_pd_mask(_mm512_abs_pd(v), _mm512_set1_pd(0x1p128), _CMP_GE_OQ);
      const __m256 rounded = _mm512_cvt_roundpd_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m256 infinity = _mm256_or_ps(_mm256_and_ps(rounded, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(__builtin_inff()));
      return _mm256_mask_blend_ps(overflow, rounded, infinity);
    };
    return _mm512_insertf32x8(_mm512_castps256_ps512(narrow(low)), narrow(high), 1);
  }
#if defined(__AVX512BF16__)
  /// The optional primitive of simd/scalar/ops.hpp: VDPBF16PS itself.
  static NVFP4_ALWAYS_INLINE vf dot_bf16_pairs(vf acc, vi a, vi b) {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
  }
#endif
  static NVFP4_ALWAYS_INLINE vd add(vd a, vd b) { return _mm512_add_pd(a, b); }
  static NVFP4_ALWAYS_INLINE vd sub(vd a, vd b) { return _mm512_sub_pd(a, b); }
  static NVFP4_ALWAYS_INLINE vd mul(vd a, vd b) { return _mm512_mul_pd(a, b); }
  static NVFP4_ALWAYS_INLINE vd min(vd a, vd b) { return _mm512_min_pd(a, b); }
  static NVFP4_ALWAYS_INLINE vd max(vd a, vd b) { return _mm512_max_pd(a, b); }
  static NVFP4_ALWAYS_INLINE vd abs(vd a) { return _mm512_abs_pd(a); }
  static NVFP4_ALWAYS_INLINE vd bit_and(vd a, vd b) { return _mm512_and_pd(a, b); }
  static NVFP4_ALWAYS_INLINE vd select(vdm m, vd if_true, vd if_false) { return _mm512_mask_blend_pd(m, if_false, if_true); }
  static NVFP4_ALWAYS_INLINE vdm less(vd a, vd b) { return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ); }
  static NVFP4_ALWAYS_INLINE vdm less_equal(vd a, vd b) { return _mm512_cmp_pd_mask(a, b, _CMP_LE_OQ); }
  static NVFP4_ALWAYS_INLINE vdm equal(vd a, vd b) { return _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ); }
  static NVFP4_ALWAYS_INLINE unsigned mask_bits(vdm m) { return m; }
  static NVFP4_ALWAYS_INLINE void store_bf16_of_exact(std::uint16_t* out, vd v) {
    // Exact to float (8 significant bits; 2^128 and beyond become Inf), whose top half is the code.
    const __m256i bits = _mm256_srli_epi32(_mm256_castps_si256(_mm512_cvtpd_ps(v)), 16);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtepi32_epi16(bits));
  }

 private:
  static NVFP4_ALWAYS_INLINE __m128i extract128(vi v, int q) {
    switch (q) {
      case 0:
        return _mm512_castsi512_si128(v);
      case 1:
        return _mm512_extracti32x4_epi32(v, 1);
      case 2:
        return _mm512_extracti32x4_epi32(v, 2);
      default:
        return _mm512_extracti32x4_epi32(v, 3);
    }
  }
};

}  // namespace nvfp4::simd::avx512
NVFP4_END_INTRINSIC_CODE

#endif  // NVFP4_HAS_AVX512
