// Tests of nvfp4/gemm/fp8/mma_model.hpp against hand-worked steps of docs/numerics_spec.md §9: the element
// decomposition, each tensor core's alignment (13 / 25 fractional bits) and result width (13 / 23
// bits), truncation toward zero of each term, gradual underflow at the result's granularity,
// overflow, NaN / Inf rules, E8M0 block scales, and the relaxed step.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "nvfp4/gemm/fp8/mma_model.hpp"

namespace nvfp4 {
namespace {
namespace gemm_fp8_mma_model_test {

using fp8::mma::tensor_core;
constexpr auto e4 = fp8_format::e4m3;
constexpr auto e5 = fp8_format::e5m2;

/// A step whose first elements are the given codes (the rest zero).
struct step_input {
  std::uint8_t a[fp8::mma::step_k] = {};
  std::uint8_t b[fp8::mma::step_k] = {};
};
step_input with(std::initializer_list<std::pair<std::uint8_t, std::uint8_t>> products) {
  step_input s;
  int k = 0;
  for (auto [a, b] : products) {
    s.a[k] = a;
    s.b[k] = b;
    ++k;
  }
  return s;
}
float run(const step_input& s, float c, tensor_core core, fp8_format fa = e4, fp8_format fb = e4) {
  return fp8::mma::step(s.a, fa, s.b, fb, c, core);
}
std::uint32_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

// E4M3 codes used below: 0x38 = 1.0, 0x40 = 2.0, 0x30 = 0.5, 0x7E = 448, 0x01 = 2^-9 (subnormal),
// 0x08 = 2^-6, 0xB8 = -1.0. E5M2: 0x3C = 1.0, 0x7B = 57344, 0x7C = +Inf, 0xFC = -Inf, 0x7E = NaN.

TEST(Fp8MmaModel, Decomposition) {
  const auto one = fp8::mma::decompose(0x38, e4);
  EXPECT_EQ(one.m, 8);
  EXPECT_EQ(one.exponent, 0);
  const auto sub = fp8::mma::decompose(0x01, e4);  // 2^-9 = 1 * 2^(-6 - 3)
  EXPECT_EQ(sub.m, 1);
  EXPECT_EQ(sub.exponent, -6);
  const auto zero = fp8::mma::decompose(0x80, e4);
  EXPECT_EQ(zero.m, 0);
  EXPECT_EQ(zero.exponent, -126);
  EXPECT_TRUE(fp8::mma::decompose(0x7F, e4).is_nan);
  EXPECT_TRUE(fp8::mma::decompose(0xFC, e5).is_inf);
  EXPECT_TRUE(fp8::mma::decompose(0x7D, e5).is_nan);
  EXPECT_EQ(fp8::mma::value_of(0x7B, e5), 57344.0);
  EXPECT_EQ(fp8::mma::value_of(0x01, e5), std::ldexp(1.0, -16));
}

TEST(Fp8MmaModel, ExactSums) {
  // 1*2 + 0.5*0.5 + (-1)*1 = 1.25, exact on both tensor cores.
  const auto s = with({{0x38, 0x40}, {0x30, 0x30}, {0xB8, 0x38}});
  EXPECT_EQ(run(s, 0.0f, tensor_core::hopper), 1.25f);
  EXPECT_EQ(run(s, 0.0f, tensor_core::blackwell), 1.25f);
  EXPECT_EQ(run(s, 3.0f, tensor_core::blackwell), 4.25f);
  // All zero: +0, also from c = -0.
  EXPECT_EQ(bits(run(step_input{}, -0.0f, tensor_core::hopper)), 0u);
  // A sum that cancels exactly gives +0.
  EXPECT_EQ(bits(run(with({{0x38, 0x38}, {0xB8, 0x38}}), 0.0f, tensor_core::blackwell)), 0u);
}

TEST(Fp8MmaModel, TermsTruncatedBelowTheLargestExponent) {
  // c = 1 (E_max = 0); product 2^-9 * 2^-9 = 2^-18: Hopper keeps multiples of 2^-13 (drops it),
  // Blackwell of 2^-25 (keeps it).
  const auto tiny = with({{0x01, 0x01}});
  EXPECT_EQ(run(tiny, 1.0f, tensor_core::hopper), 1.0f);
  EXPECT_EQ(run(tiny, 1.0f, tensor_core::blackwell), 1.0f + std::ldexp(1.0f, -18));
  // Truncation is toward zero per term: c = -1, product -2^-18 -> Hopper gives exactly -1.
  EXPECT_EQ(run(with({{0x81, 0x01}}), -1.0f, tensor_core::hopper), -1.0f);
  // Each term separately: two products 0x04 * 0x3C = 2^-7 * 1.5 under E_max = 6 (c = 64): the
  // Hopper unit is 2^-7, so each is truncated to 2^-7 and the sum is 64 + 2^-6 (their exact sum
  // 3 * 2^-7 would keep 2^-7 more); 64 + 2^-6 fits the 13-bit result. Blackwell keeps both.
  const auto two = with({{0x04, 0x3C}, {0x04, 0x3C}});
  EXPECT_EQ(run(two, 64.0f, tensor_core::hopper), 64.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(run(two, 64.0f, tensor_core::blackwell), 64.0f + 3 * std::ldexp(1.0f, -7));
}

TEST(Fp8MmaModel, ZeroElementsStillTakePartInTheAlignment) {
  // A zero element has e = -126: with a partner 448 (e = 8) its product's exponent is -118, above
  // c = 2^-120 + 2^-132 (E_c = -120). On Hopper that moves the unit from 2^-133 to 2^-131 and the
  // 2^-132 bit of c is lost; with no such product c passes unchanged.
  const float c = std::ldexp(1.0f, -120) + std::ldexp(1.0f, -132);
  EXPECT_EQ(run(step_input{}, c, tensor_core::hopper), c);
  EXPECT_EQ(run(with({{0x00, 0x7E}}), c, tensor_core::hopper), std::ldexp(1.0f, -120));
}

TEST(Fp8MmaModel, HopperResultKeepsThirteenFractionBits) {
  // c = 1 + 2^-20 and no products: E_max = 0, unit 2^-13 on Hopper: c itself truncated to 1.
  EXPECT_EQ(run(step_input{}, 1.0f + std::ldexp(1.0f, -20), tensor_core::hopper), 1.0f);
  EXPECT_EQ(run(step_input{}, 1.0f + std::ldexp(1.0f, -20), tensor_core::blackwell), 1.0f + std::ldexp(1.0f, -20));
  // The sum 448*448 + 1 = 200705 needs 17 fraction bits after its leading one: Hopper keeps 13,
  // truncating toward zero (200704 + 0, as 200705 = 2^17 * (1 + 72961/131072)).
  const auto big = with({{0x7E, 0x7E}, {0x38, 0x38}});
  EXPECT_EQ(run(big, 0.0f, tensor_core::blackwell), 200705.0f);
  EXPECT_EQ(run(big, 0.0f, tensor_core::hopper), 200704.0f);
  // Negative: toward zero too.
  const auto neg = with({{0xFE, 0x7E}, {0xB8, 0x38}});
  EXPECT_EQ(run(neg, 0.0f, tensor_core::hopper), -200704.0f);
}

TEST(Fp8MmaModel, GradualUnderflowAtTheResultGranularity) {
  // A subnormal result: c = 3 * 2^-140 (subnormal fp32), no products. Blackwell keeps it; Hopper's
  // granularity below 2^-126 is 2^-139, so it truncates to 2^-139.
  const float c = 3 * std::ldexp(1.0f, -140);
  EXPECT_EQ(run(step_input{}, c, tensor_core::blackwell), c);
  EXPECT_EQ(run(step_input{}, c, tensor_core::hopper), std::ldexp(1.0f, -139));
}

TEST(Fp8MmaModel, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  // A NaN element, a NaN c, Inf * 0 and +Inf + -Inf all give the canonical NaN 0x7FFFFFFF.
  EXPECT_EQ(bits(run(with({{0x7F, 0x38}}), 0.0f, tensor_core::hopper)), 0x7FFFFFFFu);
  EXPECT_EQ(bits(run(step_input{}, std::nanf(""), tensor_core::blackwell)), 0x7FFFFFFFu);
  EXPECT_EQ(bits(run(with({{0x7C, 0x00}}), 0.0f, tensor_core::blackwell, e5, e5)), 0x7FFFFFFFu);
  EXPECT_EQ(bits(run(with({{0x7C, 0x3C}, {0xFC, 0x3C}}), 0.0f, tensor_core::blackwell, e5, e5)), 0x7FFFFFFFu);
  EXPECT_EQ(bits(run(with({{0x7C, 0x3C}}), inf * -1, tensor_core::blackwell, e5, e5)), 0x7FFFFFFFu);
  // Inf element or c gives Inf of its sign.
  EXPECT_EQ(run(with({{0xFC, 0x3C}}), 1.0f, tensor_core::hopper, e5, e5), -inf);
  EXPECT_EQ(run(step_input{}, inf, tensor_core::hopper), inf);
  // E5M2 x E4M3 mix: 57344 * 448 exactly.
  EXPECT_EQ(run(with({{0x7B, 0x7E}}), 0.0f, tensor_core::blackwell, e5, e4), 57344.0f * 448.0f);
}

TEST(Fp8MmaModel, BlockScalesAndOverflow) {
  const auto s = with({{0x38, 0x40}});  // 1 * 2 = 2
  const auto scaled = [&](std::uint8_t sa, std::uint8_t sb, float c = 0.0f) {
    return fp8::mma::step(s.a, e4, s.b, e4, c, tensor_core::blackwell, e8m0::from_bits(sa), e8m0::from_bits(sb));
  };
  EXPECT_EQ(scaled(127 + 3, 127 - 1), 8.0f);                            // 2 * 2^3 * 2^-1
  EXPECT_EQ(scaled(0, 127), std::ldexp(1.0f, -126));                    // 2 * 2^-127: the scale exponent counts
  EXPECT_EQ(bits(scaled(0xFF, 127)), 0x7FFFFFFFu);                      // NaN scale
  EXPECT_EQ(scaled(254, 128), std::numeric_limits<float>::infinity());  // 2 * 2^127 * 2 overflows
  // A scale's exponent sets E_max for the products it scales: c = 1 with a product 2^-30 after
  // scaling (2 * 2^-31): Blackwell truncates it (below 2^-25).
  EXPECT_EQ(scaled(127 - 31, 127, 1.0f), 1.0f);
  EXPECT_EQ(scaled(127 - 20, 127, 1.0f), 1.0f + std::ldexp(1.0f, -19));
}

TEST(Fp8MmaModel, RelaxedStepSumsPairsInTheBf16DotOrder) {
  // E5M2 products p0 = 4096 * 4096 = 2^24, p1 = 0, p2 = 1 * 1, p3 = 2 * 1. Pair order: P = p1,
  // + p0 = 2^24, + p3 = 2^24 + 2, + p2 = 2^24 + 3 -> 2^24 + 4 (tie to even). In plain K order the
  // 1 would be lost first and the sum would be 2^24 + 2.
  const auto s = with({{0x6C, 0x6C}, {0x00, 0x00}, {0x3C, 0x3C}, {0x40, 0x3C}});
  EXPECT_EQ(fp8::mma::relaxed_step(s.a, e5, s.b, e5, 0.0f), 16777220.0f);
  // Then acc = fma(P, 2^(sa + sb), acc).
  EXPECT_EQ(fp8::mma::relaxed_step(s.a, e5, s.b, e5, -16777220.0f * 2, e8m0::from_bits(128), e8m0::from_bits(127)), 0.0f);
  EXPECT_EQ(fp8::mma::relaxed_step(s.a, e5, s.b, e5, 1.0f, e8m0::from_bits(126), e8m0::from_bits(126)), 4194306.0f);
}

}  // namespace gemm_fp8_mma_model_test
}  // namespace
}  // namespace nvfp4
