// nvfp4/scaling/mxfp8_quantize.hpp: MXFP8 quantization as TransformerEngine's MXFP8BlockScaling
// recipe does it (docs/numerics.md, "MXFP8"): blocks of 32 along a row, the E8M0 scale rounded UP
// from amax * (1 / fp8_max), elements multiplied by the scale's exact reciprocal and rounded to
// E4M3 or E5M2. The rowwise and columnwise copies are both quantized from the high-precision
// tensor. Differs from OCP's floor rule and from scaling/'s `mx_scale_rule::te_ceil` (a division).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "nvfp4/detail/column_bands.hpp"
#include "nvfp4/formats/e5m2.hpp"
#include "nvfp4/scaling/bulk_codecs.hpp"
#include "nvfp4/scaling/detail/block_kernels.hpp"
#include "nvfp4/scaling/detail/mxfp8_tiles.hpp"
#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4 {

/// MXFP8 with E5M2 elements (TE's HYBRID format for gradients), one E8M0 scale per 32.
using mxfp8_e5m2 = block_format<e5m2, e8m0, 1, 32>;
using mxfp8_e5m2_tensor = quantized_tensor<mxfp8_e5m2>;

/// The two MXFP8 formats a recipe uses.
template <class Format>
concept mxfp8_format = std::is_same_v<Format, mxfp8> || std::is_same_v<Format, mxfp8_e5m2>;

/// TE's float -> E8M0 conversion with rounding up (the software form of Blackwell's
/// `cvt.rp.satfinite.ue8m0x2.f32`, TE common/util/ptx_arch_spec.cuh `float_to_e8m0`): NaN -> 0xFF,
/// Inf -> 0xFE, 0 -> 0x00; otherwise the float's biased exponent, plus one when any mantissa bit
/// is set, except at 0xFE (saturates) and for subnormals up to 2^-127 (which give 0x00, 2^-127).
constexpr e8m0 e8m0_round_up(float v) {
  if (v != v) return e8m0::from_bits(0xFF);
  const std::uint32_t bits = detail::float_bits(v) & 0x7FFFFFFFu;
  if (bits == 0x7F800000u) return e8m0::from_bits(0xFE);
  if (bits == 0) return e8m0::from_bits(0x00);
  std::uint32_t exponent = bits >> 23;
  const std::uint32_t mantissa = bits & 0x7FFFFFu;
  if (mantissa > 0 && exponent != 0xFE && !(exponent == 0 && mantissa <= 0x400000u)) ++exponent;
  return e8m0::from_bits(static_cast<std::uint8_t>(exponent));
}

/// The MXFP8 block scale of a block with max |x| = block_amax: e8m0_round_up(block_amax *
/// fp32(1 / fp8_max)), a product with the rounded reciprocal as TE's kernels compute it.
template <mxfp8_format Format>
constexpr e8m0 mxfp8_te_block_scale(float block_amax) {
  constexpr float reciprocal = static_cast<float>(1.0 / static_cast<double>(Format::element_max));
  return e8m0_round_up(block_amax * reciprocal);
}

/// The factor an element is multiplied by: 2^(127 - b), TE's exp2f_rcp (2^-127 for b = 254).
constexpr float mxfp8_te_encode_factor(e8m0 scale) { return detail::exp2i(-scale.exponent()); }

namespace reference {

/// MXFP8 quantization of x (blocks of 32 along its rows; pass x.transposed() for the columnwise
/// copy) by TE's rule. Throws non_finite_error on NaN/Inf.
template <mxfp8_format Format, quantizer_input T>
quantized_tensor<Format> quantize_mxfp8_te(matrix_view<const T> x, quantized_axis axis = quantized_axis::rowwise) {
  const float x_amax = reference::amax(x);
  using element_type = typename Format::element_type;
  quantized_tensor<Format> q(x.rows(), x.cols(), axis);
  q.set_tensor_scale(x_amax, 1.0f, 1.0f);
  for (index_t r = 0; r < x.rows(); ++r)
    for (index_t block = 0; block < q.scale_cols(); ++block) {
      const index_t c0 = block * Format::block_cols, c1 = std::min<index_t>(c0 + Format::block_cols, x.cols());
      float block_amax = 0.0f;
      for (index_t c = c0; c < c1; ++c) block_amax = std::max(block_amax, std::fabs(to_float32(x(r, c))));
      const e8m0 scale = mxfp8_te_block_scale<Format>(block_amax);
      const float factor = mxfp8_te_encode_factor(scale);
      q.scales()[static_cast<std::size_t>(r * q.scale_cols() + block)] = scale;
      for (index_t c = c0; c < c1; ++c)
        q.data()[static_cast<std::size_t>(r * q.data_row_stride() + c)] = element_type::from_float(to_float32(x(r, c)) * factor);
    }
  return q;
}

}  // namespace reference

namespace detail {

/// One row (or its part from a block boundary on) of quantize_mxfp8_te: n floats, their block
/// amaxes, TE's scales and the codes, into scale_codes and out (one code per byte). The block
/// amax is an integer max of the |x| bits, which orders finite floats as their values do.
template <mxfp8_format Format>
void quantize_mxfp8_te_row(const float* values, index_t n, std::uint8_t* scale_codes, std::uint8_t* out,
                           std::vector<std::uint32_t>& amax_bits, std::vector<float>& factors) {
  constexpr index_t block = Format::block_cols;
  const index_t blocks = (n + block - 1) / block;
  amax_bits.assign(static_cast<std::size_t>(blocks), 0u);
  factors.resize(static_cast<std::size_t>(blocks));
  fast_block_kernels::template block_abs_max_bits<block>(values, n, amax_bits.data());
  for (index_t b = 0; b < blocks; ++b) {
    const e8m0 scale = mxfp8_te_block_scale<Format>(bits_float(amax_bits[static_cast<std::size_t>(b)]));
    scale_codes[b] = scale.bits();
    factors[static_cast<std::size_t>(b)] = mxfp8_te_encode_factor(scale);
  }
  fast_block_kernels::template encode_scaled<Format::element_type::traits, block>(values, n, factors.data(), out);
}

/// Where a copy of the tile walk goes (mxfp8_tiles::copy_out) in q.
template <mxfp8_format Format>
mxfp8_tiles::copy_out tile_copy_of(quantized_tensor<Format>& q) {
  return {reinterpret_cast<std::uint8_t*>(q.data().data()), q.data_row_stride(), reinterpret_cast<std::uint8_t*>(q.scales().data()),
          q.scale_cols()};
}

/// The columnwise copy's part of quantize_mxfp8_te of one copy (x with contiguous columns: x =
/// sourceᵀ of a row-major source): every block `walk` covers (column_band_walk over x, bands of
/// one block), each across the lanes of 32 registers (quantize_mxfp8_te_across), so the source is
/// read along its rows and only the codes are transposed.
template <mxfp8_format Format, quantizer_input T>
void quantize_mxfp8_te_columns(const column_band_walk<T>& walk, std::uint8_t* data, index_t data_stride, std::uint8_t* scales,
                               index_t scale_stride, bool parallel) {
  using kernels = fast_block_kernels;
  static_assert(Format::block_cols == 32);
  constexpr float reciprocal = static_cast<float>(1.0 / static_cast<double>(Format::element_max));
  simd::parallel_ranges(walk.items(), parallel, [&](index_t first_item, index_t last_item) {
    walk.run(first_item, last_item, [&](index_t r0, index_t c0, int /*blocks: 1*/, const T* source, index_t stride) {
      typename kernels::vf v[32];
      kernels::load_across(source, stride, v);
      typename kernels::vi scale_code, packed[8];
      kernels::template quantize_mxfp8_te_across<Format::element_type::traits>(v, reciprocal, scale_code, packed);
      kernels::store_mxfp8_across(packed, scale_code, data + r0 * data_stride + c0, data_stride, scales + r0 * scale_stride + c0 / 32,
                                  scale_stride);
    });
  });
}

/// quantize_mxfp8_te of x into q (of x's shape; input checked by the caller), one copy: rows in
/// parallel through the vector block kernels (float rows read in place); for a view with
/// contiguous columns (the columnwise copy, x.transposed()) the blocks are quantized across lanes
/// instead, the source read along its rows (quantize_mxfp8_te_columns), and only what that leaves
/// goes row by row. (For one copy this beats the tile walk of the two-copy form, whose copy of
/// each tile into a buffer is a pass more: 4096² fp32 columnwise on the AVX2 dev box, 27 vs 31-32
/// ms at one thread.)
template <mxfp8_format Format, quantizer_input T>
void quantize_mxfp8_te_one_copy(matrix_view<const T> x, quantized_tensor<Format>& q) {
  constexpr index_t block = Format::block_cols;
  if (x.empty()) return;
  auto* const data = reinterpret_cast<std::uint8_t*>(q.data().data());
  auto* const scales = reinterpret_cast<std::uint8_t*>(q.scales().data());
  const index_t data_stride = q.data_row_stride(), scale_stride = q.scale_cols();
  const bool parallel = simd::worth_parallel(x.size());
  // The columnwise copy goes across lanes first; the rows then do what that leaves (all of any
  // other view).
  std::optional<column_band_walk<T>> walk;
  if (!x.rows_contiguous() && x.row_stride() == 1) {
    walk.emplace(x, fast_block_kernels::width, block, 1);
    quantize_mxfp8_te_columns<Format>(*walk, data, data_stride, scales, scale_stride, parallel);
  }
  simd::parallel_ranges(x.rows(), parallel, [&](index_t begin, index_t end) {
    std::vector<float> row(static_cast<std::size_t>(x.cols()));
    std::vector<std::uint32_t> amax_bits;
    std::vector<float> factors;
    for (index_t r = begin; r < end; ++r) {
      const index_t c0 = walk ? walk->first_column_left(r) : 0;
      if (c0 == x.cols()) continue;
      const float* values = row.data();
      if constexpr (std::is_same_v<T, float>) {
        if (x.rows_contiguous()) values = x.row(r) + c0;
      }
      if (values == row.data())
        for (index_t c = c0; c < x.cols(); ++c) row[static_cast<std::size_t>(c - c0)] = to_float32(x(r, c));
      quantize_mxfp8_te_row<Format>(values, x.cols() - c0, scales + r * scale_stride + c0 / block, data + r * data_stride + c0, amax_bits,
                                    factors);
    }
  });
}

/// Both copies of quantize_mxfp8_te_both_into (each already of its shape; input checked by the
/// caller): through the tile walk where x or xᵀ has contiguous rows, each tile quantized both
/// ways; else each copy alone (quantize_mxfp8_te_one_copy, elements gathered).
template <mxfp8_format Format, quantizer_input T>
void quantize_mxfp8_te_both_copies(matrix_view<const T> x, quantized_tensor<Format>& rowwise, quantized_tensor<Format>& columnwise) {
  if (x.empty()) return;
  if (!x.rows_contiguous() && x.row_stride() != 1) {
    quantize_mxfp8_te_one_copy(x, rowwise);
    quantize_mxfp8_te_one_copy(x.transposed(), columnwise);
    return;
  }
  constexpr float reciprocal = static_cast<float>(1.0 / static_cast<double>(Format::element_max));
  // x = sourceᵀ of a source with contiguous rows: x's blocks run down the source's columns.
  const bool transposed = !x.rows_contiguous();
  const matrix_view<const T> source = transposed ? x.transposed() : x;
  const mxfp8_tiles::copy_out mine = tile_copy_of(rowwise), other = tile_copy_of(columnwise);
  mxfp8_tiles::quantize<Format::element_type::traits>(source.data(), source.row_stride(), source.rows(), source.cols(), reciprocal,
                                                      transposed ? other : mine, transposed ? mine : other, simd::worth_parallel(x.size()));
}

}  // namespace detail

/// MXFP8 quantization by TE's rule: same result as reference::quantize_mxfp8_te. Rows in parallel
/// through the vector block kernels; for a view with contiguous columns (the columnwise copy,
/// x.transposed()) the blocks are quantized across lanes instead, the source read along its rows
/// (detail::quantize_mxfp8_te_one_copy). Throws non_finite_error on NaN/Inf. The into form writes
/// `q`, a tensor the caller keeps: its storage is reused where it already has x's shape and the
/// axis (nothing allocated or zero-filled), else it is made anew; q is untouched on error.
template <mxfp8_format Format, quantizer_input T>
void quantize_mxfp8_te_into(matrix_view<const T> x, quantized_tensor<Format>& q, quantized_axis axis = quantized_axis::rowwise) {
  detail::check_input_view(x, "quantize input");
  const float x_amax = amax(x);
  if (q.rows() != x.rows() || q.cols() != x.cols() || q.axis() != axis) q = quantized_tensor<Format>(x.rows(), x.cols(), axis);
  q.set_tensor_scale(x_amax, 1.0f, 1.0f);
  detail::quantize_mxfp8_te_one_copy(x, q);
}

/// Both MXFP8 copies of x that TE's MXFP8 recipe makes of a GEMM operand used twice: `rowwise` =
/// quantize_mxfp8_te(x) and `columnwise` = quantize_mxfp8_te(xᵀ, quantized_axis::columnwise), the
/// same bytes, from one amax pass and one read of x (each 32 x 128 tile of x or xᵀ, whichever
/// has contiguous rows, quantized both ways while in cache: scaling/detail/mxfp8_tiles.hpp; a view
/// with neither stride 1 makes each copy alone). Both reused as the into form reuses q; throws as
/// it does, before either is written.
template <mxfp8_format Format, quantizer_input T>
void quantize_mxfp8_te_both_into(matrix_view<const T> x, quantized_tensor<Format>& rowwise, quantized_tensor<Format>& columnwise) {
  detail::check_input_view(x, "quantize input");
  const float x_amax = amax(x);
  if (rowwise.rows() != x.rows() || rowwise.cols() != x.cols() || rowwise.axis() != quantized_axis::rowwise)
    rowwise = quantized_tensor<Format>(x.rows(), x.cols(), quantized_axis::rowwise);
  if (columnwise.rows() != x.cols() || columnwise.cols() != x.rows() || columnwise.axis() != quantized_axis::columnwise)
    columnwise = quantized_tensor<Format>(x.cols(), x.rows(), quantized_axis::columnwise);
  rowwise.set_tensor_scale(x_amax, 1.0f, 1.0f);
  columnwise.set_tensor_scale(x_amax, 1.0f, 1.0f);
  detail::quantize_mxfp8_te_both_copies(x, rowwise, columnwise);
}

template <mxfp8_format Format, quantizer_input T>
quantized_tensor<Format> quantize_mxfp8_te(matrix_view<const T> x, quantized_axis axis = quantized_axis::rowwise) {
  quantized_tensor<Format> q;
  quantize_mxfp8_te_into(x, q, axis);
  return q;
}

}  // namespace nvfp4
