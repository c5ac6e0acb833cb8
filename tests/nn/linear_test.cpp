// Tests of nvfp4/nn/linear.hpp: for every recipe, forward and backward rebuilt bit for bit from
// the public quantizers and GEMMs the header documents; the layer's dtype (bf16 inputs and
// outputs, bf16 tensors given and written as stored), the bias and its gradient against a hand sum, delayed scaling stepping its states,
// seeds, 1 vs 2 threads, recipe switching, bad input; the inference forward and the kept weight
// (TE's is_first_microbatch) against the training forward; an NVFP4 amax rule composed the same way.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "nn/linear_test_support.hpp"
#include "nvfp4/nn/linear.hpp"
#include "test_support.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace nvfp4 {
namespace {
namespace nn_linear_test {

using test::cview, test::mview, test::first_difference, test::inputs, test::every_recipe, test::make_layer, test::M, test::K, test::N;

struct layer_run {
  std::vector<float> y, dx, dw, db;
};

layer_run run_layer(const recipe& r, const nn::linear_options& options, const inputs& in) {
  nn::linear layer(K, N, r, options);
  std::copy(in.w.begin(), in.w.end(), layer.weight().begin());
  if (options.bias) std::copy(in.b.begin(), in.b.end(), layer.bias().begin());
  layer_run out;
  out.y = layer.forward(cview(in.x, M, K));
  out.dx = layer.backward(cview(in.dy, M, N));
  out.dw.assign(layer.weight_grad().begin(), layer.weight_grad().end());
  out.db.assign(layer.bias_grad().begin(), layer.bias_grad().end());
  return out;
}

/// Rounds every value to bf16 (the layer's bf16 dtype does this to its inputs and outputs).
std::vector<float> to_bf16(std::vector<float> v) {
  for (auto& x : v) x = bf16::from_float(x).to_float();
  return v;
}

void expect_same(const layer_run& got, const layer_run& want, const char* what) {
  EXPECT_EQ(first_difference(got.y, want.y), -1) << what << ": Y";
  EXPECT_EQ(first_difference(got.dx, want.dx), -1) << what << ": dX";
  EXPECT_EQ(first_difference(got.dw, want.dw), -1) << what << ": dW";
}

TEST(Linear, NoQuantizationComposesFloatGemm) {
  const inputs in;
  for (high_precision dtype : {high_precision::fp32, high_precision::bf16})
    for (gemm_mode mode : {gemm_mode::exact, gemm_mode::relaxed}) {
      const nn::linear_options options{.bias = true, .dtype = dtype, .mode = mode};
      const layer_run got = run_layer(no_quantization{}, options, in);
      const bool bf = dtype == high_precision::bf16;
      const auto x = bf ? to_bf16(in.x) : in.x, w = bf ? to_bf16(in.w) : in.w, dy = bf ? to_bf16(in.dy) : in.dy;
      layer_run want{std::vector<float>(M * N), std::vector<float>(M * K), std::vector<float>(N * K), {}};
      float_gemm(cview(x, M, K), cview(w, N, K), {}, mview(want.y, M, N), mode);
      for (index_t i = 0; i < M; ++i)
        for (index_t j = 0; j < N; ++j) want.y[std::size_t(i * N + j)] += in.b[std::size_t(j)];
      float_gemm(cview(dy, M, N), cview(w, N, K).transposed(), {}, mview(want.dx, M, K), mode);
      float_gemm(cview(dy, M, N).transposed(), cview(x, M, K).transposed(), {}, mview(want.dw, N, K), mode);
      if (bf) {
        want.y = to_bf16(want.y);
        want.dx = to_bf16(want.dx);
      }
      const std::string what = std::string(high_precision_name(dtype)) + (mode == gemm_mode::exact ? " exact" : " relaxed");
      expect_same(got, want, what.c_str());
      // db: the fp32 sum of dY's rows, in row order.
      for (index_t j = 0; j < N; ++j) {
        float s = 0.0f;
        for (index_t i = 0; i < M; ++i) s += dy[std::size_t(i * N + j)];
        EXPECT_EQ(got.db[std::size_t(j)], s) << j;
      }
      // And the result is the product: Y within fp32 rounding of a double dot product.
      for (index_t i = 0; i < M; i += 7)
        for (index_t j = 0; j < N; j += 5) {
          double s = in.b[std::size_t(j)];
          for (index_t k = 0; k < K; ++k) s += double(x[std::size_t(i * K + k)]) * w[std::size_t(j * K + k)];
          EXPECT_NEAR(got.y[std::size_t(i * N + j)], s, bf ? 0.02 * std::fabs(s) + 0.02 : 1e-4);
        }
    }
}

// A bf16 layer of the size the BF16 tiles take (>= 128 rows and columns): in the relaxed mode its
// three GEMMs are float_gemm's relaxed form (on an AMX machine the tiles, equal to the tile model's
// chain; elsewhere the exact GEMM).
TEST(Linear, NoQuantizationRelaxedIsTheRelaxedFloatGemmAtTileSizes) {
  constexpr index_t rows = 160, in_features = 192, out_features = 144;
  const auto x = to_bf16(test::random_values(rows * in_features, 21));
  const auto w = to_bf16(test::random_values(out_features * in_features, 22, {.sigma = 0.1}));
  const auto dy = to_bf16(test::random_values(rows * out_features, 23, {.sigma = 0.01}));
  nn::linear layer(in_features, out_features, no_quantization{}, {.dtype = high_precision::bf16, .mode = gemm_mode::relaxed});
  std::copy(w.begin(), w.end(), layer.weight().begin());
  const std::vector<float> y = layer.forward(cview(x, rows, in_features));
  const std::vector<float> dx = layer.backward(cview(dy, rows, out_features));
  const std::vector<float> dw(layer.weight_grad().begin(), layer.weight_grad().end());
  std::vector<float> want_y(rows * out_features), want_dx(rows * in_features), want_dw(out_features * in_features);
  reference::float_gemm(cview(x, rows, in_features), cview(w, out_features, in_features), {}, mview(want_y, rows, out_features),
                        gemm_mode::relaxed);
  reference::float_gemm(cview(dy, rows, out_features), cview(w, out_features, in_features).transposed(), {},
                        mview(want_dx, rows, in_features), gemm_mode::relaxed);
  reference::float_gemm(cview(dy, rows, out_features).transposed(), cview(x, rows, in_features).transposed(), {},
                        mview(want_dw, out_features, in_features), gemm_mode::relaxed);
  EXPECT_EQ(first_difference(y, to_bf16(want_y)), -1) << "Y";
  EXPECT_EQ(first_difference(dx, to_bf16(want_dx)), -1) << "dX";
  EXPECT_EQ(first_difference(dw, want_dw), -1) << "dW";
}

TEST(Linear, Nvfp4ComposesRecipeOperandsAndGemm) {
  const inputs in;
  for (const nvfp4_block_scaling& r :
       {nvfp4_block_scaling{}, nvfp4_block_scaling{.disable_rht = true, .disable_2d_quantization = true},
        nvfp4_block_scaling{.disable_rht = true, .nvfp4_4over6 = four_over_six_scope::all},
        nvfp4_block_scaling{.disable_rht = true, .row_scaled_activation = true, .nvfp4_4over6 = four_over_six_scope::weights}}) {
    for (gemm_mode mode : {gemm_mode::exact, gemm_mode::relaxed}) {
      const nn::linear_options options{.bias = true, .dtype = high_precision::bf16, .mode = mode, .seed = 11};
      const layer_run got = run_layer(r, options, in);
      const auto x = to_bf16(in.x), w = to_bf16(in.w), dy = to_bf16(in.dy);
      const operand_pair xs = quantize_activation(cview(x, M, K), r);
      const operand_pair ws = quantize_weight(cview(w, N, K), r);
      nvfp4_block_scaling step0 = r;
      step0.seed = nvfp4::derived_seed(11, 0);  // the header's rule: derived_seed(options.seed, step)
      const operand_pair gs = quantize_gradient(cview(dy, M, N), step0);
      layer_run want{std::vector<float>(M * N), std::vector<float>(M * K), std::vector<float>(N * K), {}};
      nvfp4_gemm(xs.rowwise, ws.rowwise, mview(want.y, M, N), mode, to_bf16(in.b));  // TE's bias in bf16 (linear.py)
      nvfp4_gemm(gs.rowwise, ws.columnwise, mview(want.dx, M, K), mode);
      nvfp4_gemm(gs.columnwise, xs.columnwise, mview(want.dw, N, K), mode);
      want.y = to_bf16(want.y);
      want.dx = to_bf16(want.dx);
      expect_same(got, want, mode == gemm_mode::exact ? "nvfp4 exact" : "nvfp4 relaxed");
    }
  }
}

/// An amax rule that scales TE's amax by a factor per role and per RHT copy.
nvfp4_amax_rule scaled_amax_rule() {
  return [](const nvfp4_amax_query& q) {
    const float factor = q.role == tensor_role::input ? 0.5f : (q.role == tensor_role::weight ? 0.75f : 0.25f);
    return (q.transformed ? 0.5f : 1.0f) * factor * q.amax;
  };
}

TEST(Linear, Nvfp4AmaxRuleComposes) {
  const inputs in;
  const nvfp4_amax_rule rule = scaled_amax_rule();
  for (const nvfp4_block_scaling& r :
       {nvfp4_block_scaling{}, nvfp4_block_scaling{.disable_rht = true, .nvfp4_4over6 = four_over_six_scope::all}}) {
    const nn::linear_options options{.bias = true, .dtype = high_precision::bf16, .seed = 11, .nvfp4_amax = rule};
    const layer_run got = run_layer(r, options, in);
    const auto x = to_bf16(in.x), w = to_bf16(in.w), dy = to_bf16(in.dy);
    const operand_pair xs = quantize_activation(cview(x, M, K), r, rule);
    const operand_pair ws = quantize_weight(cview(w, N, K), r, rule);
    nvfp4_block_scaling step0 = r;
    step0.seed = nvfp4::derived_seed(11, 0);
    const operand_pair gs = quantize_gradient(cview(dy, M, N), step0, rule);
    layer_run want{std::vector<float>(M * N), std::vector<float>(M * K), std::vector<float>(N * K), {}};
    nvfp4_gemm(xs.rowwise, ws.rowwise, mview(want.y, M, N), gemm_mode::exact, to_bf16(in.b));
    nvfp4_gemm(gs.rowwise, ws.columnwise, mview(want.dx, M, K));
    nvfp4_gemm(gs.columnwise, xs.columnwise, mview(want.dw, N, K));
    want.y = to_bf16(want.y);
    want.dx = to_bf16(want.dx);
    expect_same(got, want, "nvfp4 with an amax rule");
    EXPECT_NE(first_difference(got.y, run_layer(r, {.bias = true, .dtype = high_precision::bf16, .seed = 11}, in).y), -1);
    // The inference forward, fresh and on a kept weight, gives the same Y.
    nn::linear layer(K, N, r, options);
    std::copy(in.w.begin(), in.w.end(), layer.weight().begin());
    std::copy(in.b.begin(), in.b.end(), layer.bias().begin());
    EXPECT_EQ(first_difference(layer.infer(cview(in.x, M, K)), got.y), -1);
    EXPECT_EQ(first_difference(layer.infer(cview(in.x, M, K), nn::weight_cache::refresh), got.y), -1);
    EXPECT_EQ(first_difference(layer.infer(cview(in.x, M, K), nn::weight_cache::reuse), got.y), -1);
  }
}

TEST(Linear, Nvfp4AmaxRuleIsRefusedWhereItCannotApply) {
  const nn::linear_options options{.nvfp4_amax = scaled_amax_rule()};
  EXPECT_EQ(test::error_code_of([&] { nn::linear(K, N, float8_current_scaling{}, options); }), errc::unsupported);
  EXPECT_EQ(test::error_code_of([&] { nn::linear(K, N, mxfp8_block_scaling{}, options); }), errc::unsupported);
  nn::linear layer(K, N, nvfp4_block_scaling{}, options);
  EXPECT_EQ(test::error_code_of([&] { layer.set_recipe(delayed_scaling{}); }), errc::unsupported);
  EXPECT_EQ(std::string(recipe_name(layer.current_recipe())), recipe_name(nvfp4_block_scaling{}));  // unchanged
  EXPECT_NO_THROW(layer.set_recipe(no_quantization{}));                                             // nothing quantized: the rule rests

  // A rule whose answer is not an amax: the forward throws before writing Y or saving anything.
  nn::linear bad(K, N, nvfp4_block_scaling{}, {.nvfp4_amax = [](const nvfp4_amax_query&) { return -1.0f; }});
  const inputs in;
  std::vector<float> y(M * N, 3.0f), dx(M * K);
  EXPECT_EQ(test::error_code_of([&] { bad.forward(cview(in.x, M, K), mview(y, M, N)); }), errc::invalid_argument);
  for (float v : y) ASSERT_EQ(v, 3.0f);
  EXPECT_EQ(test::error_code_of([&] { bad.backward(cview(in.dy, M, N), mview(dx, M, K)); }), errc::invalid_argument);  // no forward
}

TEST(Linear, Fp8CurrentScalingComposes) {
  const inputs in;
  const float8_current_scaling r{.use_power_2_scales = true};
  const nn::linear_options options{.bias = true, .fp8_tensor_core = fp8::mma::tensor_core::blackwell, .promotion_interval = 64};
  const layer_run got = run_layer(r, options, in);
  const auto x8 = quantize_fp8_current(cview(in.x, M, K), fp8_format::e4m3, {.power_2_scale = true});
  const auto w8 = quantize_fp8_current(cview(in.w, N, K), fp8_format::e4m3, {.power_2_scale = true});
  const auto g8 = quantize_fp8_current(cview(in.dy, M, N), fp8_format::e5m2, {.power_2_scale = true});
  EXPECT_EQ(x8.scale(), std::exp2(std::floor(std::log2(448.0f / x8.amax()))));
  const auto x8t = quantize_fp8_with_scale(cview(in.x, M, K).transposed(), fp8_format::e4m3, x8.scale());
  const auto w8t = quantize_fp8_with_scale(cview(in.w, N, K).transposed(), fp8_format::e4m3, w8.scale());
  const auto g8t = quantize_fp8_with_scale(cview(in.dy, M, N).transposed(), fp8_format::e5m2, g8.scale());
  const auto bias = to_bf16(in.b);  // TE's linear.py: a quantized GEMM's bias in bf16
  const fp8_gemm_options fast_accumulation{.core = fp8::mma::tensor_core::blackwell, .promotion_interval = 0, .bias = bias};
  const fp8_gemm_options split{.core = fp8::mma::tensor_core::blackwell, .promotion_interval = 64};
  layer_run want{std::vector<float>(M * N), std::vector<float>(M * K), std::vector<float>(N * K), {}};
  fp8_gemm(x8, w8, mview(want.y, M, N), fast_accumulation);  // fprop: use_split_accumulator = false
  fp8_gemm(g8, w8t, mview(want.dx, M, K), split);
  fp8_gemm(g8t, x8t, mview(want.dw, N, K), split);
  expect_same(got, want, "current scaling");
}

TEST(Linear, DelayedScalingComposesAndStepsItsState) {
  const inputs in;
  const delayed_scaling r{.margin = 1, .amax_history_len = 3};
  nn::linear layer(K, N, r, {});
  std::copy(in.w.begin(), in.w.end(), layer.weight().begin());
  const float x_amax = amax(cview(in.x, M, K)), w_amax = amax(cview(in.w, N, K)), g_amax = amax(cview(in.dy, M, N));
  for (int step = 0; step < 4; ++step) {
    // The scales this step uses: 1 at first, then (fp8_max / 2) / amax of the history.
    const float x_scale = layer.scaling_state(tensor_role::input)->scale();
    const float w_scale = layer.scaling_state(tensor_role::weight)->scale();
    const float g_scale = layer.scaling_state(tensor_role::grad_output)->scale();
    EXPECT_EQ(x_scale, step == 0 ? 1.0f : 224.0f / x_amax);
    EXPECT_EQ(w_scale, step == 0 ? 1.0f : 224.0f / w_amax);
    EXPECT_EQ(g_scale, step == 0 ? 1.0f : 28672.0f / g_amax);
    const auto y = layer.forward(cview(in.x, M, K));
    const auto dx = layer.backward(cview(in.dy, M, N));
    const auto x8 = quantize_fp8_with_scale(cview(in.x, M, K), fp8_format::e4m3, x_scale);
    const auto w8 = quantize_fp8_with_scale(cview(in.w, N, K), fp8_format::e4m3, w_scale);
    const auto g8 = quantize_fp8_with_scale(cview(in.dy, M, N), fp8_format::e5m2, g_scale);
    const auto x8t = quantize_fp8_with_scale(cview(in.x, M, K).transposed(), fp8_format::e4m3, x_scale);
    const auto w8t = quantize_fp8_with_scale(cview(in.w, N, K).transposed(), fp8_format::e4m3, w_scale);
    const auto g8t = quantize_fp8_with_scale(cview(in.dy, M, N).transposed(), fp8_format::e5m2, g_scale);
    std::vector<float> y_ref(M * N), dx_ref(M * K), dw_ref(N * K);
    fp8_gemm(x8, w8, mview(y_ref, M, N), {.promotion_interval = 0});
    fp8_gemm(g8, w8t, mview(dx_ref, M, K), {.promotion_interval = 128});
    fp8_gemm(g8t, x8t, mview(dw_ref, N, K), {.promotion_interval = 128});
    EXPECT_EQ(first_difference(y, y_ref), -1) << step;
    EXPECT_EQ(first_difference(dx, dx_ref), -1) << step;
    EXPECT_EQ(first_difference(layer.weight_grad(), dw_ref), -1) << step;
    // The history: entry 0 cleared, the newest amax at the end.
    const auto history = layer.scaling_state(tensor_role::input)->amax_history();
    EXPECT_EQ(history[0], 0.0f);
    EXPECT_EQ(history[2], x_amax);
    EXPECT_EQ(history[1], step >= 1 ? x_amax : 0.0f);
  }
}

TEST(Linear, Fp8BlockScalingComposes) {
  const inputs in;
  const float8_block_scaling r{};
  const layer_run got = run_layer(r, {.bias = true}, in);
  const auto q = [&](const std::vector<float>& v, index_t rows, index_t cols, fp8_block_shape shape, bool transposed) {
    const auto source = transposed ? cview(v, rows, cols).transposed() : cview(v, rows, cols);
    return quantize_fp8_blockwise(source, fp8_format::e4m3, shape);
  };
  const auto one_d = fp8_block_shape::block_1x128, two_d = fp8_block_shape::block_128x128;
  layer_run want{std::vector<float>(M * N), std::vector<float>(M * K), std::vector<float>(N * K), {}};
  const auto bias = to_bf16(in.b);  // TE's linear.py: a quantized GEMM's bias in bf16
  fp8_gemm(q(in.x, M, K, one_d, false), q(in.w, N, K, two_d, false), mview(want.y, M, N), {.bias = bias});
  fp8_gemm(q(in.dy, M, N, one_d, false), q(in.w, N, K, two_d, true), mview(want.dx, M, K));
  fp8_gemm(q(in.dy, M, N, one_d, true), q(in.x, M, K, one_d, true), mview(want.dw, N, K));
  expect_same(got, want, "block scaling");
}

TEST(Linear, Mxfp8Composes) {
  const inputs in;
  for (recipe_format format : {recipe_format::e4m3, recipe_format::hybrid}) {
    const layer_run got = run_layer(mxfp8_block_scaling{.fp8_format = format}, {.mode = gemm_mode::exact}, in);
    const auto x = cview(in.x, M, K), w = cview(in.w, N, K), dy = cview(in.dy, M, N);
    const fp8_gemm_options mx{.core = fp8::mma::tensor_core::blackwell, .promotion_interval = 0};
    layer_run want{std::vector<float>(M * N), std::vector<float>(M * K), std::vector<float>(N * K), {}};
    mxfp8_gemm(quantize_mxfp8_te<mxfp8>(x), quantize_mxfp8_te<mxfp8>(w), mview(want.y, M, N), mx);
    const auto compose_backward = [&]<class G>() {
      mxfp8_gemm(quantize_mxfp8_te<G>(dy), quantize_mxfp8_te<mxfp8>(w.transposed()), mview(want.dx, M, K), mx);
      mxfp8_gemm(quantize_mxfp8_te<G>(dy.transposed()), quantize_mxfp8_te<mxfp8>(x.transposed()), mview(want.dw, N, K), mx);
    };
    if (format == recipe_format::e4m3) {
      compose_backward.operator()<mxfp8>();
    } else {
      compose_backward.operator()<mxfp8_e5m2>();
    }
    expect_same(got, want, recipe_format_name(format));
  }
}

// Every recipe lands near the fp32 product (the quantization error of its formats), so a recipe
// wired to the wrong operand or scale would show.
TEST(Linear, EveryRecipeApproximatesTheProduct) {
  const inputs in;
  const layer_run exact = run_layer(no_quantization{}, {}, in);
  const auto relative = [](const std::vector<float>& got, const std::vector<float>& want) {
    double e = 0, n = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      e += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      n += double(want[i]) * want[i];
    }
    return std::sqrt(e / n);
  };
  const std::vector<std::pair<recipe, double>> cases = {{nvfp4_block_scaling{}, 0.25},
                                                        {float8_current_scaling{}, 0.1},
                                                        {delayed_scaling{}, 0.1},
                                                        {float8_block_scaling{}, 0.1},
                                                        {mxfp8_block_scaling{}, 0.1}};
  for (const auto& [r, bound] : cases) {
    const layer_run got = run_layer(r, {}, in);
    EXPECT_LT(relative(got.y, exact.y), bound) << recipe_name(r);
    EXPECT_LT(relative(got.dx, exact.dx), bound) << recipe_name(r);
    EXPECT_LT(relative(got.dw, exact.dw), bound) << recipe_name(r);
  }
}

TEST(Linear, SeedDecidesTheStochasticRounding) {
  const inputs in;
  const layer_run a = run_layer(nvfp4_block_scaling{}, {.seed = 1}, in), b = run_layer(nvfp4_block_scaling{}, {.seed = 1}, in);
  const layer_run c = run_layer(nvfp4_block_scaling{}, {.seed = 2}, in);
  expect_same(a, b, "same seed");
  EXPECT_EQ(first_difference(a.y, c.y), -1);  // forward has no randomness
  EXPECT_NE(first_difference(a.dx, c.dx), -1);
}

TEST(Linear, ThreadCountDoesNotChangeResults) {
#if defined(_OPENMP)
  // Big enough for every parallel path (more than 2^16 elements per tensor).
  constexpr index_t m = 320, k = 256, n = 288;
  const auto x = test::random_values(m * k, 5), w = test::random_values(n * k, 6, {.sigma = 0.1}), dy = test::random_values(m * n, 7);
  for (const recipe& r : {recipe{no_quantization{}}, recipe{nvfp4_block_scaling{}}, recipe{float8_current_scaling{}},
                          recipe{float8_block_scaling{}}, recipe{mxfp8_block_scaling{}}}) {
    std::vector<float> results[2];
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      nn::linear layer(k, n, r, {.seed = 3});
      std::copy(w.begin(), w.end(), layer.weight().begin());
      auto& out = results[threads - 1];
      out = layer.forward(cview(x, m, k));
      const auto dx = layer.backward(cview(dy, m, n));
      out.insert(out.end(), dx.begin(), dx.end());
      out.insert(out.end(), layer.weight_grad().begin(), layer.weight_grad().end());
    }
    omp_set_num_threads(2);
    EXPECT_EQ(first_difference(results[0], results[1]), -1) << recipe_name(r);
  }
#else
  GTEST_SKIP() << "built without OpenMP: one thread only, nothing to compare";
#endif
}

/// A layer reuses its buffers and quantized copies from step to step (the last step's storage,
/// written over): each step gives the bits of a fresh layer at that step count, whatever the last
/// step held, for W changed between steps too (an optimizer's update), with 1 and 2 threads alike.
TEST(Linear, RepeatedStepsGiveAFreshLayersBits) {
  constexpr index_t m = 320, k = 256, n = 288;  // above the parallel threshold
  const auto x1 = test::random_values(m * k, 15), w1 = test::random_values(n * k, 16, {.sigma = 0.1});
  const auto dy1 = test::random_values(m * n, 17, {.sigma = 0.01});
  const auto x2 = test::random_values(m * k, 25, {.sigma = 3.0}), w2 = test::random_values(n * k, 26, {.sigma = 0.02});
  const auto dy2 = test::random_values(m * n, 27, {.sigma = 0.5});
  const std::vector<std::pair<recipe, nn::linear_options>> cases = {
      {no_quantization{}, {.bias = true}},
      {no_quantization{}, {.bias = true, .dtype = high_precision::bf16}},
      {nvfp4_block_scaling{}, {.bias = true, .dtype = high_precision::bf16, .seed = 5}},
      {nvfp4_block_scaling{}, {.seed = 5}},
      {nvfp4_block_scaling{.disable_rht = true, .disable_stochastic_rounding = true, .disable_2d_quantization = true},
       {.dtype = high_precision::bf16, .seed = 5}},
      {nvfp4_block_scaling{.nvfp4_4over6 = four_over_six_scope::weights}, {.dtype = high_precision::bf16, .seed = 5}},
      {float8_current_scaling{}, {.bias = true, .dtype = high_precision::bf16}},
      {float8_block_scaling{}, {.dtype = high_precision::bf16}},
      {mxfp8_block_scaling{}, {.bias = true, .dtype = high_precision::bf16, .mode = gemm_mode::relaxed}}};
  const auto step = [&](nn::linear& layer, const std::vector<float>& x, const std::vector<float>& dy) {
    std::vector<float> out = layer.forward(cview(x, m, k));
    const auto dx = layer.backward(cview(dy, m, n));
    out.insert(out.end(), dx.begin(), dx.end());
    out.insert(out.end(), layer.weight_grad().begin(), layer.weight_grad().end());
    out.insert(out.end(), layer.bias_grad().begin(), layer.bias_grad().end());
    return out;
  };
  std::vector<std::vector<float>> one_thread;
  for (int threads : {1, 2}) {
    test::set_threads(threads);
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const auto& [r, options] = cases[i];
      nn::linear layer(k, n, r, options), fresh(k, n, r, options);
      std::copy(w1.begin(), w1.end(), layer.weight().begin());
      (void)step(layer, x1, dy1);
      std::copy(w2.begin(), w2.end(), layer.weight().begin());
      std::copy(w2.begin(), w2.end(), fresh.weight().begin());
      fresh.set_steps(1);
      const std::vector<float> got = step(layer, x2, dy2);
      EXPECT_EQ(first_difference(got, step(fresh, x2, dy2)), -1) << recipe_name(r) << ", " << threads << " threads";
      if (threads == 1)
        one_thread.push_back(got);
      else
        EXPECT_EQ(first_difference(got, one_thread[i]), -1) << recipe_name(r) << ": 2 threads against 1";
    }
  }
  test::set_threads(2);
}

std::vector<float> history_of(const nn::linear& layer, tensor_role role) {
  const auto h = layer.scaling_state(role)->amax_history();
  return {h.begin(), h.end()};
}

TEST(LinearInfer, GivesTheForwardsYAndTouchesNoState) {
  const inputs in;
  for (const auto& [r, options] : every_recipe()) {
    SCOPED_TRACE(recipe_name(r));
    nn::linear trained = make_layer(r, options, in), inferred = make_layer(r, options, in);
    const auto y = trained.forward(cview(in.x, M, K));
    EXPECT_EQ(first_difference(inferred.infer(cview(in.x, M, K)), y), -1);
    // Nothing saved: a backward has no forward to differentiate.
    EXPECT_EQ(test::error_code_of([&] { inferred.backward(cview(in.dy, M, N)); }), errc::invalid_argument);
    if (std::holds_alternative<delayed_scaling>(r)) {
      for (tensor_role role : {tensor_role::input, tensor_role::weight}) {
        EXPECT_EQ(inferred.scaling_state(role)->scale(), 1.0f);
        EXPECT_EQ(history_of(inferred, role), std::vector<float>(4, 0.0f));  // nothing recorded, nothing rolled
      }
      EXPECT_NE(history_of(trained, tensor_role::input), std::vector<float>(4, 0.0f));  // the forward did record
    }
  }
}

TEST(LinearInfer, KeepsASavedForwardForBackward) {
  const inputs in;
  const auto other_x = test::random_values(M * K, 11);
  for (const auto& [r, options] : every_recipe()) {
    SCOPED_TRACE(recipe_name(r));
    const layer_run want = run_layer(r, options, in);
    nn::linear layer = make_layer(r, options, in);
    layer_run got;
    got.y = layer.forward(cview(in.x, M, K));
    layer.infer(cview(other_x, M, K));  // between forward and backward, as an evaluation would be
    got.dx = layer.backward(cview(in.dy, M, N));
    got.dw.assign(layer.weight_grad().begin(), layer.weight_grad().end());
    expect_same(got, want, recipe_name(r));
  }
}

TEST(LinearWeightCache, ReuseRunsOnTheKeptWeight) {
  const inputs in;
  for (const auto& [r, options] : every_recipe()) {
    if (std::holds_alternative<delayed_scaling>(r)) continue;  // its scales move between steps: below
    SCOPED_TRACE(recipe_name(r));
    nn::linear layer = make_layer(r, options, in);
    const auto y_off = make_layer(r, options, in).forward(cview(in.x, M, K));
    const auto y_refresh = layer.forward(cview(in.x, M, K), nn::weight_cache::refresh);
    EXPECT_EQ(first_difference(y_refresh, y_off), -1);
    layer.backward(cview(in.dy, M, N));
    // The master weight moves (an optimizer step); reuse still runs on the weight kept by refresh,
    // as TE's later micro-batches do (under the FP8 and MXFP8 recipes, its packed form).
    for (float& w : layer.weight()) w *= 3.0f;
    EXPECT_EQ(first_difference(layer.forward(cview(in.x, M, K), nn::weight_cache::reuse), y_off), -1);
    // Backward against the kept (old) weight: the second step of a layer whose weight never
    // moved (the second step, so NVFP4's gradient SR uses the same step seed).
    nn::linear unmoved = make_layer(r, options, in);
    unmoved.forward(cview(in.x, M, K));
    unmoved.backward(cview(in.dy, M, N));
    unmoved.forward(cview(in.x, M, K));
    const auto want_dx = unmoved.backward(cview(in.dy, M, N));
    EXPECT_EQ(first_difference(layer.backward(cview(in.dy, M, N)), want_dx), -1);
    EXPECT_EQ(first_difference(layer.infer(cview(in.x, M, K), nn::weight_cache::reuse), y_off), -1);
    // off and refresh see the moved weight.
    const auto y_moved = layer.infer(cview(in.x, M, K));
    EXPECT_NE(first_difference(y_moved, y_off), -1);
    EXPECT_EQ(first_difference(layer.infer(cview(in.x, M, K), nn::weight_cache::refresh), y_moved), -1);
    EXPECT_EQ(first_difference(layer.infer(cview(in.x, M, K), nn::weight_cache::reuse), y_moved), -1);
  }
}

TEST(LinearWeightCache, DelayedScalingReuseRecordsNoWeightAmax) {
  // TE's rule: with is_first_microbatch False the weight's amax is not recorded, so the weight's
  // history does not roll (the fused update leaves a zero step alone); the input's still does.
  const inputs in;
  nn::linear layer = make_layer(delayed_scaling{.amax_history_len = 4}, {}, in);
  layer.forward(cview(in.x, M, K), nn::weight_cache::refresh);
  layer.backward(cview(in.dy, M, N));
  const auto weight_history = history_of(layer, tensor_role::weight);
  const float w_amax = amax(cview(in.w, N, K)), x_amax = amax(cview(in.x, M, K));
  EXPECT_EQ(weight_history, (std::vector<float>{0.0f, 0.0f, 0.0f, w_amax}));
  const float w_scale = layer.scaling_state(tensor_role::weight)->scale();
  const float x_scale = layer.scaling_state(tensor_role::input)->scale();
  const auto y = layer.forward(cview(in.x, M, K), nn::weight_cache::reuse);
  EXPECT_EQ(history_of(layer, tensor_role::weight), weight_history);
  EXPECT_EQ(history_of(layer, tensor_role::input), (std::vector<float>{0.0f, 0.0f, x_amax, x_amax}));
  // Y: X with this step's input scale against W quantized at the first step (scale 1).
  const auto x8 = quantize_fp8_with_scale(cview(in.x, M, K), fp8_format::e4m3, x_scale);
  const auto w8 = quantize_fp8_with_scale(cview(in.w, N, K), fp8_format::e4m3, 1.0f);
  std::vector<float> y_ref(M * N);
  fp8_gemm(x8, w8, mview(y_ref, M, N), {.promotion_interval = 0});
  EXPECT_EQ(first_difference(y, y_ref), -1);
  EXPECT_EQ(layer.scaling_state(tensor_role::weight)->scale(), w_scale);
}

TEST(LinearDelayed, RunsNonFiniteTensorsAsTeDoes) {
  // TE's DelayedScaling cast (common/util/vectorized_pointwise.h unary_kernel: amax by fmaxf, then
  // a satfinite cast to FP8) runs a tensor holding NaN / Inf: the amax ignores NaN and keeps Inf,
  // Inf saturates to fp8_max and NaN gives the NaN code. Every other recipe refuses such a tensor.
  const inputs in;
  const auto layer = [&] { return make_layer(delayed_scaling{.amax_history_len = 2}, {}, in); };
  std::vector<float> y_bad(M * N), y_ref(M * N);
  {
    // NaN at X[0, 3]: Y's row 0 is NaN; every other row, and the recorded amax, are those of X
    // with that element 0.
    auto bad = in.x, rest = in.x;
    bad[3] = std::nanf("");
    rest[3] = 0.0f;
    nn::linear a = layer(), b = layer();
    a.forward(cview(bad, M, K), mview(y_bad, M, N));
    b.forward(cview(rest, M, K), mview(y_ref, M, N));
    for (index_t c = 0; c < N; ++c) EXPECT_TRUE(std::isnan(y_bad[static_cast<std::size_t>(c)])) << c;
    EXPECT_TRUE(std::equal(y_bad.begin() + N, y_bad.end(), y_ref.begin() + N,
                           [](float p, float q) { return std::bit_cast<std::uint32_t>(p) == std::bit_cast<std::uint32_t>(q); }));
    EXPECT_EQ(history_of(a, tensor_role::input), history_of(b, tensor_role::input));
    EXPECT_EQ(a.scaling_state(tensor_role::input)->scale(), b.scaling_state(tensor_role::input)->scale());
  }
  {
    // Inf at X[0, 3] under scale 1 casts as 448 does (E4M3's largest, 0x7E); its amax Inf is kept,
    // and the update leaves the scale where it was (Inf amax: the old scale holds).
    auto bad = in.x, largest = in.x;
    bad[3] = INFINITY;
    largest[3] = 448.0f;
    nn::linear a = layer(), b = layer();
    a.forward(cview(bad, M, K), mview(y_bad, M, N));
    b.forward(cview(largest, M, K), mview(y_ref, M, N));
    EXPECT_EQ(first_difference(y_bad, y_ref), -1);
    const auto h = history_of(a, tensor_role::input);
    EXPECT_TRUE(std::find(h.begin(), h.end(), INFINITY) != h.end());
    // The Inf stays in the window (2 steps), so the scale holds through the next step, where a
    // layer that saw only finite input moves to 448 / amax.
    std::vector<float> y(M * N);
    nn::linear clean = layer();
    for (int step = 0; step < 2; ++step) {
      if (step == 1) a.forward(cview(in.x, M, K), mview(y, M, N));
      clean.forward(cview(in.x, M, K), mview(y, M, N));
      EXPECT_EQ(a.scaling_state(tensor_role::input)->scale(), 1.0f) << step;
    }
    EXPECT_NE(clean.scaling_state(tensor_role::input)->scale(), 1.0f);
    // A gradient holding Inf runs too; the weight gradient stays finite (saturated codes).
    auto bad_dy = in.dy;
    bad_dy[7] = -INFINITY;
    std::vector<float> dx(M * K);
    EXPECT_NO_THROW(a.backward(cview(bad_dy, M, N), mview(dx, M, K)));
    for (float g : a.weight_grad()) ASSERT_TRUE(std::isfinite(g));
  }
  // The same input under current scaling is refused before anything is computed.
  auto bad = in.x;
  bad[3] = INFINITY;
  nn::linear current = make_layer(float8_current_scaling{}, {}, in);
  EXPECT_EQ(test::error_code_of([&] { current.forward(cview(bad, M, K), mview(y_bad, M, N)); }), errc::non_finite_input);
}

TEST(LinearWeightCache, AReuseMissQuantizesAndKeeps) {
  // TE's linear.py with is_first_microbatch=False and no cached weight quantizes W and caches it.
  const inputs in;
  nn::linear layer = make_layer(nvfp4_block_scaling{}, {}, in);
  std::vector<float> y(M * N), y_kept(M * N), y_now(M * N);
  layer.infer(cview(in.x, M, K), mview(y, M, N));
  layer.forward(cview(in.x, M, K), mview(y_kept, M, N), nn::weight_cache::reuse);  // a miss: W quantized and kept
  EXPECT_EQ(first_difference(y_kept, y), -1);
  for (float& w : layer.weight()) w *= 2.0f;
  layer.infer(cview(in.x, M, K), mview(y_now, M, N), nn::weight_cache::reuse);  // the kept W, as it was
  EXPECT_EQ(first_difference(y_now, y), -1);
  layer.set_recipe(float8_current_scaling{});  // a kept weight belongs to its recipe: a miss again
  layer.infer(cview(in.x, M, K), mview(y_now, M, N), nn::weight_cache::reuse);
  layer.infer(cview(in.x, M, K), mview(y, M, N));
  EXPECT_EQ(first_difference(y_now, y), -1);
  EXPECT_EQ(test::error_code_of([&] { layer.infer(cview(in.x, M, K - 1), mview(y, M, N)); }), errc::shape_mismatch);
}

TEST(LinearRecipeSwitch, DelayedToDelayedKeepsScaleAndHistoryAsTe) {
  // TE module/base.py set_meta_tensor: a DelayedScaling state survives a switch to another
  // DelayedScaling (adjust_amax_history_length: history[:length], or zero rows appended); the
  // state keeps the settings it was made with. From another recipe the state starts afresh.
  const inputs in;
  nn::linear layer = make_layer(delayed_scaling{.amax_history_len = 4}, {}, in);
  layer.forward(cview(in.x, M, K));
  layer.backward(cview(in.dy, M, N));
  const float scale = layer.scaling_state(tensor_role::input)->scale();
  const float x_amax = amax(cview(in.x, M, K));
  EXPECT_EQ(history_of(layer, tensor_role::input), (std::vector<float>{0.0f, 0.0f, 0.0f, x_amax}));
  layer.set_recipe(delayed_scaling{.margin = 3.0f, .amax_history_len = 6});
  EXPECT_EQ(layer.scaling_state(tensor_role::input)->scale(), scale);
  EXPECT_EQ(history_of(layer, tensor_role::input), (std::vector<float>{0.0f, 0.0f, 0.0f, x_amax, 0.0f, 0.0f}));
  EXPECT_EQ(layer.scaling_state(tensor_role::input)->margin(), 0.0f);  // first settings kept
  layer.set_recipe(delayed_scaling{.amax_history_len = 2});
  EXPECT_EQ(history_of(layer, tensor_role::input), (std::vector<float>{0.0f, 0.0f}));  // history[:2]
  EXPECT_EQ(layer.scaling_state(tensor_role::input)->scale(), scale);
  layer.set_recipe(float8_current_scaling{});
  layer.set_recipe(delayed_scaling{.amax_history_len = 2});
  EXPECT_EQ(layer.scaling_state(tensor_role::input)->scale(), 1.0f);
}

TEST(Linear, RecipeSwitchKeepsWeightsAndRejectsWhatTeRejects) {
  nn::linear layer(K, N, nvfp4_block_scaling{});
  layer.weight()[0] = 0.5f;
  layer.set_recipe(no_quantization{});
  EXPECT_EQ(layer.weight()[0], 0.5f);
  EXPECT_EQ(std::string(recipe_name(layer.current_recipe())), "NoQuantization");
  const auto rejected = [&](const recipe& r, errc code) {
    try {
      layer.set_recipe(r);
      ADD_FAILURE() << recipe_name(r);
    } catch (const error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
    }
    EXPECT_EQ(std::string(recipe_name(layer.current_recipe())), "NoQuantization");  // unchanged
  };
  rejected(nvfp4_block_scaling{.nvfp4_4over6 = four_over_six_scope::activations}, errc::invalid_argument);  // with RHT
  rejected(nvfp4_block_scaling{.row_scaled_activation = true}, errc::invalid_argument);                     // with RHT
  rejected(nvfp4_block_scaling{.disable_rht = true, .row_scaled_activation = true, .nvfp4_4over6 = four_over_six_scope::all},
           errc::invalid_argument);
  rejected(float8_current_scaling{.fp8_format = recipe_format::e5m2}, errc::invalid_argument);
  rejected(delayed_scaling{.amax_history_len = 0}, errc::invalid_argument);
  rejected(float8_block_scaling{.x_block_scaling_dim = 2}, errc::invalid_argument);  // 2D x 2D with w
  rejected(float8_block_scaling{.fp8_gemm_dgrad = {.use_split_accumulator = false}}, errc::invalid_argument);
  rejected(mxfp8_block_scaling{.enable_2d_quantization = true}, errc::unsupported);
  EXPECT_NO_THROW(layer.set_recipe(nvfp4_block_scaling{.nvfp4_4over6 = four_over_six_scope::weights}));
}

TEST(LinearParameters, ExternalViewsGiveTheOwnedLayersBits) {
  // The caller's W and b read in place, dW and db written into the caller's buffers.
  const inputs in;
  for (const auto& [r, options] : every_recipe()) {
    SCOPED_TRACE(recipe_name(r));
    const layer_run owned = run_layer(r, options, in);
    nn::linear_options external = options;
    external.parameters = nn::parameter_storage::external;
    nn::linear layer(K, N, r, external);
    EXPECT_TRUE(layer.weight().empty());
    const std::span<const float> bias = options.bias ? std::span<const float>(in.b) : std::span<const float>();
    std::vector<float> y(M * N), dx(M * K), dw(N * K, NAN), db(options.bias ? N : 0, NAN);
    layer.forward({cview(in.w, N, K), bias}, cview(in.x, M, K), mview(y, M, N));
    layer.backward(cview(in.dy, M, N), mview(dx, M, K), {mview(dw, N, K), db});
    EXPECT_EQ(first_difference(y, owned.y), -1);
    EXPECT_EQ(first_difference(dx, owned.dx), -1);
    EXPECT_EQ(first_difference(dw, owned.dw), -1);
    EXPECT_EQ(first_difference(db, owned.db), -1);
  }
}

TEST(LinearParameters, ExternalLayerRefusesMissingOrMisshapenParameters) {
  const inputs in;
  nn::linear layer(K, N, nvfp4_block_scaling{}, {.bias = true, .parameters = nn::parameter_storage::external});
  std::vector<float> y(M * N), dx(M * K), dw(N * K), db(N);
  EXPECT_EQ(test::error_code_of([&] { layer.forward(cview(in.x, M, K), mview(y, M, N)); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([&] {
              layer.forward({cview(in.w, K, N), in.b}, cview(in.x, M, K), mview(y, M, N));
            }),
            errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { layer.forward({cview(in.w, N, K), {}}, cview(in.x, M, K), mview(y, M, N)); }), errc::shape_mismatch);
  layer.forward({cview(in.w, N, K), in.b}, cview(in.x, M, K), mview(y, M, N));
  EXPECT_EQ(test::error_code_of([&] { layer.backward(cview(in.dy, M, N), mview(dx, M, K)); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([&] { layer.backward(cview(in.dy, M, N), mview(dx, M, K), {mview(dw, N, K), {}}); }), errc::shape_mismatch);
  EXPECT_NO_THROW(layer.backward(cview(in.dy, M, N), mview(dx, M, K), {mview(dw, N, K), db}));  // the forward survived
  // Sizes whose product overflows are refused before anything is allocated.
  EXPECT_EQ(test::error_code_of([] { nn::linear(index_t{1} << 40, index_t{1} << 40); }), errc::invalid_argument);
  EXPECT_NO_THROW(nn::linear(65536, 65536, no_quantization{}, {.parameters = nn::parameter_storage::external}));
}

TEST(LinearRegions, OneScalePerForwardRegionAmaxesMaxMerged) {
  // TE pytorch/quantization.py FP8GlobalStateManager.autocast_exit: the forward roles update once,
  // at the outermost region's exit with grad enabled, from the amaxes of every call in it.
  const inputs in;
  nn::linear layer = make_layer(delayed_scaling{.amax_history_len = 4}, {.delayed_update = nn::scaling_update::per_region}, in);
  auto x3 = in.x;
  for (float& v : x3) v *= 3.0f;
  const auto y1 = layer.forward(cview(in.x, M, K));
  layer.forward(cview(x3, M, K));
  EXPECT_EQ(first_difference(layer.forward(cview(in.x, M, K)), y1), -1);  // one scale in the region
  EXPECT_EQ(layer.scaling_state(tensor_role::input)->scale(), 1.0f);
  layer.end_forward_region(/*grad_enabled=*/false);  // no_grad exit: nothing updates
  EXPECT_EQ(layer.scaling_state(tensor_role::input)->scale(), 1.0f);
  layer.end_forward_region(true);
  const float x3_amax = amax(cview(x3, M, K));
  EXPECT_EQ(history_of(layer, tensor_role::input), (std::vector<float>{0.0f, 0.0f, 0.0f, x3_amax}));
  EXPECT_EQ(layer.scaling_state(tensor_role::input)->scale(), 448.0f / x3_amax);
  EXPECT_EQ(layer.scaling_state(tensor_role::weight)->scale(), 448.0f / amax(cview(in.w, N, K)));
  // Backward: grad_output updates at end_backward_region only (HYBRID: E5M2, 57344).
  layer.backward(cview(in.dy, M, N));
  EXPECT_EQ(layer.scaling_state(tensor_role::grad_output)->scale(), 1.0f);
  layer.end_backward_region();
  EXPECT_EQ(layer.scaling_state(tensor_role::grad_output)->scale(), 57344.0f / amax(cview(in.dy, M, N)));
}

TEST(LinearRegions, EvaluationAmaxesRecordedAsTeMergeIntoTheNextUpdate) {
  // TE under torch.no_grad(): the quantizers record X's and W's amaxes, the region's exit skips
  // the update, so the next training update max-merges them.
  const inputs in;
  nn::linear layer = make_layer(delayed_scaling{.amax_history_len = 4}, {.delayed_update = nn::scaling_update::per_region}, in);
  auto x5 = in.x;
  for (float& v : x5) v *= 5.0f;
  std::vector<float> y(M * N);
  layer.infer({cview(in.w, N, K), {}}, cview(x5, M, K), mview(y, M, N), nn::weight_cache::off, nn::eval_amaxes::record_as_te);
  layer.end_forward_region(false);
  EXPECT_EQ(history_of(layer, tensor_role::input)[0], amax(cview(x5, M, K)));
  layer.forward(cview(in.x, M, K));
  layer.end_forward_region(true);
  EXPECT_EQ(layer.scaling_state(tensor_role::input)->scale(), 448.0f / amax(cview(x5, M, K)));
  // The library's own evaluation records nothing.
  nn::linear quiet = make_layer(delayed_scaling{.amax_history_len = 4}, {.delayed_update = nn::scaling_update::per_region}, in);
  quiet.infer(cview(x5, M, K), mview(y, M, N));
  EXPECT_EQ(history_of(quiet, tensor_role::input), std::vector<float>(4, 0.0f));
}

TEST(Linear, BadInput) {
  nn::linear layer(K, N, float8_current_scaling{});
  const auto x = test::random_values(M * K, 8), dy = test::random_values(M * N, 9);
  std::vector<float> y(M * N), dx(M * K);
  EXPECT_EQ(test::error_code_of([&] { layer.backward(cview(dy, M, N), mview(dx, M, K)); }), errc::invalid_argument);  // no forward yet
  EXPECT_EQ(test::error_code_of([&] { layer.forward(cview(x, M, K - 1), mview(y, M, N)); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { layer.forward(cview(x, M, K), mview(y, M, N - 1)); }), errc::shape_mismatch);
  auto bad = x;
  bad[5] = std::nanf("");
  EXPECT_EQ(test::error_code_of([&] { layer.forward(cview(bad, M, K), mview(y, M, N)); }), errc::non_finite_input);
  layer.forward(cview(x, M, K), mview(y, M, N));
  EXPECT_EQ(test::error_code_of([&] { layer.backward(cview(dy, M - 1, N), mview(dx, M - 1, K)); }), errc::shape_mismatch);
  auto bad_dy = dy;
  bad_dy[7] = INFINITY;
  EXPECT_EQ(test::error_code_of([&] { layer.backward(cview(bad_dy, M, N), mview(dx, M, K)); }), errc::non_finite_input);
  EXPECT_NO_THROW(layer.backward(cview(dy, M, N), mview(dx, M, K)));
  EXPECT_EQ(test::error_code_of([] { nn::linear(-1, 4); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([] { nn::linear(4, 4, no_quantization{}, {.promotion_interval = 48}); }), errc::invalid_argument);
}

/// bf16 values of `v` as bf16 (bf16::from_float of each).
std::vector<bf16> bf16_values(const std::vector<float>& v) {
  std::vector<bf16> out;
  for (float x : v) out.push_back(bf16::from_float(x));
  return out;
}

// X, W, b, dY given as bf16 values, Y and dX written as bf16: the bits of the fp32 calls on the same
// values (which a bf16 layer rounds to bf16, and whose Y, dX it rounds to bf16), for every recipe,
// row-major or strided, without the layer copying a bf16 tensor where its policy reads bf16.
TEST(LinearBf16, TensorsAsStoredGiveTheFloatCallsBits) {
  const inputs in;
  for (const auto& [r, given] : every_recipe()) {
    SCOPED_TRACE(recipe_name(r));
    nn::linear_options options = given;
    options.dtype = high_precision::bf16;
    options.bias = true;
    const auto x = to_bf16(in.x), w = to_bf16(in.w), b = to_bf16(in.b), dy = to_bf16(in.dy);
    const layer_run want = run_layer(r, options, {.x = x, .w = w, .b = b, .dy = dy});
    const nn::linear_options external{.bias = true,
                                      .dtype = high_precision::bf16,
                                      .mode = options.mode,
                                      .seed = options.seed,
                                      .parameters = nn::parameter_storage::external};
    const auto xb = bf16_values(x), wb = bf16_values(w), bb = bf16_values(b), dyb = bf16_values(dy);
    // X strided: every other element of a wider buffer.
    std::vector<bf16> x_wide(static_cast<std::size_t>(M * K * 2));
    for (std::size_t i = 0; i < xb.size(); ++i) x_wide[2 * i] = xb[i];
    for (const bool strided : {false, true}) {
      nn::linear layer(K, N, r, external);  // fresh: delayed scaling's per-call update moves the scales
      const auto xv =
          strided ? matrix_view<const bf16>(x_wide.data(), M, K, 2 * K, 2) : matrix_view<const bf16>::row_major(xb.data(), M, K);
      const nn::linear_parameters p{.weight = matrix_view<const bf16>::row_major(wb.data(), N, K), .bias = std::span<const bf16>(bb)};
      std::vector<bf16> y(M * N), dx(M * K);
      std::vector<float> dw(N * K), db(N);
      const nn::saved_forward s = layer.forward(p, xv, matrix_view<bf16>::row_major(y.data(), M, N));
      layer.backward(s, matrix_view<const bf16>::row_major(dyb.data(), M, N), matrix_view<bf16>::row_major(dx.data(), M, K),
                     {mview(dw, N, K), db});
      std::vector<float> yf, dxf;
      for (bf16 v : y) yf.push_back(v.to_float());
      for (bf16 v : dx) dxf.push_back(v.to_float());
      expect_same({yf, dxf, dw, db}, want, strided ? "bf16, strided X" : "bf16");
      EXPECT_EQ(first_difference(db, want.db), -1);
    }
    if (std::holds_alternative<delayed_scaling>(r)) continue;  // runs NaN as TE does
    // A bf16 NaN is refused as an fp32 one is, before Y is written.
    auto nan_x = xb;
    nan_x[7] = bf16::from_bits(0x7FC0);
    nn::linear layer(K, N, r, external);
    std::vector<bf16> y(M * N, bf16::from_bits(0x3F80));
    const nn::linear_parameters p{.weight = matrix_view<const bf16>::row_major(wb.data(), N, K), .bias = std::span<const bf16>(bb)};
    EXPECT_EQ(test::error_code_of([&] {
                layer.forward(p, matrix_view<const bf16>::row_major(nan_x.data(), M, K), matrix_view<bf16>::row_major(y.data(), M, N));
              }),
              errc::non_finite_input);
    for (bf16 v : y) ASSERT_EQ(v.bits(), 0x3F80);
  }
}

}  // namespace nn_linear_test
}  // namespace
}  // namespace nvfp4
