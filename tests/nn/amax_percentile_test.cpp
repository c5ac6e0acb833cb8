// Tests for nvfp4/nn/amax_percentile.hpp: quantiles worked by hand, bad input, the rule's answers
// per role, and the percentile engine: with quantile 1 it is the Linear layer's NVFP4 recipe bit
// for bit (forward and two backward steps; RHT, no RHT, 4over6, row-scaled); below 1 it is one
// step rebuilt from the public quantizers with quantile amaxes, differs and stays finite.
#include "nvfp4/nn/amax_percentile.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace nvfp4::nn {
namespace {
namespace nn_amax_percentile_test {

TEST(AmaxPercentile, QuantilesWorkedByHand) {
  const std::vector<float> x{-3, 1, 10, -7, 2, 5, -9, 4, 6, 8};  // |x| sorted: 1 2 3 4 5 6 7 8 9 10
  EXPECT_EQ(amax_percentile(x, 1.0), 10.0f);
  EXPECT_EQ(amax_percentile(x, 0.9), 9.0f);    // the 9th of 10
  EXPECT_EQ(amax_percentile(x, 0.91), 10.0f);  // ceil(9.1) = 10th
  EXPECT_EQ(amax_percentile(x, 0.5), 5.0f);
  EXPECT_EQ(amax_percentile(x, 0.01), 1.0f);
  EXPECT_EQ(amax_percentile(std::vector<float>{}, 0.5), 0.0f);
  // The header: invalid_argument for q outside (0, 1], non_finite_input for NaN/Inf in x.
  EXPECT_EQ(test::error_code_of([&] { amax_percentile(x, 0.0); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([&] { amax_percentile(x, 1.5); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([] {
              amax_percentile(std::vector<float>{1.0f, std::numeric_limits<float>::quiet_NaN()}, 0.5);
            }),
            errc::non_finite_input);
}

/// The quantile by definition: sort the magnitudes, take the ceil(q·n)-th (at least the first).
float sorted_quantile(std::vector<float> x, double q) {
  for (float& v : x) v = std::fabs(v);
  std::sort(x.begin(), x.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(x.size())));
  return x[std::min(x.size(), std::max<std::size_t>(rank, 1)) - 1];
}

// The selection works on bit patterns in buckets: cases that put many values in one bucket, both
// zeros, subnormals, ties at the wanted rank, and spreads over many binades.
TEST(AmaxPercentile, EqualsTheSortedMagnitudes) {
  std::vector<std::vector<float>> cases;
  cases.push_back(test::random_values(10007, 1, {.log2_spread = 4.0, .zero_every = 17}));
  cases.push_back(test::random_values(4096, 2));
  cases.push_back(std::vector<float>(1000, -2.5f));  // one bucket, all tied
  std::vector<float> near(3000);
  for (std::size_t i = 0; i < near.size(); ++i) near[i] = (i % 2 ? -1.0f : 1.0f) * std::nextafter(1.0f + float(i % 97) * 1e-7f, 2.0f);
  cases.push_back(near);  // one bucket, distinct values
  std::vector<float> tiny{0.0f, -0.0f, 1e-45f, -1e-45f, 1e-40f, std::numeric_limits<float>::min(), -3e-39f, 0.0f};
  cases.push_back(tiny);  // zeros and subnormals
  cases.push_back({std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), 1.0f});
  for (std::size_t i = 0; i < cases.size(); ++i)
    for (double q : {1e-6, 0.001, 0.25, 0.5, 0.9, 0.999, 0.9999, 1.0}) {
      const float got = amax_percentile(cases[i], q), want = sorted_quantile(cases[i], q);
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want)) << "case " << i << ", q " << q;
    }
  // A view gives its elements' quantile, in any layout; NaN in a view is named by row-major index.
  const auto& x = cases[0];
  EXPECT_EQ(amax_percentile(matrix_view<const float>::row_major(x.data(), 1, 10007).transposed(), 0.99), sorted_quantile(x, 0.99));
  std::vector<float> bad(12, 1.0f);
  bad[7] = std::numeric_limits<float>::infinity();
  try {
    (void)amax_percentile(matrix_view<const float>::row_major(bad.data(), 3, 4), 0.5);
    ADD_FAILURE();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::non_finite_input);
    EXPECT_NE(std::string(e.what()).find("index 7"), std::string::npos) << e.what();
  }
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
  for (const nvfp4_block_scaling& recipe : {nvfp4_block_scaling{}, nvfp4_block_scaling{.disable_rht = true},
                                            nvfp4_block_scaling{.disable_rht = true, .nvfp4_4over6 = four_over_six_scope::all},
                                            nvfp4_block_scaling{.disable_rht = true, .row_scaled_activation = true}}) {
    linear_engine reference(k, n, recipe, {.dtype = high_precision::bf16, .seed = 77});
    nvfp4_percentile_engine engine(k, n, {.quantile = 1.0, .recipe = recipe, .seed = 77});
    EXPECT_EQ(two_steps(engine, w, m, k, n), two_steps(reference, w, m, k, n))
        << "rht " << !recipe.disable_rht << ", 4over6 " << (recipe.nvfp4_4over6 != four_over_six_scope::none) << ", row scaled "
        << recipe.row_scaled_activation;
  }
}

/// The bf16 copy of v (the engine's high precision).
std::vector<float> bf16_copy(const std::vector<float>& v) {
  std::vector<float> out;
  for (float x : v) out.push_back(bf16::from_float(x).to_float());
  return out;
}

// Below quantile 1, one step rebuilt from the public quantizers: X and dY quantized against the
// quantile of their bf16 values, the RHT'd wgrad copies against the quantile of the transformed
// values, W against its amax; the GEMMs and seeds as the Linear documents.
TEST(PercentileEngine, BelowOneIsThePublicQuantizersWithQuantileAmaxes) {
  const index_t m = 32, k = 64, n = 48;
  const double q = 0.97;
  const auto w = bf16_copy(test::random_values(n * k, 12));
  const auto x = bf16_copy(test::random_values(m * k, 13, {.log2_spread = 1.0}));
  const auto dy = bf16_copy(test::random_values(m * n, 14, {.log2_spread = 1.0}));
  const auto xv = matrix_view<const float>::row_major(x.data(), m, k), wv = matrix_view<const float>::row_major(w.data(), n, k);
  const auto gv = matrix_view<const float>::row_major(dy.data(), m, n);
  for (bool rht : {true, false}) {
    nvfp4_block_scaling recipe{};
    recipe.disable_rht = !rht;
    nvfp4_percentile_engine engine(k, n, {.quantile = q, .recipe = recipe, .seed = 3});
    std::vector<float> y(m * n), dx(m * k), dw(n * k);
    engine.forward(xv, wv, matrix_view<float>::row_major(y.data(), m, n), true);
    engine.backward(gv, matrix_view<float>::row_major(dx.data(), m, k), matrix_view<float>::row_major(dw.data(), n, k));

    const auto columnwise_copy = [&](matrix_view<const float> v, quantize_options options) -> nvfp4_operand {
      options.axis = quantized_axis::columnwise;
      if (!rht) return {quantize_with_amax<nvfp4_1x16>(v.transposed(), amax_percentile(v, q), options), 448.0f, {}};
      const columnwise_rht t = rht_columnwise(v);
      std::vector<float> transformed;
      for (bf16 b : t.values) transformed.push_back(b.to_float());
      return {quantize_with_amax<nvfp4_1x16>(t.view(), amax_percentile(transformed, q), options), 448.0f, {}};
    };
    const operand_pair ws = quantize_weight(wv, recipe);
    const nvfp4_operand x_row{quantize_with_amax<nvfp4_1x16>(xv, amax_percentile(x, q)), 448.0f, {}};
    const nvfp4_operand x_col = columnwise_copy(xv, {});
    const std::uint64_t seed = nvfp4::derived_seed(3, 0);  // step 0 of options.seed 3, as the Linear documents
    const nvfp4_operand g_row{quantize_with_amax<nvfp4_1x16>(gv, amax_percentile(dy, q),
                                                             {.rounding = rounding_mode::stochastic, .seed = nvfp4::derived_seed(seed, 0)}),
                              448.0f,
                              {}};
    const nvfp4_operand g_col = columnwise_copy(gv, {.rounding = rounding_mode::stochastic, .seed = nvfp4::derived_seed(seed, 1)});
    std::vector<float> want_y(m * n), want_dx(m * k), want_dw(n * k);
    nvfp4_gemm(x_row, ws.rowwise, matrix_view<float>::row_major(want_y.data(), m, n));
    nvfp4_gemm(g_row, ws.columnwise, matrix_view<float>::row_major(want_dx.data(), m, k));
    nvfp4_gemm(g_col, x_col, matrix_view<float>::row_major(want_dw.data(), n, k));
    EXPECT_EQ(y, bf16_copy(want_y)) << "rht " << rht;
    EXPECT_EQ(dx, bf16_copy(want_dx)) << "rht " << rht;
    EXPECT_EQ(dw, want_dw) << "rht " << rht;
  }
}

TEST(PercentileEngine, BelowOneChangesTheScalesAndStaysFinite) {
  const index_t m = 32, k = 64, n = 48;
  const auto w = test::random_values(n * k, 6);
  nvfp4_percentile_engine q1(k, n, {.quantile = 1.0, .seed = 1}), q99(k, n, {.quantile = 0.99, .seed = 1});
  const auto a = two_steps(q1, w, m, k, n), b = two_steps(q99, w, m, k, n);
  EXPECT_NE(a, b);
  for (float v : b) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(q99.name(), "nvfp4_amax_q0.99");
  EXPECT_EQ(test::error_code_of([&] { nvfp4_percentile_engine(k, n, {.quantile = 0.0}); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([&] { nvfp4_percentile_engine(k, n, {.recipe = {.row_scaled_activation = true}}); }),
            errc::invalid_argument);  // with RHT: TE rejects it
  EXPECT_EQ(test::error_code_of([&] { percentile_amax_rule(1.5); }), errc::invalid_argument);
}

TEST(PercentileRule, WeightsKeepTheirAmax) {
  const std::vector<float> v{1.0f, -2.0f, 3.0f, -4.0f, 100.0f};
  const auto view = matrix_view<const float>::row_major(v.data(), 1, 5);
  const nvfp4_amax_rule rule = percentile_amax_rule(0.8);
  EXPECT_EQ(rule({.role = tensor_role::input, .values = view, .amax = 100.0f}), 4.0f);
  EXPECT_EQ(rule({.role = tensor_role::grad_output, .transformed = true, .values = view, .amax = 100.0f}), 4.0f);
  EXPECT_EQ(rule({.role = tensor_role::weight, .values = view, .amax = 100.0f}), 100.0f);
  EXPECT_EQ(amax_percentile(view.transposed(), 0.8), 4.0f);  // a strided view
}

}  // namespace nn_amax_percentile_test
}  // namespace
}  // namespace nvfp4::nn
