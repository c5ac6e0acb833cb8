// nvfp4/transforms/simd/hadamard16_avx512.hpp: the 16-point Hadamard transform of bf16 inputs on
// 16 blocks at once in float32 (one block per lane, butterflies between whole registers), exact
// whenever the block's exponent span is at most 12 binades; results transposed to rows in-register.
#pragma once

#include "nvfp4/config.hpp"

#if NVFP4_HAS_AVX512
#include <cstddef>
#include <cstdint>

#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/simd/x86_intrinsics.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::simd::avx512 {

/// The largest exponent span (in binades, between the biased exponent fields of the largest and
/// the smallest nonzero |x|) for which the float32 FWHT of 16 bf16 inputs is exact. Why: let u be
/// the last-place value of the smallest nonzero input, 2^(e_min - 7) (bf16 has 8 significant
/// bits; a subnormal's is 2^-133, which e_min = -126 also gives). Every input is a multiple of u,
/// so every partial sum of up to 16 of them is too, and it is below 16 * 2^(e_max + 1) =
/// 2^(e_max - e_min + 12) u. With e_max - e_min <= 12 that is below 2^24 u: the sum is an integer
/// below 2^24 times u >= 2^-133, which float32 holds exactly. The final * 1/4 is exact as well
/// (u / 4 >= 2^-135 is above float32's 2^-149).
inline constexpr int hadamard16_float_exact_span = 12;
/// The largest biased exponent field of the largest input for which no partial sum overflows:
/// 16 |x| < 2^128 needs |x| < 2^124, field <= 250. Inf/NaN (field 255) always fail the guard.
inline constexpr int hadamard16_float_max_exponent_field = 250;

/// How far ahead along each source row the tile kernel prefetches (bf16 elements: two lines).
inline constexpr std::ptrdiff_t hadamard16_prefetch_elements = 64;

/// One 16-row tile of the transform's input: 16 blocks (lanes) of 16 elements (registers).
struct hadamard16_tile {
  __m512i rounded_pairs[8];  ///< outputs 2k (low half) and 2k + 1 (high half) of each lane, as bf16 bits
  __mmask16 exact;           ///< lanes that passed the exactness guard (the others are to be redone)
};

/// 16 bf16 values widened to float32 (exact).
NVFP4_ALWAYS_INLINE __m512i load16_bf16_as_float_bits(const bf16* p) {
  return _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16);
}

/// The float32 FWHT of 16 blocks: block `lane` is source[i * i_stride + lane], i < 16 (so 16
/// consecutive bf16 in memory per i); bit i of `negate_input` set when element i is multiplied by
/// the sign s_i = -1. v[j] gets the unscaled sum for output j of every lane, exact in the lanes
/// returned (those within the span and overflow guards above); other lanes hold garbage.
NVFP4_ALWAYS_INLINE __mmask16 hadamard16_fwht(const bf16* source, std::ptrdiff_t i_stride, unsigned negate_input, __m512 v[16]) {
  const __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512i magnitude_mask = _mm512_set1_epi32(0x7FFF0000);
  const __m512i one = _mm512_set1_epi32(1);
  __m512i largest = _mm512_setzero_si512();
  __m512i smallest_minus_one = _mm512_set1_epi32(-1);  // min over nonzero |x| bits, less one (0 wraps to the top)
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    __m512i bits = load16_bf16_as_float_bits(source + i * i_stride);
    // The walk goes along memory rows, 16 and 32 of them at once: more than the hardware
    // prefetcher follows well, so each row is fetched two lines ahead (never faults, even past
    // the end).
    _mm_prefetch(reinterpret_cast<const char*>(source + i * i_stride + hadamard16_prefetch_elements), _MM_HINT_T0);
    const __m512i magnitude = _mm512_and_si512(bits, magnitude_mask);
    largest = _mm512_max_epu32(largest, magnitude);
    smallest_minus_one = _mm512_min_epu32(smallest_minus_one, _mm512_sub_epi32(magnitude, one));
    if ((negate_input >> i) & 1) bits = _mm512_xor_si512(bits, sign_bit);
    v[i] = _mm512_castsi512_ps(bits);
  }
#pragma GCC unroll 4
  for (int span = 1; span < 16; span *= 2) {
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      const int k = p / span * 2 * span + p % span;
      const __m512 a = v[k], b = v[k + span];
      v[k] = _mm512_add_ps(a, b);
      v[k + span] = _mm512_sub_ps(a, b);
    }
  }
  const __m512i largest_field = _mm512_srli_epi32(largest, 23);
  const __m512i smallest_field = _mm512_max_epi32(_mm512_srli_epi32(_mm512_add_epi32(smallest_minus_one, one), 23), one);
  return static_cast<__mmask16>(
      _mm512_cmple_epi32_mask(_mm512_sub_epi32(largest_field, smallest_field), _mm512_set1_epi32(hadamard16_float_exact_span)) &
      _mm512_cmple_epi32_mask(largest_field, _mm512_set1_epi32(hadamard16_float_max_exponent_field)));
}

/// Float32 bits rounded to nearest even at bit 16, as bf16 bits in the top half: adds 0x7FFF
/// plus the kept lsb (subnormals and a carry into the exponent come out right, as bf16 shares
/// float's range; a finite value past bf16's largest becomes Inf). Finite inputs only.
NVFP4_ALWAYS_INLINE __m512i round_float_bits_to_bf16_high(__m512i y) {
  return _mm512_add_epi32(_mm512_add_epi32(y, _mm512_set1_epi32(0x7FFF)), _mm512_and_si512(_mm512_srli_epi32(y, 16), _mm512_set1_epi32(1)));
}

/// Transforms 16 blocks (hadamard16_fwht's layout). `negate_output`: bit j set when output j is
/// multiplied by s_j = -1 (forward: inputs, y = x T; inverse: outputs, x = y Tᵀ). Each output is
/// the exact sum times 1/4 rounded once to bf16 (RNE), an exact zero as +0 — the reference's
/// result — in every lane of `exact`; other lanes hold garbage.
NVFP4_ALWAYS_INLINE hadamard16_tile hadamard16_transform_tile(const bf16* source, std::ptrdiff_t i_stride,
                                                                unsigned negate_input, unsigned negate_output) {
  const __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  __m512 v[16];
  hadamard16_tile tile;
  tile.exact = hadamard16_fwht(source, i_stride, negate_input, v);
  const __m512 quarter = _mm512_set1_ps(0.25f);
#pragma GCC unroll 16
  for (int j = 0; j < 16; j += 2) {
    __m512i biased[2];
    for (int h = 0; h < 2; ++h) {
      __m512 sum = v[j + h];
      if ((negate_output >> (j + h)) & 1) sum = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(sum), sign_bit));
      // sum * 1/4 + (+0): exact, and turns an exact zero's -0 into the reference's +0.
      biased[h] = round_float_bits_to_bf16_high(_mm512_castps_si512(_mm512_fmadd_ps(sum, quarter, _mm512_setzero_ps())));
    }
    tile.rounded_pairs[j / 2] = _mm512_mask_blend_epi16(0xAAAAAAAAu, _mm512_srli_epi32(biased[0], 16), biased[1]);
  }
  return tile;
}

/// Per lane of 16 blocks (hadamard16_fwht's layout, forward), max |output| as float32 bits before
/// the rounding to bf16, exact in the lanes of the returned mask (garbage elsewhere). Rounding is
/// monotonic, so rounding the max gives the max of the rounded outputs: the amax pass needs no
/// rounding per element.
NVFP4_ALWAYS_INLINE __mmask16 hadamard16_lane_abs_max(const bf16* source, std::ptrdiff_t i_stride, unsigned negate_input,
                                                      __m512i& abs_max_bits) {
  __m512 v[16];
  const __mmask16 exact = hadamard16_fwht(source, i_stride, negate_input, v);
  __m512 largest = _mm512_abs_ps(v[0]);
#pragma GCC unroll 15
  for (int j = 1; j < 16; ++j) largest = _mm512_max_ps(largest, _mm512_abs_ps(v[j]));
  abs_max_bits = _mm512_castps_si512(_mm512_mul_ps(largest, _mm512_set1_ps(0.25f)));  // exact, as the outputs
  return exact;
}

/// An upper bound on every |output| of each lane (hadamard16_fwht's layout): sum |x_i| / 4, in
/// float32 rounded up. NaN or Inf where an input is.
NVFP4_ALWAYS_INLINE __m512 hadamard16_lane_output_bound(const bf16* source, std::ptrdiff_t i_stride) {
  __m512 total = _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i)
    total = _mm512_add_ps(total, _mm512_abs_ps(_mm512_castsi512_ps(load16_bf16_as_float_bits(source + i * i_stride))));
  // 15 additions and the multiply each lose at most 2^-24 relatively: 1 + 2^-18 covers them.
  return _mm512_mul_ps(total, _mm512_set1_ps(0.25f * (1.0f + 0x1p-18f)));
}

/// Running max of |output| bf16 bits over a tile (two per 32-bit lane: the even and odd outputs).
NVFP4_ALWAYS_INLINE __m512i hadamard16_abs_max(__m512i running, const hadamard16_tile& tile) {
  const __m512i magnitude_mask = _mm512_set1_epi32(0x7FFF7FFF);
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) running = _mm512_max_epu16(running, _mm512_and_si512(tile.rounded_pairs[k], magnitude_mask));
  return running;
}

/// Per-lane max of the two halves of hadamard16_abs_max's result, as float bits (bf16 << 16).
NVFP4_ALWAYS_INLINE __m512i hadamard16_lane_abs_max_float_bits(__m512i pair_max) {
  return _mm512_max_epu32(_mm512_slli_epi32(pair_max, 16), _mm512_and_si512(pair_max, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

/// Writes the outputs of two tiles (or one, `second` null) as rows: row `lane` gets outputs 0..15
/// of tile 0 then of tile 1, at out + lane * out_stride (bf16 elements), by a 16x16 transpose of
/// 32-bit pairs in registers; one 64-byte store per row (32 bytes for a single tile).
NVFP4_ALWAYS_INLINE void hadamard16_store_rows(const hadamard16_tile& first, const hadamard16_tile* second, std::uint16_t* out,
                                               std::ptrdiff_t out_stride) {
  __m512i r[16], t[16];
  for (int k = 0; k < 8; ++k) {
    r[k] = first.rounded_pairs[k];
    r[k + 8] = second ? second->rounded_pairs[k] : _mm512_setzero_si512();
  }
  // Interleave 32-bit, then 64-bit elements within 128-bit lanes, then move 128-bit lanes twice.
  for (int k = 0; k < 16; k += 2) {
    t[k] = _mm512_unpacklo_epi32(r[k], r[k + 1]);
    t[k + 1] = _mm512_unpackhi_epi32(r[k], r[k + 1]);
  }
  for (int k = 0; k < 16; k += 4) {
    r[k] = _mm512_unpacklo_epi64(t[k], t[k + 2]);
    r[k + 1] = _mm512_unpackhi_epi64(t[k], t[k + 2]);
    r[k + 2] = _mm512_unpacklo_epi64(t[k + 1], t[k + 3]);
    r[k + 3] = _mm512_unpackhi_epi64(t[k + 1], t[k + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_shuffle_i32x4(r[k], r[k + 4], 0x88);
    t[k + 4] = _mm512_shuffle_i32x4(r[k], r[k + 4], 0xDD);
    t[k + 8] = _mm512_shuffle_i32x4(r[k + 8], r[k + 12], 0x88);
    t[k + 12] = _mm512_shuffle_i32x4(r[k + 8], r[k + 12], 0xDD);
  }
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_i32x4(t[k], t[k + 8], 0x88);
    r[k + 8] = _mm512_shuffle_i32x4(t[k], t[k + 8], 0xDD);
  }
  if (second) {
    for (int k = 0; k < 16; ++k) _mm512_storeu_si512(out + k * out_stride, r[k]);
  } else {
    for (int k = 0; k < 16; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k * out_stride), _mm512_castsi512_si256(r[k]));
  }
}

}  // namespace nvfp4::simd::avx512
NVFP4_END_INTRINSIC_CODE
#endif
