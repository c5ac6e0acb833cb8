// nvfp4/training/controls.hpp: the precision controls of NVFP4 training practice (NVIDIA,
// "Pretraining Large Language Models with NVFP4", arXiv:2509.25149): keep the first and last
// model layers in BF16, and switch every layer to BF16 for the last fraction of the steps.
#pragma once

#include <cmath>
#include <string>

#include "nvfp4/error.hpp"
#include "nvfp4/nn/model.hpp"

namespace nvfp4::training {

/// Which model layers run in BF16 instead of the recipe, and when. A model layer is what the model
/// counts (nn::model::layer_count(): a transformer block, the LM head, an MLP's dense layer).
struct precision_controls {
  int skip_quant_first_layers = 0;  ///< layers [0, n) always in BF16
  int skip_quant_last_layers = 0;   ///< the last n layers always in BF16 (the head is the last)
  double cooldown_fraction = 0.0;   ///< the last round(fraction · steps) steps: every layer in BF16

  /// Throws invalid_argument for a fraction outside [0, 1], negative counts, or more skipped
  /// layers than the model has.
  void validate(int layer_count) const {
    nvfp4::detail::require(cooldown_fraction >= 0.0 && cooldown_fraction <= 1.0, errc::invalid_argument,
                           "precision controls: cooldown_fraction must be in [0, 1], got " + std::to_string(cooldown_fraction));
    nvfp4::detail::require(skip_quant_first_layers >= 0 && skip_quant_last_layers >= 0, errc::invalid_argument,
                           "precision controls: skip_quant_first_layers and skip_quant_last_layers must be >= 0");
    nvfp4::detail::require(skip_quant_first_layers + skip_quant_last_layers <= layer_count, errc::invalid_argument,
                           "precision controls: " + std::to_string(skip_quant_first_layers) + " first + " +
                               std::to_string(skip_quant_last_layers) + " last layers skipped, but the model has only " +
                               std::to_string(layer_count) + " layers");
  }

  /// The first step of the cooldown (total_steps when there is none).
  long long cooldown_start(long long total_steps) const {
    return total_steps - std::llround(cooldown_fraction * static_cast<double>(total_steps));
  }

  /// True when model layer `layer` (of layer_count) runs in BF16 at `step` (0-based, of total_steps).
  bool high_precision(int layer, int layer_count, long long step, long long total_steps) const {
    return layer < skip_quant_first_layers || layer >= layer_count - skip_quant_last_layers || step >= cooldown_start(total_steps);
  }

  /// Sets every dense layer of the model for `step`.
  void apply(nn::model& model, long long step, long long total_steps) const {
    const int layers = model.layer_count();
    for (nn::dense* d : model.dense_layers()) d->use_high_precision(high_precision(d->layer(), layers, step, total_steps));
  }
};

}  // namespace nvfp4::training
