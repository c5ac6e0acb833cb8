// Tests for nvfp4/training/optimizer_state.hpp: hand-worked FP8 codes and scales (TE FusedAdam's
// per-tensor rule, torchao's per-256 rule), round-trip error bounds of every format over varied
// magnitudes, exact byte counts, zero tensors and bad names.
#include "nvfp4/training/optimizer_state.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "test_support.hpp"

namespace nvfp4::training {
namespace {
namespace training_optimizer_state_test {

std::vector<float> round_trip(state_format f, const std::vector<float>& x) {
  state_tensor s(f, static_cast<index_t>(x.size()));
  s.store(x);
  std::vector<float> out(x.size());
  s.load(out);
  return out;
}

TEST(OptimizerState, PerTensorFp8HandWorked) {
  // absmax 448 -> scale 448/448 = 1: the codes are e4m3 of the values themselves.
  // 0.3 lies in [0.25, 0.5) where e4m3 steps by 2^-5: 0.3 / 2^-5 = 9.6 -> 10 -> 0.3125.
  const auto out = round_trip(state_format::fp8_e4m3, {448.0f, 1.0f, -3.0f, 0.3f, 0.0f});
  EXPECT_EQ(out, (std::vector<float>{448.0f, 1.0f, -3.0f, 0.3125f, 0.0f}));
  // absmax 896 -> scale 2, encode scale 0.5: 100 -> 50, a tie between 48 and 52 in [32, 64)
  // (step 4), to even -> 48 -> decoded 96. 896 -> 448 exactly.
  state_tensor s(state_format::fp8_e4m3, 2);
  s.store(std::vector<float>{896.0f, 100.0f});
  EXPECT_EQ(s.scales()[0], 2.0f);
  EXPECT_EQ(s.codes()[0], 0x7E);  // 448, the largest E4M3 code
  std::vector<float> back(2);
  s.load(back);
  EXPECT_EQ(back, (std::vector<float>{896.0f, 96.0f}));
  // E5M2: absmax 57344 * 2 -> scale 2; 3 -> 1.5 exactly representable -> 3.
  EXPECT_EQ(round_trip(state_format::fp8_e5m2, {114688.0f, 3.0f}), (std::vector<float>{114688.0f, 3.0f}));
}

TEST(OptimizerState, ZeroTensorStaysZero) {
  for (state_format f : {state_format::fp8_e4m3, state_format::fp8_e5m2, state_format::block_fp8_e4m3}) {
    state_tensor s(f, 300);
    s.store(std::vector<float>(300, 0.0f));
    std::vector<float> out(300, 1.0f);
    s.load(out);
    for (float v : out) EXPECT_EQ(v, 0.0f) << state_format_name(f);
  }
}

TEST(OptimizerState, BlockFp8HandWorked) {
  // Two blocks: the first has amax 448 (scale 1), the second amax 4 (scale 4/448 = 1/112).
  std::vector<float> x(300, 0.0f);
  x[0] = 448.0f;
  x[1] = 0.3f;     // -> 0.3125 as above
  x[256] = 4.0f;   // -> 4 / (1/112) = 448 -> back to 4
  x[257] = -1.0f;  // -> -112 -> e4m3 -112 exactly ([64, 128) steps by 8) -> -1
  state_tensor s(state_format::block_fp8_e4m3, 300);
  s.store(x);
  ASSERT_EQ(s.scales().size(), 2u);
  EXPECT_EQ(s.scales()[0], 1.0f);
  EXPECT_EQ(s.scales()[1], 4.0f / 448.0f);
  std::vector<float> out(300);
  s.load(out);
  EXPECT_EQ(out[0], 448.0f);
  EXPECT_EQ(out[1], 0.3125f);
  EXPECT_FLOAT_EQ(out[256], 4.0f);
  EXPECT_FLOAT_EQ(out[257], -1.0f);
  EXPECT_EQ(out[2], 0.0f);
}

// Values over ~20 octaves, the spread Adam's second moment has.
std::vector<float> spread_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> exponent(-20.0f, 0.0f);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> x(n);
  for (auto& v : x) v = (negative(rng) ? -1.0f : 1.0f) * std::exp2(exponent(rng));
  return x;
}

/// |x̂ − x| ≤ half an ulp of the format relative to |x| for normal codes, and half the subnormal
/// step times the scale below that (a little slack for the FP32 scale's own rounding).
void expect_within_bounds(state_format f, const std::vector<float>& x, const std::vector<float>& out, float mantissa_bits, float min_normal,
                          float scale_of(std::size_t)) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float scale = scale_of(i);
    const float relative = std::exp2(-mantissa_bits - 1.0f) * std::fabs(x[i]);
    const float absolute = std::exp2(-mantissa_bits - 1.0f) * min_normal * scale;
    EXPECT_LE(std::fabs(out[i] - x[i]), std::max(relative, absolute) * 1.0001f) << state_format_name(f) << " at " << i << ": " << x[i];
  }
}

TEST(OptimizerState, RoundTripErrorBounds) {
  const auto x = spread_values(1000, 7);
  float absmax = 0.0f;
  for (float v : x) absmax = std::max(absmax, std::fabs(v));
  {
    const auto out = round_trip(state_format::bf16, x);
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_LE(std::fabs(out[i] - x[i]), std::exp2(-8.0f) * std::fabs(x[i]));  // 7 mantissa bits
  }
  static float tensor_scale_e4m3, tensor_scale_e5m2;
  tensor_scale_e4m3 = absmax / 448.0f;
  tensor_scale_e5m2 = absmax / 57344.0f;
  // E4M3: 3 mantissa bits, smallest normal 2^-6; E5M2: 2 bits, 2^-14.
  expect_within_bounds(state_format::fp8_e4m3, x, round_trip(state_format::fp8_e4m3, x), 3, std::exp2(-6.0f),
                       [](std::size_t) { return tensor_scale_e4m3; });
  expect_within_bounds(state_format::fp8_e5m2, x, round_trip(state_format::fp8_e5m2, x), 2, std::exp2(-14.0f),
                       [](std::size_t) { return tensor_scale_e5m2; });
  // Block scales by torchao's rule, max(block amax, 1e-12) / 448, worked out here (not read back
  // from the state, whose scale would also widen the bound).
  static std::vector<float> block_scales;
  block_scales.assign(4, 0.0f);
  for (std::size_t i = 0; i < x.size(); ++i) block_scales[i / 256] = std::max(block_scales[i / 256], std::fabs(x[i]));
  for (float& scale : block_scales) scale = std::max(scale, 1e-12f) / 448.0f;
  state_tensor s(state_format::block_fp8_e4m3, 1000);
  s.store(x);
  EXPECT_EQ(std::vector<float>(s.scales().begin(), s.scales().end()), block_scales);
  std::vector<float> out(1000);
  s.load(out);
  expect_within_bounds(state_format::block_fp8_e4m3, x, out, 3, std::exp2(-6.0f), [](std::size_t i) { return block_scales[i / 256]; });
  // Blocks of different magnitude (block j scaled by 2^-6j): per-block scales keep the small
  // blocks that one tensor scale flushes towards zero.
  std::vector<float> y(x);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::fabs(y[i]) * std::exp2(-6.0f * static_cast<float>(i / 256));
  const auto by_block = round_trip(state_format::block_fp8_e4m3, y);
  const auto by_tensor = round_trip(state_format::fp8_e4m3, y);
  double err_block = 0, err_tensor = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    err_block += std::fabs(by_block[i] - y[i]) / y[i];
    err_tensor += std::fabs(by_tensor[i] - y[i]) / y[i];
  }
  EXPECT_LT(err_block, 0.5 * err_tensor);
}

TEST(OptimizerState, ExactBytes) {
  EXPECT_EQ(state_tensor(state_format::fp32, 1000).bytes(), 4000u);
  EXPECT_EQ(state_tensor(state_format::bf16, 1000).bytes(), 2000u);
  EXPECT_EQ(state_tensor(state_format::fp8_e4m3, 1000).bytes(), 1004u);
  EXPECT_EQ(state_tensor(state_format::fp8_e5m2, 1000).bytes(), 1004u);
  EXPECT_EQ(state_tensor(state_format::block_fp8_e4m3, 1000).bytes(), 1000u + 4u * 4u);  // 4 blocks of <= 256
  EXPECT_EQ(state_tensor(state_format::block_fp8_e4m3, 512).bytes(), 512u + 8u);
}

TEST(OptimizerState, BadNamesAndSizes) {
  EXPECT_EQ(parse_state_format("block_fp8_e4m3"), state_format::block_fp8_e4m3);
  try {
    parse_state_format("fp4");
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("fp4"), std::string::npos);
  }
  state_tensor s(state_format::fp32, 4);
  std::vector<float> wrong(3);
  EXPECT_EQ(test::error_code_of([&] { s.store(wrong); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { s.load(wrong); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([] { state_tensor(state_format::fp32, -1); }), errc::invalid_argument);  // a negative shape
}

}  // namespace training_optimizer_state_test
}  // namespace
}  // namespace nvfp4::training
