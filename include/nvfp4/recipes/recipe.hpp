// nvfp4/recipes/recipe.hpp: `recipe`, any one of TransformerEngine's training recipes (or no
// quantization), as one value type: what a Linear layer (nvfp4/nn/linear.hpp) is configured with.
// The list of recipe policies (recipes/policies/) is here: the recipe variant, the names and the
// Python binding's recipe table all follow it. Adding a recipe: one policy header, one line below.
#pragma once

#include <string>
#include <type_traits>
#include <variant>

#include "nvfp4/recipes/policies/delayed_scaling.hpp"
#include "nvfp4/recipes/policies/float8_block_scaling.hpp"
#include "nvfp4/recipes/policies/float8_current_scaling.hpp"
#include "nvfp4/recipes/policies/mxfp8_block_scaling.hpp"
#include "nvfp4/recipes/policies/no_quantization.hpp"
#include "nvfp4/recipes/policies/nvfp4_block_scaling.hpp"

namespace nvfp4 {

/// Every recipe's policy, in the recipe variant's order (the first one is a default layer's).
using recipe_policies = policy_list<no_quantization_policy,
                                    nvfp4_block_scaling_policy,
                                    float8_current_scaling_policy,
                                    delayed_scaling_policy,
                                    float8_block_scaling_policy,
                                    mxfp8_block_scaling_policy>;

/// A training recipe: no quantization (FP32 / BF16 by the layer's dtype), or one of TE's
/// NVFP4BlockScaling, Float8CurrentScaling, DelayedScaling, Float8BlockScaling, MXFP8BlockScaling.
using recipe = recipe_policies::recipe_variant;

/// The policy of a recipe type, e.g. recipe_policy_t<delayed_scaling> is delayed_scaling_policy.
template <class Recipe>
using recipe_policy_t = recipe_policies::policy_for<std::remove_cvref_t<Recipe>>;

/// TE's class name of the recipe ("NoQuantization" for none).
inline const char* recipe_name(const recipe& r) {
  return std::visit([](const auto& value) { return recipe_policy_t<decltype(value)>::name; }, r);
}

/// Throws nvfp4::error (invalid_argument / unsupported) for a combination TE rejects.
inline void validate(const recipe& r) {
  std::visit([](const auto& value) { value.validate(); }, r);
}

}  // namespace nvfp4
