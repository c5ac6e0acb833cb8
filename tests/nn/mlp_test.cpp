// Tests for nvfp4/nn/mlp.hpp: the backward pass against central differences, the layer map, and
// bad configurations and batches.
#include "nvfp4/nn/mlp.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "nn/model_test_support.hpp"
#include "test_support.hpp"

namespace nvfp4::nn {
namespace {
namespace nn_mlp_test {

batch feature_batch(index_t rows, index_t inputs, index_t classes, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  batch b;
  b.rows = rows;
  for (index_t i = 0; i < rows * inputs; ++i) b.features.push_back(normal(rng));
  for (index_t i = 0; i < rows; ++i) b.targets.push_back(static_cast<std::int32_t>(i % classes));
  return b;
}

TEST(Mlp, GradientsMatchCentralDifferences) {
  mlp_classifier m({.inputs = 6, .hidden = 10, .depth = 2, .classes = 4, .seed = 2}, fp32_engines());
  testing::expect_gradients_match(m, feature_batch(5, 6, 4, 1), 1, 1e-2f, 2e-3, 0.03);
}

TEST(Mlp, LayerMap) {
  mlp_classifier m({.inputs = 8, .hidden = 16, .depth = 3, .classes = 5}, fp32_engines());
  EXPECT_EQ(m.layer_count(), 4);
  const auto d = m.dense_layers();
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0]->name(), "fc0");
  EXPECT_EQ(d[3]->name(), "head");
  EXPECT_EQ(d[3]->layer(), 3);
  EXPECT_EQ(m.parameter_count(), 8u * 16 + 16 * 16 * 2 + 16 * 5);
}

TEST(Mlp, RejectsBadConfigurationsAndBatches) {
  EXPECT_EQ(test::error_code_of([] { mlp_classifier({.classes = 1}, fp32_engines()); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([] { mlp_classifier({.depth = 0}, fp32_engines()); }), errc::invalid_argument);
  mlp_classifier m({.inputs = 4, .hidden = 8, .depth = 1, .classes = 3}, fp32_engines());
  batch b = feature_batch(2, 4, 3, 0);
  b.features.pop_back();
  EXPECT_EQ(test::error_code_of([&] { m.evaluate(b); }), errc::shape_mismatch);
  b = feature_batch(2, 4, 3, 0);
  b.targets[1] = 3;  // classes = 3: softmax_cross_entropy's invalid_argument for a target outside [0, classes)
  EXPECT_EQ(test::error_code_of([&] { m.evaluate(b); }), errc::invalid_argument);
}

}  // namespace nn_mlp_test
}  // namespace
}  // namespace nvfp4::nn
