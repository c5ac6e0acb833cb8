// nvfp4/recipes/nvfp4_amax_rule.hpp: a hook that chooses the global amax (the tensor scale's
// source) of each tensor an NVFP4 recipe quantizes. TransformerEngine always takes the maximum
// |value|; a rule lets a research control choose another value (nn/amax_percentile.hpp's quantile),
// values above it then saturate. Without a rule every result is TE's.
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/recipes/recipe_common.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/quantize_options.hpp"

namespace nvfp4 {

/// What a rule is asked: one tensor of a recipe, with the values its tensor amax is taken over.
/// A tensor is asked once for the copies that share its amax (rowwise, and columnwise without
/// RHT), and once more for a columnwise copy with RHT, whose amax TE takes after the transform.
struct nvfp4_amax_query {
  tensor_role role = tensor_role::input;
  bool transformed = false;         ///< values after the RHT: RHT(Xᵀ) or RHT(dYᵀ), [N, M]
  matrix_view<const float> values;  ///< X, W, dY as quantized (in the layer's dtype), or RHT(·ᵀ)
  float amax = 0.0f;                ///< TE's amax of these values: max |value|
};

/// Returns the amax to quantize against: finite and >= 0 (values above it saturate to the
/// largest FP4 value of their block scale). An empty rule is TE's (the query's amax).
using nvfp4_amax_rule = std::function<float(const nvfp4_amax_query&)>;

namespace detail {

/// The amax of a tensor under `rule`: `amax` without one; else the rule's answer, checked. Values
/// that are not float (bf16 after the RHT) are shown to the rule as a float copy.
template <quantizer_input T>
float chosen_amax(const nvfp4_amax_rule& rule, tensor_role role, bool transformed, matrix_view<const T> values, float amax) {
  if (!rule) return amax;
  float chosen = 0.0f;
  if constexpr (std::is_same_v<T, float>) {
    chosen = rule({role, transformed, values, amax});
  } else {
    std::vector<float> copy(static_cast<std::size_t>(values.rows() * values.cols()));
    for (index_t r = 0; r < values.rows(); ++r)
      for (index_t c = 0; c < values.cols(); ++c) copy[static_cast<std::size_t>(r * values.cols() + c)] = to_float32(values(r, c));
    chosen = rule({role, transformed, matrix_view<const float>::row_major(copy.data(), values.rows(), values.cols()), amax});
  }
  require(std::isfinite(chosen) && chosen >= 0.0f, errc::invalid_argument,
          std::string("nvfp4_amax_rule: the rule's amax for ") + tensor_role_name(role) + (transformed ? " after the RHT" : "") + " is " +
              std::to_string(chosen) + "; it must be a finite number >= 0");
  return chosen;
}

}  // namespace detail
}  // namespace nvfp4
