// Tests of nvfp4/recipes/nvfp4_amax_rule.hpp through the NVFP4 recipe's quantizers: which
// queries a rule is asked (role, transformed, values, TE's amax) for each tensor and switch; a
// rule that answers TE's amax changes no bit; a rule's amax is used exactly as
// quantize_with_amax uses a given amax (rowwise, columnwise, after the RHT, with SR); bf16 input is
// shown as floats; a rule's answer that is not a finite number >= 0 is refused.
#include "nvfp4/recipes/nvfp4_amax_rule.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "nvfp4/recipes/nvfp4_recipe.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace recipes_nvfp4_amax_rule_test {

using test::bytes_of;

constexpr index_t M = 64, K = 48, N = 32;

/// Gaussian bf16 values with a few outliers, as floats.
std::vector<float> values(index_t n, unsigned seed) {
  std::vector<float> out;
  for (bf16 v : test::random_values<bf16>(n, seed, {.log2_spread = 1.0})) out.push_back(v.to_float());
  return out;
}
matrix_view<const float> view(const std::vector<float>& v, index_t rows, index_t cols) {
  return matrix_view<const float>::row_major(v.data(), rows, cols);
}

/// A rule that records what it is asked (values copied row-major) and answers factor · amax.
struct recording_rule {
  struct asked {
    tensor_role role;
    bool transformed;
    index_t rows, cols;
    std::vector<float> values;
    float amax;
  };
  std::vector<asked> queries;
  float factor = 1.0f;

  nvfp4_amax_rule rule() {
    return [this](const nvfp4_amax_query& q) {
      std::vector<float> v;
      for (index_t r = 0; r < q.values.rows(); ++r)
        for (index_t c = 0; c < q.values.cols(); ++c) v.push_back(q.values(r, c));
      queries.push_back({q.role, q.transformed, q.values.rows(), q.values.cols(), std::move(v), q.amax});
      return factor * q.amax;
    };
  }
};

std::vector<float> row_major_of(const columnwise_rht& t) {
  std::vector<float> out;
  for (bf16 v : t.values) out.push_back(v.to_float());
  return out;
}

void expect_same_operand(const nvfp4_operand& got, const nvfp4_operand& want, const std::string& what) {
  EXPECT_EQ(bytes_of(got.tensor), bytes_of(want.tensor)) << what;
  EXPECT_EQ(got.tensor.amax(), want.tensor.amax()) << what;
  EXPECT_EQ(got.e4m3_max, want.e4m3_max) << what;
  EXPECT_EQ(got.row_amax, want.row_amax) << what;
}

TEST(Nvfp4AmaxRule, AsksEachTensorOnceAndTheRhtCopyAgain) {
  const auto xs = values(M * K, 1), ws = values(N * K, 2), gs = values(M * N, 3);
  const auto x = view(xs, M, K), w = view(ws, N, K), dy = view(gs, M, N);
  recording_rule recorder;
  (void)quantize_activation(x, {}, recorder.rule());
  ASSERT_EQ(recorder.queries.size(), 2u);
  EXPECT_EQ(recorder.queries[0].role, tensor_role::input);
  EXPECT_FALSE(recorder.queries[0].transformed);
  EXPECT_EQ(recorder.queries[0].values, xs);
  EXPECT_EQ(recorder.queries[0].amax, amax(x));
  const columnwise_rht xt = rht_columnwise(x);
  EXPECT_TRUE(recorder.queries[1].transformed);
  EXPECT_EQ(recorder.queries[1].rows, K);
  EXPECT_EQ(recorder.queries[1].cols, M);
  EXPECT_EQ(recorder.queries[1].values, row_major_of(xt));
  EXPECT_EQ(recorder.queries[1].amax, xt.amax);

  recorder.queries.clear();
  (void)quantize_activation(x, {.disable_rht = true}, recorder.rule());  // both copies share one amax
  ASSERT_EQ(recorder.queries.size(), 1u);
  recorder.queries.clear();
  (void)quantize_activation_rowwise(x, {}, recorder.rule());
  ASSERT_EQ(recorder.queries.size(), 1u);
  recorder.queries.clear();
  (void)quantize_activation(x, {.disable_rht = true, .row_scaled_activation = true}, recorder.rule());  // row amaxes only
  EXPECT_TRUE(recorder.queries.empty());

  recorder.queries.clear();
  (void)quantize_weight(w, {}, recorder.rule());  // never RHT
  ASSERT_EQ(recorder.queries.size(), 1u);
  EXPECT_EQ(recorder.queries[0].role, tensor_role::weight);
  EXPECT_EQ(recorder.queries[0].values, ws);
  recorder.queries.clear();
  (void)quantize_weight_rowwise(w, {}, recorder.rule());
  ASSERT_EQ(recorder.queries.size(), 1u);

  recorder.queries.clear();
  (void)quantize_gradient(dy, {.seed = 4}, recorder.rule());
  ASSERT_EQ(recorder.queries.size(), 2u);
  EXPECT_EQ(recorder.queries[0].role, tensor_role::grad_output);
  EXPECT_EQ(recorder.queries[0].values, gs);
  EXPECT_EQ(recorder.queries[1].role, tensor_role::grad_output);
  EXPECT_TRUE(recorder.queries[1].transformed);
  EXPECT_EQ(recorder.queries[1].amax, rht_columnwise(dy).amax);
}

TEST(Nvfp4AmaxRule, TeAmaxChangesNoBit) {
  const auto xs = values(M * K, 4), ws = values(N * K, 5), gs = values(M * N, 6);
  const auto x = view(xs, M, K), w = view(ws, N, K), dy = view(gs, M, N);
  recording_rule identity;
  for (const nvfp4_block_scaling& r :
       {nvfp4_block_scaling{.seed = 9}, nvfp4_block_scaling{.disable_rht = true, .disable_2d_quantization = true, .seed = 9},
        nvfp4_block_scaling{.disable_rht = true, .nvfp4_4over6 = four_over_six_scope::all, .seed = 9},
        nvfp4_block_scaling{.disable_stochastic_rounding = true, .seed = 9}}) {
    const operand_pair xa = quantize_activation(x, r), xb = quantize_activation(x, r, identity.rule());
    expect_same_operand(xb.rowwise, xa.rowwise, "activation rowwise");
    expect_same_operand(xb.columnwise, xa.columnwise, "activation columnwise");
    const operand_pair wa = quantize_weight(w, r), wb = quantize_weight(w, r, identity.rule());
    expect_same_operand(wb.rowwise, wa.rowwise, "weight rowwise");
    expect_same_operand(wb.columnwise, wa.columnwise, "weight columnwise");
    const operand_pair ga = quantize_gradient(dy, r), gb = quantize_gradient(dy, r, identity.rule());
    expect_same_operand(gb.rowwise, ga.rowwise, "gradient rowwise");
    expect_same_operand(gb.columnwise, ga.columnwise, "gradient columnwise");
  }
}

// A rule's amax below the maximum: every copy is quantize_with_amax with that amax (the values
// above it saturate), the copy after the RHT with the rule's answer for the transformed values.
TEST(Nvfp4AmaxRule, ChosenAmaxIsQuantizeWithAmax) {
  const auto xs = values(M * K, 7), gs = values(M * N, 8);
  const auto x = view(xs, M, K), dy = view(gs, M, N);
  recording_rule quarter;
  quarter.factor = 0.25f;
  const float x_amax = 0.25f * amax(x);
  const columnwise_rht xt = rht_columnwise(x);
  const operand_pair xq = quantize_activation(x, {}, quarter.rule());
  EXPECT_EQ(bytes_of(xq.rowwise.tensor), bytes_of(quantize_with_amax<nvfp4_1x16>(x, x_amax)));
  EXPECT_EQ(xq.rowwise.tensor.amax(), x_amax);
  EXPECT_EQ(bytes_of(xq.columnwise.tensor),
            bytes_of(quantize_with_amax<nvfp4_1x16>(xt.view(), 0.25f * xt.amax, {.axis = quantized_axis::columnwise})));
  EXPECT_EQ(xq.columnwise.tensor.amax(), 0.25f * xt.amax);
  const operand_pair plain = quantize_activation(x, {.disable_rht = true}, quarter.rule());
  EXPECT_EQ(bytes_of(plain.columnwise.tensor),
            bytes_of(quantize_with_amax<nvfp4_1x16>(x.transposed(), x_amax, {.axis = quantized_axis::columnwise})));

  // Gradients: SR streams as the recipe documents, with the rule's amaxes.
  const nvfp4_block_scaling r{.seed = 21};
  const float g_amax = 0.25f * amax(dy);
  const columnwise_rht gt = rht_columnwise(dy);
  const operand_pair gq = quantize_gradient(dy, r, quarter.rule());
  EXPECT_EQ(bytes_of(gq.rowwise.tensor),
            bytes_of(quantize_with_amax<nvfp4_1x16>(dy, g_amax, {.rounding = rounding_mode::stochastic, .seed = derived_seed(r.seed, 0)})));
  EXPECT_EQ(bytes_of(gq.columnwise.tensor),
            bytes_of(quantize_with_amax<nvfp4_1x16>(
                gt.view(), 0.25f * gt.amax,
                {.rounding = rounding_mode::stochastic, .seed = derived_seed(r.seed, 1), .axis = quantized_axis::columnwise})));
  // The weight's tiles.
  const auto ws = values(N * K, 9);
  const auto w = view(ws, N, K);
  EXPECT_EQ(bytes_of(quantize_weight(w, {}, quarter.rule()).rowwise.tensor),
            bytes_of(quantize_with_amax<nvfp4_16x16>(w, 0.25f * amax(w))));  // the tiles' bytes as 1x16 rows
}

TEST(Nvfp4AmaxRule, Bf16InputIsShownAsFloats) {
  const auto xb = test::random_values<bf16>(M * K, 10);
  const auto x = matrix_view<const bf16>::row_major(xb.data(), M, K);
  recording_rule recorder;
  const operand_pair got = quantize_activation(x, {.disable_rht = true}, recorder.rule());
  ASSERT_EQ(recorder.queries.size(), 1u);
  for (std::size_t i = 0; i < xb.size(); ++i) ASSERT_EQ(recorder.queries[0].values[i], xb[i].to_float()) << i;
  expect_same_operand(got.rowwise, quantize_activation(x, {.disable_rht = true}).rowwise, "bf16 rowwise");
}

TEST(Nvfp4AmaxRule, RefusesAnAmaxThatIsNotFiniteAndNonNegative) {
  const auto xs = values(M * K, 11);
  const auto x = view(xs, M, K);
  for (float answer : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), -1.0f}) {
    const nvfp4_amax_rule rule = [answer](const nvfp4_amax_query&) { return answer; };
    try {
      (void)quantize_activation(x, {}, rule);
      ADD_FAILURE() << answer;
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("nvfp4_amax_rule"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("input"), std::string::npos) << e.what();
    }
  }
  // Only the transformed copy's answer is bad: still refused, naming it.
  const nvfp4_amax_rule bad_after_rht = [](const nvfp4_amax_query& q) { return q.transformed ? -2.0f : q.amax; };
  try {
    (void)quantize_gradient(view(xs, M, K), {}, bad_after_rht);
    ADD_FAILURE();
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("grad_output after the RHT"), std::string::npos) << e.what();
  }
  // Zero is an amax the scale rule defines (tensor scale 1, docs/numerics_spec.md §2): accepted.
  const nvfp4_amax_rule zero = [](const nvfp4_amax_query&) { return 0.0f; };
  EXPECT_NO_THROW((void)quantize_activation(x, {}, zero));
}

}  // namespace recipes_nvfp4_amax_rule_test
}  // namespace
}  // namespace nvfp4
