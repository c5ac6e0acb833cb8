// Tests for nvfp4/nn/amax_percentile.hpp: quantiles worked by hand, bad input, and the percentile
// engine: with quantile 1 it is the Linear layer's NVFP4 recipe bit for bit (forward and two
// backward steps, with and without RHT); below 1 it differs and stays finite on outliers.
#include "nvfp4/nn/amax_percentile.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "test_support.hpp"

namespace nvfp4::nn {
namespace {

TEST(AmaxPercentile, QuantilesWorkedByHand) {
  const std::vector<float> x{-3, 1, 10, -7, 2, 5, -9, 4, 6, 8};  // |x| sorted: 1 2 3 4 5 6 7 8 9 10
  EXPECT_EQ(amax_percentile(x, 1.0), 10.0f);
  EXPECT_EQ(amax_percentile(x, 0.9), 9.0f);   // the 9th of 10
  EXPECT_EQ(amax_percentile(x, 0.91), 10.0f);  // ceil(9.1) = 10th
  EXPECT_EQ(amax_percentile(x, 0.5), 5.0f);
  EXPECT_EQ(amax_percentile(x, 0.01), 1.0f);
  EXPECT_EQ(amax_percentile(std::vector<float>{}, 0.5), 0.0f);
  EXPECT_THROW(amax_percentile(x, 0.0), error);
  EXPECT_THROW(amax_percentile(x, 1.5), error);
  EXPECT_THROW(amax_percentile(std::vector<float>{1.0f, std::numeric_limits<float>::quiet_NaN()}, 0.5), error);
}

/// Forward + backward of one layer for two steps; returns Y, dX and dW of both steps.
std::vector<float> two_steps(gemm_engine& engine, const std::vector<float>& w, index_t m, index_t k, index_t n) {
  std::vector<float> out;
  for (unsigned step = 0; step < 2; ++step) {
    const auto x = test::random_values(m * k, 20 + step, {.log2_spread = 1.0});
    const auto dy = test::random_values(m * n, 30 + step, {.log2_spread = 1.0});
    std::vector<float> y(static_cast<std::size_t>(m * n)), dx(static_cast<std::size_t>(m * k)), dw(static_cast<std::size_t>(n * k));
    engine.forward(matrix_view<const float>::row_major(x.data(), m, k), matrix_view<const float>::row_major(w.data(), n, k),
                   matrix_view<float>::row_major(y.data(), m, n), true);
    engine.backward(matrix_view<const float>::row_major(dy.data(), m, n), matrix_view<float>::row_major(dx.data(), m, k),
                    matrix_view<float>::row_major(dw.data(), n, k));
    out.insert(out.end(), y.begin(), y.end());
    out.insert(out.end(), dx.begin(), dx.end());
    out.insert(out.end(), dw.begin(), dw.end());
  }
  return out;
}

TEST(PercentileEngine, QuantileOneIsTheLinearLayersNvfp4) {
  const index_t m = 32, k = 64, n = 48;
  const auto w = test::random_values(n * k, 5);
  for (bool rht : {true, false}) {
    nvfp4_block_scaling recipe{};
    recipe.disable_rht = !rht;
    linear_engine reference(k, n, recipe, {.dtype = high_precision::bf16, .seed = 77});
    nvfp4_percentile_engine engine({.quantile = 1.0, .recipe = recipe, .seed = 77});
    EXPECT_EQ(two_steps(engine, w, m, k, n), two_steps(reference, w, m, k, n)) << "rht " << rht;
  }
}

TEST(PercentileEngine, BelowOneChangesTheScalesAndStaysFinite) {
  const index_t m = 32, k = 64, n = 48;
  const auto w = test::random_values(n * k, 6);
  nvfp4_percentile_engine q1({.quantile = 1.0, .seed = 1}), q99({.quantile = 0.99, .seed = 1});
  const auto a = two_steps(q1, w, m, k, n), b = two_steps(q99, w, m, k, n);
  EXPECT_NE(a, b);
  for (float v : b) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(q99.name(), "nvfp4_amax_q0.99");
  EXPECT_THROW(nvfp4_percentile_engine({.quantile = 0.0}), error);
  nvfp4_block_scaling four_over_six{};
  four_over_six.nvfp4_4over6 = four_over_six_scope::weights;
  EXPECT_THROW(nvfp4_percentile_engine({.recipe = four_over_six}), error);
}

}  // namespace
}  // namespace nvfp4::nn
