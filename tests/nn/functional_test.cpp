// Tests for nvfp4/nn/functional.hpp: each backward pass against central differences of its
// forward pass (in double where the op allows, else FP32 with a matching tolerance), hand-worked
// values, 1 vs 2 threads bit for bit, and bad shapes / targets.
#include "nvfp4/nn/functional.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "test_support.hpp"

namespace nvfp4::nn {
namespace {
namespace nn_functional_test {

std::vector<float> random_values(std::size_t n, unsigned seed, double stddev = 1.0) {
  return test::random_values(static_cast<index_t>(n), seed, {.sigma = stddev});
}

/// Σ w·f(x) for fixed random weights w: a scalar whose gradient with respect to f's output is w.
double weighted_sum(const std::vector<float>& y, const std::vector<float>& w) {
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * w[i];
  return s;
}

/// Central difference of `loss` in x[i], step h.
double numeric_gradient(std::vector<float>& x, std::size_t i, float h, const std::function<double()>& loss) {
  const float saved = x[i];
  x[i] = saved + h;
  const double up = loss();
  x[i] = saved - h;
  const double down = loss();
  x[i] = saved;
  return (up - down) / (2.0 * static_cast<double>(h));
}

TEST(RmsNorm, HandWorkedAndGradients) {
  rms_norm norm("g", 2, 0.0f);
  std::vector<float> y;
  norm.forward(std::vector<float>{3.0f, 4.0f}, 1, y);  // rms = √12.5
  EXPECT_NEAR(y[0], 3.0 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(y[1], 4.0 / std::sqrt(12.5), 1e-6);

  const index_t rows = 3, width = 8;
  rms_norm n2("g", width);
  for (index_t j = 0; j < width; ++j) n2.gain().value[static_cast<std::size_t>(j)] = 0.5f + 0.1f * static_cast<float>(j);
  auto x = random_values(rows * width, 1);
  const auto w = random_values(rows * width, 2);
  auto loss = [&] {
    std::vector<float> out;
    n2.forward(x, rows, out);
    return weighted_sum(out, w);
  };
  loss();
  std::vector<float> dx;
  n2.backward(w, dx);
  const std::vector<float> dgain = n2.gain().grad;
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(dx[i], numeric_gradient(x, i, 1e-2f, loss), 2e-3) << i;
  for (std::size_t j = 0; j < static_cast<std::size_t>(width); ++j)
    EXPECT_NEAR(dgain[j], numeric_gradient(n2.gain().value, j, 1e-2f, loss), 2e-3) << j;
}

TEST(Gelu, ValuesAndDerivative) {
  std::vector<float> y;
  gelu_forward(std::vector<float>{0.0f, 1.0f, -1.0f, 10.0f}, y);
  EXPECT_EQ(y[0], 0.0f);
  // 0.5·(1 + tanh(0.7978845608·1.044715)) = 0.841192 (GPT-2's approximation of x·Φ(x) at 1)
  EXPECT_NEAR(y[1], 0.8411920, 1e-6);
  EXPECT_NEAR(y[2], -0.1588080, 1e-6);
  EXPECT_NEAR(y[3], 10.0f, 1e-5);
  auto x = random_values(50, 3, 2.0);
  const auto w = random_values(50, 4);
  std::vector<float> dx;
  gelu_backward(x, w, dx);
  auto loss = [&] {
    std::vector<float> out;
    gelu_forward(x, out);
    return weighted_sum(out, w);
  };
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(dx[i], numeric_gradient(x, i, 1e-2f, loss), 2e-3) << x[i];
}

TEST(CausalAttention, FirstPositionCopiesItsValueAndCausalityHolds) {
  // batch 1, seq 3, width 2, 1 head. Position 0 attends only to itself: out[0] = V[0].
  causal_attention att(2, 1);
  auto qkv = random_values(3 * 6, 5);
  std::vector<float> out;
  att.forward(qkv, 1, 3, out);
  EXPECT_FLOAT_EQ(out[0], qkv[4]);
  EXPECT_FLOAT_EQ(out[1], qkv[5]);
  // Changing the last position's K and V leaves the earlier outputs unchanged.
  auto changed = qkv;
  changed[2 * 6 + 2] += 5.0f;
  changed[2 * 6 + 4] -= 3.0f;
  std::vector<float> out2;
  att.forward(changed, 1, 3, out2);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[static_cast<std::size_t>(i)], out2[static_cast<std::size_t>(i)]);
  EXPECT_NE(out[4], out2[4]);
}

TEST(CausalAttention, GradientsMatchCentralDifferences) {
  const index_t batch = 2, seq = 5, width = 8, heads = 2;
  causal_attention att(width, heads);
  auto qkv = random_values(static_cast<std::size_t>(batch * seq * 3 * width), 6);
  const auto w = random_values(static_cast<std::size_t>(batch * seq * width), 7);
  auto loss = [&] {
    std::vector<float> out;
    att.forward(qkv, batch, seq, out);
    return weighted_sum(out, w);
  };
  loss();
  std::vector<float> d_qkv;
  att.backward(w, d_qkv);
  for (std::size_t i = 0; i < qkv.size(); ++i) EXPECT_NEAR(d_qkv[i], numeric_gradient(qkv, i, 1e-2f, loss), 3e-3) << i;
}

TEST(CrossEntropy, HandWorkedAndGradient) {
  // Logits (0, ln 3) and target 1: p = (1/4, 3/4), loss = ln(4/3); gradient (1/4, −1/4)·scale.
  std::vector<float> grad;
  const float loss = softmax_cross_entropy(std::vector<float>{0.0f, std::log(3.0f)}, 2, std::vector<std::int32_t>{1}, 2.0f, &grad);
  EXPECT_NEAR(loss, std::log(4.0 / 3.0), 1e-6);
  EXPECT_NEAR(grad[0], 0.5, 1e-6);
  EXPECT_NEAR(grad[1], -0.5, 1e-6);
  // Mean over rows: two rows, the gradient of each is divided by 2.
  auto logits = random_values(2 * 5, 8);
  const std::vector<std::int32_t> targets{3, 0};
  softmax_cross_entropy(logits, 5, targets, 1.0f, &grad);
  auto f = [&] { return static_cast<double>(softmax_cross_entropy(logits, 5, targets, 1.0f, nullptr)); };
  for (std::size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(grad[i], numeric_gradient(logits, i, 1e-2f, f), 1e-3);
}

TEST(Functional, BadShapesAndTargets) {
  // The codes: the header's (a target outside [0, classes) is invalid_argument) and, where it names
  // none, docs/errors.md's (a wrong size is shape_mismatch, width % heads != 0 a parameter out of
  // its domain).
  std::vector<float> out;
  EXPECT_EQ(test::error_code_of([] {
              softmax_cross_entropy(std::vector<float>(4), 2, std::vector<std::int32_t>{0, 2}, 1.0f, nullptr);
            }),
            errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([] {
              softmax_cross_entropy(std::vector<float>(3), 2, std::vector<std::int32_t>{0, 1}, 1.0f, nullptr);
            }),
            errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([] { causal_attention(10, 3); }), errc::invalid_argument);
  causal_attention att(4, 2);
  EXPECT_EQ(test::error_code_of([&] { att.forward(std::vector<float>(10), 1, 2, out); }), errc::shape_mismatch);
  rms_norm norm("g", 4);
  EXPECT_EQ(test::error_code_of([&] { norm.forward(std::vector<float>(7), 2, out); }), errc::shape_mismatch);
  // Sizes whose product overflows are refused through the checked-size helpers, not multiplied.
  const index_t huge = index_t{1} << 62;
  EXPECT_EQ(test::error_code_of([&] { norm.forward(std::vector<float>(8), huge, out); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([] {
              softmax_cross_entropy(std::vector<float>(4), index_t{1} << 62, std::vector<std::int32_t>{0, 1}, 1.0f, nullptr);
            }),
            errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([] { parameter("w", parameter_kind::matrix, index_t{1} << 30, index_t{1} << 30); }),
            errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([] { parameter("w", parameter_kind::matrix, -1, 4); }), errc::invalid_argument);
}

TEST(Functional, SameBitsForOneAndTwoThreads) {
#if NVFP4_HAS_OPENMP
  const index_t batch = 32, seq = 32, width = 64, heads = 4;  // big enough for every parallel path
  const auto qkv = random_values(static_cast<std::size_t>(batch * seq * 3 * width), 9);
  const auto dout = random_values(static_cast<std::size_t>(batch * seq * width), 10);
  auto run = [&](int threads) {
    test::set_threads(threads);
    causal_attention att(width, heads);
    rms_norm norm("g", width);
    std::vector<float> out, d_qkv, normed, d_norm;
    att.forward(qkv, batch, seq, out);
    att.backward(dout, d_qkv);
    norm.forward(out, batch * seq, normed);
    norm.backward(dout, d_norm);
    out.insert(out.end(), d_qkv.begin(), d_qkv.end());
    out.insert(out.end(), normed.begin(), normed.end());
    out.insert(out.end(), d_norm.begin(), d_norm.end());
    out.insert(out.end(), norm.gain().grad.begin(), norm.gain().grad.end());
    return out;
  };
  EXPECT_EQ(run(1), run(2));
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}

}  // namespace nn_functional_test
}  // namespace
}  // namespace nvfp4::nn
