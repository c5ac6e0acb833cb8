// nvfp4/training/recipe_catalog.hpp: the training recipes a comparison can name: which GEMM engine
// each dense layer gets, which precision controls apply, and how the optimizer keeps its states.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/nn/amax_percentile.hpp"
#include "nvfp4/nn/dense.hpp"
#include "nvfp4/nn/model.hpp"
#include "nvfp4/recipes/recipe.hpp"
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
inline std::vector<training_recipe> recipe_catalog(gemm_mode mode = gemm_mode::exact) {
  // Every quantized recipe runs with BF16 as its high precision, as TE's recipes do.
  auto with = [mode](recipe r, high_precision dtype = high_precision::bf16) {
    return [r, dtype, mode](std::uint64_t seed) { return nn::linear_engines(r, {.dtype = dtype, .mode = mode, .seed = seed}); };
  };
  const nvfp4_block_scaling nvfp4{};
  std::vector<training_recipe> out;
  out.push_back({"fp32", "FP32 everywhere: the reference", with(no_quantization{}, high_precision::fp32), {}, {}});
  out.push_back({"bf16", "BF16 operands and outputs, FP32 accumulation (no quantization)", with(no_quantization{}), {}, {}});
  out.push_back({"fp8_delayed", "FP8 HYBRID, delayed scaling (history 1024, max)", with(delayed_scaling{}), {}, {}});
  out.push_back({"fp8_current", "FP8 HYBRID, per-tensor current scaling", with(float8_current_scaling{}), {}, {}});
  out.push_back({"fp8_block", "FP8 E4M3 blocks: 1x128 activations/gradients, 128x128 weights", with(float8_block_scaling{}), {}, {}});
  out.push_back({"mxfp8", "MXFP8: E4M3, 1x32 blocks, E8M0 scales", with(mxfp8_block_scaling{}), {}, {}});
  out.push_back({"nvfp4", "NVFP4 (TE defaults: RHT on wgrad, SR on gradients, 16x16 weights)", with(nvfp4), {}, {}});
  nvfp4_block_scaling no_rht = nvfp4;
  no_rht.disable_rht = true;
  out.push_back({"nvfp4_no_rht", "NVFP4 without the random Hadamard transform", with(no_rht), {}, {}});
  nvfp4_block_scaling no_sr = nvfp4;
  no_sr.disable_stochastic_rounding = true;
  out.push_back({"nvfp4_no_sr", "NVFP4 with round-to-nearest gradients (no stochastic rounding)", with(no_sr), {}, {}});
  out.push_back({"nvfp4_last_bf16", "NVFP4, the last model layer (the head) in BF16", with(nvfp4), {.skip_quant_last_layers = 1}, {}});
  out.push_back(
      {"nvfp4_cooldown", "NVFP4, every layer in BF16 for the last 20% of the steps", with(nvfp4), {.cooldown_fraction = 0.2}, {}});
  nvfp4_block_scaling four_over_six = nvfp4;
  four_over_six.nvfp4_4over6 = four_over_six_scope::all;
  four_over_six.disable_rht = true;  // TE rejects 4over6 activations with RHT: compare with nvfp4_no_rht
  out.push_back({"nvfp4_4over6", "NVFP4 4over6 on weights and activations (RHT off, as TE requires)", with(four_over_six), {}, {}});
  out.push_back(
      {"nvfp4_amax_q999",
       "NVFP4 with the 0.999-quantile of |x| as the global amax of activations and gradients (NOT a TE recipe)",
       [mode](std::uint64_t seed) -> nn::engine_factory {
         return [mode, seed](const std::string& name, int, index_t in, index_t out) -> std::unique_ptr<nn::gemm_engine> {
           return std::make_unique<nn::nvfp4_percentile_engine>(
               in, out,
               nn::percentile_amax_options{.quantile = 0.999, .mode = mode, .seed = nvfp4::derived_seed(seed, nn::name_hash(name))});
         };
       },
       {},
       {}});
  out.push_back({"nvfp4_fp8_states",
                 "NVFP4, AdamW moments in FP8 E4M3 with a per-tensor scale (TE FusedAdam)",
                 with(nvfp4),
                 {},
                 {state_format::fp8_e4m3, state_format::fp8_e4m3}});
  return out;
}

/// The names of the catalog, comma separated.
inline std::string recipe_names() {
  std::string names;
  for (const auto& r : recipe_catalog()) names += (names.empty() ? "" : ", ") + r.name;
  return names;
}

/// The recipe called `name`. Throws invalid_argument naming the known recipes otherwise.
inline training_recipe find_recipe(std::string_view name, gemm_mode mode = gemm_mode::exact) {
  for (auto& r : recipe_catalog(mode))
    if (r.name == name) return r;
  throw error(errc::invalid_argument, "unknown training recipe '" + std::string(name) + "'; known: " + recipe_names());
}

}  // namespace nvfp4::training
