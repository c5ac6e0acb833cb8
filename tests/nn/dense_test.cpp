// Tests for nvfp4/nn/dense.hpp: a dense layer over the emulated Linear layer: FP32 and BF16 against
// products computed here, an NVFP4 layer against the recipe's public functions composed here bit
// for bit, evaluation passes that leave a delayed-scaling history alone, per-layer seeds, the
// observer's view of each tensor (a rejected tensor stopping the layer with its name and role),
// the high-precision switch, and bad shapes.
#include "nvfp4/nn/dense.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace nvfp4::nn {
namespace {
namespace nn_dense_test {

using test::random_values;

/// Σ_k a[i, k] · b[j, k] in double (an independent oracle of X·Wᵀ).
double dot_row(const std::vector<float>& a, index_t i, const std::vector<float>& b, index_t j, index_t k) {
  double s = 0;
  for (index_t q = 0; q < k; ++q) s += static_cast<double>(a[static_cast<std::size_t>(i * k + q)]) * b[static_cast<std::size_t>(j * k + q)];
  return s;
}

std::vector<float> rounded_to_bf16(std::vector<float> v) {
  for (float& x : v) x = bf16::from_float(x).to_float();
  return v;
}

TEST(Dense, Fp32ForwardAndBackward) {
  const index_t m = 5, k = 12, n = 7;
  dense d("fc", 0, k, n, parameter_kind::matrix, fp32_engines());
  d.weight().value = random_values(n * k, 1);
  const auto x = random_values(m * k, 2);
  const auto dy = random_values(m * n, 3);
  std::vector<float> y, dx;
  d.forward(x, m, y, true);
  d.backward(dy, dx);
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) EXPECT_NEAR(y[static_cast<std::size_t>(i * n + j)], dot_row(x, i, d.weight().value, j, k), 1e-5);
  for (index_t i = 0; i < m; ++i)
    for (index_t q = 0; q < k; ++q) {
      double s = 0;  // dX = dY · W
      for (index_t j = 0; j < n; ++j)
        s += static_cast<double>(dy[static_cast<std::size_t>(i * n + j)]) * d.weight().value[static_cast<std::size_t>(j * k + q)];
      EXPECT_NEAR(dx[static_cast<std::size_t>(i * k + q)], s, 1e-5);
    }
  for (index_t j = 0; j < n; ++j)
    for (index_t q = 0; q < k; ++q) {
      double s = 0;  // dW = dYᵀ · X
      for (index_t i = 0; i < m; ++i)
        s += static_cast<double>(dy[static_cast<std::size_t>(i * n + j)]) * x[static_cast<std::size_t>(i * k + q)];
      EXPECT_NEAR(d.weight().grad[static_cast<std::size_t>(j * k + q)], s, 1e-5);
    }
}

TEST(Dense, Bf16RoundsOperandsAndOutputs) {
  const index_t m = 4, k = 32, n = 3;
  dense d("fc", 0, k, n, parameter_kind::matrix, bf16_engines());
  d.weight().value = random_values(n * k, 4);
  const auto x = random_values(m * k, 5), dy = random_values(m * n, 6);
  std::vector<float> y, dx;
  d.forward(x, m, y, true);
  d.backward(dy, dx);
  const auto xr = rounded_to_bf16(x), wr = rounded_to_bf16(d.weight().value), dyr = rounded_to_bf16(dy);
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      const float v = y[static_cast<std::size_t>(i * n + j)];
      EXPECT_EQ(v, bf16::from_float(v).to_float());   // written in BF16
      const double exact = dot_row(xr, i, wr, j, k);  // exact products of the BF16 operands
      EXPECT_NEAR(v, exact, std::fabs(exact) * std::exp2(-7.0) + 1e-6);
    }
  for (float v : dx) EXPECT_EQ(v, bf16::from_float(v).to_float());
  // dW stays FP32 (TE's main_grad): the FP32 sum of the BF16 operands' products.
  for (index_t j = 0; j < n; ++j)
    for (index_t q = 0; q < k; ++q) {
      double s = 0;
      for (index_t i = 0; i < m; ++i)
        s += static_cast<double>(dyr[static_cast<std::size_t>(i * n + j)]) * xr[static_cast<std::size_t>(i * k + q)];
      EXPECT_NEAR(d.weight().grad[static_cast<std::size_t>(j * k + q)], s, 1e-5);
    }
}

TEST(Dense, Nvfp4EqualsTheRecipeComposedFromPublicFunctions) {
  const index_t m = 32, k = 64, n = 16;
  dense d("blk0.up", 0, k, n, parameter_kind::matrix, linear_engines(nvfp4_block_scaling{}, {.dtype = high_precision::bf16, .seed = 9}));
  d.weight().value = random_values(n * k, 7);
  const auto x = random_values(m * k, 8), dy = random_values(m * n, 9);
  std::vector<float> y, dx;
  d.forward(x, m, y, true);
  d.backward(dy, dx);
  // The same GEMMs built here: BF16 inputs, the recipe's roles, the layer's SR seed for step 0.
  const auto xr = rounded_to_bf16(x), wr = rounded_to_bf16(d.weight().value), dyr = rounded_to_bf16(dy);
  auto view = [](const std::vector<float>& v, index_t r, index_t c) { return matrix_view<const float>::row_major(v.data(), r, c); };
  nvfp4_block_scaling recipe{};
  const operand_pair xs = quantize_activation(view(xr, m, k), recipe), ws = quantize_weight(view(wr, n, k), recipe);
  recipe.seed = nvfp4::derived_seed(nvfp4::derived_seed(9, name_hash("blk0.up")), 0);
  const operand_pair gs = quantize_gradient(view(dyr, m, n), recipe);
  std::vector<float> y_ref(static_cast<std::size_t>(m * n)), dx_ref(static_cast<std::size_t>(m * k)),
      dw_ref(static_cast<std::size_t>(n * k));
  nvfp4_gemm(xs.rowwise, ws.rowwise, matrix_view<float>::row_major(y_ref.data(), m, n));
  nvfp4_gemm(gs.rowwise, ws.columnwise, matrix_view<float>::row_major(dx_ref.data(), m, k));
  nvfp4_gemm(gs.columnwise, xs.columnwise, matrix_view<float>::row_major(dw_ref.data(), n, k));
  EXPECT_EQ(y, rounded_to_bf16(y_ref));
  EXPECT_EQ(dx, rounded_to_bf16(dx_ref));
  EXPECT_EQ(d.weight().grad, dw_ref);
  EXPECT_EQ(d.engine().name(), "nvfp4");
}

TEST(Dense, EvaluationLeavesTheDelayedScalingHistoryAlone) {
  dense d("fc", 0, 32, 16, parameter_kind::matrix, linear_engines(delayed_scaling{.amax_history_len = 4}, {.dtype = high_precision::bf16}));
  d.weight().value = random_values(16 * 32, 10);
  auto& engine = dynamic_cast<linear_engine&>(d.engine());
  const auto x = random_values(8 * 32, 11);
  std::vector<float> y;
  d.forward(x, 8, y, true);  // a training forward records the amaxes and updates the scales
  const delayed_scaling_state& input = *engine.layer().scaling_state(nvfp4::tensor_role::input);
  const std::vector<float> history(input.amax_history().begin(), input.amax_history().end());
  const float scale = input.scale();
  EXPECT_NE(scale, 1.0f);
  const auto x2 = random_values(8 * 32, 12, {.sigma = 5.0});
  d.forward(x2, 8, y, false);
  EXPECT_EQ(std::vector<float>(input.amax_history().begin(), input.amax_history().end()), history);
  EXPECT_EQ(input.scale(), scale);
  d.forward(x2, 8, y, true);
  EXPECT_NE(input.scale(), scale);
}

TEST(Dense, EachLayerHasItsOwnSeed) {
  const auto engines = linear_engines(nvfp4_block_scaling{}, {.seed = 3});
  dense a("blk0.qkv", 0, 16, 16, parameter_kind::matrix, engines), b("blk0.proj", 0, 16, 16, parameter_kind::matrix, engines);
  const auto sa = dynamic_cast<linear_engine&>(a.engine()).layer().options().seed;
  const auto sb = dynamic_cast<linear_engine&>(b.engine()).layer().options().seed;
  EXPECT_NE(sa, sb);
  EXPECT_EQ(sa, nvfp4::derived_seed(3, name_hash("blk0.qkv")));
}

struct recording_observer final : tensor_observer {
  std::vector<std::string> seen;
  std::string reject;  // "layer:role" to reject
  bool observe(const dense& layer, dense_tensor role, std::span<const float> values) override {
    const std::string key = layer.name() + ":" + dense_tensor_name(role);
    seen.push_back(key + ":" + std::to_string(values.size()));
    return key != reject;
  }
};

TEST(Dense, ObserverSeesEveryTensorInOrderAndCanStopTheLayer) {
  dense d("fc", 2, 4, 3, parameter_kind::matrix, fp32_engines());
  recording_observer obs;
  d.set_observer(&obs);
  std::vector<float> y, dx;
  d.forward(std::vector<float>(8, 1.0f), 2, y, true);
  d.backward(std::vector<float>(6, 1.0f), dx);
  EXPECT_EQ(obs.seen,
            (std::vector<std::string>{"fc:activation:8", "fc:weight:12", "fc:output:6", "fc:gradient:6", "fc:weight_gradient:12"}));
  obs.reject = "fc:weight";
  try {
    d.forward(std::vector<float>(8, 1.0f), 2, y, true);
    FAIL();
  } catch (const non_finite_tensor& e) {
    EXPECT_EQ(e.layer(), "fc");
    EXPECT_EQ(e.role(), dense_tensor::weight);
    EXPECT_EQ(e.code(), errc::non_finite_input);
  }
}

TEST(Dense, HighPrecisionSwitchChangesTheEngine) {
  dense d("fc", 0, 16, 16, parameter_kind::matrix, fp32_engines());
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
  dense d("fc", 0, 4, 3, parameter_kind::matrix, fp32_engines());
  std::vector<float> y, dx;
  // forward documents shape_mismatch for a wrong X; backward's dY is checked against the last
  // training forward, so without one every dY is the wrong shape.
  EXPECT_EQ(test::error_code_of([&] { d.forward(std::vector<float>(7), 2, y, true); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { d.backward(std::vector<float>(6), dx); }), errc::shape_mismatch);  // no forward yet
  d.forward(std::vector<float>(8), 2, y, true);
  EXPECT_EQ(test::error_code_of([&] { d.backward(std::vector<float>(5), dx); }), errc::shape_mismatch);
  // A zero dimension is a parameter out of its domain; an empty factory is a null callable.
  EXPECT_EQ(test::error_code_of([] { dense("x", 0, 0, 3, parameter_kind::matrix, fp32_engines()); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([] { dense("x", 0, 4, 3, parameter_kind::matrix, engine_factory{}); }), errc::null_pointer);
}

}  // namespace nn_dense_test
}  // namespace
}  // namespace nvfp4::nn
