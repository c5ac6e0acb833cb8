// nvfp4/transforms/hadamard.hpp: the public random Hadamard transform (NUMERICS.md §4): the fast
// path (FWHT on 8 blocks per AVX-512 register, OpenMP over panels), bit-identical to
// reference::hadamard_rows for every input and thread count, and the columnwise-copy helpers.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/transforms/hadamard_reference.hpp"
#include "nvfp4/transforms/simd/hadamard_avx512.hpp"

#if NVFP4_HAS_OPENMP
#include <omp.h>
#endif

namespace nvfp4 {

namespace detail {

/// True when x holds NaN or Inf, reading memory in its own order (fast for transposed views).
template <class T>
bool has_non_finite(matrix_view<const T> x) {
  auto exponent_all_ones = [](T v) {
    if constexpr (std::is_same_v<T, float>) return (std::bit_cast<std::uint32_t>(v) & 0x7F800000u) == 0x7F800000u;
    else return (v.bits() & 0x7F80u) == 0x7F80u;
  };
  const bool transposed = x.row_stride() == 1 && x.col_stride() != 1;
  const index_t outer = transposed ? x.cols() : x.rows(), inner = transposed ? x.rows() : x.cols();
  bool found = false;
#if NVFP4_HAS_OPENMP
#pragma omp parallel for reduction(|| : found) schedule(static)
#endif
  for (index_t a = 0; a < outer; ++a) {
    bool line = false;
    for (index_t b = 0; b < inner; ++b) line |= exponent_all_ones(transposed ? x(b, a) : x(a, b));
    found = found || line;
  }
  return found;
}

/// The transform of one block (row r, columns c0 .. c0 + n) by the exact reference. Returns false,
/// writing nothing, when the block holds NaN/Inf.
template <class T>
bool hadamard_block_exact(matrix_view<const T> x, index_t r, index_t c0, const hadamard_transform& t,
                          hadamard_direction direction, std::uint16_t* out_bits, index_t out_stride) {
  float block[hadamard_transform::max_size];
  for (int i = 0; i < t.size(); ++i) {
    block[i] = to_float32(x(r, c0 + i));
    if (!std::isfinite(block[i])) return false;
  }
  for (int j = 0; j < t.size(); ++j) out_bits[j * out_stride] = hadamard_output_bits(block, t, direction, j);
  return true;
}

/// The fast transform of x's rows into out; returns max |out| as bf16 bits (0x7F80 on overflow)
/// and sets `non_finite` when x holds NaN/Inf (out is then partly garbage). No checks here.
template <class T>
std::uint16_t hadamard_rows_fast(matrix_view<const T> x, const hadamard_transform& t, hadamard_direction direction,
                                 matrix_view<bf16> out, bool& non_finite) {
  const int n = t.size();
  const index_t rows = x.rows(), blocks_per_row = x.cols() / n;
  constexpr index_t lanes = 8;
  const index_t full_panels = NVFP4_HAS_AVX512 ? rows / lanes : 0;
  std::uint16_t largest = 0;
  bool bad = false;
  std::vector<double> sign_values(t.signs().begin(), t.signs().end());
  // The double sums are exact when n * max|x| <= 2^53 * (smallest input ulp), and that ulp is
  // above |x| * 2^-precision (8 bits for bf16, 24 for float).
  constexpr int input_precision = std::is_same_v<T, float> ? 24 : 8;
  [[maybe_unused]] const double guard_ratio = std::ldexp(1.0, 53 - std::countr_zero(static_cast<unsigned>(n)) - input_precision);
  [[maybe_unused]] const double scale = t.exact_scale() ? std::ldexp(1.0, -t.half_log2_size()) : t.scale();

#if NVFP4_HAS_OPENMP
#pragma omp parallel reduction(max : largest) reduction(|| : bad)
#endif
  {
    std::vector<std::uint16_t> bits(static_cast<std::size_t>(n * lanes));
    std::vector<T> gathered(static_cast<std::size_t>(n * lanes));
    auto record = [&](index_t r, index_t c0, const std::uint16_t* values, index_t stride) {
      for (int j = 0; j < n; ++j) {
        const std::uint16_t b = values[j * stride];
        largest = std::max<std::uint16_t>(largest, b & 0x7FFF);
        out(r, c0 + j) = bf16::from_bits(b);
      }
    };
#if NVFP4_HAS_AVX512
    const simd::avx512::hadamard_kernel_params params{sign_values.data(), direction == hadamard_direction::inverse,
                                                      t.exact_scale(), scale, guard_ratio};
#if NVFP4_HAS_OPENMP
#pragma omp for schedule(static) nowait
#endif
    for (index_t task = 0; task < full_panels * blocks_per_row; ++task) {
      // Consecutive tasks walk along the rows of the source's memory (a transposed view's
      // columns), so each loaded cache line is used whole.
      const index_t r0 = task % full_panels * lanes, c0 = task / full_panels * n;
      const T* source;
      std::ptrdiff_t i_stride;
      if (x.row_stride() == 1) {  // the 8 blocks' elements i sit side by side (a transposed view)
        source = &x(r0, c0);
        i_stride = x.col_stride();
      } else {
        for (int i = 0; i < n; ++i)
          for (index_t lane = 0; lane < lanes; ++lane) gathered[static_cast<std::size_t>(i * lanes + lane)] = x(r0 + lane, c0 + i);
        source = gathered.data();
        i_stride = lanes;
      }
      __mmask8 lane_non_finite = 0, redo = 0;
      switch (n) {
        case 16: redo = simd::avx512::hadamard_panel8<16>(source, i_stride, params, bits.data(), lane_non_finite); break;
        case 32: redo = simd::avx512::hadamard_panel8<32>(source, i_stride, params, bits.data(), lane_non_finite); break;
        case 64: redo = simd::avx512::hadamard_panel8<64>(source, i_stride, params, bits.data(), lane_non_finite); break;
        case 128: redo = simd::avx512::hadamard_panel8<128>(source, i_stride, params, bits.data(), lane_non_finite); break;
        default: redo = simd::avx512::hadamard_panel8<256>(source, i_stride, params, bits.data(), lane_non_finite); break;
      }
      if (lane_non_finite) bad = true;
      for (index_t lane = 0; lane < lanes; ++lane)
        if ((redo >> lane) & 1) hadamard_block_exact(x, r0 + lane, c0, t, direction, bits.data() + lane, lanes);
      for (index_t lane = 0; lane < lanes; ++lane) record(r0 + lane, c0, bits.data() + lane, lanes);
    }
#endif
    // Rows past the last full panel of 8 (all rows without AVX-512): the exact reference.
#if NVFP4_HAS_OPENMP
#pragma omp for schedule(static)
#endif
    for (index_t task = 0; task < (rows - full_panels * lanes) * blocks_per_row; ++task) {
      const index_t r = full_panels * lanes + task / blocks_per_row, c0 = task % blocks_per_row * n;
      if (!hadamard_block_exact(x, r, c0, t, direction, bits.data(), 1)) {
        bad = true;
        continue;
      }
      record(r, c0, bits.data(), 1);
    }
  }
  non_finite = bad;
  return largest;
}

}  // namespace detail

/// Applies t to every block of n consecutive elements of each row of x (out(r, c) in bf16),
/// forward (y = x * T) or inverse (x = y * Tᵀ). For the columnwise copy of a tensor (along the
/// token dimension M, NUMERICS.md §4) pass x.transposed(). Bit-identical to
/// reference::hadamard_rows. Throws shape_mismatch unless x.cols() is a multiple of n,
/// non_finite_error on NaN/Inf; nothing is written before the checks pass.
template <quantizer_input T>
void hadamard_rows(matrix_view<const T> x, const hadamard_transform& t, matrix_view<bf16> out,
                   hadamard_direction direction = hadamard_direction::forward) {
  detail::check_hadamard_shapes(x, t, out);
  if (detail::has_non_finite(x)) detail::throw_first_non_finite(x, "hadamard input");
  bool non_finite = false;
  detail::hadamard_rows_fast(x, t, direction, out, non_finite);
}

/// The input of a columnwise copy with RHT: RHT(xᵀ) as a row-major [N, M] bf16 matrix (for x of
/// shape [M, N]), and its amax (taken after the transform, NUMERICS.md §4).
struct columnwise_rht {
  std::vector<bf16> values;
  index_t rows = 0;  ///< N, the source's columns
  index_t cols = 0;  ///< M, the source's rows (the transformed dimension)
  float amax = 0.0f;
  matrix_view<const bf16> view() const { return matrix_view<const bf16>::row_major(values.data(), rows, cols); }
};

/// RHT(xᵀ): t applied along x's rows dimension M in blocks of n, for every column of x.
/// Throws shape_mismatch unless M is a multiple of n; non_finite_error on NaN/Inf in x, or when
/// the transform overflows bf16.
template <quantizer_input T>
columnwise_rht rht_columnwise(matrix_view<const T> x, const hadamard_transform& t = hadamard_transform::te_default()) {
  const matrix_view<const T> source = x.transposed();
  columnwise_rht result;
  result.rows = source.rows();
  result.cols = source.cols();
  source.validate("rht input");
  detail::require(source.cols() % t.size() == 0, errc::shape_mismatch,
                  "rht_columnwise: the token dimension M = " + std::to_string(source.cols()) +
                      " is not a multiple of the transform size " + std::to_string(t.size()));
  result.values.resize(static_cast<std::size_t>(result.rows * result.cols));
  bool non_finite = false;
  const auto out = matrix_view<bf16>::row_major(result.values.data(), result.rows, result.cols);
  const std::uint16_t largest = detail::hadamard_rows_fast(source, t, hadamard_direction::forward, out, non_finite);
  if (non_finite) detail::throw_first_non_finite(x, "rht input");
  detail::require(largest < 0x7F80u, errc::non_finite_input, "rht_columnwise: the transform overflows bf16");
  result.amax = bf16::from_bits(largest).to_float();
  return result;
}

/// The columnwise copy of x with RHT, as TransformerEngine's NVFP4 recipe makes it for the Wgrad
/// GEMM: RHT(xᵀ) in bf16, quantized with blocks along M and the tensor scale from its own amax.
template <block_scaled_format Format = nvfp4_1x16, quantizer_input T>
quantized_tensor<Format> quantize_columnwise_rht(matrix_view<const T> x, const hadamard_transform& t = hadamard_transform::te_default(),
                                                 quantize_options options = {}) {
  const columnwise_rht transformed = rht_columnwise(x, t);
  options.axis = quantized_axis::columnwise;
  return quantize_with_amax<Format>(transformed.view(), transformed.amax, options);
}

}  // namespace nvfp4
