// nvfp4/detail/non_finite.hpp: the first NaN/Inf of a matrix, for the non_finite_error of every entry
// point that refuses one (docs/errors.md); shared by scaling/ and transforms/, so it takes any view
// of float or bf16 (rows(), cols(), operator()(r, c)).
#pragma once

#include <cmath>

#include "nvfp4/config.hpp"
#include "nvfp4/error.hpp"

namespace nvfp4::detail {

/// Throws non_finite_error for the first NaN/Inf of x in row-major order; returns if there is none.
template <class View>
void throw_first_non_finite(const View& x, const char* what) {
  for (index_t r = 0; r < x.rows(); ++r)
    for (index_t c = 0; c < x.cols(); ++c) {
      const float v = static_cast<float>(x(r, c));  // exact: float, or bf16 widened
      if (!std::isfinite(v)) throw non_finite_error(what, r, c, v);
    }
}

}  // namespace nvfp4::detail
