// nvfp4/recipes/recipe.hpp: `recipe`, any one of TransformerEngine's training recipes (or no
// quantization), as one value type: what a Linear layer (nvfp4/nn/linear.hpp) is configured with.
#pragma once

#include <string>
#include <variant>

#include "nvfp4/recipes/delayed_scaling.hpp"
#include "nvfp4/recipes/float8_block_scaling.hpp"
#include "nvfp4/recipes/float8_current_scaling.hpp"
#include "nvfp4/recipes/mxfp8_block_scaling.hpp"
#include "nvfp4/recipes/no_quantization.hpp"
#include "nvfp4/recipes/nvfp4_recipe.hpp"

namespace nvfp4 {

/// A training recipe: no quantization (FP32 / BF16 by the layer's dtype), or one of TE's
/// NVFP4BlockScaling, Float8CurrentScaling, DelayedScaling, Float8BlockScaling, MXFP8BlockScaling.
using recipe = std::variant<no_quantization, nvfp4_block_scaling, float8_current_scaling, delayed_scaling, float8_block_scaling,
                            mxfp8_block_scaling>;

/// TE's class name of the recipe ("NoQuantization" for none).
inline const char* recipe_name(const recipe& r) {
  constexpr const char* names[] = {"NoQuantization",  "NVFP4BlockScaling",  "Float8CurrentScaling",
                                   "DelayedScaling",  "Float8BlockScaling", "MXFP8BlockScaling"};
  return names[r.index()];
}

/// Throws nvfp4::error (invalid_argument / unsupported) for a combination TE rejects.
inline void validate(const recipe& r) {
  std::visit([](const auto& value) { value.validate(); }, r);
}

}  // namespace nvfp4
