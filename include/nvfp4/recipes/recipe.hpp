// nvfp4/recipes/recipe.hpp: `recipe`, any one of TransformerEngine's training recipes (or no
// quantization), as one value type: what a Linear layer (nvfp4/nn/linear.hpp) is configured with.
// The list of recipe policies is here: the recipe variant, the names and the Python binding's
// recipe classes all follow it. Adding a recipe to the library: one header (struct, field table,
// policy) and one line below; a user's own recipe: a list with its policy added
// (recipe_policies::with_policy<P>), run by nn::basic_linear (docs/architecture.md, "Adding a recipe").
#pragma once

#include <string>
#include <type_traits>
#include <variant>

#include "nvfp4/recipes/delayed_scaling.hpp"
#include "nvfp4/recipes/float8_block_scaling.hpp"
#include "nvfp4/recipes/float8_current_scaling.hpp"
#include "nvfp4/recipes/mxfp8_block_scaling.hpp"
#include "nvfp4/recipes/no_quantization.hpp"
#include "nvfp4/recipes/nvfp4_block_scaling.hpp"

namespace nvfp4 {

/// Every recipe's policy, in the recipe variant's order (the first one is a default layer's).
/// policy_list checks each against the recipe_policy concept.
using recipe_policies = policy_list<no_quantization_policy, nvfp4_block_scaling_policy, float8_current_scaling_policy,
                                    delayed_scaling_policy, float8_block_scaling_policy, mxfp8_block_scaling_policy>;

/// A training recipe: no quantization (FP32 / BF16 by the layer's dtype), or one of TE's
/// NVFP4BlockScaling, Float8CurrentScaling, DelayedScaling, Float8BlockScaling, MXFP8BlockScaling.
using recipe = recipe_policies::recipe_variant;

/// The policy of a recipe type, e.g. recipe_policy_t<delayed_scaling> is delayed_scaling_policy.
template <class Recipe, class Policies = recipe_policies>
using recipe_policy_t = typename Policies::template policy_for<std::remove_cvref_t<Recipe>>;

/// TE's class name of the recipe ("NoQuantization" for none): its policy's name.
inline const char* recipe_name(const recipe& r) { return recipe_policies::name_of(r); }

/// Throws nvfp4::error (invalid_argument / unsupported) for a combination TE rejects (any list's
/// recipe variant).
template <class... Recipes>
void validate(const std::variant<Recipes...>& r) {
  std::visit([](const auto& value) { value.validate(); }, r);
}

}  // namespace nvfp4
