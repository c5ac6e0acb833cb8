// Shared by the tests of nn::linear (linear_test.cpp, saved_forward_test.cpp): the shapes and
// inputs, views, bit comparison, and one of each recipe family with the options it runs under.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "nvfp4/nn/linear.hpp"
#include "test_support.hpp"

namespace nvfp4::test {

constexpr index_t M = 48, K = 160, N = 64;

inline matrix_view<const float> cview(const std::vector<float>& v, index_t rows, index_t cols) {
  return matrix_view<const float>::row_major(v.data(), rows, cols);
}
inline matrix_view<float> mview(std::vector<float>& v, index_t rows, index_t cols) {
  return matrix_view<float>::row_major(v.data(), rows, cols);
}

/// Index of the first element whose bits differ, or -1 (a size mismatch reports 0).
inline long first_difference(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return static_cast<long>(i);
  return -1;
}

/// Inputs shared by the tests: X [M, K], W [N, K], b [N], dY [M, N].
struct inputs {
  std::vector<float> x = random_values(M * K, 1), w = random_values(N * K, 2, {.sigma = 0.1});
  std::vector<float> b = random_values(N, 3), dy = random_values(M * N, 4, {.sigma = 0.01});
};

/// One of each recipe family and its variants, with the layer options they run under.
inline std::vector<std::pair<recipe, nn::linear_options>> every_recipe() {
  return {{no_quantization{}, {.bias = true}},
          {no_quantization{}, {.bias = true, .dtype = high_precision::bf16}},
          {nvfp4_block_scaling{}, {.bias = true, .dtype = high_precision::bf16, .seed = 5}},
          {nvfp4_block_scaling{.disable_rht = true, .row_scaled_activation = true}, {.seed = 5}},
          {nvfp4_block_scaling{.nvfp4_4over6 = four_over_six_scope::weights}, {.seed = 5}},
          {float8_current_scaling{}, {.bias = true}},
          {delayed_scaling{.amax_history_len = 4}, {}},
          {float8_block_scaling{}, {}},
          {mxfp8_block_scaling{}, {.bias = true, .mode = gemm_mode::relaxed}}};
}

/// A layer of that recipe and options with W (and b) from `in`.
inline nn::linear make_layer(const recipe& r, const nn::linear_options& options, const inputs& in) {
  nn::linear layer(K, N, r, options);
  std::copy(in.w.begin(), in.w.end(), layer.weight().begin());
  if (options.bias) std::copy(in.b.begin(), in.b.end(), layer.bias().begin());
  return layer;
}

}  // namespace nvfp4::test
