// nvfp4/transforms/hadamard.hpp: the public random Hadamard transform (docs/numerics_spec.md §4, whose rule
// is transforms/hadamard_reference.hpp) and the columnwise-copy helpers. The fast paths (16-point
// bf16 blocks of a columnwise copy: float32 FWHT on a vector of blocks; other cases: float64 FWHT
// on a vector of blocks; detail/hadamard_walks.hpp) are bit-identical to reference::hadamard_rows
// for every input and thread count; this header only chooses among them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/simd/dispatch.hpp"
#include "nvfp4/transforms/detail/hadamard_blocks.hpp"
#include "nvfp4/transforms/detail/hadamard_walks.hpp"
#include "nvfp4/transforms/hadamard_reference.hpp"

namespace nvfp4 {

namespace detail {

/// The Hadamard walks of this build's ISA (simd/dispatch.hpp picks the Ops).
using fast_hadamard_walks = hadamard_walks<simd::ops>;

/// The fast transform of x's rows into out; returns max |out| as bf16 bits (0x7F80 on overflow)
/// and sets `non_finite` when x holds NaN/Inf (out is then partly garbage). No checks here.
template <class T>
std::uint16_t hadamard_rows_fast(matrix_view<const T> x, const hadamard_transform& t, hadamard_direction direction, matrix_view<bf16> out,
                                 bool& non_finite) {
  using walks = fast_hadamard_walks;
  // bf16 blocks of 16 along rows that are columns in memory (the columnwise copy): the float32
  // tile kernel on the rows in full panels of one vector, the general path for the rest.
  if constexpr (std::is_same_v<T, bf16>) {
    if (t.size() == 16 && x.row_stride() == 1 && x.col_stride() != 1 && out.col_stride() == 1 && x.rows() >= walks::lanes) {
      const index_t done = x.rows() / walks::lanes * walks::lanes;
      std::uint16_t largest = walks::columnwise_transform(x, t, direction, out, non_finite);
      if (done < x.rows()) {
        bool tail_non_finite = false;
        const matrix_view<const T> x_rest(&x(done, 0), x.rows() - done, x.cols(), x.row_stride(), x.col_stride());
        const matrix_view<bf16> out_rest(&out(done, 0), out.rows() - done, out.cols(), out.row_stride(), out.col_stride());
        largest = std::max(largest, walks::rows_transform(x_rest, t, direction, out_rest, tail_non_finite));
        non_finite = non_finite || tail_non_finite;
      }
      return largest;
    }
  }
  return walks::rows_transform(x, t, direction, out, non_finite);
}

/// Below this biased exponent (|x| < 2^123) no output can overflow bf16: |y| <= sqrt(n) max|x|
/// <= 16 max|x| < 2^127 for n <= 256.
inline constexpr std::uint32_t hadamard_overflow_exponent = 127 + 123;

/// Throws errc::overflow for the first Inf in `out`, the transform of the rows of `x` (finite):
/// `what` names the input, `columnwise` reports the place in the source of a columnwise copy.
template <class T>
[[noreturn]] void throw_hadamard_overflow(matrix_view<const T> x, matrix_view<const bf16> out, int n, const char* what, bool columnwise) {
  for (index_t r = 0; r < out.rows(); ++r)
    for (index_t c = 0; c < out.cols(); ++c) {
      if ((out(r, c).bits() & 0x7FFFu) < 0x7F80u) continue;
      const index_t c0 = c / n * n;
      float largest = 0.0f;
      for (index_t i = c0; i < c0 + n; ++i) largest = std::max(largest, std::fabs(to_float32(x(r, i))));
      const std::string place =
          columnwise ? "source column " + std::to_string(r) + ", rows " + std::to_string(c0) + ".." + std::to_string(c0 + n - 1)
                     : "row " + std::to_string(r) + ", columns " + std::to_string(c0) + ".." + std::to_string(c0 + n - 1);
      throw error(errc::overflow, std::string(what) + ": the Hadamard transform of finite values overflows bf16 at " + place +
                                      " (largest |x| there " + number_text(largest) + "); scale the tensor down");
    }
  throw error(errc::overflow, std::string(what) + ": the Hadamard transform overflows bf16");
}

}  // namespace detail

/// Applies t to every block of n consecutive elements of each row of x (out(r, c) in bf16),
/// forward (y = x * T) or inverse (x = y * Tᵀ). For the columnwise copy of a tensor (along the
/// token dimension M, docs/numerics_spec.md §4) pass x.transposed(). Bit-identical to
/// reference::hadamard_rows. Throws shape_mismatch unless x.cols() is a multiple of n,
/// non_finite_error on NaN/Inf, errc::overflow (naming the block) when a finite input's transform
/// exceeds bf16; nothing is written before the checks pass.
template <quantizer_input T>
void hadamard_rows(matrix_view<const T> x, const hadamard_transform& t, matrix_view<bf16> out,
                   hadamard_direction direction = hadamard_direction::forward) {
  detail::check_hadamard_shapes(x, t, out);
  if (x.empty()) return;  // before any loop over the other dimension (it may be huge)
  bool non_finite = false;
  if (detail::has_non_finite(x, detail::hadamard_overflow_exponent)) {
    // NaN/Inf, or values large enough to overflow: transform into scratch memory first, so that
    // `out` is left as it was when the result does not fit.
    detail::throw_first_non_finite(x, "hadamard input");
    std::vector<bf16> scratch(static_cast<std::size_t>(x.rows() * x.cols()));
    const auto scratch_view = matrix_view<bf16>::row_major(scratch.data(), x.rows(), x.cols());
    if (detail::hadamard_rows_fast(x, t, direction, scratch_view, non_finite) >= 0x7F80u)
      detail::throw_hadamard_overflow(x, matrix_view<const bf16>(scratch_view), t.size(), "hadamard input", false);
    for (index_t r = 0; r < x.rows(); ++r)
      for (index_t c = 0; c < x.cols(); ++c) out(r, c) = scratch_view(r, c);
    return;
  }
  detail::hadamard_rows_fast(x, t, direction, out, non_finite);
}

/// The input of a columnwise copy with RHT: RHT(xᵀ) as a row-major [N, M] bf16 matrix (for x of
/// shape [M, N]), and its amax (taken after the transform, docs/numerics_spec.md §4).
struct columnwise_rht {
  std::vector<bf16> values;
  index_t rows = 0;  ///< N, the source's columns
  index_t cols = 0;  ///< M, the source's rows (the transformed dimension)
  float amax = 0.0f;
  matrix_view<const bf16> view() const { return matrix_view<const bf16>::row_major(values.data(), rows, cols); }
};

/// RHT(xᵀ): t applied along x's rows dimension M in blocks of n, for every column of x.
/// Throws shape_mismatch unless M is a multiple of n; non_finite_error on NaN/Inf in x;
/// errc::overflow, naming the block, when the transform of finite x overflows bf16.
/// This form writes into `result`, reusing its storage (a caller's scratch kept from call to call).
template <quantizer_input T>
void rht_columnwise(matrix_view<const T> x, const hadamard_transform& t, columnwise_rht& result) {
  const matrix_view<const T> source = x.transposed();
  detail::check_rht_columnwise(x, t);
  result.rows = source.rows();
  result.cols = source.cols();
  result.amax = 0.0f;
  if (x.empty()) return;                                                      // amax 0; before any loop over the other dimension
  result.values.resize(static_cast<std::size_t>(result.rows * result.cols));  // within its capacity: nothing allocated
  bool non_finite = false;
  const auto out = matrix_view<bf16>::row_major(result.values.data(), result.rows, result.cols);
  const std::uint16_t largest = detail::hadamard_rows_fast(source, t, hadamard_direction::forward, out, non_finite);
  if (non_finite) detail::throw_first_non_finite(x, "rht input");
  if (largest >= 0x7F80u) detail::throw_hadamard_overflow(source, matrix_view<const bf16>(out), t.size(), "rht input", true);
  result.amax = bf16::from_bits(largest).to_float();
}
template <quantizer_input T>
columnwise_rht rht_columnwise(matrix_view<const T> x, const hadamard_transform& t = hadamard_transform::te_default()) {
  columnwise_rht result;
  rht_columnwise(x, t, result);
  return result;
}

namespace detail {

/// quantize_columnwise_rht for NVFP4 1x16, bf16 input with at least one vector of columns,
/// round to nearest even, t of size 16: no bf16 intermediate. Pass 1 transforms for the amax only; pass 2
/// transforms again and quantizes each tile in registers (its lanes are the copy's blocks).
/// Source columns past the last full vector go through the general transform and fast quantizer.
/// Writes into q, reusing its storage where it has the copy's shape.
inline void quantize_columnwise_rht_fused(matrix_view<const bf16> x, const hadamard_transform& t, nvfp4_tensor& q) {
  using walks = fast_hadamard_walks;
  check_rht_columnwise(x, t);
  const matrix_view<const bf16> source = x.transposed();  // [N, M], blocks along M
  const index_t rows = source.rows(), cols = source.cols(), done = rows / walks::lanes * walks::lanes;
  bool non_finite = false;
  std::uint16_t largest = walks::columnwise_abs_max(source, t, non_finite);
  std::vector<bf16> tail(static_cast<std::size_t>((rows - done) * cols));
  const auto tail_view = matrix_view<bf16>::row_major(tail.data(), rows - done, cols);
  if (done < rows) {
    bool tail_non_finite = false;
    const matrix_view<const bf16> rest(&source(done, 0), rows - done, cols, source.row_stride(), source.col_stride());
    largest = std::max(largest, walks::rows_transform(rest, t, hadamard_direction::forward, tail_view, tail_non_finite));
    non_finite = non_finite || tail_non_finite;
  }
  if (non_finite) detail::throw_first_non_finite(x, "rht input");
  if (largest >= 0x7F80u) (void)rht_columnwise(x, t);  // overflow: throws, saying where
  detail::require(largest < 0x7F80u, errc::overflow, "rht input: the Hadamard transform overflows bf16");
  const float amax = bf16::from_bits(largest).to_float();

  if (q.rows() != rows || q.cols() != cols || q.axis() != quantized_axis::columnwise)
    q = nvfp4_tensor(rows, cols, quantized_axis::columnwise);
  const tensor_scale scale = nvfp4_tensor_scale(amax);
  q.set_tensor_scale(amax, scale.encode, scale.decode);
  std::uint8_t* const data = bytes_of(q.data());
  std::uint8_t* const scales = bytes_of(q.scales());
  const index_t data_stride = q.data_row_stride(), scale_stride = q.scale_cols();
  walks::columnwise_quantize(source, t, scale, data, data_stride, scales, scale_stride);
  if (done < rows) {
    const auto tail_q = quantize_with_amax_fast<nvfp4_1x16>(matrix_view<const bf16>(tail_view), amax, {});
    const std::uint8_t* tail_data = bytes_of(tail_q.data());
    const std::uint8_t* tail_scales = bytes_of(tail_q.scales());
    std::copy_n(tail_data, (rows - done) * data_stride, data + done * data_stride);
    std::copy_n(tail_scales, (rows - done) * scale_stride, scales + done * scale_stride);
  }
}

}  // namespace detail

/// The columnwise copy of x with RHT, as TransformerEngine's NVFP4 recipe makes it for the Wgrad
/// GEMM: RHT(xᵀ) in bf16, quantized with blocks along M and the tensor scale from its own amax.
/// Same result as rht_columnwise then quantize_with_amax (for NVFP4 1x16 from bf16 with round to
/// nearest, computed without the bf16 intermediate).
/// The into form writes the copy into `out` and the bf16 transform into `scratch`, both kept by the
/// caller and reused where they have the shapes already (nothing allocated or zero-filled then);
/// same bits as quantize_columnwise_rht. It always goes through the kept transform: one transposed
/// walk over x, then the row quantizer on contiguous bf16, which is faster than the fused path's
/// two walks (docs/benchmarks.md, "NVFP4 step outside its GEMMs"). The value form, with no storage
/// kept, takes the fused path (no 2-byte-per-element scratch).
/// Throws as quantize_columnwise_rht, before anything of out is written.
template <block_scaled_format Format = nvfp4_1x16, quantizer_input T>
void quantize_columnwise_rht_into(matrix_view<const T> x, const hadamard_transform& t, quantize_options options,
                                  quantized_tensor<Format>& out, columnwise_rht& scratch) {
  detail::check_rounding<Format>(options);
  rht_columnwise(x, t, scratch);
  options.axis = quantized_axis::columnwise;
  if (out.rows() != scratch.rows || out.cols() != scratch.cols || out.axis() != options.axis)
    out = quantized_tensor<Format>(scratch.rows, scratch.cols, options.axis);
  detail::quantize_with_amax_fast<Format>(scratch.view(), scratch.amax, options, out);
}
template <block_scaled_format Format = nvfp4_1x16, quantizer_input T>
quantized_tensor<Format> quantize_columnwise_rht(matrix_view<const T> x, const hadamard_transform& t = hadamard_transform::te_default(),
                                                 quantize_options options = {}) {
  quantized_tensor<Format> out;
  if constexpr (std::is_same_v<Format, nvfp4_1x16> && std::is_same_v<T, bf16>) {
    detail::check_rounding<Format>(options);
    if (options.rounding == rounding_mode::nearest_even && t.size() == 16 && x.cols() >= detail::fast_hadamard_walks::lanes && !x.empty()) {
      detail::quantize_columnwise_rht_fused(x, t, out);
      return out;
    }
  }
  columnwise_rht scratch;
  quantize_columnwise_rht_into(x, t, options, out, scratch);
  return out;
}

}  // namespace nvfp4
