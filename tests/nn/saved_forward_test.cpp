// Tests of nvfp4/nn/saved_forward.hpp with nn::linear's backward(saved, ...): each backward gets
// its own forward's gradients for any interleaving of forwards and backwards (the bits of fresh
// layers running each call alone), across a recipe switch, a delayed-scaling update and an
// in-place weight change between forward and backward, and run twice on one saved forward; a saved
// forward of another layer, or none, is refused with nothing written.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nn/linear_test_support.hpp"
#include "nvfp4/nn/saved_forward.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace nn_saved_forward_test {

using test::cview, test::mview, test::first_difference, test::inputs, test::every_recipe, test::make_layer, test::M, test::K, test::N;

/// A backward's results: dX, dW, db.
struct gradients {
  std::vector<float> dx = std::vector<float>(M * K), dw = std::vector<float>(N * K), db;
  explicit gradients(bool bias) : db(bias ? N : 0) {}
  nn::linear_gradients views() { return {mview(dw, N, K), db}; }
};

void expect_same(const gradients& got, const gradients& want, const std::string& what) {
  EXPECT_EQ(first_difference(got.dx, want.dx), -1) << what << ": dX";
  EXPECT_EQ(first_difference(got.dw, want.dw), -1) << what << ": dW";
  EXPECT_EQ(first_difference(got.db, want.db), -1) << what << ": db";
}

/// The layer's W and b as a call's parameters.
nn::linear_parameters parameters_of(const nn::linear& layer) { return {layer.weight_view(), layer.bias()}; }

/// What a fresh layer gives for one call alone: Y, then the gradients of the backward it runs as
/// its `backward_number`-th (NVFP4's gradient seed is the layer's backward count).
struct alone {
  std::vector<float> y;
  gradients g;
};
alone run_alone(const recipe& r, const nn::linear_options& options, const inputs& in, const std::vector<float>& x,
                const std::vector<float>& dy, std::uint64_t backward_number) {
  nn::linear layer = make_layer(r, options, in);
  layer.set_steps(backward_number);
  alone out{std::vector<float>(M * N), gradients(options.bias)};
  const nn::saved_forward s = layer.forward(parameters_of(layer), cview(x, M, K), mview(out.y, M, N));
  layer.backward(s, cview(dy, M, N), mview(out.g.dx, M, K), out.g.views());
  return out;
}

/// Delayed scaling as TE runs it (one update per region): the layer's states do not move between
/// the calls of a step, so each call alone is a fresh layer's.
nn::linear_options per_region(nn::linear_options o) {
  o.delayed_update = nn::scaling_update::per_region;
  return o;
}

TEST(SavedForward, TwoForwardsThenBackwardsInEitherOrderGiveFreshLayersBits) {
  const inputs in;
  const auto x2 = test::random_values(M * K, 31, {.sigma = 2.0}), dy2 = test::random_values(M * N, 32, {.sigma = 0.1});
  const std::vector<float>* xs[] = {&in.x, &x2};
  const std::vector<float>* dys[] = {&in.dy, &dy2};
  for (const auto& [r, given] : every_recipe()) {
    const nn::linear_options options = per_region(given);
    for (const bool reversed : {false, true}) {
      SCOPED_TRACE(std::string(recipe_name(r)) + (reversed ? ", second call's backward first" : ", in call order"));
      nn::linear layer = make_layer(r, options, in);
      std::vector<float> y[2] = {std::vector<float>(M * N), std::vector<float>(M * N)};
      nn::saved_forward saved[2];
      for (int i = 0; i < 2; ++i) saved[i] = layer.forward(parameters_of(layer), cview(*xs[i], M, K), mview(y[i], M, N));
      for (int k = 0; k < 2; ++k) {
        const int i = reversed ? 1 - k : k;
        gradients got(options.bias);
        layer.backward(saved[i], cview(*dys[i], M, N), mview(got.dx, M, K), got.views());
        const alone want = run_alone(r, options, in, *xs[i], *dys[i], static_cast<std::uint64_t>(k));
        EXPECT_EQ(first_difference(y[i], want.y), -1) << "call " << i << ": Y";
        expect_same(got, want.g, "call " + std::to_string(i));
      }
    }
  }
}

// The forward's recipe runs its backward, whatever the layer runs since; the layer's next step runs
// the new recipe as a fresh layer would.
TEST(SavedForward, RecipeSwitchBetweenForwardAndBackward) {
  const inputs in;
  const nn::linear_options options{
      .bias = true, .dtype = high_precision::bf16, .seed = 5, .delayed_update = nn::scaling_update::per_region};
  const std::vector<recipe> recipes = {no_quantization{},        nvfp4_block_scaling{},
                                       float8_current_scaling{}, delayed_scaling{.amax_history_len = 4},
                                       float8_block_scaling{},   mxfp8_block_scaling{}};
  for (const recipe& first : recipes) {
    for (const recipe& second : recipes) {
      SCOPED_TRACE(std::string(recipe_name(first)) + " -> " + recipe_name(second));
      nn::linear layer = make_layer(first, options, in);
      std::vector<float> y(M * N);
      const nn::saved_forward saved = layer.forward(parameters_of(layer), cview(in.x, M, K), mview(y, M, N));
      layer.set_recipe(second);
      EXPECT_EQ(recipe_name(saved.recipe()), std::string(recipe_name(first)));
      gradients got(true);
      layer.backward(saved, cview(in.dy, M, N), mview(got.dx, M, K), got.views());
      expect_same(got, run_alone(first, options, in, in.x, in.dy, 0).g, "the first recipe's backward");
      // The next call runs the second recipe (the delayed-scaling states of a DelayedScaling ->
      // DelayedScaling switch are kept: here still fresh, as per_region updates nothing).
      std::vector<float> y2(M * N);
      const nn::saved_forward next = layer.forward(parameters_of(layer), cview(in.x, M, K), mview(y2, M, N));
      gradients got2(true);
      layer.backward(next, cview(in.dy, M, N), mview(got2.dx, M, K), got2.views());
      const alone want2 = run_alone(second, options, in, in.x, in.dy, 1);
      EXPECT_EQ(first_difference(y2, want2.y), -1);
      expect_same(got2, want2.g, "the second recipe's step");
    }
  }
}

// Delayed scaling updating its scales (per_call) between a forward and its backward: the backward
// differentiates the X that forward quantized (with the scale then), not X quantized again with
// the scale now, so it equals a fresh layer's single step. Its dY is quantized with the live
// grad_output state, where its amax is also recorded (TE's backward quantizer is the module's).
TEST(SavedForward, DelayedScalingUpdateBetweenForwardAndBackward) {
  const inputs in;
  const auto x2 = test::random_values(M * K, 41, {.sigma = 5.0});
  const nn::linear_options options{.delayed_update = nn::scaling_update::per_call};
  const delayed_scaling r{.amax_history_len = 4};
  nn::linear layer = make_layer(r, options, in);
  std::vector<float> y1(M * N), y2(M * N);
  const nn::saved_forward first = layer.forward(parameters_of(layer), cview(in.x, M, K), mview(y1, M, N));
  const float input_scale = layer.scaling_state(tensor_role::input)->scale();
  ASSERT_NE(input_scale, 1.0f);  // updated after the first forward
  (void)layer.forward(parameters_of(layer), cview(x2, M, K), mview(y2, M, N));
  ASSERT_NE(layer.scaling_state(tensor_role::input)->scale(), input_scale);  // and after the second
  gradients got(false);
  layer.backward(first, cview(in.dy, M, N), mview(got.dx, M, K), got.views());
  const alone want = run_alone(r, options, in, in.x, in.dy, 0);
  EXPECT_EQ(first_difference(y1, want.y), -1);
  expect_same(got, want.g, "the first call's backward");
  // Its amax went into the layer's live grad_output state, which then updated (per_call).
  EXPECT_EQ(layer.scaling_state(tensor_role::grad_output)->amax_history().back(), amax(cview(in.dy, M, N)));
  EXPECT_NE(layer.scaling_state(tensor_role::grad_output)->scale(), 1.0f);

  // A DelayedScaling -> DelayedScaling switch between them: the states carry over, so the saved
  // forward's backward records into the new recipe's state; its GEMMs keep the forward's flags.
  nn::linear switched = make_layer(r, per_region(options), in);
  const nn::saved_forward saved = switched.forward(parameters_of(switched), cview(in.x, M, K), mview(y1, M, N));
  switched.set_recipe(delayed_scaling{.amax_history_len = 2, .fp8_gemm_dgrad = {.use_split_accumulator = false}});
  gradients got2(false);
  switched.backward(saved, cview(in.dy, M, N), mview(got2.dx, M, K), got2.views());
  expect_same(got2, run_alone(r, per_region(options), in, in.x, in.dy, 0).g, "across a DelayedScaling switch");
  EXPECT_EQ(switched.scaling_state(tensor_role::grad_output)->amax_history()[0], amax(cview(in.dy, M, N)));
  EXPECT_EQ(switched.scaling_state(tensor_role::grad_output)->amax_history().size(), 2u);
}

// W changed in place between forward and backward (an optimizer step, torch's in-place ops): the
// backward runs on W as the forward quantized (or, unquantized, copied) it.
TEST(SavedForward, InPlaceWeightChangeBetweenForwardAndBackward) {
  const inputs in;
  for (const auto& [r, given] : every_recipe()) {
    SCOPED_TRACE(recipe_name(r));
    const nn::linear_options options = per_region(given);
    nn::linear layer = make_layer(r, options, in);
    std::vector<float> y(M * N);
    const nn::saved_forward saved = layer.forward(parameters_of(layer), cview(in.x, M, K), mview(y, M, N));
    for (float& w : layer.weight()) w = -2.0f * w + 0.25f;
    gradients got(options.bias);
    layer.backward(saved, cview(in.dy, M, N), mview(got.dx, M, K), got.views());
    expect_same(got, run_alone(r, options, in, in.x, in.dy, 0).g, "W changed after the forward");
  }
}

// torch's retain_graph: a second backward on one saved forward gives the first's bits, except
// where the recipe's own state moved on: NVFP4's gradient seed (the layer's backward count) and
// delayed scaling's grad_output scale under per_call updates.
TEST(SavedForward, BackwardTwiceOnOneSavedForward) {
  const inputs in;
  for (const auto& [r, given] : every_recipe()) {
    SCOPED_TRACE(recipe_name(r));
    const nn::linear_options options = per_region(given);
    nn::linear layer = make_layer(r, options, in);
    std::vector<float> y(M * N);
    const nn::saved_forward saved = layer.forward(parameters_of(layer), cview(in.x, M, K), mview(y, M, N));
    gradients first(options.bias), second(options.bias);
    layer.backward(saved, cview(in.dy, M, N), mview(first.dx, M, K), first.views());
    layer.backward(saved, cview(in.dy, M, N), mview(second.dx, M, K), second.views());
    expect_same(first, run_alone(r, options, in, in.x, in.dy, 0).g, "first backward");
    expect_same(second, run_alone(r, options, in, in.x, in.dy, 1).g, "second backward, as the layer's second");
    if (!std::holds_alternative<nvfp4_block_scaling>(r)) expect_same(second, first, "second backward against the first");
  }
  // NVFP4 without stochastic rounding: the seed decides nothing, the two agree.
  const nvfp4_block_scaling rn{.disable_stochastic_rounding = true};
  nn::linear layer = make_layer(rn, {.seed = 5}, in);
  std::vector<float> y(M * N);
  const nn::saved_forward saved = layer.forward(parameters_of(layer), cview(in.x, M, K), mview(y, M, N));
  gradients first(false), second(false);
  layer.backward(saved, cview(in.dy, M, N), mview(first.dx, M, K), first.views());
  layer.backward(saved, cview(in.dy, M, N), mview(second.dx, M, K), second.views());
  expect_same(second, first, "NVFP4 round to nearest");
  // And with it, the second differs (else the check above could not tell the seeds apart).
  nn::linear sr = make_layer(nvfp4_block_scaling{}, {.seed = 5}, in);
  const nn::saved_forward s = sr.forward(parameters_of(sr), cview(in.x, M, K), mview(y, M, N));
  sr.backward(s, cview(in.dy, M, N), mview(first.dx, M, K), first.views());
  sr.backward(s, cview(in.dy, M, N), mview(second.dx, M, K), second.views());
  EXPECT_NE(first_difference(first.dw, second.dw), -1);
}

// Delayed scaling with per_call updates: the first backward updates the grad_output scale, so the
// second quantizes dY with the new one (TE's state moves on the same way).
TEST(SavedForward, BackwardTwiceUnderPerCallDelayedScalingUsesTheUpdatedScale) {
  const inputs in;
  nn::linear layer = make_layer(delayed_scaling{.amax_history_len = 4}, {}, in);
  std::vector<float> y(M * N);
  const nn::saved_forward saved = layer.forward(parameters_of(layer), cview(in.x, M, K), mview(y, M, N));
  gradients first(false), second(false);
  layer.backward(saved, cview(in.dy, M, N), mview(first.dx, M, K), first.views());
  const float scale = layer.scaling_state(tensor_role::grad_output)->scale();
  EXPECT_NE(scale, 1.0f);
  layer.backward(saved, cview(in.dy, M, N), mview(second.dx, M, K), second.views());
  EXPECT_NE(first_difference(first.dx, second.dx), -1);
  // The second equals a fresh layer whose grad_output state is the one the first left.
  nn::linear fresh = make_layer(delayed_scaling{.amax_history_len = 4}, {}, in);
  *fresh.scaling_state(tensor_role::grad_output) = *layer.scaling_state(tensor_role::grad_output);
  gradients want(false);
  const nn::saved_forward f = fresh.forward(parameters_of(fresh), cview(in.x, M, K), mview(y, M, N));
  fresh.backward(f, cview(in.dy, M, N), mview(want.dx, M, K), want.views());
  expect_same(second, want, "the second backward");
}

TEST(SavedForward, EmptyOrAnotherLayersSavedForwardIsRefused) {
  const inputs in;
  nn::linear layer = make_layer(nvfp4_block_scaling{}, {}, in), other = make_layer(nvfp4_block_scaling{}, {}, in);
  std::vector<float> y(M * N);
  const nn::saved_forward others = other.forward(parameters_of(other), cview(in.x, M, K), mview(y, M, N));
  EXPECT_TRUE(others);
  EXPECT_EQ(others.rows(), M);
  EXPECT_EQ(others.dtype(), high_precision::fp32);
  gradients g(false);
  std::fill(g.dx.begin(), g.dx.end(), 7.0f);
  std::fill(g.dw.begin(), g.dw.end(), 7.0f);
  EXPECT_EQ(test::error_code_of([&] { layer.backward(others, cview(in.dy, M, N), mview(g.dx, M, K), g.views()); }), errc::invalid_argument);
  const nn::saved_forward empty;
  EXPECT_FALSE(empty);
  EXPECT_EQ(test::error_code_of([&] { layer.backward(empty, cview(in.dy, M, N), mview(g.dx, M, K), g.views()); }), errc::invalid_argument);
  // dY of another row count than the saved forward's.
  const nn::saved_forward mine = layer.forward(parameters_of(layer), cview(in.x, M, K), mview(y, M, N));
  std::vector<float> short_dy(static_cast<std::size_t>((M - 1) * N)), short_dx(static_cast<std::size_t>((M - 1) * K), 7.0f);
  EXPECT_EQ(test::error_code_of([&] { layer.backward(mine, cview(short_dy, M - 1, N), mview(short_dx, M - 1, K), g.views()); }),
            errc::shape_mismatch);
  for (float v : g.dx) ASSERT_EQ(v, 7.0f);
  for (float v : g.dw) ASSERT_EQ(v, 7.0f);
  for (float v : short_dx) ASSERT_EQ(v, 7.0f);
  EXPECT_EQ(layer.steps(), 0u);
  EXPECT_EQ(other.steps(), 0u);
}

// The convenience backward(dy) runs on the last training forward (the handle the layer keeps);
// a forward saved by the caller stays valid after the layer's later calls and the convenience's.
TEST(SavedForward, LastForwardConvenienceIsTheSameBackward) {
  const inputs in;
  const auto x2 = test::random_values(M * K, 51);
  for (const auto& [r, given] : every_recipe()) {
    SCOPED_TRACE(recipe_name(r));
    const nn::linear_options options = per_region(given);
    nn::linear layer = make_layer(r, options, in);
    std::vector<float> y(M * N);
    const nn::saved_forward kept = layer.forward(parameters_of(layer), cview(in.x, M, K), mview(y, M, N));
    (void)layer.forward(cview(x2, M, K));
    gradients last(options.bias);
    last.dx = layer.backward(cview(in.dy, M, N));  // on x2's forward
    last.dw.assign(layer.weight_grad().begin(), layer.weight_grad().end());
    last.db.assign(layer.bias_grad().begin(), layer.bias_grad().end());
    expect_same(last, run_alone(r, options, in, x2, in.dy, 0).g, "backward(dy) on the last forward");
    EXPECT_EQ(test::error_code_of([&] { layer.backward(cview(in.dy, M, N)); }), errc::invalid_argument);  // consumed
    gradients got(options.bias);
    layer.backward(kept, cview(in.dy, M, N), mview(got.dx, M, K), got.views());
    expect_same(got, run_alone(r, options, in, in.x, in.dy, 1).g, "the caller's saved forward");
  }
}

}  // namespace nn_saved_forward_test
}  // namespace
}  // namespace nvfp4
