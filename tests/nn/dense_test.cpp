// Tests for nvfp4/nn/dense.hpp: the FP32 and BF16 engines against products computed here, the
// observer's view of each tensor (and a rejected tensor stopping the layer with its name and role),
// the high-precision switch, and bad shapes.
#include "nvfp4/nn/dense.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace nvfp4::nn {
namespace {

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

/// Σ_k a[i, k] · b[j, k] in double (an independent oracle of X·Wᵀ).
double dot_row(const std::vector<float>& a, index_t i, const std::vector<float>& b, index_t j, index_t k) {
  double s = 0;
  for (index_t q = 0; q < k; ++q) s += static_cast<double>(a[static_cast<std::size_t>(i * k + q)]) * b[static_cast<std::size_t>(j * k + q)];
  return s;
}

TEST(Dense, Fp32EngineForwardAndBackward) {
  const index_t m = 5, k = 12, n = 7;
  dense d("fc", 0, k, n, parameter_kind::matrix, std::make_unique<fp32_engine>());
  d.weight().value = random_values(static_cast<std::size_t>(n * k), 1);
  const auto x = random_values(static_cast<std::size_t>(m * k), 2);
  const auto dy = random_values(static_cast<std::size_t>(m * n), 3);
  std::vector<float> y, dx;
  d.forward(x, m, y, true);
  d.backward(dy, dx);
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) EXPECT_NEAR(y[static_cast<std::size_t>(i * n + j)], dot_row(x, i, d.weight().value, j, k), 1e-5);
  for (index_t i = 0; i < m; ++i)
    for (index_t q = 0; q < k; ++q) {
      double s = 0;  // dX = dY · W
      for (index_t j = 0; j < n; ++j) s += static_cast<double>(dy[static_cast<std::size_t>(i * n + j)]) * d.weight().value[static_cast<std::size_t>(j * k + q)];
      EXPECT_NEAR(dx[static_cast<std::size_t>(i * k + q)], s, 1e-5);
    }
  for (index_t j = 0; j < n; ++j)
    for (index_t q = 0; q < k; ++q) {
      double s = 0;  // dW = dYᵀ · X
      for (index_t i = 0; i < m; ++i) s += static_cast<double>(dy[static_cast<std::size_t>(i * n + j)]) * x[static_cast<std::size_t>(i * k + q)];
      EXPECT_NEAR(d.weight().grad[static_cast<std::size_t>(j * k + q)], s, 1e-5);
    }
}

TEST(Dense, Bf16EngineRoundsOperandsAndOutputs) {
  const index_t m = 4, k = 32, n = 3;
  dense d("fc", 0, k, n, parameter_kind::matrix, std::make_unique<bf16_engine>());
  d.weight().value = random_values(static_cast<std::size_t>(n * k), 4);
  const auto x = random_values(static_cast<std::size_t>(m * k), 5);
  std::vector<float> y;
  d.forward(x, m, y, true);
  auto rounded = [](std::vector<float> v) {
    round_to_bf16(v);
    return v;
  };
  const auto xr = rounded(x), wr = rounded(d.weight().value);
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      const float v = y[static_cast<std::size_t>(i * n + j)];
      EXPECT_EQ(v, bf16::from_float(v).to_float());  // a bf16 value
      // The FP32 sum of exact bf16 products, rounded once more to bf16: within one bf16 ulp.
      const double exact = dot_row(xr, i, wr, j, k);
      EXPECT_NEAR(v, exact, std::fabs(exact) * std::exp2(-7.0) + 1e-6);
    }
  // The rounding matters: the same layer in FP32 gives different bits.
  dense f("fc", 0, k, n, parameter_kind::matrix, std::make_unique<fp32_engine>());
  f.weight().value = d.weight().value;
  std::vector<float> y32;
  f.forward(x, m, y32, true);
  EXPECT_NE(y, y32);
}

struct recording_observer final : tensor_observer {
  std::vector<std::string> seen;
  std::string reject;  // "layer:role" to reject
  bool observe(const dense& layer, tensor_role role, std::span<const float> values) override {
    const std::string key = layer.name() + ":" + tensor_role_name(role);
    seen.push_back(key + ":" + std::to_string(values.size()));
    return key != reject;
  }
};

TEST(Dense, ObserverSeesEveryTensorInOrderAndCanStopTheLayer) {
  dense d("fc", 2, 4, 3, parameter_kind::matrix, std::make_unique<fp32_engine>());
  recording_observer obs;
  d.set_observer(&obs);
  std::vector<float> y, dx;
  d.forward(std::vector<float>(8, 1.0f), 2, y, true);
  d.backward(std::vector<float>(6, 1.0f), dx);
  EXPECT_EQ(obs.seen, (std::vector<std::string>{"fc:activation:8", "fc:weight:12", "fc:output:6", "fc:gradient:6", "fc:weight_gradient:12"}));
  obs.reject = "fc:weight";
  try {
    d.forward(std::vector<float>(8, 1.0f), 2, y, true);
    FAIL();
  } catch (const non_finite_tensor& e) {
    EXPECT_EQ(e.layer(), "fc");
    EXPECT_EQ(e.role(), tensor_role::weight);
    EXPECT_EQ(e.code(), errc::non_finite_input);
  }
}

TEST(Dense, HighPrecisionSwitchChangesTheEngine) {
  dense d("fc", 0, 16, 16, parameter_kind::matrix, std::make_unique<fp32_engine>());
  d.weight().value = random_values(256, 6);
  const auto x = random_values(32, 7);
  std::vector<float> y32, y16;
  EXPECT_EQ(d.active_engine().name(), "fp32");
  d.forward(x, 2, y32, true);
  d.use_high_precision(true);
  EXPECT_EQ(d.active_engine().name(), "bf16");
  d.forward(x, 2, y16, true);
  EXPECT_NE(y32, y16);
  for (float v : y16) EXPECT_EQ(v, bf16::from_float(v).to_float());
}

TEST(Dense, RejectsBadShapes) {
  dense d("fc", 0, 4, 3, parameter_kind::matrix, std::make_unique<fp32_engine>());
  std::vector<float> y, dx;
  EXPECT_THROW(d.forward(std::vector<float>(7), 2, y, true), error);
  EXPECT_THROW(d.backward(std::vector<float>(6), dx), error);  // no forward yet
  d.forward(std::vector<float>(8), 2, y, true);
  EXPECT_THROW(d.backward(std::vector<float>(5), dx), error);
  EXPECT_THROW(dense("x", 0, 0, 3, parameter_kind::matrix, std::make_unique<fp32_engine>()), error);
  EXPECT_THROW(dense("x", 0, 4, 3, parameter_kind::matrix, nullptr), error);
}

}  // namespace
}  // namespace nvfp4::nn
