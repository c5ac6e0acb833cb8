// nvfp4/nn/model.hpp: what a trainer needs from a model: its parameters, its dense layers (each
// tagged with the model layer the precision controls count), a training step's forward + backward
// and an evaluation pass, over a batch of examples or token sequences.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nvfp4/nn/dense.hpp"
#include "nvfp4/nn/parameter.hpp"

namespace nvfp4::nn {

/// One batch: feature rows and class labels (a classifier), or token sequences and their next
/// tokens (a language model).
struct batch {
  index_t rows = 0;                   ///< examples, or sequences
  index_t seq_len = 1;                ///< tokens per sequence (1 for a classifier)
  std::vector<float> features;        ///< [rows, features] inputs of a classifier
  std::vector<std::int32_t> inputs;   ///< [rows, seq_len] input tokens of a language model
  std::vector<std::int32_t> targets;  ///< [rows] labels, or [rows, seq_len] next tokens
  /// Predictions the loss is averaged over (examples or tokens).
  index_t predictions() const { return static_cast<index_t>(targets.size()); }
};

class model {
 public:
  virtual ~model() = default;
  virtual std::string name() const = 0;
  /// Every trainable parameter, in a fixed order.
  virtual std::vector<parameter*> parameters() = 0;
  /// Every dense layer, input side first.
  virtual std::vector<dense*> dense_layers() = 0;
  /// How many model layers the precision controls count (blocks + head, or dense layers).
  virtual int layer_count() const = 0;
  /// Forward and backward over the batch: overwrites every gradient with d(mean loss · loss_scale)
  /// and returns the mean loss (not scaled).
  virtual float forward_backward(const batch& b, float loss_scale) = 0;
  /// The mean loss of a forward pass that changes no state.
  virtual float evaluate(const batch& b) = 0;

  /// Routes every dense layer's tensors to `observer` (nullptr: none).
  void set_observer(tensor_observer* observer) {
    for (dense* d : dense_layers()) d->set_observer(observer);
  }
  /// FP32 master weights, in bytes.
  std::size_t weight_bytes() {
    std::size_t total = 0;
    for (const parameter* p : parameters()) total += p->bytes();
    return total;
  }
  std::size_t parameter_count() {
    std::size_t total = 0;
    for (const parameter* p : parameters()) total += p->value.size();
    return total;
  }
};

}  // namespace nvfp4::nn
