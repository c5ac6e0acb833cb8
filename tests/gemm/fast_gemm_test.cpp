// Tests for nvfp4/gemm/fast_gemm.hpp: the exact kernels add a step's terms without truncation only
// where §6's truncation provably removes nothing, and hand the other lanes to the §6 step. Each
// case below sits on one edge of that test (accumulator too small, accumulator too large, terms
// too far apart, subnormal accumulator, overflow), one binade inside and one outside, with values
// for which the untruncated sum and the §6 result differ, so a bound off by one would show. Every
// case fills a 6 x 37 output (all kernel block shapes) and is compared with the reference bit for bit.
// NVFP4_TEST_ALL_ISAS
#include "nvfp4/gemm/fast_gemm.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "nvfp4/gemm/gemm.hpp"

namespace nvfp4 {
namespace {

/// One K = 64 step: E2M1 codes of A's and B's row, their scale bytes (one per block), and c.
struct step_case {
  std::string name;
  std::vector<int> a_codes, b_codes;  // 64 each
  std::vector<std::uint8_t> a_scales, b_scales;
  float c;
};

constexpr int e2m1_half = 0x1, e2m1_one = 0x2, e2m1_six = 0x7, e2m1_minus = 0x8;

template <class Format>
quantized_tensor<Format> operand(const std::vector<int>& codes, const std::vector<std::uint8_t>& scales, index_t rows) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * 32), 0), scale_bytes;
  for (index_t r = 0; r < rows; ++r) {
    for (int k = 0; k < 64; ++k) bytes[static_cast<std::size_t>(r * 32 + k / 2)] |= static_cast<std::uint8_t>(codes[k] << ((k & 1) * 4));
    scale_bytes.insert(scale_bytes.end(), scales.begin(), scales.end());
  }
  return quantized_tensor<Format>::from_bytes(rows, 64, bytes, scale_bytes);
}

/// c + Σ P_g s_a s_b without §6's truncation, rounded toward zero to fp32 (the sums here are
/// exact in double): what a fast path that skipped the truncation test would return.
double untruncated_sum(const step_case& t, int block_cols, bool nvfp4) {
  auto scale = [&](std::uint8_t code) {
    return nvfp4 ? static_cast<double>(ue4m3::from_bits(code).to_float()) : std::ldexp(1.0, e8m0::from_bits(code).exponent());
  };
  double sum = t.c;
  for (int k = 0; k < 64; ++k)
    sum += static_cast<double>(e2m1::from_bits(static_cast<std::uint8_t>(t.a_codes[k])).to_float()) *
           e2m1::from_bits(static_cast<std::uint8_t>(t.b_codes[k])).to_float() * scale(t.a_scales[k / block_cols]) *
           scale(t.b_scales[k / block_cols]);
  return sum;
}
float round_toward_zero(double x) {
  float f = static_cast<float>(x);
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return f;
}

template <class Format>
void check_case(const step_case& t, bool truncation_matters) {
  constexpr index_t m = 6, n = 37;
  const auto a = operand<Format>(t.a_codes, t.a_scales, m);
  const auto b = operand<Format>(t.b_codes, t.b_scales, n);
  const std::vector<float> c(static_cast<std::size_t>(m * n), t.c);
  std::vector<float> expected(c.size()), got(c.size());
  const auto c_view = matrix_view<const float>::row_major(c.data(), m, n);
  reference::block_scaled_mma(a, b, c_view, matrix_view<float>::row_major(expected.data(), m, n));
  block_scaled_mma(a, b, c_view, matrix_view<float>::row_major(got.data(), m, n));
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(expected[i]))
        << t.name << ": output " << i << " fast " << std::hexfloat << got[i] << " reference " << expected[i];
  const float naive = round_toward_zero(untruncated_sum(t, Format::block_cols, std::is_same_v<typename Format::scale_type, ue4m3>));
  if (truncation_matters)
    EXPECT_NE(std::bit_cast<std::uint32_t>(naive), std::bit_cast<std::uint32_t>(expected[0])) << t.name << ": not a telling case";
  else
    EXPECT_EQ(std::bit_cast<std::uint32_t>(naive), std::bit_cast<std::uint32_t>(expected[0])) << t.name;
}

std::vector<int> codes_at(std::initializer_list<std::pair<int, int>> placed) {
  std::vector<int> codes(64, 0);
  for (auto [k, code] : placed) codes[static_cast<std::size_t>(k)] = code;
  return codes;
}

constexpr std::uint8_t ue4m3_one = 0x38, ue4m3_256 = 0x78, ue4m3_smallest = 0x01, ue4m3_2_pow_minus5 = 0x10;

TEST(ExactFastPathEdges, AccumulatorBelowTheLargestTerm) {
  // Groups 0 and 1 cancel (+1 - 1, E = 0): E_max = 0 and the unit is 2^-35, so c = (1 + 2^-23) 2^d
  // keeps its last bit for d >= -12 and loses it below.
  for (int d = -15; d <= -9; ++d) {
    const float c = std::ldexp(1.0f + std::ldexp(1.0f, -23), d);
    step_case t{"floor d=" + std::to_string(d), codes_at({{0, e2m1_one}, {16, e2m1_one}}),
                codes_at({{0, e2m1_one}, {16, e2m1_one | e2m1_minus}}), {ue4m3_one, ue4m3_one, ue4m3_one, ue4m3_one},
                {ue4m3_one, ue4m3_one, ue4m3_one, ue4m3_one}, c};
    check_case<nvfp4_1x16>(t, d < -12);
    t.c = -c;
    check_case<nvfp4_1x16>(t, d < -12);
  }
}

TEST(ExactFastPathEdges, AccumulatorFarAboveTheSmallestTerm) {
  // One term -2^-20 (0.5 * -0.5 * 2^-9 * 2^-9, E = -12, lsb 2^-20); c = 2^e. The unit is
  // 2^(e - 35): the term survives up to e = 15 (result: the float below c) and is cut above.
  for (int e = 12; e <= 19; ++e) {
    const step_case t{"ceiling e=" + std::to_string(e), codes_at({{3, e2m1_half}}), codes_at({{3, e2m1_half | e2m1_minus}}),
                      {ue4m3_smallest, ue4m3_one, ue4m3_one, ue4m3_one}, {ue4m3_smallest, ue4m3_one, ue4m3_one, ue4m3_one},
                      std::ldexp(1.0f, e)};
    check_case<nvfp4_1x16>(t, e > 15);
  }
}

TEST(ExactFastPathEdges, TermsTooFarApart) {
  // Groups 0 and 1 cancel at E = 16 (scales 256); group 2 holds one small term of lsb 2^(E_2 - 8)
  // with an odd significand. E_2 = -12 is 28 binades down (cut: result +0); E_2 = -11, 27 down, stays.
  for (bool cut : {true, false}) {
    const std::uint8_t small_a = cut ? ue4m3_smallest : ue4m3_2_pow_minus5;  // e = -6 or e = -5
    const step_case t{cut ? "span 28" : "span 27", codes_at({{0, e2m1_one}, {16, e2m1_one}, {40, e2m1_half}}),
                      codes_at({{0, e2m1_one}, {16, e2m1_one | e2m1_minus}, {40, e2m1_half}}),
                      {ue4m3_256, ue4m3_256, small_a, ue4m3_one}, {ue4m3_256, ue4m3_256, ue4m3_smallest, ue4m3_one}, 0.0f};
    check_case<nvfp4_1x16>(t, cut);
  }
}

std::uint8_t pow2(int e) { return e8m0::from_exponent(e).bits(); }

TEST(ExactFastPathEdges, E8M0AccumulatorFloorAndCeiling) {
  // MXFP4, groups 0-1 share block 0. Cancelling pair at E = -100, c = (1 + 2^-23) 2^(-100 + d).
  for (int d = -14; d <= -10; ++d) {
    const step_case t{"mx floor d=" + std::to_string(d), codes_at({{0, e2m1_one}, {16, e2m1_one}}),
                      codes_at({{0, e2m1_one}, {16, e2m1_one | e2m1_minus}}), {pow2(-50), pow2(-50)}, {pow2(-50), pow2(-50)},
                      std::ldexp(1.0f + std::ldexp(1.0f, -23), -100 + d)};
    check_case<mxfp4>(t, d < -12);
  }
  // One term -2^-122 (0.5 * -0.5 * 2^-60 * 2^-60, E = -120), c = 2^e: the fast path takes it up
  // to e = -93 (it assumes a term's lowest bit may be 2^(E - 8)); its real lowest bit, 2^-122,
  // survives truncation to e = -87.
  for (int e = -96; e <= -85; ++e) {
    const step_case t{"mx ceiling e=" + std::to_string(e), codes_at({{5, e2m1_half}}), codes_at({{5, e2m1_half | e2m1_minus}}),
                      {pow2(-60), pow2(-60)}, {pow2(-60), pow2(-60)}, std::ldexp(1.0f, e)};
    check_case<mxfp4>(t, e > -87);
  }
}

TEST(ExactFastPathEdges, SubnormalAccumulatorAgainstATinyTerm) {
  // A subnormal c aligns at exponent -126, so the unit is 2^-161 once terms are smaller: a term
  // -2^-162 (E = -160) is cut (result c), one of -2^-150 (E = -148) stays (result: c minus one
  // subnormal step, rounded toward zero).
  const float c = std::ldexp(3.0f, -149);
  for (int half_e : {-80, -74}) {
    const step_case t{"subnormal c, E=" + std::to_string(2 * half_e), codes_at({{7, e2m1_half}}),
                      codes_at({{7, e2m1_half | e2m1_minus}}), {pow2(half_e), pow2(half_e)}, {pow2(half_e), pow2(half_e)}, c};
    check_case<mxfp4>(t, half_e == -80);
  }
}

TEST(ExactFastPathEdges, AllZeroGroupsStillRaiseTheAlignment) {
  // §6 step 3: group 0 has no non-zero product (A is non-zero only at k = 0, B only at k = 1)
  // but carries scales 448 * 448 (E_0 = 16); group 1 is 0.5 * 0.5 at 2^-9 * 2^-9 (term 2^-20,
  // E_1 = -12), below the unit 2^(16 - 35): cut, D = +0. With group 0's scales 1 (E_0 = 0) the
  // term stays. Group 2 has zero scales (m = 0, e = -126) and group 3 a product with a zero scale.
  for (bool large : {true, false}) {
    const std::uint8_t zero_group_scale = large ? 0x7E : ue4m3_one;
    const step_case t{large ? "zero group, scales 448" : "zero group, scales 1",
                      codes_at({{0, e2m1_six}, {16, e2m1_half}, {32, e2m1_one}, {48, e2m1_six}}),
                      codes_at({{1, e2m1_six}, {16, e2m1_half}, {32, e2m1_one}, {48, e2m1_six}}),
                      {zero_group_scale, ue4m3_smallest, 0x00, 0x00}, {zero_group_scale, ue4m3_smallest, 0x00, 0x7E}, 0.0f};
    check_case<nvfp4_1x16>(t, large);
  }
}

TEST(ExactFastPathEdges, AZeroAccumulatorAlignsAtMinus126) {
  // MXFP4: group 0 is sixteen 6 * 6 at 2^-77 * 2^-78 (9 * 2^-149), group 2 is -2^-182 (0.5 *
  // -0.5 at 2^-90 * 2^-90). c = 0 has E_c = -126, so the unit is 2^-161 and group 2 is cut:
  // D = 9 * 2^-149, where the untruncated sum rounds toward zero to 8 * 2^-149.
  std::vector<int> a_codes(64, 0), b_codes(64, 0);
  for (int k = 0; k < 16; ++k) a_codes[static_cast<std::size_t>(k)] = b_codes[static_cast<std::size_t>(k)] = e2m1_six;
  a_codes[32] = e2m1_half;
  b_codes[32] = e2m1_half | e2m1_minus;
  const step_case t{"zero accumulator", a_codes, b_codes, {pow2(-77), pow2(-90)}, {pow2(-78), pow2(-90)}, 0.0f};
  check_case<mxfp4>(t, true);
}

TEST(ExactFastPathEdges, SumsNearTheTopOfTheFloatRange) {
  // 16 products 6 * 6 = 576 per group at 2^118 (block 0 scales 2^59): group 0 alone gives
  // 1.125 * 2^127 (a float); groups 0 and 1 give 1.125 * 2^128, which §6 turns into +Inf where
  // rounding toward zero alone would give FLT_MAX. B's block 1 (no products) is 2^32, which keeps
  // every other bound of the fast path satisfied, so only its overflow bound decides.
  std::vector<int> one_group(64, 0);
  for (int k = 0; k < 16; ++k) one_group[static_cast<std::size_t>(k)] = e2m1_six;
  std::vector<int> two_groups = one_group;
  for (int k = 16; k < 32; ++k) two_groups[static_cast<std::size_t>(k)] = e2m1_six;
  const step_case one{"one big group", one_group, one_group, {pow2(59), pow2(59)}, {pow2(59), pow2(32)}, 0.0f};
  check_case<mxfp4>(one, false);
  const step_case two{"overflow", two_groups, two_groups, {pow2(59), pow2(59)}, {pow2(59), pow2(32)}, 0.0f};
  check_case<mxfp4>(two, true);
  float d = 0;
  block_scaled_mma(operand<mxfp4>(two.a_codes, two.a_scales, 1), operand<mxfp4>(two.b_codes, two.b_scales, 1),
                   matrix_view<const float>{}, matrix_view<float>::row_major(&d, 1, 1));
  EXPECT_EQ(d, std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace nvfp4
