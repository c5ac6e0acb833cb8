// nvfp4/nn/mlp.hpp: a multi-layer perceptron classifier (dense layers with GELU between them and a
// softmax cross-entropy head), every dense layer through the engine its factory gives it.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "nvfp4/nn/functional.hpp"
#include "nvfp4/nn/init.hpp"
#include "nvfp4/nn/model.hpp"

namespace nvfp4::nn {

struct mlp_config {
  index_t inputs = 64;
  index_t hidden = 128;
  int depth = 2;  ///< hidden layers (dense layers = depth + 1)
  index_t classes = 16;
  std::uint64_t seed = 1;
};

/// inputs -> [dense, GELU] x depth -> dense head -> logits. Model layer i is dense layer i.
class mlp_classifier final : public model {
 public:
  mlp_classifier(const mlp_config& config, const engine_factory& engines) : config_(config) {
    nvfp4::detail::require(config.inputs > 0 && config.hidden > 0 && config.classes > 1 && config.depth >= 1, errc::invalid_argument,
                           "mlp: inputs, hidden > 0, classes > 1 and depth >= 1 needed");
    for (int i = 0; i <= config.depth; ++i) {
      const bool head = i == config.depth;
      const index_t in = i == 0 ? config.inputs : config.hidden;
      const index_t out = head ? config.classes : config.hidden;
      const std::string name = head ? "head" : "fc" + std::to_string(i);
      layers_.push_back(std::make_unique<dense>(name, i, in, out, head ? parameter_kind::head : parameter_kind::matrix, engines));
      parameter& w = layers_.back()->weight();
      fill_normal(w.value, 1.0f / std::sqrt(static_cast<float>(in)), config.seed, static_cast<std::uint64_t>(i));
    }
  }

  std::string name() const override { return "mlp"; }
  std::vector<parameter*> parameters() override {
    std::vector<parameter*> out;
    for (auto& d : layers_) out.push_back(&d->weight());
    return out;
  }
  std::vector<dense*> dense_layers() override {
    std::vector<dense*> out;
    for (auto& d : layers_) out.push_back(d.get());
    return out;
  }
  int layer_count() const override { return static_cast<int>(layers_.size()); }

  float forward_backward(const batch& b, float loss_scale) override {
    std::vector<float> grad, dx, dg;
    const float loss = run_forward(b, true, loss_scale, &grad);
    for (int i = config_.depth; i >= 0; --i) {
      layers_[static_cast<std::size_t>(i)]->backward(grad, dx);
      if (i > 0) {
        gelu_backward(pre_[static_cast<std::size_t>(i - 1)], dx, dg);
        grad.swap(dg);
      }
    }
    return loss;
  }
  float evaluate(const batch& b) override { return run_forward(b, false, 1.0f, nullptr); }

 private:
  /// The mean loss; with d_logits, also its gradient times loss_scale.
  float run_forward(const batch& b, bool training, float loss_scale, std::vector<float>* d_logits) {
    nvfp4::detail::require(static_cast<index_t>(b.features.size()) ==
                                   nvfp4::detail::checked_element_count(b.rows, config_.inputs, errc::shape_mismatch, "mlp batch") &&
                               b.predictions() == b.rows,
                           errc::shape_mismatch, "mlp: batch is not [rows, inputs] features with one label per row");
    pre_.resize(static_cast<std::size_t>(config_.depth));
    std::vector<float> h(b.features), act;
    for (int i = 0; i <= config_.depth; ++i) {
      std::vector<float>& y = i == config_.depth ? logits_ : pre_[static_cast<std::size_t>(i)];
      layers_[static_cast<std::size_t>(i)]->forward(h, b.rows, y, training);
      if (i < config_.depth) {
        gelu_forward(y, act);
        h.swap(act);
      }
    }
    return softmax_cross_entropy(logits_, config_.classes, b.targets, loss_scale, d_logits);
  }

  mlp_config config_;
  std::vector<std::unique_ptr<dense>> layers_;
  std::vector<std::vector<float>> pre_;  // pre-activation of each hidden layer
  std::vector<float> logits_;
};

}  // namespace nvfp4::nn
