// nvfp4/gemm/simd/mma_operands_avx512.hpp: the two operand layouts of the AVX-512 VNNI GEMM
// kernels. vpdpbusd multiplies 4 unsigned bytes of one register lane by 4 signed bytes of the
// other and adds them into that lane, so one operand ("rows", A) is read as broadcast 4-byte
// words of doubled E2M1 values, and the other ("tiles", B) is rearranged so that register lane l
// holds 4 consecutive K elements of output column l. Each step of 64 K elements also carries its
// group scales in the forms the kernels read, and the exponent bounds of the exact fast path.
#pragma once

#include "nvfp4/config.hpp"

#if NVFP4_HAS_AVX512_VNNI

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "nvfp4/gemm/mma_model.hpp"
#include "nvfp4/gemm/operands.hpp"
#include "nvfp4/simd/x86_intrinsics.hpp"

namespace nvfp4::gemm_detail::avx512 {

inline constexpr int lanes = 16;           // output columns per register
inline constexpr int element_offset = 12;  // tile bytes hold b2 + 12 >= 0 (vpdpbusd wants them unsigned)
/// Exponent stand-in for a row (or lane) whose step has no non-zero scale: it enters the fast
/// path's bounds as if it were a real exponent, which can only make them stricter.
inline constexpr float no_scale_exponent = 0.0f;

/// What the kernels read of one scale code, looked up once per code.
struct scale_forms {
  float value = 0;       ///< s as a float (NaN for a NaN code)
  float quarter = 0;     ///< s / 4 (exact except for E8M0 codes below 2^-147)
  float exponent = 0;    ///< e of s = m·2^e (§6 step 1)
  bool nonzero = false;  ///< m != 0 and not NaN: the scale takes part in the exponent bounds
  bool is_nan = false;
};

template <class ScaleType>
constexpr std::array<scale_forms, 256> make_scale_table() {
  std::array<scale_forms, 256> table{};
  for (int code = 0; code < 256; ++code) {
    const mma::scale_parts parts = mma::decompose(ScaleType::from_bits(static_cast<std::uint8_t>(code)));
    scale_forms& f = table[static_cast<std::size_t>(code)];
    f.is_nan = parts.is_nan;
    f.value = mma::scale_value(parts);
    f.quarter = f.value * 0.25f;
    f.exponent = static_cast<float>(parts.exponent);
    f.nonzero = !parts.is_nan && parts.m_eighths != 0;
  }
  return table;
}
template <class ScaleType>
inline constexpr std::array<scale_forms, 256> scale_table = make_scale_table<ScaleType>();

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

/// The largest exponent distance the fast path allows between two non-zero group terms
/// (a term is a whole multiple of 2^(E_g - 8), the fused sum keeps 2^(E_max - 35)).
inline constexpr float max_term_span = mma::fraction_bits - 8;
/// How far the accumulator's exponent may sit below E_max (its lsb is 2^(E_c - 23)).
inline constexpr float max_accumulator_drop = mma::fraction_bits - 23;

/// One step (64 K elements) of one row of the broadcast operand.
struct alignas(64) row_step {
  std::int8_t values[mma::step_k];        ///< doubled E2M1 values, zero past K
  std::int32_t correction[4];             ///< -12 Σ a2 per group: undoes the tiles' +12 offset
  float value[4];                         ///< s_g
  float quarter[4];                       ///< s_g / 4
  float exponent_min, exponent_max;       ///< over groups with a non-zero scale (or the stand-in)
  std::uint8_t codes[4];                  ///< the scale codes, for the exact fallback
  std::uint8_t zero_scale_mask;           ///< groups past K (a zero scale, which no E8M0 code is)
  std::uint8_t has_nan;
};

/// A [rows, K] operand as rows of steps.
struct broadcast_rows {
  index_t rows = 0, steps = 0;
  float exponent_min = std::numeric_limits<float>::infinity();   ///< over every non-zero scale
  float exponent_max = -std::numeric_limits<float>::infinity();
  std::vector<row_step> data;
  const row_step* row(index_t r) const { return data.data() + r * steps; }
};

/// Group g of step s uses scale block (s*64 + g*16) / block_cols, or none past the last block.
template <class Format>
index_t scale_block_of(index_t step, int group) {
  return (step * mma::step_k + group * mma::group_k) / Format::block_cols;
}

template <class Format>
broadcast_rows make_broadcast_rows(const quantized_tensor<Format>& q) {
  using scale_type = typename Format::scale_type;
  const auto& table = scale_table<scale_type>;
  broadcast_rows out;
  out.rows = q.rows();
  out.steps = (q.cols() + mma::step_k - 1) / mma::step_k;
  out.data.resize(static_cast<std::size_t>(out.rows * out.steps));
  const index_t stride = q.data_row_stride(), scale_cols = q.scale_cols();
  const auto* data = reinterpret_cast<const std::uint8_t*>(q.data().data());
  const auto* scales = reinterpret_cast<const std::uint8_t*>(q.scales().data());
  float global_min = out.exponent_min, global_max = out.exponent_max;
#pragma omp parallel for schedule(static) reduction(min : global_min) reduction(max : global_max) \
    if (out.rows * out.steps > 4096)
  for (index_t r = 0; r < out.rows; ++r) {
    const __m512i values_table = doubled_value_table(0);
    for (index_t s = 0; s < out.steps; ++s) {
      row_step& rs = out.data[static_cast<std::size_t>(r * out.steps + s)];
      const __m512i values = decode_step(data + r * stride + s * 32, std::min<index_t>(32, stride - s * 32), values_table);
      _mm512_store_si512(rs.values, values);
      // Group sums: quads by vpdpbusd against ones, then each 128-bit lane's 4 dwords added.
      __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), values);
      sums = _mm512_add_epi32(sums, _mm512_shuffle_epi32(sums, _MM_PERM_CDAB));
      sums = _mm512_add_epi32(sums, _mm512_shuffle_epi32(sums, _MM_PERM_BADC));
      const __m128i group_sums = _mm512_castsi512_si128(
          _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), sums));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(rs.correction), _mm_mullo_epi32(group_sums, _mm_set1_epi32(-element_offset)));
      float e_min = std::numeric_limits<float>::infinity(), e_max = -e_min;
      rs.zero_scale_mask = 0;
      rs.has_nan = 0;
      for (int g = 0; g < 4; ++g) {
        const index_t block = scale_block_of<Format>(s, g);
        const bool present = block < scale_cols;
        const std::uint8_t code = present ? scales[r * scale_cols + block] : 0;
        const scale_forms f = present ? table[code] : scale_forms{};
        rs.codes[g] = code;
        rs.zero_scale_mask |= static_cast<std::uint8_t>(present ? 0 : 1 << g);
        rs.value[g] = f.value;
        rs.quarter[g] = f.quarter;
        rs.has_nan |= static_cast<std::uint8_t>(f.is_nan);
        if (f.nonzero) {
          e_min = std::min(e_min, f.exponent);
          e_max = std::max(e_max, f.exponent);
        }
      }
      global_min = std::min(global_min, e_min);
      global_max = std::max(global_max, e_max);
      rs.exponent_min = e_min <= e_max ? e_min : no_scale_exponent;
      rs.exponent_max = e_min <= e_max ? e_max : no_scale_exponent;
    }
  }
  out.exponent_min = global_min;
  out.exponent_max = global_max;
  return out;
}

/// One step of a 16-column tile of the other operand.
struct alignas(64) tile_step {
  std::uint8_t bytes[16][64];     ///< [g*4 + q][lane*4 + e] = b2 + 12 of element g*16 + q*4 + e
  float value[4][lanes];          ///< s_g per lane
  double weight[4][lanes];        ///< s_g per lane, as a double (the exact kernel's form)
  float accumulator_floor[lanes];    ///< max_g e_g - 12: the accumulator's exponent must reach it
  float accumulator_ceiling[lanes];  ///< min_g e_g + 27: ... and stay below it
  std::uint8_t codes[4][lanes];   ///< scale codes, for the exact fallback
  float span;                     ///< max over lanes of max_g e_g - min_g e_g
  float exponent_min_low, exponent_min_high, exponent_max_high;  ///< min/max over lanes of the bounds
  std::uint16_t zero_scale_lanes[4];  ///< per group: lanes past K or past the operand's rows
  std::uint8_t has_nan;
};

/// The whole operand's exponent range (every non-zero scale), for the relaxed kernel's choice.
template <class Format>
void scale_exponent_range(const quantized_tensor<Format>& q, float& exponent_min, float& exponent_max) {
  const auto& table = scale_table<typename Format::scale_type>;
  const auto* scales = reinterpret_cast<const std::uint8_t*>(q.scales().data());
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (index_t i = 0; i < q.rows() * q.scale_cols(); ++i) {
    const scale_forms& f = table[scales[i]];
    if (f.nonzero) {
      lo = std::min(lo, f.exponent);
      hi = std::max(hi, f.exponent);
    }
  }
  exponent_min = lo;
  exponent_max = hi;
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

/// Packs rows [j0, j0 + 16) of q (rows past the end are zero with no scale) into `out[steps]`.
template <class Format>
void pack_tile(const quantized_tensor<Format>& q, index_t j0, tile_step* out) {
  const auto& table = scale_table<typename Format::scale_type>;
  const index_t steps = (q.cols() + mma::step_k - 1) / mma::step_k;
  const index_t stride = q.data_row_stride(), scale_cols = q.scale_cols();
  const index_t valid = std::min<index_t>(lanes, q.rows() - j0);
  const auto* data = reinterpret_cast<const std::uint8_t*>(q.data().data());
  const auto* scales = reinterpret_cast<const std::uint8_t*>(q.scales().data());
  const __m512i offset_table = doubled_value_table(element_offset);
  constexpr float infinity = std::numeric_limits<float>::infinity();
  for (index_t s = 0; s < steps; ++s) {
    tile_step& ts = out[s];
    __m512i rows[16];
    for (int l = 0; l < lanes; ++l)
      rows[l] = l < valid ? decode_step(data + (j0 + l) * stride + s * 32, std::min<index_t>(32, stride - s * 32), offset_table)
                          : _mm512_set1_epi8(element_offset);
    transpose_16x16_epi32(rows);
    for (int i = 0; i < 16; ++i) _mm512_store_si512(ts.bytes[i], rows[i]);
    float span = 0, min_low = infinity, min_high = -infinity, max_high = -infinity;
    ts.has_nan = 0;
    for (int g = 0; g < 4; ++g) ts.zero_scale_lanes[g] = 0;
    for (int l = 0; l < lanes; ++l) {
      float e_min = infinity, e_max = -infinity;
      for (int g = 0; g < 4; ++g) {
        const index_t block = scale_block_of<Format>(s, g);
        const bool present = l < valid && block < scale_cols;
        const std::uint8_t code = present ? scales[(j0 + l) * scale_cols + block] : 0;
        const scale_forms f = present ? table[code] : scale_forms{};
        ts.codes[g][l] = code;
        if (!present) ts.zero_scale_lanes[g] |= static_cast<std::uint16_t>(1u << l);
        ts.value[g][l] = f.value;
        ts.weight[g][l] = f.value;
        ts.has_nan |= static_cast<std::uint8_t>(f.is_nan);
        if (f.nonzero) {
          e_min = std::min(e_min, f.exponent);
          e_max = std::max(e_max, f.exponent);
        }
      }
      if (e_min > e_max) e_min = e_max = no_scale_exponent;
      ts.accumulator_floor[l] = e_max - max_accumulator_drop;
      ts.accumulator_ceiling[l] = e_min + max_term_span;
      span = std::max(span, e_max - e_min);
      min_low = std::min(min_low, e_min);
      min_high = std::max(min_high, e_min);
      max_high = std::max(max_high, e_max);
    }
    ts.span = span;
    ts.exponent_min_low = min_low;
    ts.exponent_min_high = min_high;
    ts.exponent_max_high = max_high;
  }
}

}  // namespace nvfp4::gemm_detail::avx512

#endif  // NVFP4_HAS_AVX512_VNNI
