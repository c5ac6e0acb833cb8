// nvfp4/training/dataset.hpp: where a trainer's batches come from, and a synthetic classification
// task (Gaussian clusters) for the MLP. A batch depends only on (seed, step), never on the order
// of calls or on threads, so a run is reproducible from its seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/nn/init.hpp"
#include "nvfp4/nn/model.hpp"

namespace nvfp4::training {

/// A source of training and validation batches.
class dataset {
 public:
  virtual ~dataset() = default;
  virtual std::string name() const = 0;
  /// The training batch of `step` (the same for the same step).
  virtual nn::batch train_batch(long long step) const = 0;
  /// Validation batch `index` (a fixed held-out set: index 0, 1, ... is always the same data).
  virtual nn::batch validation_batch(int index) const = 0;
};

struct cluster_config {
  index_t features = 64;
  index_t classes = 16;
  float spread = 1.0f;  ///< noise stddev around a class center (centers have unit-variance coordinates)
  index_t batch_size = 64;
  std::uint64_t seed = 1;
};

/// Classification of points drawn around `classes` random centers in `features` dimensions:
/// x = center[c] + spread·N(0, I), label c uniform. Training and validation points come from
/// separate random streams.
class cluster_dataset final : public dataset {
 public:
  explicit cluster_dataset(const cluster_config& config) : config_(config) {
    nvfp4::detail::require(config.features > 0 && config.classes > 1 && config.batch_size > 0 && config.spread >= 0.0f,
                           errc::invalid_argument, "cluster_dataset: features > 0, classes > 1, batch_size > 0, spread >= 0 needed");
    centers_.resize(static_cast<std::size_t>(config.features * config.classes));
    nn::fill_normal(centers_, 1.0f, config.seed, stream_centers);
  }
  std::string name() const override { return "clusters"; }
  nn::batch train_batch(long long step) const override { return make(stream_train, static_cast<std::uint64_t>(step)); }
  nn::batch validation_batch(int index) const override { return make(stream_validation, static_cast<std::uint64_t>(index)); }
  const cluster_config& config() const { return config_; }

 private:
  static constexpr std::uint64_t stream_centers = 0, stream_train = 1, stream_validation = 2;

  nn::batch make(std::uint64_t kind, std::uint64_t index) const {
    nn::batch b;
    b.rows = config_.batch_size;
    b.features.resize(static_cast<std::size_t>(b.rows * config_.features));
    b.targets.resize(static_cast<std::size_t>(b.rows));
    // One stream per batch: (kind, index) -> stream id.
    const std::uint64_t stream = (index << 2) | kind;
    nn::fill_normal(b.features, config_.spread, config_.seed ^ 0x5DEECE66Dull, stream);
    for (index_t r = 0; r < b.rows; ++r) {
      const auto [u, unused] = nn::uniform_pair(config_.seed, stream | (std::uint64_t{1} << 62), static_cast<std::uint64_t>(r));
      (void)unused;
      const auto label = std::min<index_t>(config_.classes - 1, static_cast<index_t>(u * static_cast<float>(config_.classes)));
      b.targets[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(label);
      for (index_t j = 0; j < config_.features; ++j)
        b.features[static_cast<std::size_t>(r * config_.features + j)] += centers_[static_cast<std::size_t>(label * config_.features + j)];
    }
    return b;
  }

  cluster_config config_;
  std::vector<float> centers_;
};

}  // namespace nvfp4::training
