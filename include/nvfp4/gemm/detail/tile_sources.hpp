// nvfp4/gemm/detail/tile_sources.hpp: the operands of the relaxed GEMMs on BF16 tiles, folded into
// the values the tiles multiply (gemm/detail/tile_gemm.hpp's sources): FP4 elements times their
// block scales (NVFP4: E2M1 x UE4M3, MXFP4: E2M1 x 2^e), FP8 codes (times 2^e for MXFP8), fp32
// views that hold bf16 values. Each fill() writes the fp32 bit patterns of 16 rows x 32 K
// elements; the vector lanes of this build (simd::ops) do the decoding, and the values are the
// same on every build (a decode and at most one product, exact wherever the tiles take the
// operand: tile_gemm's stats refuse any value that is not an exact bf16). folded_value() is the
// same value for one element in plain scalar code, the references' form.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "nvfp4/gemm/detail/tile_gemm.hpp"
#include "nvfp4/scaling/fp8_tensor.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"
#include "nvfp4/simd/dispatch.hpp"

namespace nvfp4::detail::tiles {

using bit_block = std::uint32_t[lanes][step_k];

/// The 256 scale codes of ScaleType (UE4M3, E8M0) as floats (NaN for NaN codes).
template <class ScaleType>
const std::array<float, 256>& scale_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[static_cast<std::size_t>(c)] = ScaleType::from_bits(static_cast<std::uint8_t>(c)).to_float();
    return t;
  }();
  return table;
}

/// The 256 codes of an FP8 format as floats.
inline const float* fp8_values(fp8_format format) {
  static const auto make = [](fp8_format f) {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[static_cast<std::size_t>(c)] = fp8_decode(static_cast<std::uint8_t>(c), f);
    return t;
  };
  static const std::array<float, 256> e4m3 = make(fp8_format::e4m3), e5m2 = make(fp8_format::e5m2);
  return format == fp8_format::e4m3 ? e4m3.data() : e5m2.data();
}

/// Rows past `rows`: zeros.
inline void zero_rows(bit_block& bits, int from) {
  for (int r = from; r < lanes; ++r) std::memset(bits[r], 0, sizeof bits[r]);
}

/// The FP4 elements of a block-scaled tensor times their block scales.
template <class Format>
struct fp4_source {
  const quantized_tensor<Format>& q;

  /// Element (r, k) times its scale, in scalar code (k < cols).
  float folded(index_t r, index_t k) const {
    return q.element(r, k).to_float() * scale_values<typename Format::scale_type>()[q.scale(r, k / Format::block_cols).bits()];
  }

  void fill(index_t row0, index_t step, bit_block& bits) const {
    using ops = simd::ops;
    constexpr int w = ops::width;
    static_assert(Format::block_cols % w == 0 && step_k % w == 0);
    static constexpr nvfp4::detail::decode_table<e2m1_traits, 16> table{};
    const auto* data = reinterpret_cast<const std::uint8_t*>(q.data().data());
    const auto* scales = reinterpret_cast<const std::uint8_t*>(q.scales().data());
    const std::array<float, 256>& scale_of = scale_values<typename Format::scale_type>();
    const index_t k0 = step * step_k, stride = q.data_row_stride();
    const int rows = static_cast<int>(std::min<index_t>(lanes, q.rows() - row0));
    for (int r = 0; r < rows; ++r) {
      const std::uint8_t* row = data + (row0 + r) * stride;
      const std::uint8_t* row_scales = scales + (row0 + r) * q.scale_cols();
      if (k0 + step_k <= q.cols()) {
        for (int v = 0; v < step_k; v += w) {
          const index_t first = k0 + v;
          const auto values = ops::lookup16(ops::load_nibbles(row, first), table.values);
          const auto scale = ops::set(scale_of[row_scales[first / Format::block_cols]]);
          ops::store_bits(&bits[r][v], ops::as_int(ops::mul(values, scale)));
        }
      } else {
        for (int kk = 0; kk < step_k; ++kk) bits[r][kk] = k0 + kk < q.cols() ? std::bit_cast<std::uint32_t>(folded(row0 + r, k0 + kk)) : 0u;
      }
    }
    zero_rows(bits, rows);
  }
};

/// The codes of a row-major FP8 matrix ([rows, cols], `stride` codes per row), each times 2^e
/// of its 32-element block for MXFP8 (scale_codes: E8M0 per row and step, null for none).
struct fp8_source {
  const std::uint8_t* codes;
  index_t rows, cols, stride;
  fp8_format format;
  const std::uint8_t* scale_codes = nullptr;  // [rows, scale_cols] E8M0, one per 32 elements
  index_t scale_cols = 0;

  float scale(index_t r, index_t k) const { return scale_codes ? scale_values<e8m0>()[scale_codes[r * scale_cols + k / step_k]] : 1.0f; }
  float folded(index_t r, index_t k) const { return fp8_values(format)[codes[r * stride + k]] * scale(r, k); }

  void fill(index_t row0, index_t step, bit_block& bits) const {
    using ops = simd::ops;
    constexpr int w = ops::width;
    const float* table = fp8_values(format);
    const index_t k0 = step * step_k;
    const int count = static_cast<int>(std::min<index_t>(lanes, rows - row0));
    for (int r = 0; r < count; ++r) {
      const std::uint8_t* row = codes + (row0 + r) * stride;
      if (k0 + step_k <= cols) {
        const auto s = ops::set(scale(row0 + r, k0));
        for (int v = 0; v < step_k; v += w)
          ops::store_bits(&bits[r][v], ops::as_int(ops::mul(ops::gather(ops::load_bytes(row + k0 + v), table), s)));
      } else {
        for (int kk = 0; kk < step_k; ++kk) bits[r][kk] = k0 + kk < cols ? std::bit_cast<std::uint32_t>(folded(row0 + r, k0 + kk)) : 0u;
      }
    }
    zero_rows(bits, count);
  }
};

inline fp8_source source_of(const fp8_tensor& t) { return {t.codes().data(), t.rows(), t.cols(), t.cols(), t.format()}; }

template <class Format>
fp8_source source_of(const quantized_tensor<Format>& q) {
  constexpr fp8_format format = std::is_same_v<typename Format::element_type, e4m3> ? fp8_format::e4m3 : fp8_format::e5m2;
  return {reinterpret_cast<const std::uint8_t*>(q.data().data()),   q.rows(),      q.cols(), q.data_row_stride(), format,
          reinterpret_cast<const std::uint8_t*>(q.scales().data()), q.scale_cols()};
}

/// An fp32 view (any strides), its values as they are: the tiles take it where every value is a
/// bf16 (the BF16 recipe's tensors).
struct float_source {
  matrix_view<const float> v;

  float folded(index_t r, index_t k) const { return v(r, k); }

  void fill(index_t row0, index_t step, bit_block& bits) const {
    const index_t k0 = step * step_k;
    const int rows = static_cast<int>(std::min<index_t>(lanes, v.rows() - row0));
    const int ks = static_cast<int>(std::min<index_t>(step_k, v.cols() - k0));
    if (v.row_stride() == 1 && v.col_stride() != 1) {
      // K-major (a transposed view): the rows of one k are contiguous.
      for (int kk = 0; kk < step_k; ++kk)
        for (int r = 0; r < lanes; ++r) bits[r][kk] = (r < rows && kk < ks) ? std::bit_cast<std::uint32_t>(v(row0 + r, k0 + kk)) : 0u;
      return;
    }
    for (int r = 0; r < rows; ++r) {
      if (v.col_stride() == 1 && ks == step_k) {
        std::memcpy(bits[r], &v(row0 + r, k0), sizeof bits[r]);
      } else {
        for (int kk = 0; kk < step_k; ++kk) bits[r][kk] = kk < ks ? std::bit_cast<std::uint32_t>(v(row0 + r, k0 + kk)) : 0u;
      }
    }
    zero_rows(bits, rows);
  }
};

/// The folded values' stats in scalar code (the references' form of what pack() finds).
template <class Source>
fold_stats scalar_stats(const Source& s, index_t rows, index_t cols) {
  fold_stats stats;
  for (index_t r = 0; r < rows; ++r)
    for (index_t k = 0; k < cols; ++k) stats.add(static_cast<double>(s.folded(r, k)));
  return stats;
}

}  // namespace nvfp4::detail::tiles
