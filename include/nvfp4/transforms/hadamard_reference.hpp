// nvfp4/transforms/hadamard_reference.hpp: the scalar reference of the Hadamard transform, one
// output at a time as docs/numerics_spec.md §4 states it: the exact n-term sum, rounded once to bf16.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nvfp4/detail/non_finite.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/quantize_options.hpp"
#include "nvfp4/transforms/detail/exact_rounding.hpp"
#include "nvfp4/transforms/hadamard_transform.hpp"

namespace nvfp4 {

namespace detail {
/// Output j of one block: forward y_j = Σ_i x_i T[i][j], inverse x_j = Σ_i y_i T[j][i], with
/// `values` the block's n inputs widened to float (exact). For n = 16, 64, 256 the result is the
/// exact sum times 2^-k rounded once to bf16 (RNE). For n = 32 and 128 (1/sqrt(n) irrational) it
/// is RN_double(exact sum) * RN_double(1/sqrt(n)) rounded to double, then once to bf16.
inline std::uint16_t hadamard_output_bits(const float* values, const hadamard_transform& t, hadamard_direction direction, int j) {
  exact_sum sum;
  for (int i = 0; i < t.size(); ++i) {
    const int entry = direction == hadamard_direction::forward ? t.unscaled_entry(i, j) : t.unscaled_entry(j, i);
    sum.add(values[i], entry);
  }
  if (t.exact_scale()) return bf16_bits_of_exact(sum.rounded(8, -133, -t.half_log2_size()));
  return bf16_bits_from_double_rne(sum.rounded(53, -1074, 0) * t.scale());
}

/// Checks shapes for a transform of x's rows into out; throws before anything is written.
template <class T>
void check_hadamard_shapes(matrix_view<const T> x, const hadamard_transform& t, matrix_view<bf16> out) {
  x.validate("hadamard input");
  out.validate("hadamard output");
  require(out.rows() == x.rows() && out.cols() == x.cols(), errc::shape_mismatch,
          "hadamard: output is " + std::to_string(out.rows()) + "x" + std::to_string(out.cols()) + ", input is " +
              std::to_string(x.rows()) + "x" + std::to_string(x.cols()));
  require(x.cols() % t.size() == 0, errc::shape_mismatch,
          "hadamard: the transformed dimension (" + std::to_string(x.cols()) + ") is not a multiple of the transform size " +
              std::to_string(t.size()));
}
}  // namespace detail

namespace reference {

/// Applies t to every block of n consecutive elements of each row of x, out(r, c) in bf16. For
/// the columnwise copy of a tensor (docs/numerics_spec.md §4, along the token dimension M) pass
/// x.transposed(). Throws shape_mismatch unless x.cols() is a multiple of n, non_finite_error on
/// NaN/Inf; nothing is written before the checks pass.
template <quantizer_input T>
void hadamard_rows(matrix_view<const T> x, const hadamard_transform& t, matrix_view<bf16> out,
                   hadamard_direction direction = hadamard_direction::forward) {
  detail::check_hadamard_shapes(x, t, out);
  detail::throw_first_non_finite(x, "hadamard input");
  const int n = t.size();
  std::vector<float> block(static_cast<std::size_t>(n));
  for (index_t r = 0; r < x.rows(); ++r)
    for (index_t c0 = 0; c0 < x.cols(); c0 += n) {
      for (int i = 0; i < n; ++i) block[static_cast<std::size_t>(i)] = to_float32(x(r, c0 + i));
      for (int j = 0; j < n; ++j) out(r, c0 + j) = bf16::from_bits(detail::hadamard_output_bits(block.data(), t, direction, j));
    }
}

}  // namespace reference
}  // namespace nvfp4
