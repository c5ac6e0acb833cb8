// nvfp4/training/monitor.hpp: watches every tensor of every dense layer during training: records
// the first NaN/Inf of a step (step, layer, tensor) and stops it from reaching a quantizer, and
// logs per-layer amax of activations, weights and gradients and the weight-gradient norm.
#pragma once

#include <cmath>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "nvfp4/nn/dense.hpp"

namespace nvfp4::training {

/// Where a non-finite value first appeared.
struct nan_event {
  long long step = 0;
  std::string layer;     ///< dense layer name, a parameter name, or "loss"
  int layer_index = -1;  ///< model layer (-1 when not a dense layer)
  std::string tensor;    ///< activation, weight, output, gradient, weight_gradient, loss
};

/// One dense layer's statistics at one logged step (NaN where the tensor was not seen).
struct layer_stats {
  long long step = 0;
  std::string layer;
  int layer_index = 0;
  std::string engine;
  float activation_amax = NAN, weight_amax = NAN, output_amax = NAN, gradient_amax = NAN;
  double weight_gradient_norm = NAN;
};

class training_monitor final : public nn::tensor_observer {
 public:
  /// Stats are kept every `log_every` steps (0: never).
  explicit training_monitor(int log_every = 0) : log_every_(log_every) {}

  /// Starts a step; `training` false for evaluation passes (no stats, events not recorded).
  void begin_step(long long step, bool training = true) {
    step_ = step;
    training_ = training;
    event_this_step_ = false;
  }

  bool observe(const nn::dense& layer, nn::dense_tensor role, std::span<const float> values) override {
    float amax = 0.0f;
    double squares = 0.0;
    bool finite = true;
    const bool norm = role == nn::dense_tensor::weight_gradient && logging();
    for (float v : values) {
      if (!std::isfinite(v)) {
        finite = false;
        break;
      }
      amax = std::max(amax, std::fabs(v));
      if (norm) squares += static_cast<double>(v) * static_cast<double>(v);
    }
    if (!finite) {
      record({step_, layer.name(), layer.layer(), nn::dense_tensor_name(role)});
      return false;
    }
    if (logging()) {
      layer_stats& s = current_stats(layer);
      switch (role) {
        case nn::dense_tensor::activation:
          s.activation_amax = amax;
          break;
        case nn::dense_tensor::weight:
          s.weight_amax = amax;
          break;
        case nn::dense_tensor::output:
          s.output_amax = amax;
          break;
        case nn::dense_tensor::output_gradient:
          s.gradient_amax = amax;
          break;
        case nn::dense_tensor::weight_gradient:
          s.weight_gradient_norm = std::sqrt(squares);
          break;
      }
    }
    return true;
  }

  /// Records an event found outside a dense layer (the loss, an embedding's gradient).
  void record(nan_event event) {
    if (!training_ || event_this_step_) return;
    event_this_step_ = true;
    events_.push_back(std::move(event));
  }

  bool event_this_step() const { return event_this_step_; }
  const std::vector<nan_event>& events() const { return events_; }
  /// Per-layer statistics in (step, layer) order.
  const std::vector<layer_stats>& stats() const { return stats_; }

 private:
  bool logging() const { return training_ && log_every_ > 0 && step_ % log_every_ == 0; }
  layer_stats& current_stats(const nn::dense& layer) {
    if (stats_.empty() || stats_.back().step != step_ || stats_.back().layer != layer.name()) {
      // A layer appears once per pass; a repeat within the step (backward) finds its entry.
      for (auto it = stats_.rbegin(); it != stats_.rend() && it->step == step_; ++it)
        if (it->layer == layer.name()) return *it;
      stats_.push_back({step_, layer.name(), layer.layer(), layer.active_engine().name()});
    }
    return stats_.back();
  }

  int log_every_;
  long long step_ = 0;
  bool training_ = true;
  bool event_this_step_ = false;
  std::vector<nan_event> events_;
  std::vector<layer_stats> stats_;
};

}  // namespace nvfp4::training
