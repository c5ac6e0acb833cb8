// Tests for nvfp4/training/trainer.hpp on the MLP and the synthetic cluster task: the loss falls
// below half its start, a run is bit-for-bit reproducible and independent of the thread count,
// NaN/Inf monitoring names the step, layer and tensor of an injected fault and skips that step,
// loss scaling backs off after overflows, clipping bounds the update, per-layer logs, bad options.
#include "nvfp4/training/trainer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "nvfp4/nn/mlp.hpp"

#include "test_support.hpp"

namespace nvfp4::training {
namespace {
namespace training_trainer_test {

const cluster_config task{.features = 32, .classes = 8, .spread = 1.0f, .batch_size = 32, .seed = 5};
const nn::mlp_config net{.inputs = 32, .hidden = 64, .depth = 2, .classes = 8, .seed = 7};

train_result run(const nn::engine_factory& engines, train_options options, std::vector<float>* weights = nullptr) {
  cluster_dataset data(task);
  nn::mlp_classifier m(net, engines);
  adamw opt(m.parameters(), {.lr = 3e-3f});
  auto r = train(m, data, opt, options);
  if (weights != nullptr)
    for (nn::parameter* p : m.parameters()) weights->insert(weights->end(), p->value.begin(), p->value.end());
  return r;
}

TEST(Trainer, LossFallsBelowHalfItsStartForFp32AndBf16) {
  for (const auto& engines : {nn::fp32_engines(), nn::bf16_engines()}) {
    const auto r = run(engines, {.steps = 60, .eval_every = 0});
    ASSERT_EQ(r.steps.size(), 60u);
    EXPECT_NEAR(r.steps[0].loss, std::log(8.0f), 0.8);  // chance level at the start
    EXPECT_LT(r.final_train_loss(), 0.5f * r.steps[0].loss);
    EXPECT_LT(r.final_val_loss(), 0.5f * r.steps[0].loss);
    EXPECT_TRUE(r.nan_events.empty());
    EXPECT_FALSE(r.diverged);
  }
}

TEST(Trainer, ValidationRecordsDelayedScalingAmaxesAsTeUnlessToldNot) {
  // TE's evaluation under torch.no_grad() inside the autocast region (pytorch/quantization.py
  // autocast_exit skips the update without grad): the first layer's input amax over the
  // validation batches is left in the history's entry 0 for the next training update. The
  // expected value is the validation features' max |x|, read from the dataset here.
  cluster_dataset data(task);
  float eval_amax = 0.0f;
  for (int i = 0; i < 2; ++i)
    for (const float v : data.validation_batch(i).features) eval_amax = std::fmax(eval_amax, std::fabs(v));
  for (const nn::eval_amaxes evaluation : {nn::eval_amaxes::record_as_te, nn::eval_amaxes::record_nothing}) {
    float entry0 = -1.0f;
    train_options options{.steps = 2, .eval_every = 1, .eval_batches = 2, .evaluation = evaluation};
    options.before_step = [&](long long step, nn::model& m) {
      if (step != 1) return;
      auto& engine = dynamic_cast<nn::linear_engine&>(m.dense_layers()[0]->engine());
      entry0 = engine.layer().scaling_state(tensor_role::input)->amax_history()[0];
    };
    run(nn::linear_engines(delayed_scaling{.amax_history_len = 4}), options);
    EXPECT_EQ(entry0, evaluation == nn::eval_amaxes::record_as_te ? eval_amax : 0.0f);
  }
}

TEST(Trainer, RunsAreReproducibleAndIndependentOfThreads) {
  // NVFP4 (stochastic rounding seeded per layer and step, RHT on wgrad) and FP8 delayed scaling
  // (an amax history carried from step to step) besides BF16: the recipes with state and
  // randomness. The same seed gives the same bits twice.
  const std::vector<std::pair<const char*, nn::engine_factory>> recipes{
      {"bf16", nn::bf16_engines()},
      {"nvfp4", nn::linear_engines(nvfp4_block_scaling{}, {.seed = 3})},
      {"fp8_delayed", nn::linear_engines(delayed_scaling{}, {.seed = 3})}};
  for (const auto& [name, engines] : recipes) {
    std::vector<float> w1, w2;
    const auto a = run(engines, {.steps = 12, .eval_every = 6}, &w1);
    const auto b = run(engines, {.steps = 12, .eval_every = 6}, &w2);
    EXPECT_EQ(w1, w2) << name;
    ASSERT_EQ(a.steps.size(), b.steps.size());
    for (std::size_t i = 0; i < a.steps.size(); ++i) EXPECT_EQ(a.steps[i].loss, b.steps[i].loss) << name << " step " << i;
    EXPECT_EQ(a.final_val_loss(), b.final_val_loss()) << name;
  }
#if NVFP4_HAS_OPENMP
  // A larger batch so the parallel paths run; 1 vs 2 threads give the same bits.
  auto wide = [](const nn::engine_factory& engines, int threads, std::vector<float>* w) {
    test::set_threads(threads);
    cluster_dataset data({.features = 64, .classes = 8, .batch_size = 512, .seed = 1});
    nn::mlp_classifier m({.inputs = 64, .hidden = 256, .depth = 2, .classes = 8}, engines);
    adamw opt(m.parameters(), {.lr = 1e-3f});
    const auto r = train(m, data, opt, {.steps = 3, .eval_every = 0});
    for (nn::parameter* p : m.parameters()) w->insert(w->end(), p->value.begin(), p->value.end());
    return r.steps.back().loss;
  };
  for (const auto& [name, engines] : recipes) {
    std::vector<float> w1, w2;
    const float one = wide(engines, 1, &w1);
    const float two = wide(engines, 2, &w2);
    EXPECT_EQ(one, two) << name;
    EXPECT_EQ(w1, w2) << name;
  }
#endif
}

/// Wraps an FP32 engine (of a 64 x 64 layer, fc1's shape) and turns one entry of dX into NaN at
/// steps [first, last].
class nan_in_input_gradient final : public nn::gemm_engine {
 public:
  nan_in_input_gradient(long long first, long long last) : first_(first), last_(last) {}
  std::string name() const override { return "fp32+fault"; }
  void begin_step(long long step) override { step_ = step; }
  void forward(matrix_view<const float> x, matrix_view<const float> w, matrix_view<float> y, bool training) override {
    inner_.forward(x, w, y, training);
  }
  void backward(matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) override {
    inner_.backward(dy, dx, dw);
    if (step_ >= first_ && step_ <= last_) dx(1, 2) = std::numeric_limits<float>::quiet_NaN();
  }

 private:
  nn::linear_engine inner_{64, 64, no_quantization{}, {}};
  long long first_, last_, step_ = 0;
};

/// fc1 gets a fault-injecting engine (NaN in its dX at steps [first, last]); the others FP32.
nn::engine_factory faulty_fc1(long long first, long long last) {
  return [=](const std::string& name, int layer, index_t in, index_t out) -> std::unique_ptr<nn::gemm_engine> {
    if (name == "fc1") return std::make_unique<nan_in_input_gradient>(first, last);
    return nn::fp32_engines()(name, layer, in, out);
  };
}

TEST(Trainer, NanMonitorNamesStepLayerAndTensorAndSkipsTheStep) {
  // A NaN written into fc1's weight before step 5: seen as fc1's weight at step 5.
  {
    const auto r =
        run(nn::fp32_engines(), {.steps = 8, .eval_every = 0, .max_skipped_steps = 100, .before_step = [](long long step, nn::model& m) {
                                   if (step == 5) m.dense_layers()[1]->weight().value[3] = std::numeric_limits<float>::quiet_NaN();
                                 }});
    ASSERT_FALSE(r.nan_events.empty());
    EXPECT_EQ(r.nan_events[0].step, 5);
    EXPECT_EQ(r.nan_events[0].layer, "fc1");
    EXPECT_EQ(r.nan_events[0].layer_index, 1);
    EXPECT_EQ(r.nan_events[0].tensor, "weight");
    EXPECT_FALSE(r.steps[4].skipped);
    EXPECT_TRUE(r.steps[5].skipped);
  }
  // fc1's backward writes a NaN into its dX at step 3: it reaches fc0 as fc0's output gradient.
  {
    const auto r = run(faulty_fc1(3, 3), {.steps = 6, .eval_every = 0});
    ASSERT_EQ(r.nan_events.size(), 1u);
    EXPECT_EQ(r.nan_events[0].step, 3);
    EXPECT_EQ(r.nan_events[0].layer, "fc0");
    EXPECT_EQ(r.nan_events[0].tensor, "gradient");
    EXPECT_TRUE(r.steps[3].skipped);
    EXPECT_FALSE(r.steps[4].skipped);  // the next step is clean again
  }
  // An Inf in the input features of step 2: fc0's activation.
  {
    struct poisoned final : dataset {
      cluster_dataset inner{task};
      std::string name() const override { return "poisoned"; }
      nn::batch train_batch(long long step) const override {
        auto b = inner.train_batch(step);
        if (step == 2) b.features[17] = std::numeric_limits<float>::infinity();
        return b;
      }
      nn::batch validation_batch(int i) const override { return inner.validation_batch(i); }
    } data;
    nn::mlp_classifier m(net, nn::fp32_engines());
    adamw opt(m.parameters(), {});
    const auto r = train(m, data, opt, {.steps = 4, .eval_every = 0});
    ASSERT_EQ(r.nan_events.size(), 1u);
    EXPECT_EQ(r.nan_events[0].step, 2);
    EXPECT_EQ(r.nan_events[0].layer, "fc0");
    EXPECT_EQ(r.nan_events[0].tensor, "activation");
  }
}

TEST(Trainer, DynamicLossScalingBacksOffAndGrows) {
  // Non-finite gradients at steps 0 and 1 halve the scale twice; three good steps double it.
  const auto r = run(faulty_fc1(0, 1),
                     {.steps = 8,
                      .scaling = {.kind = loss_scaling::mode::dynamic, .initial_scale = 1024.0f, .factor = 2.0f, .growth_interval = 3},
                      .eval_every = 0});
  const std::vector<float> expected{1024, 512, 256, 256, 256, 512, 512, 512};
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(r.steps[i].loss_scale, expected[i]) << i;
  EXPECT_TRUE(r.steps[0].skipped);
  EXPECT_TRUE(r.steps[1].skipped);
  EXPECT_FALSE(r.steps[2].skipped);
  EXPECT_EQ(r.nan_events.size(), 2u);
  // A fixed scale that fits changes nothing but rounding: the same loss curve up to FP32 noise.
  const auto plain = run(nn::fp32_engines(), {.steps = 10, .eval_every = 0});
  const auto fixed =
      run(nn::fp32_engines(), {.steps = 10, .scaling = {.kind = loss_scaling::mode::fixed, .initial_scale = 1024.0f}, .eval_every = 0});
  for (std::size_t i = 0; i < plain.steps.size(); ++i) EXPECT_NEAR(plain.steps[i].loss, fixed.steps[i].loss, 1e-4);
}

TEST(Trainer, ClippingBoundsTheUpdate) {
  // SGD without momentum, lr 1: the update is the clipped gradient, whose norm is the clip.
  cluster_dataset data(task);
  nn::mlp_classifier m(net, nn::fp32_engines());
  std::vector<float> before;
  for (nn::parameter* p : m.parameters()) before.insert(before.end(), p->value.begin(), p->value.end());
  sgd_momentum opt(m.parameters(), {.lr = 1.0f, .momentum = 0.0f});
  const auto r = train(m, data, opt, {.steps = 1, .grad_clip = 0.05f, .eval_every = 0});
  double moved = 0;
  std::size_t i = 0;
  for (nn::parameter* p : m.parameters())
    for (float v : p->value) {
      moved += (static_cast<double>(v) - before[i]) * (static_cast<double>(v) - before[i]);
      ++i;
    }
  EXPECT_GT(r.steps[0].grad_norm, 0.05f);
  EXPECT_NEAR(std::sqrt(moved), 0.05, 1e-5);
}

TEST(Trainer, PerLayerLogs) {
  cluster_dataset data(task);
  nn::mlp_classifier m(net, nn::bf16_engines());
  adamw opt(m.parameters(), {});
  const auto r = train(m, data, opt, {.steps = 4, .eval_every = 0, .log_every = 2});
  ASSERT_EQ(r.layer_log.size(), 6u);  // steps 0 and 2, three layers each
  EXPECT_EQ(r.layer_log[0].step, 0);
  EXPECT_EQ(r.layer_log[0].layer, "fc0");
  EXPECT_EQ(r.layer_log[3].step, 2);
  EXPECT_EQ(r.layer_log[5].layer, "head");
  EXPECT_EQ(r.layer_log[5].engine, "bf16");
  for (const auto& s : r.layer_log) {
    EXPECT_GT(s.activation_amax, 0.0f);
    EXPECT_GT(s.weight_amax, 0.0f);
    EXPECT_GT(s.gradient_amax, 0.0f);
    EXPECT_GT(s.weight_gradient_norm, 0.0);
  }
  // The first step's weight amax is that of the initial weights.
  nn::mlp_classifier fresh(net, nn::bf16_engines());
  float amax = 0;
  for (float v : fresh.dense_layers()[0]->weight().value) amax = std::max(amax, std::fabs(v));
  EXPECT_EQ(r.layer_log[0].weight_amax, amax);
  EXPECT_EQ(r.weight_bytes, 4u * (32 * 64 + 64 * 64 + 64 * 8));
  EXPECT_EQ(r.optimizer_bytes, 2 * r.weight_bytes);  // two FP32 moments
}

TEST(Trainer, BadOptionsAreRefusedBeforeAnyStep) {
  cluster_dataset data(task);
  nn::mlp_classifier m(net, nn::fp32_engines());
  adamw opt(m.parameters(), {});
  auto refuses = [&](const train_options& o, const char* text) {
    try {
      train(m, data, opt, o);
      ADD_FAILURE() << "accepted";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  refuses({.steps = 0}, "steps must be > 0");
  refuses({.steps = 10, .controls = {.cooldown_fraction = 1.2}}, "cooldown_fraction must be in [0, 1]");
  refuses({.steps = 10, .controls = {.skip_quant_last_layers = 4}}, "only 3 layers");
  refuses({.steps = 10, .min_lr_fraction = 2.0f}, "min_lr_fraction");
  refuses({.steps = 10, .scaling = {.kind = loss_scaling::mode::fixed, .initial_scale = 0.0f}}, "loss scale");
  EXPECT_EQ(opt.steps(), 0);
}

TEST(Trainer, LearningRateSchedule) {
  const train_options o{.steps = 11, .warmup_steps = 2, .min_lr_fraction = 0.1f};
  EXPECT_FLOAT_EQ(learning_rate_scale(o, 0), 0.5f);
  EXPECT_FLOAT_EQ(learning_rate_scale(o, 1), 1.0f);
  EXPECT_FLOAT_EQ(learning_rate_scale(o, 2), 1.0f);
  EXPECT_NEAR(learning_rate_scale(o, 6), 0.55f, 1e-6);  // half way: 0.1 + 0.9 · 0.5
  EXPECT_FLOAT_EQ(learning_rate_scale(o, 10), 0.1f);
}

}  // namespace training_trainer_test
}  // namespace
}  // namespace nvfp4::training
