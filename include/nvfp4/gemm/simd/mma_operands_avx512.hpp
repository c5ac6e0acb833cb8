// nvfp4/gemm/simd/mma_operands_avx512.hpp: the GEMM operand layouts of gemm/mma_layout.hpp built
// with AVX-512: nibbles to doubled values with one vpshufb table lookup per 64 elements, group
// sums with vpdpbusd against ones, and a tile's lanes by a 16x16 dword transpose.
#pragma once

#include "nvfp4/config.hpp"

#if NVFP4_HAS_AVX512_VNNI

#include <algorithm>
#include <cstdint>

#include "nvfp4/gemm/mma_layout.hpp"
#include "nvfp4/simd/x86_intrinsics.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::gemm_detail::avx512 {

/// Decodes up to 32 packed E2M1 bytes (64 elements, the low nibble first) through a 16-entry
/// byte table; bytes past `count` read as code 0.
inline __m512i decode_step(const std::uint8_t* packed, index_t count, __m512i table) {
  const __mmask32 present = count >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((std::uint32_t{1} << count) - 1);
  const __m512i words = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(present, packed));
  const __m512i nibbles = _mm512_or_si512(_mm512_and_si512(words, _mm512_set1_epi16(0x000F)),
                                          _mm512_and_si512(_mm512_slli_epi16(words, 4), _mm512_set1_epi16(0x0F00)));
  return _mm512_shuffle_epi8(table, nibbles);
}

inline __m512i doubled_value_table(int offset) {
  alignas(16) std::int8_t table[16];
  for (int code = 0; code < 16; ++code) table[code] = static_cast<std::int8_t>(mma::e2m1_doubled(static_cast<std::uint8_t>(code)) + offset);
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(table)));
}

template <class Format>
broadcast_rows make_broadcast_rows(const quantized_tensor<Format>& q) {
  return build_broadcast_rows(q, [](const quantized_tensor<Format>& source, index_t r, index_t s, row_step& rs) {
    const index_t stride = source.data_row_stride();
    const auto* data = reinterpret_cast<const std::uint8_t*>(source.data().data());
    const __m512i values = decode_step(data + r * stride + s * 32, std::min<index_t>(32, stride - s * 32), doubled_value_table(0));
    _mm512_store_si512(rs.values, values);
    // Group sums: quads by vpdpbusd against ones, then each 128-bit lane's 4 dwords added.
    __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), values);
    sums = _mm512_add_epi32(sums, _mm512_shuffle_epi32(sums, _MM_PERM_CDAB));
    sums = _mm512_add_epi32(sums, _mm512_shuffle_epi32(sums, _MM_PERM_BADC));
    const __m128i group_sums = _mm512_castsi512_si128(
        _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), sums));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(rs.correction), _mm_mullo_epi32(group_sums, _mm_set1_epi32(-element_offset)));
  });
}

/// Transposes 16 rows of 16 dwords in place: row[k] dword j <- row[j] dword k.
inline void transpose_16x16_epi32(__m512i (&row)[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(row[2 * i], row[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(row[2 * i], row[2 * i + 1]);
  }
  // u[4i + k], 128-bit lane L: rows 4i..4i+3 of column 4L + k.
  for (int i = 0; i < 4; ++i) {
    u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    const __m512i low01 = _mm512_shuffle_i32x4(u[k], u[4 + k], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i high01 = _mm512_shuffle_i32x4(u[k], u[4 + k], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i low23 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i high23 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], _MM_SHUFFLE(3, 2, 3, 2));
    row[0 + k] = _mm512_shuffle_i32x4(low01, low23, _MM_SHUFFLE(2, 0, 2, 0));
    row[4 + k] = _mm512_shuffle_i32x4(low01, low23, _MM_SHUFFLE(3, 1, 3, 1));
    row[8 + k] = _mm512_shuffle_i32x4(high01, high23, _MM_SHUFFLE(2, 0, 2, 0));
    row[12 + k] = _mm512_shuffle_i32x4(high01, high23, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

template <class Format>
void pack_tile(const quantized_tensor<Format>& q, index_t j0, tile_step* out) {
  const index_t steps = (q.cols() + mma::step_k - 1) / mma::step_k;
  const index_t stride = q.data_row_stride();
  const index_t valid = std::min<index_t>(tile_lanes, q.rows() - j0);
  const auto* data = reinterpret_cast<const std::uint8_t*>(q.data().data());
  const __m512i offset_table = doubled_value_table(element_offset);
  for (index_t s = 0; s < steps; ++s) {
    __m512i rows[16];
    for (int l = 0; l < tile_lanes; ++l)
      rows[l] = l < valid ? decode_step(data + (j0 + l) * stride + s * 32, std::min<index_t>(32, stride - s * 32), offset_table)
                          : _mm512_set1_epi8(element_offset);
    transpose_16x16_epi32(rows);
    for (int i = 0; i < 16; ++i) _mm512_store_si512(out[s].bytes[i], rows[i]);
    set_tile_step_scales(q, j0, valid, s, out[s]);
  }
}

}  // namespace nvfp4::gemm_detail::avx512
NVFP4_END_INTRINSIC_CODE

#endif  // NVFP4_HAS_AVX512_VNNI
