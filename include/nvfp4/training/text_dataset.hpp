// nvfp4/training/text_dataset.hpp: byte-level language-modelling batches from a text file: the
// first 90% of the bytes train, the last 10% validate. Training windows start at offsets drawn
// from (seed, step); validation windows tile the held-out bytes in order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/nn/init.hpp"
#include "nvfp4/training/dataset.hpp"

namespace nvfp4::training {

struct text_config {
  index_t seq_len = 64;
  index_t batch_size = 16;
  double validation_fraction = 0.1;
  std::uint64_t seed = 1;
};

/// Reads a whole file as bytes. Throws io_error when it cannot be opened or read.
inline std::vector<std::uint8_t> read_text_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  nvfp4::detail::require(static_cast<bool>(in), errc::io_error, "text dataset: cannot open '" + path.string() + "'");
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nvfp4::detail::require(!in.bad(), errc::io_error, "text dataset: error reading '" + path.string() + "'");
  return bytes;
}

class text_dataset final : public dataset {
 public:
  /// From bytes already in memory (any content: the model is byte-level).
  text_dataset(std::vector<std::uint8_t> bytes, const text_config& config, std::string name = "text")
      : bytes_(std::move(bytes)), config_(config), name_(std::move(name)) {
    nvfp4::detail::require(config.seq_len > 0 && config.batch_size > 0, errc::invalid_argument,
                           "text dataset: seq_len and batch_size must be positive");
    nvfp4::detail::require(config.validation_fraction > 0.0 && config.validation_fraction < 1.0, errc::invalid_argument,
                           "text dataset: validation_fraction must be in (0, 1), got " + std::to_string(config.validation_fraction));
    const auto size = static_cast<index_t>(bytes_.size());
    split_ = size - static_cast<index_t>(static_cast<double>(size) * config.validation_fraction);
    // Both parts need at least one window of seq_len + 1 bytes (inputs and shifted targets).
    nvfp4::detail::require(split_ > config.seq_len && size - split_ > config.seq_len, errc::invalid_argument,
                           "text dataset '" + name_ + "': " + std::to_string(size) + " bytes are too few for sequences of " +
                               std::to_string(config.seq_len) + " (each split needs more than seq_len bytes)");
  }
  /// From a file (io_error when unreadable).
  text_dataset(const std::filesystem::path& path, const text_config& config)
      : text_dataset(read_text_bytes(path), config, path.filename().string()) {}

  std::string name() const override { return name_; }
  index_t train_bytes() const { return split_; }
  index_t validation_bytes() const { return static_cast<index_t>(bytes_.size()) - split_; }
  /// How many distinct validation batches the held-out bytes hold (at least 1).
  int validation_batches() const {
    const index_t windows = (validation_bytes() - 1) / config_.seq_len;
    return static_cast<int>(std::max<index_t>(1, windows / config_.batch_size));
  }

  nn::batch train_batch(long long step) const override {
    nn::batch b = empty_batch();
    const index_t span = split_ - config_.seq_len;  // start offsets in [0, span)
    for (index_t r = 0; r < b.rows; ++r) {
      const auto [u, v] = nn::uniform_pair(config_.seed, static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(r));
      // 48 random bits for the offset: uniform enough for any file under 2^40 bytes.
      const double unit = (static_cast<double>(u) + static_cast<double>(v) / 16777216.0);
      const index_t start = std::min<index_t>(span - 1, static_cast<index_t>(unit * static_cast<double>(span)));
      fill_row(b, r, start);
    }
    return b;
  }

  nn::batch validation_batch(int index) const override {
    nn::batch b = empty_batch();
    const index_t windows = (validation_bytes() - 1) / config_.seq_len;
    for (index_t r = 0; r < b.rows; ++r) {
      const index_t window = (static_cast<index_t>(index) * b.rows + r) % windows;
      fill_row(b, r, split_ + window * config_.seq_len);
    }
    return b;
  }

 private:
  nn::batch empty_batch() const {
    nn::batch b;
    b.rows = config_.batch_size;
    b.seq_len = config_.seq_len;
    b.inputs.resize(static_cast<std::size_t>(b.rows * b.seq_len));
    b.targets.resize(b.inputs.size());
    return b;
  }
  void fill_row(nn::batch& b, index_t row, index_t start) const {
    for (index_t t = 0; t < config_.seq_len; ++t) {
      b.inputs[static_cast<std::size_t>(row * config_.seq_len + t)] = bytes_[static_cast<std::size_t>(start + t)];
      b.targets[static_cast<std::size_t>(row * config_.seq_len + t)] = bytes_[static_cast<std::size_t>(start + t + 1)];
    }
  }

  std::vector<std::uint8_t> bytes_;
  text_config config_;
  std::string name_;
  index_t split_ = 0;
};

}  // namespace nvfp4::training
