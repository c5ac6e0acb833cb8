// Tests for nvfp4/training/optimizer.hpp: AdamW, SGD and Muon against steps worked by hand and
// against an independent double-precision oracle of the textbook formulas; low-precision states
// stay close to FP32 states; byte counts; non-finite gradients and bad options are rejected.
#include "nvfp4/training/optimizer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "test_support.hpp"

namespace nvfp4::training {
namespace {
namespace training_optimizer_test {

nn::parameter scalar_parameter(float value, nn::parameter_kind kind = nn::parameter_kind::matrix) {
  nn::parameter p("w", kind, 1, 1);
  p.value[0] = value;
  return p;
}

TEST(AdamW, TwoStepsWorkedByHand) {
  // p = 1, lr 0.1, β = (0.9, 0.999), ε = 1e-8, wd 0.1; gradients 0.5 then -0.25.
  // Step 1: p = 1·(1 − 0.01) = 0.99; m = 0.05, v = 0.00025; m̂ = 0.05/0.1 = 0.5, v̂ = 0.00025/0.001
  //   = 0.25; p = 0.99 − 0.1·0.5/(0.5 + 1e-8) = 0.890000002.
  // Step 2: p = 0.890000002·0.99 = 0.88110000198; m = 0.045 − 0.025 = 0.02; v = 0.00024975 +
  //   0.0000625 = 0.00031225; m̂ = 0.02/0.19 = 0.1052631579; v̂ = 0.00031225/0.001999 = 0.1562031016,
  //   √v̂ = 0.3952253808; p = 0.88110000198 − 0.1·0.1052631579/0.3952253908 = 0.8544662987.
  nn::parameter p = scalar_parameter(1.0f);
  adamw opt({&p}, {.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f});
  p.grad[0] = 0.5f;
  opt.step();
  EXPECT_NEAR(p.value[0], 0.890000002, 2e-7);
  p.grad[0] = -0.25f;
  opt.step();
  EXPECT_NEAR(p.value[0], 0.8544662987, 2e-7);
  EXPECT_EQ(opt.steps(), 2);
  // Gains are not decayed: the same first step without the 0.99 factor.
  nn::parameter gain = scalar_parameter(1.0f, nn::parameter_kind::vector);
  adamw opt2({&gain}, {.lr = 0.1f, .weight_decay = 0.1f});
  gain.grad[0] = 0.5f;
  opt2.step();
  EXPECT_NEAR(gain.value[0], 1.0 - 0.1 * 0.5 / (0.5 + 1e-8), 2e-7);
}

/// The textbook AdamW (Loshchilov & Hutter, Algorithm 2 with a constant schedule) in double.
struct textbook_adamw {
  double lr, b1, b2, eps, wd;
  std::vector<double> p, m, v;
  int t = 0;
  void step(const std::vector<float>& g) {
    ++t;
    for (std::size_t i = 0; i < p.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * static_cast<double>(g[i]) * g[i];
      const double mhat = m[i] / (1 - std::pow(b1, t));
      const double vhat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * p[i]);
    }
  }
};

TEST(AdamW, MatchesTextbookOracleOverManySteps) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  nn::parameter p("w", nn::parameter_kind::matrix, 8, 16);
  for (auto& v : p.value) v = normal(rng);
  textbook_adamw oracle{1e-2, 0.9, 0.95, 1e-6, 0.05, {}, {}, {}};
  oracle.p.assign(p.value.begin(), p.value.end());
  oracle.m.assign(p.value.size(), 0.0);
  oracle.v.assign(p.value.size(), 0.0);
  adamw opt({&p}, {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-6f, .weight_decay = 0.05f});
  for (int s = 0; s < 20; ++s) {
    for (auto& g : p.grad) g = normal(rng) * 0.1f;
    oracle.step(p.grad);
    opt.step();
  }
  for (std::size_t i = 0; i < p.value.size(); ++i) EXPECT_NEAR(p.value[i], oracle.p[i], 2e-6 * (1 + std::fabs(oracle.p[i])));
}

TEST(AdamW, LowPrecisionStatesTrackFp32States) {
  // The same 30 steps with every state format; the parameters stay within a fraction of their total
  // motion of the FP32 run (measured: BF16 0.6%, FP8 E4M3 11-18%, E5M2 22%; a lost or mis-scaled
  // state moves them by the whole motion).
  struct case_t {
    state_formats formats;
    double bound;
  };
  const std::vector<case_t> cases{{{state_format::bf16, state_format::bf16}, 0.02},
                                  {{state_format::block_fp8_e4m3, state_format::block_fp8_e4m3}, 0.25},
                                  {{state_format::fp8_e4m3, state_format::fp32}, 0.25},
                                  {{state_format::fp8_e4m3, state_format::fp8_e4m3}, 0.25},
                                  {{state_format::fp8_e5m2, state_format::fp8_e5m2}, 0.35}};
  auto run = [](state_formats f) {
    std::mt19937 rng(9);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    nn::parameter p("w", nn::parameter_kind::matrix, 16, 32);
    for (auto& v : p.value) v = normal(rng);
    adamw opt({&p}, {.lr = 1e-2f, .states = {.default_formats = f}});
    for (int s = 0; s < 30; ++s) {
      for (std::size_t i = 0; i < p.grad.size(); ++i) p.grad[i] = 0.1f * (p.value[i] - 0.5f) + 0.01f * normal(rng);
      opt.step();
    }
    return p.value;
  };
  const auto reference = run({});
  for (const auto& c : cases) {
    const auto got = run(c.formats);
    double max_diff = 0;
    for (std::size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - reference[i]));
    // 30 steps move each weight by up to 0.3 (lr 0.01 per step): the bound is a fraction of that.
    EXPECT_LE(max_diff, c.bound * 0.3) << state_format_name(c.formats.first) << "/" << state_format_name(c.formats.second);
  }
}

TEST(AdamW, StateBytesArePerTensorExact) {
  nn::parameter a("a", nn::parameter_kind::matrix, 16, 32), b("b", nn::parameter_kind::vector, 1, 32);
  state_plan plan{.default_formats = {state_format::fp8_e4m3, state_format::bf16},
                  .by_name = {{"b", {state_format::fp32, state_format::block_fp8_e4m3}}}};
  adamw opt({&a, &b}, {.states = plan});
  // a: 512 + 4 (FP8 + scale) and 1024 (BF16); b: 128 (FP32) and 32 + 4 (one block).
  EXPECT_EQ(opt.state_bytes(), 516u + 1024u + 128u + 36u);
  EXPECT_EQ(opt.first_moment(0).format(), state_format::fp8_e4m3);
  EXPECT_EQ(opt.second_moment(1).format(), state_format::block_fp8_e4m3);
}

TEST(AdamW, RejectsNonFiniteGradientsBeforeUpdating) {
  nn::parameter a("a", nn::parameter_kind::matrix, 2, 2), b("b", nn::parameter_kind::matrix, 2, 2);
  a.value = {1, 2, 3, 4};
  a.grad = {1, 1, 1, 1};
  b.grad = {0, 0, std::nanf(""), 0};
  adamw opt({&a, &b}, {});
  try {
    opt.step();
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::non_finite_input);
    EXPECT_NE(std::string(e.what()).find("'b'"), std::string::npos);
  }
  EXPECT_EQ(a.value, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(opt.steps(), 0);
}

TEST(AdamW, RejectsBadOptions) {
  nn::parameter a("a", nn::parameter_kind::matrix, 1, 1);
  // Betas outside [0, 1) and a negative rate are options out of their domain; a null parameter
  // is a null pointer.
  EXPECT_EQ(test::error_code_of([&] { adamw({&a}, {.beta1 = 1.0f}); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([&] { adamw({&a}, {.beta2 = -0.1f}); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([&] { adamw({&a}, {.lr = -1.0f}); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([] { adamw({nullptr}, {}); }), errc::null_pointer);
}

TEST(Sgd, MomentumStepsWorkedByHand) {
  // p = 1, lr 0.1, μ 0.9, wd 0.5 (L2): g1 = 0.2 + 0.5·1 = 0.7, b = 0.7, p = 1 − 0.07 = 0.93.
  // g2 = −0.1 + 0.5·0.93 = 0.365, b = 0.63 + 0.365 = 0.995, p = 0.93 − 0.0995 = 0.8305.
  nn::parameter p = scalar_parameter(1.0f);
  sgd_momentum opt({&p}, {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.5f});
  p.grad[0] = 0.2f;
  opt.step();
  EXPECT_NEAR(p.value[0], 0.93, 1e-6);
  p.grad[0] = -0.1f;
  opt.step();
  EXPECT_NEAR(p.value[0], 0.8305, 1e-6);
  // Nesterov: d = g + μ·b: step 1 d = 0.2 + 0.9·0.2 = 0.38 -> p = 0.962.
  nn::parameter q = scalar_parameter(1.0f);
  sgd_momentum nesterov({&q}, {.lr = 0.1f, .momentum = 0.9f, .nesterov = true});
  q.grad[0] = 0.2f;
  nesterov.step();
  EXPECT_NEAR(q.value[0], 0.962, 1e-6);
  EXPECT_EQ(nesterov.state_bytes(), 4u);
}

/// The Newton-Schulz polynomial applied to one singular value, in double: on a diagonal matrix the
/// iteration acts on each diagonal entry separately.
double newton_schulz_scalar(double s, double frobenius, int steps) {
  double x = s / (frobenius + 1e-7);
  for (int i = 0; i < steps; ++i) x = 3.4445 * x - 4.7750 * x * x * x + 2.0315 * x * x * x * x * x;
  return x;
}

TEST(Muon, NewtonSchulzOnDiagonalAndRotatedMatrices) {
  // diag(3, 0.5, 0.2) as a 3x4 matrix (wide) and its transpose (tall).
  const double fro = std::sqrt(9.0 + 0.25 + 0.04);
  std::vector<float> g(12, 0.0f);
  g[0] = 3.0f, g[5] = 0.5f, g[10] = 0.2f;
  const auto wide = newton_schulz_orthogonalize(g, 3, 4, 5);
  std::vector<float> gt(12, 0.0f);
  gt[0] = 3.0f, gt[4] = 0.5f, gt[8] = 0.2f;
  const auto tall = newton_schulz_orthogonalize(gt, 4, 3, 5);
  const double expect[3] = {newton_schulz_scalar(3.0, fro, 5), newton_schulz_scalar(0.5, fro, 5), newton_schulz_scalar(0.2, fro, 5)};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(wide[static_cast<std::size_t>(i * 4 + i)], expect[i], 2e-5);
    EXPECT_NEAR(tall[static_cast<std::size_t>(i * 3 + i)], expect[i], 2e-5);
    EXPECT_GT(expect[i], 0.6);  // the quintic pushes every singular value towards [0.7, 1.2]
    EXPECT_LT(expect[i], 1.25);
  }
  for (std::size_t i = 0; i < 12; ++i) {
    if (i != 0 && i != 5 && i != 10) {
      EXPECT_NEAR(wide[i], 0.0f, 1e-6);
    }
  }
  // A rotation R = [c −s; s c] on the left: NS(R·D) = R·NS(D).
  const float c = 0.6f, s = 0.8f;
  const std::vector<float> rd{c * 2.0f, -s * 0.5f, s * 2.0f, c * 0.5f};  // R · diag(2, 0.5)
  const auto o = newton_schulz_orthogonalize(rd, 2, 2, 5);
  const double f = std::sqrt(4.0 + 0.25);
  const double d0 = newton_schulz_scalar(2.0, f, 5), d1 = newton_schulz_scalar(0.5, f, 5);
  EXPECT_NEAR(o[0], c * d0, 2e-5);
  EXPECT_NEAR(o[1], -s * d1, 2e-5);
  EXPECT_NEAR(o[2], s * d0, 2e-5);
  EXPECT_NEAR(o[3], c * d1, 2e-5);
}

TEST(Muon, OneStepWorkedByHand) {
  // W 2x2 = 0, gradient diag(1, 0.25), μ 0.95, nesterov: b = 0.05·g, u = g + 0.95·(b − g) = 0.0975·g;
  // NS is scale-free (up to the 1e-7), so the update is diag(f(1), f(0.25)) with ‖·‖ = √1.0625.
  nn::parameter w("w", nn::parameter_kind::matrix, 2, 2), gain("g", nn::parameter_kind::vector, 1, 2);
  w.grad = {1.0f, 0.0f, 0.0f, 0.25f};
  gain.value = {1.0f, 1.0f};
  gain.grad = {0.5f, -0.5f};
  muon opt({&w, &gain}, {.lr = 0.02f, .momentum = 0.95f, .adamw = {.lr = 0.1f}});
  opt.step();
  const double fro = std::sqrt(1.0625) * 0.0975;
  EXPECT_NEAR(w.value[0], -0.02 * newton_schulz_scalar(0.0975, fro, 5), 1e-6);
  EXPECT_NEAR(w.value[3], -0.02 * newton_schulz_scalar(0.0975 * 0.25, fro, 5), 1e-6);
  EXPECT_NEAR(w.value[1], 0.0f, 1e-7);
  // The gain went through AdamW: first step moves by lr·sign(g).
  EXPECT_NEAR(gain.value[0], 0.9, 1e-6);
  EXPECT_NEAR(gain.value[1], 1.1, 1e-6);
  // States: the momentum buffer (16 B) and AdamW's two moments of the gain (8 + 8 B).
  EXPECT_EQ(opt.state_bytes(), 16u + 16u);
}

}  // namespace training_optimizer_test
}  // namespace
}  // namespace nvfp4::training
