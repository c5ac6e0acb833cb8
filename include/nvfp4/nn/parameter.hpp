// nvfp4/nn/parameter.hpp: a trainable tensor of a model: its FP32 master values, the gradient the
// backward pass accumulates into it, its shape and what kind of tensor it is (the optimizers
// treat matrices, embeddings and gains differently).
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "nvfp4/config.hpp"
#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/error.hpp"

namespace nvfp4::nn {

/// What a parameter is in its model; optimizers use it to pick rules (Muon only orthogonalizes
/// hidden matrices, weight decay skips gains).
enum class parameter_kind {
  matrix,     ///< the weight of a hidden dense layer, [out, in]
  head,       ///< the weight of the output (classifier / LM head) layer, [out, in]
  embedding,  ///< a lookup table, [entries, width]
  vector      ///< a gain or a bias, [1, width]
};

constexpr const char* parameter_kind_name(parameter_kind kind) {
  switch (kind) {
    case parameter_kind::matrix:
      return "matrix";
    case parameter_kind::head:
      return "head";
    case parameter_kind::embedding:
      return "embedding";
    case parameter_kind::vector:
      return "vector";
  }
  return "?";
}

/// FP32 master values and their gradient, row-major [rows, cols].
struct parameter {
  /// The largest parameter accepted: the library's limit on any tensor (nvfp4::max_element_count).
  static constexpr index_t max_elements = max_element_count;

  std::string name;
  parameter_kind kind = parameter_kind::matrix;
  index_t rows = 0;
  index_t cols = 0;
  std::vector<float> value;
  std::vector<float> grad;

  parameter() = default;
  parameter(std::string name_, parameter_kind kind_, index_t rows_, index_t cols_)
      : name(std::move(name_)), kind(kind_), rows(rows_), cols(cols_) {
    value.assign(
        static_cast<std::size_t>(nvfp4::detail::checked_element_count(rows_, cols_, errc::invalid_argument, "parameter '" + name + "'")),
        0.0f);
    grad.assign(value.size(), 0.0f);
  }

  index_t size() const { return rows * cols; }
  void zero_grad() { std::fill(grad.begin(), grad.end(), 0.0f); }
  /// Bytes of the FP32 master values.
  std::size_t bytes() const { return value.size() * sizeof(float); }
};

}  // namespace nvfp4::nn
