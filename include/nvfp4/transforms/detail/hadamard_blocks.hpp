// nvfp4/transforms/detail/hadamard_blocks.hpp: the per-block pieces the Hadamard fast paths
// share: one block by the exact reference or by a scalar float64 FWHT (the vector kernels'
// fallbacks), the NaN/Inf scan, and the columnwise shape check.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "nvfp4/error.hpp"
#include "nvfp4/simd/parallel.hpp"
#include "nvfp4/transforms/hadamard_reference.hpp"

namespace nvfp4::detail {

/// True when x holds NaN or Inf, reading memory in its own order (fast for transposed views).
/// With `min_exponent` below 255: true when some element's biased exponent is at least that
/// (|x| >= 2^(min_exponent - 127), or NaN/Inf).
template <class T>
bool has_non_finite(matrix_view<const T> x, std::uint32_t min_exponent = 255) {
  auto exponent_all_ones = [min_exponent](T v) {
    if constexpr (std::is_same_v<T, float>)
      return ((std::bit_cast<std::uint32_t>(v) >> 23) & 0xFFu) >= min_exponent;
    else
      return ((v.bits() >> 7) & 0xFFu) >= min_exponent;
  };
  const bool transposed = x.row_stride() == 1 && x.col_stride() != 1;
  const index_t outer = transposed ? x.cols() : x.rows(), inner = transposed ? x.rows() : x.cols();
  return simd::parallel_reduce(
      outer, simd::worth_parallel(x.size()), false,
      [&](index_t begin, index_t end) {
        bool found = false;
        for (index_t a = begin; a < end; ++a)
          for (index_t b = 0; b < inner; ++b) found |= exponent_all_ones(transposed ? x(b, a) : x(a, b));
        return found;
      },
      [](bool a, bool b) { return a || b; });
}

/// The transform of one block (row r, columns c0 .. c0 + n) by the exact reference. Returns false,
/// writing nothing, when the block holds NaN/Inf.
template <class T>
bool hadamard_block_exact(matrix_view<const T> x, index_t r, index_t c0, const hadamard_transform& t, hadamard_direction direction,
                          std::uint16_t* out_bits, index_t out_stride) {
  float block[hadamard_transform::max_size];
  for (int i = 0; i < t.size(); ++i) {
    block[i] = to_float32(x(r, c0 + i));
    if (!std::isfinite(block[i])) return false;
  }
  for (int j = 0; j < t.size(); ++j) out_bits[j * out_stride] = hadamard_output_bits(block, t, direction, j);
  return true;
}

/// One 16-point block (row r, columns c0 .. c0 + 16) the float32 kernel could not do exactly: by a
/// float64 FWHT when its exponent span allows (all partial sums are then multiples of the smallest
/// input's last place below 2^53 of it: max|x| <= 2^(53 - 4 - 8) min|x| for bf16), else by the
/// exact reference. Returns false, writing nothing, when the block holds NaN/Inf.
template <class T>
bool hadamard16_block_fallback(matrix_view<const T> x, index_t r, index_t c0, const hadamard_transform& t, hadamard_direction direction,
                               std::uint16_t* out_bits, index_t out_stride) {
  constexpr int input_precision = std::is_same_v<T, float> ? 24 : 8;
  double v[16];
  double largest = 0.0, smallest = INFINITY;
  for (int i = 0; i < 16; ++i) {
    const float value = to_float32(x(r, c0 + i));
    if (!std::isfinite(value)) return false;
    const double magnitude = std::fabs(static_cast<double>(value));
    largest = std::max(largest, magnitude);
    if (magnitude != 0.0) smallest = std::min(smallest, magnitude);
    v[i] = direction == hadamard_direction::forward ? value * static_cast<double>(t.sign(i)) : value;
  }
  if (!(largest <= smallest * std::ldexp(1.0, 53 - 4 - input_precision)))
    return hadamard_block_exact(x, r, c0, t, direction, out_bits, out_stride);
  for (int span = 1; span < 16; span *= 2)
    for (int k = 0; k < 16; ++k)
      if ((k & span) == 0) {
        const double a = v[k], b = v[k + span];
        v[k] = a + b;
        v[k + span] = a - b;
      }
  for (int j = 0; j < 16; ++j) {
    const double sum = direction == hadamard_direction::inverse ? v[j] * t.sign(j) : v[j];
    out_bits[j * out_stride] = bf16_bits_from_double_rne(sum * 0.25 + 0.0);  // + 0.0: an exact zero is +0
  }
  return true;
}

/// Throws unless x (source [M, N]) can have its columnwise copy transformed by t.
template <class T>
void check_rht_columnwise(matrix_view<const T> x, const hadamard_transform& t) {
  x.validate("rht input");
  detail::require(x.rows() % t.size() == 0, errc::shape_mismatch,
                  "rht_columnwise: the token dimension M = " + std::to_string(x.rows()) + " is not a multiple of the transform size " +
                      std::to_string(t.size()));
}

}  // namespace nvfp4::detail
