// nvfp4/scaling/fp8_quantize.hpp: FP8 quantization as TransformerEngine's FP8 recipes do it
// (docs/numerics.md, "FP8 recipes"): the scale-from-amax rule, per-tensor quantization with a given
// scale (delayed scaling) or with the tensor's own amax (current scaling), and 1x128 / 128x128 block
// scaling (Float8BlockScaling). Scalar references in nvfp4::reference read like the rules; the
// public functions check their input, then run the fast path, bit-identical for any thread count.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/scaling/bulk_codecs.hpp"
#include "nvfp4/scaling/detail/fp8_block_tiles.hpp"
#include "nvfp4/scaling/fp8_tensor.hpp"
#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/simd/panels.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4 {

/// TE's scale rule (common/recipe/recipe_common.cuh, compute_scale_from_amax): amax is raised to
/// `epsilon`; an amax of 0, Inf or NaN gives scale 1; else scale = max_fp8 / amax (one fp32
/// division), an infinite quotient becomes `value_for_inf`, and with `force_pow_2` only the sign
/// and exponent bits are kept (bits & 0xFF800000, i.e. rounded down to a power of two).
inline float fp8_scale_from_amax(float amax, float max_fp8, bool force_pow_2, float epsilon, float value_for_inf) {
  if (amax < epsilon) amax = epsilon;
  if (std::isinf(amax) || amax == 0.0f || std::isnan(amax)) return 1.0f;
  float scale = max_fp8 / amax;
  if (std::isinf(scale)) scale = value_for_inf;
  if (force_pow_2) scale = detail::bits_float(detail::float_bits(scale) & 0xFF800000u);
  return scale;
}

/// The largest finite value of a quantizer input type: TE's block quantizers use it for an
/// infinite scale (`TypeInfo<IType>::max_finite_value`), per-tensor current scaling uses FLT_MAX.
template <quantizer_input T>
constexpr float input_max_finite() {
  if constexpr (std::is_same_v<T, bf16>) {
    return bf16::from_bits(0x7F7F).to_float();
  } else {
    return FLT_MAX;
  }
}

/// Options of the FP8 scale rule (TE's QParams).
struct fp8_scale_options {
  bool power_2_scale = false;  ///< keep only the exponent of each scale
  float amax_epsilon = 0.0f;   ///< floor of the amax
};

/// The block shapes of TE's Float8BlockScaling: 1x128 (activations, gradients; "1D") and
/// 128x128 (weights; "2D"). Blocks run along the rows of the matrix passed in.
enum class fp8_block_shape { block_1x128, block_128x128 };
/// Its names in checkpoints, the CLI and Python (one table: nvfp4/detail/enum_names.hpp).
namespace detail {
template <>
struct enum_table<fp8_block_shape> {
  static constexpr enum_entry<fp8_block_shape> entries[] = {{"1x128", fp8_block_shape::block_1x128},
                                                            {"128x128", fp8_block_shape::block_128x128}};
};
}  // namespace detail
inline constexpr index_t fp8_block_size = 128;

constexpr index_t fp8_block_rows(fp8_block_shape shape) { return shape == fp8_block_shape::block_1x128 ? 1 : fp8_block_size; }

/// What per-tensor quantization with a given scale (quantize_fp8_with_scale) does with NaN / Inf
/// in its input.
enum class fp8_non_finite {
  /// Throw non_finite_error naming the first NaN / Inf, before anything is produced (the library's
  /// rule for every recipe whose TE counterpart does not run such a tensor).
  refuse,
  /// TE's delayed-scaling cast (common/util/vectorized_pointwise.h unary_kernel: amax =
  /// fmaxf(|x|, amax), then static_cast to __nv_fp8_e4m3 / __nv_fp8_e5m2, whose float constructor
  /// converts with __NV_SATFINITE): the amax ignores NaN (fmaxf) and keeps Inf; Inf * scale
  /// saturates to +-fp8_max (E4M3 0x7E / 0xFE, E5M2 0x7B / 0xFB) as every overflow does; a NaN
  /// element gives code 0x7F, the NaN an H100's cvt.rn.satfinite wrote for a NaN in both formats
  /// (tests/formats/data/h100_nan_codes.json): the codec's own satfinite NaN
  /// (satfinite_nan_code, formats/traits.hpp), so NaN needs no pass of its own.
  te_satfinite
};

namespace detail {

/// max |x| ignoring NaN, as fmaxf does (an Inf is kept; all NaN gives 0).
template <quantizer_input T>
float amax_ignoring_nan(matrix_view<const T> x) {
  float result = 0.0f;
  for (index_t r = 0; r < x.rows(); ++r)
    for (index_t c = 0; c < x.cols(); ++c) result = std::fmax(result, std::fabs(to_float32(x(r, c))));
  return result;
}

}  // namespace detail

namespace reference {

/// Per-tensor FP8 with a given encode scale (delayed scaling, docs/numerics_spec.md §10): code = fp8(x *
/// scale) rounded to nearest even with saturation; scale_inv = 1 / scale (TE's reciprocal). The
/// tensor records the input's amax. NaN / Inf: as `non_finite` says (fp8_non_finite); refused by
/// default (non_finite_error).
template <quantizer_input T>
fp8_tensor quantize_fp8_with_scale(matrix_view<const T> x, fp8_format format, float scale, quantized_axis axis = quantized_axis::rowwise,
                                   fp8_non_finite non_finite = fp8_non_finite::refuse) {
  detail::check_input_view(x, "quantize input");
  const float x_amax = non_finite == fp8_non_finite::refuse ? reference::amax(x) : detail::amax_ignoring_nan(x);
  fp8_tensor q(x.rows(), x.cols(), format, 0, 0, axis);
  for (index_t r = 0; r < x.rows(); ++r)
    for (index_t c = 0; c < x.cols(); ++c)
      q.codes()[static_cast<std::size_t>(r * x.cols() + c)] = fp8_encode(to_float32(x(r, c)) * scale, format);
  q.scale_inv()[0] = 1.0f / scale;
  q.set_scale(scale);
  q.set_amax(x_amax);
  return q;
}

/// Per-tensor current scaling (Float8CurrentScaling): the scale from this tensor's amax by
/// fp8_scale_from_amax (infinite scale -> FLT_MAX), then quantize_fp8_with_scale.
template <quantizer_input T>
fp8_tensor quantize_fp8_current(matrix_view<const T> x, fp8_format format, const fp8_scale_options& options = {},
                                quantized_axis axis = quantized_axis::rowwise) {
  const float x_amax = reference::amax(x);
  const float scale = fp8_scale_from_amax(x_amax, fp8_max(format), options.power_2_scale, options.amax_epsilon, FLT_MAX);
  return reference::quantize_fp8_with_scale(x, format, scale, axis);
}

/// FP8 block scaling (Float8BlockScaling): blocks of 1x128 or 128x128 along x's rows; each block's
/// scale from its own amax by fp8_scale_from_amax (infinite -> the input type's max), code =
/// fp8(x * scale), scale_inv = 1 / scale. Edge blocks are smaller (zero padding changes no amax).
template <quantizer_input T>
fp8_tensor quantize_fp8_blockwise(matrix_view<const T> x, fp8_format format, fp8_block_shape shape,
                                  const fp8_scale_options& options = {.power_2_scale = true},
                                  quantized_axis axis = quantized_axis::rowwise) {
  const float x_amax = reference::amax(x);
  const index_t block_rows = fp8_block_rows(shape);
  fp8_tensor q(x.rows(), x.cols(), format, block_rows, fp8_block_size, axis);
  for (index_t br = 0; br < q.scale_rows(); ++br)
    for (index_t bc = 0; bc < q.scale_cols(); ++bc) {
      const index_t r0 = br * block_rows, r1 = std::min(r0 + block_rows, x.rows());
      const index_t c0 = bc * fp8_block_size, c1 = std::min(c0 + fp8_block_size, x.cols());
      float block_amax = 0.0f;
      for (index_t r = r0; r < r1; ++r)
        for (index_t c = c0; c < c1; ++c) block_amax = std::max(block_amax, std::fabs(to_float32(x(r, c))));
      const float scale =
          fp8_scale_from_amax(block_amax, fp8_max(format), options.power_2_scale, options.amax_epsilon, input_max_finite<T>());
      q.scale_inv()[static_cast<std::size_t>(br * q.scale_cols() + bc)] = 1.0f / scale;
      for (index_t r = r0; r < r1; ++r)
        for (index_t c = c0; c < c1; ++c)
          q.codes()[static_cast<std::size_t>(r * x.cols() + c)] = fp8_encode(to_float32(x(r, c)) * scale, format);
    }
  q.set_amax(x_amax);
  return q;
}

/// Dequantizes: out(r, c) = decode(code) * scale_inv of its block (one fp32 multiply).
inline void dequantize(const fp8_tensor& q, matrix_view<float> out) {
  out.validate("dequantize output");
  detail::require(out.rows() == q.rows() && out.cols() == q.cols(), errc::shape_mismatch,
                  "dequantize: output is " + std::to_string(out.rows()) + "x" + std::to_string(out.cols()) + ", tensor is " +
                      std::to_string(q.rows()) + "x" + std::to_string(q.cols()));
  for (index_t r = 0; r < q.rows(); ++r)
    for (index_t c = 0; c < q.cols(); ++c) out(r, c) = q.element(r, c) * q.scale_inv_at(r, c);
}

}  // namespace reference

namespace detail {

/// Encodes x[0..n) * scale to FP8 codes with this build's fastest kernel.
inline void encode_fp8_scaled(const float* x, index_t n, float scale, fp8_format format, float* buffer, std::uint8_t* out) {
  for (index_t i = 0; i < n; ++i) buffer[i] = x[i] * scale;
  if (format == fp8_format::e4m3) {
    encode_codes<e4m3_traits>(buffer, n, out);
  } else {
    encode_codes<e5m2_traits>(buffer, n, out);
  }
}

/// Row r of x, columns [c0, c0 + n), as floats in `buffer` (a pointer into x itself when it is
/// already a contiguous float row).
template <quantizer_input T>
const float* load_row(matrix_view<const T> x, index_t r, index_t c0, index_t n, float* buffer) {
  if constexpr (std::is_same_v<T, float>) {
    if (x.rows_contiguous()) return x.row(r) + c0;
  }
  for (index_t c = 0; c < n; ++c) buffer[c] = to_float32(x(r, c0 + c));
  return buffer;
}

/// The fast per-tensor quantization: rows in parallel, each encoded by encode_codes.
template <quantizer_input T>
void quantize_fp8_rows(matrix_view<const T> x, fp8_tensor& q, float scale) {
  const bool parallel = simd::worth_parallel(x.size());
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bf16>) {
    if (!x.rows_contiguous() && x.row_stride() == 1 && x.rows() > 1) {
      // Columns contiguous (the columnwise copy of a row-major tensor): 16 rows transposed at a
      // time, so each cache line of the source is read once instead of once per row.
      constexpr index_t panel = 16;
      const index_t cols = x.cols();
      simd::parallel_ranges((x.rows() + panel - 1) / panel, parallel, [&](index_t begin, index_t end) {
        std::vector<float> rows(static_cast<std::size_t>(panel * cols)), scaled(static_cast<std::size_t>(cols));
        for (index_t p = begin; p < end; ++p) {
          const index_t r0 = p * panel, n = std::min(panel, x.rows() - r0);
          simd::fast_panels::transpose_panel(&x(r0, 0), x.col_stride(), n, cols, rows.data(), cols);
          for (index_t i = 0; i < n; ++i)
            encode_fp8_scaled(rows.data() + i * cols, cols, scale, q.format(), scaled.data(), q.codes().data() + (r0 + i) * cols);
        }
      });
      return;
    }
  }
  simd::parallel_ranges(x.rows(), parallel, [&](index_t begin, index_t end) {
    std::vector<float> row(static_cast<std::size_t>(x.cols())), scaled(static_cast<std::size_t>(x.cols()));
    for (index_t r = begin; r < end; ++r) {
      const float* values = load_row(x, r, 0, x.cols(), row.data());
      encode_fp8_scaled(values, x.cols(), scale, q.format(), scaled.data(), q.codes().data() + r * x.cols());
    }
  });
}

/// out as a per-tensor [rows, cols] tensor of this format and axis: kept where it is one already
/// (its codes are then all written over), else made anew.
inline void reuse_or_make(fp8_tensor& out, index_t rows, index_t cols, fp8_format format, quantized_axis axis) {
  if (out.per_tensor() && out.rows() == rows && out.cols() == cols && out.format() == format && out.axis() == axis &&
      out.codes().size() == static_cast<std::size_t>(rows * cols) && out.scale_inv().size() == 1)
    return;
  out = fp8_tensor(rows, cols, format, 0, 0, axis);
}

}  // namespace detail

/// Per-tensor FP8 with a given encode scale (delayed scaling): same result as
/// reference::quantize_fp8_with_scale. NaN / Inf in x: non_finite_error by default, TE's
/// delayed-scaling cast with fp8_non_finite::te_satfinite (see there). invalid_argument for a
/// scale that is not a positive finite number.
/// The into form writes `out`, a tensor the caller keeps: its storage is reused where it is already
/// a per-tensor copy of x's shape, format and axis (nothing allocated or zero-filled), else made
/// anew; throws as the other form, before anything of out is written.
template <quantizer_input T>
void quantize_fp8_with_scale_into(matrix_view<const T> x, fp8_format format, float scale, fp8_tensor& out,
                                  quantized_axis axis = quantized_axis::rowwise, fp8_non_finite non_finite = fp8_non_finite::refuse) {
  detail::check_input_view(x, "quantize input");
  detail::require(std::isfinite(scale) && scale > 0.0f, errc::invalid_argument,
                  "quantize_fp8_with_scale: the scale must be positive and finite, got " + std::to_string(scale));
  float x_amax = 0.0f;
  if (non_finite == fp8_non_finite::refuse) {
    x_amax = amax(x);
  } else {
    // One fast pass: max |x| bits above Inf's mean a NaN, whose rare tensors take a scalar pass.
    const std::uint32_t bits = detail::amax_bits_fast(x);
    x_amax = bits > detail::float_inf_bits ? detail::amax_ignoring_nan(x) : detail::bits_float(bits);
  }
  detail::reuse_or_make(out, x.rows(), x.cols(), format, axis);
  detail::quantize_fp8_rows(x, out, scale);  // Inf * scale saturates like any overflow, NaN is 0x7F
  out.scale_inv()[0] = 1.0f / scale;
  out.set_scale(scale);
  out.set_amax(x_amax);
}
template <quantizer_input T>
fp8_tensor quantize_fp8_with_scale(matrix_view<const T> x, fp8_format format, float scale, quantized_axis axis = quantized_axis::rowwise,
                                   fp8_non_finite non_finite = fp8_non_finite::refuse) {
  fp8_tensor q;
  quantize_fp8_with_scale_into(x, format, scale, q, axis, non_finite);
  return q;
}

/// Per-tensor current scaling (Float8CurrentScaling): same result as
/// reference::quantize_fp8_current. Throws non_finite_error on NaN/Inf.
/// The into form writes `out`, reused as quantize_fp8_with_scale_into reuses it.
template <quantizer_input T>
void quantize_fp8_current_into(matrix_view<const T> x, fp8_format format, const fp8_scale_options& options, fp8_tensor& out,
                               quantized_axis axis = quantized_axis::rowwise) {
  detail::check_input_view(x, "quantize input");
  const float x_amax = amax(x);
  const float scale = fp8_scale_from_amax(x_amax, fp8_max(format), options.power_2_scale, options.amax_epsilon, FLT_MAX);
  detail::reuse_or_make(out, x.rows(), x.cols(), format, axis);
  detail::quantize_fp8_rows(x, out, scale);
  out.scale_inv()[0] = 1.0f / scale;
  out.set_scale(scale);
  out.set_amax(x_amax);
}
template <quantizer_input T>
fp8_tensor quantize_fp8_current(matrix_view<const T> x, fp8_format format, const fp8_scale_options& options = {},
                                quantized_axis axis = quantized_axis::rowwise) {
  fp8_tensor q;
  quantize_fp8_current_into(x, format, options, q, axis);
  return q;
}

namespace detail {

/// fp8_scale_from_amax bound to a block quantization's format, options and input type.
struct fp8_block_rule {
  float max_fp8, epsilon, value_for_inf;
  bool power_2;
  float operator()(float amax) const { return fp8_scale_from_amax(amax, max_fp8, power_2, epsilon, value_for_inf); }
};

/// out as a block-scaled [rows, cols] tensor of this format, shape and axis: kept where it is one
/// already (every code and scale is then written over), else made anew.
inline void reuse_or_make_blocks(fp8_tensor& out, index_t rows, index_t cols, fp8_format format, fp8_block_shape shape,
                                 quantized_axis axis) {
  const index_t block_rows = fp8_block_rows(shape);
  if (!out.per_tensor() && out.rows() == rows && out.cols() == cols && out.format() == format && out.axis() == axis &&
      out.block_rows() == block_rows && out.block_cols() == fp8_block_size && out.codes().size() == static_cast<std::size_t>(rows * cols))
    return;
  out = fp8_tensor(rows, cols, format, block_rows, fp8_block_size, axis);
}

/// The block quantization of a view whose rows and columns are both strided (neither x nor xᵀ has
/// contiguous rows): block rows in parallel, elements gathered a row at a time.
template <quantizer_input T>
void quantize_fp8_blocks_strided(matrix_view<const T> x, fp8_block_shape shape, const fp8_block_rule& rule, fp8_tensor& q) {
  const index_t block_rows = fp8_block_rows(shape), scale_cols = q.scale_cols();
  simd::parallel_ranges(q.scale_rows(), simd::worth_parallel(x.size()), [&](index_t begin, index_t end) {
    std::vector<float> row(static_cast<std::size_t>(x.cols())), scaled(static_cast<std::size_t>(fp8_block_size));
    std::vector<float> block_amax(static_cast<std::size_t>(scale_cols)), scales(static_cast<std::size_t>(scale_cols));
    for (index_t br = begin; br < end; ++br) {
      const index_t r0 = br * block_rows, r1 = std::min(r0 + block_rows, x.rows());
      std::fill(block_amax.begin(), block_amax.end(), 0.0f);
      for (index_t r = r0; r < r1; ++r) {
        const float* values = load_row(x, r, 0, x.cols(), row.data());
        for (index_t c = 0; c < x.cols(); ++c) {
          float& m = block_amax[static_cast<std::size_t>(c / fp8_block_size)];
          m = std::max(m, std::fabs(values[c]));
        }
      }
      for (index_t bc = 0; bc < scale_cols; ++bc) {
        scales[static_cast<std::size_t>(bc)] = rule(block_amax[static_cast<std::size_t>(bc)]);
        q.scale_inv()[static_cast<std::size_t>(br * scale_cols + bc)] = 1.0f / scales[static_cast<std::size_t>(bc)];
      }
      for (index_t r = r0; r < r1; ++r) {
        const float* values = load_row(x, r, 0, x.cols(), row.data());
        for (index_t c0 = 0; c0 < x.cols(); c0 += fp8_block_size)
          encode_fp8_scaled(values + c0, std::min(fp8_block_size, x.cols() - c0), scales[static_cast<std::size_t>(c0 / fp8_block_size)],
                            q.format(), scaled.data(), q.codes().data() + r * x.cols() + c0);
      }
    }
  });
}

/// Where a copy of a tile walk goes (fp8_block_tiles::copy_out) in q.
inline fp8_block_tiles::copy_out tile_copy_of(fp8_tensor& q) { return {q.codes().data(), q.cols(), q.scale_inv().data(), q.scale_cols()}; }

/// FP8 block quantization of x into `along_rows` (blocks along x's rows: x's rowwise copy) and/or
/// `along_cols` (blocks along x's columns: the copy of xᵀ), each already of its shape; the
/// input checked and the tensor amax recorded by the caller. Through the tile walk where x or xᵀ
/// has contiguous rows, else gathered (quantize_fp8_blocks_strided).
template <quantizer_input T>
void quantize_fp8_blocks(matrix_view<const T> x, fp8_format format, fp8_block_shape shape, const fp8_scale_options& options,
                         fp8_tensor* along_rows, fp8_tensor* along_cols) {
  const fp8_block_rule rule{fp8_max(format), options.amax_epsilon, input_max_finite<T>(), options.power_2_scale};
  if (x.empty()) return;
  fp8_block_tiles::job<fp8_block_rule> job{
      .square = shape == fp8_block_shape::block_128x128, .e4m3 = format == fp8_format::e4m3, .rule = &rule, .rows = {}, .cols = {}};
  const bool parallel = simd::worth_parallel(x.size());
  if (x.rows_contiguous()) {
    if (along_rows) job.rows = tile_copy_of(*along_rows);
    if (along_cols) job.cols = tile_copy_of(*along_cols);
    fp8_block_tiles::quantize(x.data(), x.row_stride(), x.rows(), x.cols(), job, parallel);
  } else if (x.row_stride() == 1) {
    // x = sourceᵀ of a source with contiguous rows: x's blocks run down the source's columns.
    if (along_rows) job.cols = tile_copy_of(*along_rows);
    if (along_cols) job.rows = tile_copy_of(*along_cols);
    fp8_block_tiles::quantize(x.data(), x.col_stride(), x.cols(), x.rows(), job, parallel);
  } else {
    if (along_rows) quantize_fp8_blocks_strided(x, shape, rule, *along_rows);
    if (along_cols) quantize_fp8_blocks_strided(x.transposed(), shape, rule, *along_cols);
  }
}

}  // namespace detail

/// FP8 block scaling (Float8BlockScaling): same result as reference::quantize_fp8_blockwise.
/// Throws non_finite_error on NaN/Inf. The into form writes `out`, a tensor the caller keeps:
/// its storage is reused where it is already a block-scaled copy of x's shape, format, block
/// shape and axis (nothing allocated or zero-filled), else made anew; out is untouched on error.
template <quantizer_input T>
void quantize_fp8_blockwise_into(matrix_view<const T> x, fp8_format format, fp8_block_shape shape, const fp8_scale_options& options,
                                 fp8_tensor& out, quantized_axis axis = quantized_axis::rowwise) {
  detail::check_input_view(x, "quantize input");
  const float x_amax = amax(x);
  detail::reuse_or_make_blocks(out, x.rows(), x.cols(), format, shape, axis);
  detail::quantize_fp8_blocks(x, format, shape, options, &out, nullptr);
  out.set_scale(1.0f);
  out.set_amax(x_amax);
}
template <quantizer_input T>
fp8_tensor quantize_fp8_blockwise(matrix_view<const T> x, fp8_format format, fp8_block_shape shape,
                                  const fp8_scale_options& options = {.power_2_scale = true},
                                  quantized_axis axis = quantized_axis::rowwise) {
  fp8_tensor q;
  quantize_fp8_blockwise_into(x, format, shape, options, q, axis);
  return q;
}

/// Both copies of x that TE's Float8BlockScaling quantizer makes for a GEMM operand used twice:
/// `rowwise` = quantize_fp8_blockwise(x, ...) and `columnwise` = quantize_fp8_blockwise(xᵀ, ...,
/// quantized_axis::columnwise), the same bytes, from one read of x (each 128 x 128 tile of x
/// quantized both ways while it is in cache) and one amax pass. Both tensors are reused as the
/// into form reuses out; throws as it does, before either is written.
template <quantizer_input T>
void quantize_fp8_blockwise_both_into(matrix_view<const T> x, fp8_format format, fp8_block_shape shape, const fp8_scale_options& options,
                                      fp8_tensor& rowwise, fp8_tensor& columnwise) {
  detail::check_input_view(x, "quantize input");
  const float x_amax = amax(x);
  detail::reuse_or_make_blocks(rowwise, x.rows(), x.cols(), format, shape, quantized_axis::rowwise);
  detail::reuse_or_make_blocks(columnwise, x.cols(), x.rows(), format, shape, quantized_axis::columnwise);
  detail::quantize_fp8_blocks(x, format, shape, options, &rowwise, &columnwise);
  for (fp8_tensor* q : {&rowwise, &columnwise}) {
    q->set_scale(1.0f);
    q->set_amax(x_amax);
  }
}

/// Dequantizes q into out (same shape): decode(code) * the block's scale_inv.
inline void dequantize(const fp8_tensor& q, matrix_view<float> out) { reference::dequantize(q, out); }

}  // namespace nvfp4
