// nvfp4/training/recipe_catalog.hpp: the training recipes a comparison can name: which GEMM engine
// each dense layer gets, which precision controls apply, and how the optimizer keeps its states.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/nn/dense.hpp"
#include "nvfp4/nn/model.hpp"
#include "nvfp4/training/controls.hpp"
#include "nvfp4/training/optimizer.hpp"

namespace nvfp4::training {

/// A named way to train: the engines, the controls, the optimizer state storage.
struct training_recipe {
  std::string name;
  std::string description;
  /// Makes the engine factory of a model for a run seeded with `seed` (stochastic rounding).
  std::function<nn::engine_factory(std::uint64_t seed)> engines;
  precision_controls controls{};
  state_formats optimizer_states{};
};

/// Every recipe this build knows, in the order a comparison runs them.
inline std::vector<training_recipe> recipe_catalog() {
  auto same = [](auto make) {
    return [make](std::uint64_t) -> nn::engine_factory {
      return [make](const std::string&, int) -> std::unique_ptr<nn::gemm_engine> { return make(); };
    };
  };
  std::vector<training_recipe> out;
  out.push_back({"fp32", "FP32 GEMMs: the reference", same([] { return std::make_unique<nn::fp32_engine>(); }), {}, {}});
  out.push_back({"bf16", "BF16 operands and outputs, FP32 accumulation", same([] { return std::make_unique<nn::bf16_engine>(); }), {}, {}});
  return out;
}

/// The names of the catalog, comma separated.
inline std::string recipe_names() {
  std::string names;
  for (const auto& r : recipe_catalog()) names += (names.empty() ? "" : ", ") + r.name;
  return names;
}

/// The recipe called `name`. Throws invalid_argument naming the known recipes otherwise.
inline training_recipe find_recipe(std::string_view name) {
  for (auto& r : recipe_catalog())
    if (r.name == name) return r;
  throw error(errc::invalid_argument, "unknown training recipe '" + std::string(name) + "'; known: " + recipe_names());
}

}  // namespace nvfp4::training
