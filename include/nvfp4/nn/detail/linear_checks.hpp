// nvfp4/nn/detail/linear_checks.hpp: what nn::linear does the same way for every recipe around
// its policy: the argument checks made before anything changes, the copies in the layer's dtype
// (X, W, dY in, fp32 or bf16; Y, dX out, fp32 or bf16; on the library's threads) with NaN / Inf
// refused as the quantizers refuse them, and the bias as the quantized GEMMs add it.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/nn/linear_options.hpp"
#include "nvfp4/recipes/policy.hpp"
#include "nvfp4/recipes/recipe_common.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4::nn::detail {

using nvfp4::detail::require;

inline std::string shape(index_t r, index_t c) { return std::to_string(r) + "x" + std::to_string(c); }

/// rows * cols for a result buffer, refused (invalid_argument) above max_element_count.
inline std::size_t output_size(index_t rows, index_t cols) {
  return static_cast<std::size_t>(
      nvfp4::detail::checked_element_count(std::max<index_t>(rows, 0), cols, errc::invalid_argument, "linear output"));
}

/// A row-major [rows, cols] view of `buffer`, grown as needed (layer buffers are reused from step
/// to step: touching fresh memory costs more than the copies).
inline matrix_view<float> scratch(index_t rows, index_t cols, std::vector<float>& buffer) {
  const auto size = output_size(rows, cols);
  if (buffer.size() < size) buffer.resize(size);
  return matrix_view<float>::row_major(buffer.data(), rows, cols);
}

inline float in_dtype(float value, high_precision dtype) {
  return dtype == high_precision::bf16 ? bf16::from_float(value).to_float() : value;
}

/// out[i] = in[i] in the dtype (bf16: bf16::from_float(v).to_float(), NaN kept quiet) for n
/// contiguous values; returns the largest |value| bits seen (>= float_inf_bits: a NaN or Inf).
/// Branch-free, so the compiler vectorizes it; in_dtype is its scalar reference.
inline std::uint32_t row_in_dtype(const float* in, index_t n, float* out, high_precision dtype) {
  std::uint32_t largest = 0;
  if (dtype != high_precision::bf16) {
    for (index_t i = 0; i < n; ++i) {
      largest = std::max(largest, std::bit_cast<std::uint32_t>(in[i]) & 0x7FFFFFFFu);
      out[i] = in[i];
    }
    return largest;
  }
  for (index_t i = 0; i < n; ++i) {
    const std::uint32_t b = std::bit_cast<std::uint32_t>(in[i]);
    const std::uint32_t magnitude = b & 0x7FFFFFFFu;
    const std::uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u;
    const std::uint32_t quiet_nan = (b | 0x00400000u) & 0xFFFF0000u;
    largest = std::max(largest, magnitude);
    out[i] = std::bit_cast<float>(magnitude > 0x7F800000u ? quiet_nan : rounded);
  }
  return largest;
}

/// |v| as fp32 bits (>= float_inf_bits: a NaN or Inf).
inline std::uint32_t magnitude_bits(float v) { return std::bit_cast<std::uint32_t>(v) & 0x7FFFFFFFu; }
inline std::uint32_t magnitude_bits(bf16 v) { return (static_cast<std::uint32_t>(v.bits()) << 16) & 0x7FFFFFFFu; }

/// out = v widened to fp32 (exact: a bf16 value is in both dtypes), row by row on the library's
/// threads; returns the largest |value| bits seen.
inline std::uint32_t copy_in_dtype(matrix_view<const bf16> v, matrix_view<float> out, high_precision) {
  return simd::parallel_max(v.rows(), simd::worth_parallel(v.size()), [&](index_t begin, index_t end) {
    std::uint32_t largest = 0;
    for (index_t r = begin; r < end; ++r)
      for (index_t c = 0; c < v.cols(); ++c) {
        largest = std::max(largest, magnitude_bits(v(r, c)));
        out(r, c) = v(r, c).to_float();
      }
    return largest;
  });
}

/// out = v in the dtype, row by row on the library's threads (simd::parallel_ranges: each row one
/// writer); returns the largest |value| bits seen. v and out the same shape.
inline std::uint32_t copy_in_dtype(matrix_view<const float> v, matrix_view<float> out, high_precision dtype) {
  const index_t cols = v.cols();
  return simd::parallel_max(v.rows(), simd::worth_parallel(v.size()), [&](index_t begin, index_t end) {
    std::uint32_t largest = 0;
    for (index_t r = begin; r < end; ++r) {
      if (v.col_stride() == 1 && out.col_stride() == 1) {
        largest = std::max(largest, row_in_dtype(v.row(r), cols, &out(r, 0), dtype));
        continue;
      }
      for (index_t c = 0; c < cols; ++c) {
        const float value = v(r, c);
        largest = std::max(largest, std::bit_cast<std::uint32_t>(value) & 0x7FFFFFFFu);
        out(r, c) = in_dtype(value, dtype);
      }
    }
    return largest;
  });
}

/// The amax of a checked tensor from the largest |value| bits its pass saw, in the dtype it is
/// handed over in (rounding to bf16 is monotone, so the rounded maximum is the maximum of the
/// rounded values); -1 (unknown) where a value or the rounded maximum is not finite.
inline float amax_of(std::uint32_t largest, high_precision dtype) {
  if (largest >= 0x7F800000u) return -1.0f;
  const float a = std::bit_cast<float>(largest);
  const float in_dtype = dtype == high_precision::bf16 ? bf16::from_float(a).to_float() : a;
  return std::isfinite(in_dtype) ? in_dtype : -1.0f;
}

/// Throws non_finite_error for the first NaN / Inf of v in row-major order (v holds one).
template <class T>
[[noreturn]] void throw_first_non_finite(matrix_view<const T> v, const char* what) {
  for (index_t r = 0; r < v.rows(); ++r)
    for (index_t c = 0; c < v.cols(); ++c)
      if (const float value = static_cast<float>(v(r, c)); !std::isfinite(value)) throw non_finite_error(what, r, c, value);
  throw error(errc::non_finite_input, std::string(what) + " holds NaN or Inf");  // not reached
}

/// A row-major copy of v in the dtype, in `buffer`; rejects NaN / Inf (non_finite_error, the first
/// in row-major order) unless `allow_non_finite` (a recipe TE runs such tensors under: they are
/// copied as they are). The copy runs on the library's threads; on a refusal `buffer` holds
/// scratch.
/// `known_amax` (if given): the copy's amax when every value is finite, else -1.
template <class T>
matrix_view<const float> to_dtype(matrix_view<const T> v, const char* what, std::vector<float>& buffer, high_precision dtype,
                                  bool allow_non_finite = false, float* known_amax = nullptr) {
  const matrix_view<float> out = scratch(v.rows(), v.cols(), buffer);
  const std::uint32_t largest = copy_in_dtype(v, out, dtype);
  if (!allow_non_finite && largest >= 0x7F800000u) throw_first_non_finite(v, what);
  if (known_amax) *known_amax = amax_of(largest, std::is_same_v<T, bf16> ? high_precision::fp32 : dtype);
  return out;
}

/// v itself where the dtype is fp32 and nothing needs a copy that outlives the call (a quantized
/// recipe quantizes it at once), checked for NaN / Inf as to_dtype checks it, without copying;
/// otherwise to_dtype's copy (always for bf16 values: widened).
/// `known_amax`: the amax of the values handed over when the check found them all finite, else -1
/// (also for NaN / Inf a policy runs: its quantizers take their own amax).
template <class T>
matrix_view<const float> in_place_or_copy(matrix_view<const T> v, const char* what, std::vector<float>& buffer, high_precision dtype,
                                          bool allow_non_finite, bool needs_copy, float& known_amax) {
  if constexpr (std::is_same_v<T, float>) {
    if (!needs_copy && dtype == high_precision::fp32) {
      known_amax = -1.0f;
      if (allow_non_finite) return v;
      try {
        known_amax = amax(v);  // the check and the amax in one pass
      } catch (const non_finite_error&) {
        throw_first_non_finite(v, what);  // named as the layer names its tensors
      }
      return v;
    }
  }
  return to_dtype(v, what, buffer, dtype, allow_non_finite, &known_amax);
}

/// A row-major bf16 copy of v (bf16::from_float of each value: the values to_dtype gives for the
/// bf16 dtype, in half the bytes), in `buffer`; NaN / Inf as to_dtype.
inline matrix_view<const bf16> to_bf16(matrix_view<const float> v, const char* what, std::vector<bf16>& buffer, bool allow_non_finite,
                                       float& known_amax) {
  const auto size = output_size(v.rows(), v.cols());
  if (buffer.size() < size) buffer.resize(size);
  const auto out = matrix_view<bf16>::row_major(buffer.data(), v.rows(), v.cols());
  const index_t cols = v.cols();
  const std::uint32_t largest = simd::parallel_max(v.rows(), simd::worth_parallel(v.size()), [&](index_t begin, index_t end) {
    std::uint32_t seen = 0;
    for (index_t r = begin; r < end; ++r) {
      bf16* const row = &out(r, 0);
      for (index_t c = 0; c < cols; ++c) {  // branch-free: vectorized where v's columns are contiguous
        const std::uint32_t b = std::bit_cast<std::uint32_t>(v(r, c));
        const std::uint32_t magnitude = b & 0x7FFFFFFFu;
        const std::uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
        const std::uint32_t quiet_nan = (b >> 16) | 0x40u;
        seen = std::max(seen, magnitude);
        row[c] = bf16::from_bits(static_cast<std::uint16_t>(magnitude > 0x7F800000u ? quiet_nan : rounded));
      }
    }
    return seen;
  });
  if (!allow_non_finite && largest >= 0x7F800000u) throw_first_non_finite(v, what);
  known_amax = amax_of(largest, high_precision::bf16);
  return out;
}

/// bf16 values as a row-major view: v itself when it is one, else a copy in `buffer`; NaN / Inf as
/// to_dtype (the bf16 tensors a bf16 layer's NVFP4 quantizers read as they are).
inline matrix_view<const bf16> as_bf16(matrix_view<const bf16> v, const char* what, std::vector<bf16>& buffer, bool allow_non_finite,
                                       float& known_amax) {
  const bool row_major = v.col_stride() == 1 && (v.rows() <= 1 || v.row_stride() == v.cols());
  matrix_view<const bf16> out = v;
  if (!row_major) {
    const auto size = output_size(v.rows(), v.cols());
    if (buffer.size() < size) buffer.resize(size);
    const auto copy = matrix_view<bf16>::row_major(buffer.data(), v.rows(), v.cols());
    for (index_t r = 0; r < v.rows(); ++r)
      for (index_t c = 0; c < v.cols(); ++c) copy(r, c) = v(r, c);
    out = matrix_view<const bf16>::row_major(buffer.data(), v.rows(), v.cols());
  }
  known_amax = -1.0f;
  if (allow_non_finite) return out;
  const std::uint32_t largest = simd::parallel_max(out.rows(), simd::worth_parallel(out.size()), [&](index_t begin, index_t end) {
    std::uint32_t seen = 0;
    for (index_t r = begin; r < end; ++r)
      for (index_t c = 0; c < out.cols(); ++c) seen = std::max(seen, magnitude_bits(out(r, c)));
    return seen;
  });
  if (largest >= 0x7F800000u) throw_first_non_finite(out, what);
  known_amax = amax_of(largest, high_precision::fp32);
  return out;
}

/// to = from rounded to the dtype (on the library's threads, as to_dtype).
inline void write_in_dtype(matrix_view<const float> from, matrix_view<float> to, high_precision dtype) {
  (void)copy_in_dtype(from, to, dtype);
}
/// to = from rounded once to bf16 (bf16::from_float), on the library's threads.
inline void write_in_dtype(matrix_view<const float> from, matrix_view<bf16> to, high_precision) {
  simd::parallel_ranges(from.rows(), simd::worth_parallel(from.size()), [&](index_t begin, index_t end) {
    for (index_t r = begin; r < end; ++r)
      for (index_t c = 0; c < from.cols(); ++c) to(r, c) = bf16::from_float(from(r, c));
  });
}

/// A matrix's rows and columns, after validating its view (null_pointer for a null one).
struct extent {
  index_t rows = 0, cols = 0;
};
template <class... Views>
extent validated(const std::variant<Views...>& v, const char* what) {
  return std::visit(
      [&](const auto& m) {
        m.validate(what);
        return extent{m.rows(), m.cols()};
      },
      v);
}
inline extent validated(matrix_view<float> m, const char* what) {
  m.validate(what);
  return {m.rows(), m.cols()};
}

/// db[j] = the fp32 sum of dy's rows in row order (each column's chain as a serial loop adds it),
/// columns split over the library's threads.
template <class T>
void sum_rows(matrix_view<const T> dy, std::span<float> db) {
  const index_t chunk = 64;  // columns per work item: a cache line of each row per item
  const index_t items = (dy.cols() + chunk - 1) / chunk;
  simd::parallel_ranges(items, simd::worth_parallel(dy.size()), [&](index_t begin, index_t end) {
    const index_t c0 = begin * chunk, c1 = std::min(dy.cols(), end * chunk);
    for (index_t j = c0; j < c1; ++j) db[static_cast<std::size_t>(j)] = 0.0f;
    for (index_t i = 0; i < dy.rows(); ++i)
      for (index_t j = c0; j < c1; ++j) db[static_cast<std::size_t>(j)] += static_cast<float>(dy(i, j));
  });
}

/// forward's and infer's checks of X [M, in], Y [M, out], W [out, in] and b [out] (or none).
inline void check_forward_call(index_t in, index_t out, bool has_bias, extent weight, std::size_t bias_size, bool bias_null, extent x,
                               extent y, const char* who) {
  require(x.cols == in, errc::shape_mismatch,
          std::string(who) + ": X has " + std::to_string(x.cols) + " columns, the layer " + std::to_string(in) + " inputs");
  require(y.rows == x.rows && y.cols == out, errc::shape_mismatch,
          std::string(who) + ": Y is " + shape(y.rows, y.cols) + ", expected " + shape(x.rows, out));
  require(weight.rows == out && weight.cols == in, errc::shape_mismatch,
          std::string(who) + ": W is " + shape(weight.rows, weight.cols) + ", expected " + shape(out, in));
  const std::size_t expected = has_bias ? static_cast<std::size_t>(out) : 0;
  require(bias_size == expected, errc::shape_mismatch,
          std::string(who) + ": b has " + std::to_string(bias_size) + " values, expected " + std::to_string(expected) +
              (has_bias ? "" : " (the layer has no bias)"));
  require(bias_size == 0 || !bias_null, errc::null_pointer, std::string(who) + ": b is a null pointer");
}

/// backward's checks: a forward of `rows` rows saved; dY [rows, out], dX [rows, in], dW [out, in], db.
inline void check_backward_call(index_t in, index_t out, bool has_bias, bool saved, index_t rows, extent dy, extent dx, extent dw,
                                std::span<float> db) {
  require(saved, errc::invalid_argument, "linear::backward: no forward to differentiate (call forward first)");
  require(dy.rows == rows && dy.cols == out, errc::shape_mismatch,
          "linear::backward: dY is " + shape(dy.rows, dy.cols) + ", expected " + shape(rows, out));
  require(dx.rows == rows && dx.cols == in, errc::shape_mismatch,
          "linear::backward: dX is " + shape(dx.rows, dx.cols) + ", expected " + shape(rows, in));
  require(dw.rows == out && dw.cols == in, errc::shape_mismatch,
          "linear::backward: dW is " + shape(dw.rows, dw.cols) + ", expected " + shape(out, in));
  require(db.size() == (has_bias ? static_cast<std::size_t>(out) : 0), errc::shape_mismatch,
          "linear::backward: db has " + std::to_string(db.size()) + " values, expected " + std::to_string(has_bias ? out : 0));
}

/// f(v in the layer's dtype, its amax) for policy P: v itself where it is already (fp32, no copy
/// kept past the call), else an fp32 copy in `buffer`; for a bf16 layer whose policy reads bf16
/// tensors (reads_bf16: the same values in half the bytes) without an amax rule (which sees fp32
/// values), bf16 values as given or a bf16 copy in `bf16_buffer`. NaN / Inf refused unless P runs
/// them. The amax comes from the same pass as the check (-1 where unknown), so a policy need not
/// read the tensor again for it (linear_context::tensor_amax).
template <class P, class T, class F>
void with_input(const linear_options& o, matrix_view<const T> v, const char* what, std::vector<float>& buffer,
                std::vector<bf16>& bf16_buffer, bool kept, F&& f) {
  constexpr bool allow_non_finite = runs_non_finite<P>();
  float known_amax = -1.0f;
  if constexpr (requires { P::reads_bf16; }) {
    if (o.dtype == high_precision::bf16 && !o.nvfp4_amax) {
      if constexpr (std::is_same_v<T, bf16>) {
        const auto view = as_bf16(v, what, bf16_buffer, allow_non_finite, known_amax);
        f(view, known_amax);
      } else {
        const auto view = to_bf16(v, what, bf16_buffer, allow_non_finite, known_amax);
        f(view, known_amax);
      }
      return;
    }
  }
  const auto view = in_place_or_copy(v, what, buffer, o.dtype, allow_non_finite, kept, known_amax);
  f(view, known_amax);
}

/// The bias as the GEMMs add it: a quantized recipe's GEMM adds it in bf16 (TE's linear.py casts
/// it to bf16 when the activations are fp32, as cuBLAS has no FP8 GEMM with an fp32 bias, and a
/// bf16 layer's bias is a bf16 parameter); no quantization adds it as given. bf16 values are
/// widened. Copies go to `scratch`.
inline std::span<const float> gemm_bias(const input_vector& b, bool quantized, std::vector<float>& scratch) {
  return std::visit(
      [&]<class B>(std::span<const B> given) -> std::span<const float> {
        if constexpr (std::is_same_v<B, float>) {
          if (given.empty() || !quantized) return given;
        }
        scratch.resize(given.size());
        for (std::size_t i = 0; i < given.size(); ++i) scratch[i] = bf16::from_float(static_cast<float>(given[i])).to_float();
        return scratch;
      },
      b);
}

/// A layer's weight element count (out x in), checked with its sizes and options before anything
/// is allocated: invalid_argument for negative sizes, a weight over max_element_count elements, a
/// promotion_interval that is not 0 or a multiple of 32.
inline index_t checked_weight_count(index_t in, index_t out, const linear_options& options) {
  require(in >= 0 && out >= 0, errc::invalid_argument, "linear: negative feature count");
  const index_t weight_count = nvfp4::detail::checked_element_count(out, in, errc::invalid_argument, "linear weight");
  require(options.promotion_interval >= 0 && options.promotion_interval % fp8::mma::step_k == 0, errc::invalid_argument,
          "linear: promotion_interval must be 0 or a multiple of 32");
  return weight_count;
}

/// What a layer hands its policy: its sizes and GEMM options, the call's bias as the GEMMs add it,
/// and the amax of the tensor handed over (-1: unknown).
inline linear_context context_of(index_t in, index_t out, const linear_options& options, std::span<const float> bias, float tensor_amax) {
  return {.in_features = in,
          .out_features = out,
          .mode = options.mode,
          .fp8_tensor_core = options.fp8_tensor_core,
          .promotion_interval = options.promotion_interval,
          .amax_rule = &options.nvfp4_amax,
          .bias = bias,
          .tensor_amax = tensor_amax};
}

/// A layer's output Y or dX (fp32 or bf16) = from in the layer's dtype.
inline void write_output(matrix_view<const float> from, output_matrix to, high_precision dtype) {
  std::visit([&](auto out) { write_in_dtype(from, out, dtype); }, to);
}

/// forward's and infer's checks of the call's views (validated first: null_pointer), as
/// check_forward_call below.
inline void check_forward_views(index_t in, index_t out, bool has_bias, const linear_parameters& p, const input_matrix& x,
                                const output_matrix& y, const char* who) {
  const extent xe = validated(x, "linear input"), ye = validated(y, "linear output"), we = validated(p.weight, "linear weight");
  const auto [bias_size, bias_null] = std::visit([](auto b) { return std::pair{b.size(), b.data() == nullptr}; }, p.bias);
  check_forward_call(in, out, has_bias, we, bias_size, bias_null, xe, ye, who);
}

}  // namespace nvfp4::nn::detail
