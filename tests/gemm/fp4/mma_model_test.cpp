// Tests for nvfp4/gemm/fp4/mma_model.hpp: one directed test per rule of docs/numerics_spec.md §6, each with an
// expected value worked out by hand, run through the reference GEMM and the public (fast) one.
// NVFP4_TEST_ALL_ISAS
#include "nvfp4/gemm/fp4/mma_model.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "nvfp4/gemm/fp4/gemm.hpp"
#include "nvfp4/scaling/quantize.hpp"

namespace nvfp4 {
namespace {
namespace gemm_fp4_mma_model_test {

/// A one-row operand: E2M1 values (must be exact E2M1 numbers) and one scale byte per block.
template <class Format>
quantized_tensor<Format> row_operand(const std::vector<float>& values, const std::vector<std::uint8_t>& scales) {
  std::vector<std::uint8_t> bytes((values.size() + 1) / 2, 0);
  for (std::size_t k = 0; k < values.size(); ++k) {
    const auto code = e2m1::from_float(values[k]);
    EXPECT_EQ(code.to_float(), values[k]) << "not an E2M1 value";
    bytes[k / 2] = static_cast<std::uint8_t>(bytes[k / 2] | (code.bits() << ((k & 1) * 4)));
  }
  return quantized_tensor<Format>::from_bytes(1, static_cast<index_t>(values.size()), bytes, scales);
}

/// E8M0 byte of 2^e.
std::uint8_t pow2(int e) { return e8m0::from_exponent(e).bits(); }

/// D = c + a·bᵀ for one output through the reference and the fast path; both must agree.
template <class Format>
float mma_one(const quantized_tensor<Format>& a, const quantized_tensor<Format>& b, float c) {
  float d_reference = 0, d_fast = 0;
  const matrix_view<const float> c_view(&c, 1, 1, 1, 1);
  reference::block_scaled_mma(a, b, c_view, matrix_view<float>(&d_reference, 1, 1, 1, 1));
  block_scaled_mma(a, b, c_view, matrix_view<float>(&d_fast, 1, 1, 1, 1));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(d_reference), std::bit_cast<std::uint32_t>(d_fast)) << "fast != reference";
  return d_reference;
}

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

TEST(MmaRule1, ScalesSplitIntoSignificandAndClampedExponent) {
  EXPECT_EQ(fp4::mma::decompose(ue4m3::from_bits(0x38)).m_eighths, 8);  // 1.0 = 8/8 * 2^0
  EXPECT_EQ(fp4::mma::decompose(ue4m3::from_bits(0x38)).exponent, 0);
  EXPECT_EQ(fp4::mma::decompose(ue4m3::from_bits(0x7E)).m_eighths, 14);  // 448 = 14/8 * 2^8
  EXPECT_EQ(fp4::mma::decompose(ue4m3::from_bits(0x7E)).exponent, 8);
  EXPECT_EQ(fp4::mma::decompose(ue4m3::from_bits(0x01)).m_eighths, 1);  // 2^-9 = 1/8 * 2^-6 (m < 1)
  EXPECT_EQ(fp4::mma::decompose(ue4m3::from_bits(0x01)).exponent, -6);
  EXPECT_EQ(fp4::mma::decompose(ue4m3::from_bits(0xB8)).m_eighths, 8);  // sign bit ignored
  EXPECT_TRUE(fp4::mma::decompose(ue4m3::from_bits(0xFF)).is_nan);
  EXPECT_EQ(fp4::mma::decompose(e8m0::from_bits(0x80)).exponent, 1);
  EXPECT_EQ(fp4::mma::decompose(e8m0::from_bits(0x80)).m_eighths, 8);
}

TEST(MmaRule2, GroupSumsAreExact) {
  // 16 products of 6 * 6 = 576 in group 0, scales 1: D = 576 exactly. Group 1: 1.5*0.5 sixteen
  // times minus... = 16 * 0.75 = 12. Total 588.
  std::vector<float> a(64, 0.0f), b(64, 0.0f);
  for (int k = 0; k < 16; ++k) a[k] = b[k] = 6.0f;
  for (int k = 16; k < 32; ++k) {
    a[k] = 1.5f;
    b[k] = 0.5f;
  }
  const std::vector<std::uint8_t> ones(4, 0x38);
  EXPECT_EQ(mma_one(row_operand<nvfp4_1x16>(a, ones), row_operand<nvfp4_1x16>(b, ones), 0.0f), 588.0f);
}

TEST(MmaRule3, EveryGroupTakesPartInTheAlignmentWhateverItsProducts) {
  // Group 0 products: +36 and -36 (sum 0) under scales 2^20 * 2^20: E_0 = 40, so the unit is
  // 2^(40-35) = 32 and c = 1 truncates to 0: D = +0. All-zero products under the same scales give
  // the same E_0 = 40 (the exponent comes from the scales alone), so again D = +0.
  std::vector<float> a(64, 0.0f), b(64, 0.0f);
  a[0] = 6.0f, b[0] = 6.0f, a[1] = -6.0f, b[1] = 6.0f;
  const std::vector<std::uint8_t> big = {pow2(20), pow2(0)};
  const float cancelled = mma_one(row_operand<mxfp4>(a, big), row_operand<mxfp4>(b, big), 1.0f);
  EXPECT_EQ(bits(cancelled), bits(0.0f));
  std::vector<float> b_zero_where_a_is_not(64, 0.0f);
  b_zero_where_a_is_not[5] = 6.0f;  // b is non-zero only where a is zero: every product is 0
  EXPECT_EQ(bits(mma_one(row_operand<mxfp4>(a, big), row_operand<mxfp4>(b_zero_where_a_is_not, big), 1.0f)), bits(0.0f));

  // NVFP4: group 0 has no non-zero product but scales 448 * 448 (E_0 = 8 + 8 = 16); group 1 is
  // 0.5 * 0.5 under scales 2^-9 * 2^-9 (E_1 = -12): the term 2^-20 is below the unit
  // 2^(16 - 35) = 2^-19 and truncates to 0, so D = +0. With scales 1 * 1 on group 0 instead
  // (E_0 = 0, unit 2^-35) the term is kept: D = 2^-20.
  std::vector<float> x(64, 0.0f), y(64, 0.0f);
  x[0] = 6.0f, y[1] = 6.0f, x[16] = 0.5f, y[16] = 0.5f;
  const std::vector<std::uint8_t> large_zero_group = {0x7E, 0x01, 0x00, 0x00}, unit_zero_group = {0x38, 0x01, 0x00, 0x00};
  EXPECT_EQ(bits(mma_one(row_operand<nvfp4_1x16>(x, large_zero_group), row_operand<nvfp4_1x16>(y, large_zero_group), 0.0f)), bits(0.0f));
  EXPECT_EQ(mma_one(row_operand<nvfp4_1x16>(x, unit_zero_group), row_operand<nvfp4_1x16>(y, unit_zero_group), 0.0f), 0x1p-20f);

  // A zero UE4M3 scale (either sign bit) is m = 0, e = -126.
  for (std::uint8_t zero : {std::uint8_t{0x00}, std::uint8_t{0x80}}) {
    EXPECT_EQ(fp4::mma::decompose(ue4m3::from_bits(zero)).m_eighths, 0);
    EXPECT_EQ(fp4::mma::decompose(ue4m3::from_bits(zero)).exponent, -126);
    EXPECT_FALSE(fp4::mma::decompose(ue4m3::from_bits(zero)).is_nan);
  }
}

TEST(MmaRule4, AnAccumulatorIsAlignedWithTheScalesOfAllZeroGroups) {
  const std::vector<float> zeros(64, 0.0f);
  // Scales 1 * 1: every group has E_g = 0, so E_max >= 0 and the unit is at least 2^-35.
  const std::vector<std::uint8_t> ones(2, pow2(0));
  for (float c : {1.0f, -3.5f, -FLT_MAX, 0x1.fffffep127f}) {
    EXPECT_EQ(bits(mma_one(row_operand<mxfp4>(zeros, ones), row_operand<mxfp4>(zeros, ones), c)), bits(c)) << c;
  }
  // (1 + 2^-23) * 2^-30 keeps only its multiple of 2^-35: 2^-30. 2^-140 truncates to +0.
  EXPECT_EQ(mma_one(row_operand<mxfp4>(zeros, ones), row_operand<mxfp4>(zeros, ones), 0x1.000002p-30f), 0x1p-30f);
  EXPECT_EQ(bits(mma_one(row_operand<mxfp4>(zeros, ones), row_operand<mxfp4>(zeros, ones), 0x1p-140f)), bits(0.0f));
  // The smallest E8M0 scales (2^-127 each, E_g = -254): E_max = E_c (at least -126), c comes back.
  const std::vector<std::uint8_t> smallest(2, pow2(-127));
  for (float c : {0x1p-140f, 0x1.000002p-30f, -1.0f}) {
    EXPECT_EQ(bits(mma_one(row_operand<mxfp4>(zeros, smallest), row_operand<mxfp4>(zeros, smallest), c)), bits(c)) << c;
  }
  EXPECT_EQ(bits(mma_one(row_operand<mxfp4>(zeros, ones), row_operand<mxfp4>(zeros, ones), -0.0f)), bits(0.0f));
}

TEST(MmaRule4, AZeroAccumulatorHasExponentMinus126) {
  // Group 0: sixteen 6 * 6 under scales 2^-77 * 2^-78, T_0 = 576 * 2^-155 = 9 * 2^-149.
  // Group 2: 0.5 * -0.5 under scales 2^-90 * 2^-90, T_2 = -2^-182. With c = 0 (E_c = -126)
  // E_max = -126 and the unit is 2^-161: T_2 truncates to 0 and D = 9 * 2^-149. Were c = 0 left
  // out, E_max would be -155, T_2 would be kept, and the sum 9 * 2^-149 - 2^-182 would round
  // toward zero to 8 * 2^-149.
  std::vector<float> a(64, 0.0f), b(64, 0.0f);
  for (int k = 0; k < 16; ++k) a[k] = b[k] = 6.0f;
  a[32] = 0.5f, b[32] = -0.5f;
  const std::vector<std::uint8_t> s_a = {pow2(-77), pow2(-90)}, s_b = {pow2(-78), pow2(-90)};
  EXPECT_EQ(mma_one(row_operand<mxfp4>(a, s_a), row_operand<mxfp4>(b, s_b), 0.0f), 0x9p-149f);
}

TEST(MmaRule5, TermsAreTruncatedTowardZeroBelowTheUnit) {
  // c = 1 (E_max = 0, unit 2^-35) plus a term -0.25 * 2^-17 * 2^-17 = -2^-36: it truncates to 0,
  // so D = 1 exactly (an exact sum rounded toward zero would give 1 - 2^-24).
  std::vector<float> a(64, 0.0f), b(64, 0.0f);
  a[0] = -0.5f, b[0] = 0.5f;
  const std::vector<std::uint8_t> tiny = {pow2(-17), pow2(0)};
  EXPECT_EQ(mma_one(row_operand<mxfp4>(a, tiny), row_operand<mxfp4>(b, tiny), 1.0f), 1.0f);
  // -2^-35 is a whole unit and is kept: 1 - 2^-35 rounds toward zero to 1 - 2^-24.
  const std::vector<std::uint8_t> less_tiny = {pow2(-17), pow2(0)}, other = {pow2(-16), pow2(0)};
  EXPECT_EQ(bits(mma_one(row_operand<mxfp4>(a, less_tiny), row_operand<mxfp4>(b, other), 1.0f)), 0x3F7FFFFFu);
}

TEST(MmaRule6, TheSumIsRoundedTowardZeroWithGradualUnderflowAndOverflowToInf) {
  std::vector<float> a(64, 0.0f), b(64, 0.0f);
  // 1 + 0.75 * 2^-23 = 1 + 3 * 2^-25: nearest-even would give 1 + 2^-23, toward zero gives 1.
  a[0] = 1.5f, b[0] = 0.5f;
  EXPECT_EQ(mma_one(row_operand<mxfp4>(a, {pow2(-23), pow2(0)}), row_operand<mxfp4>(b, {pow2(0), pow2(0)}), 1.0f), 1.0f);
  EXPECT_EQ(mma_one(row_operand<mxfp4>(a, {pow2(-23), pow2(0)}), row_operand<mxfp4>(b, {pow2(0), pow2(0)}), -1.0f),
            -1.0f + 0x1p-23f);  // -(1 - 1.5 * 2^-24): toward zero is -(1 - 2^-23)
  // 1.75 * 2^-149 (two terms in one step) is below the smallest normal: toward zero, 2^-149.
  std::vector<float> a2(64, 0.0f), b2(64, 0.0f);
  a2[0] = 1.0f, b2[0] = 1.0f;    // group 0: P = 1
  a2[32] = 1.5f, b2[32] = 0.5f;  // group 2: P = 0.75
  const std::vector<std::uint8_t> s_a = {pow2(-75), pow2(-75)}, s_b = {pow2(-74), pow2(-74)};
  EXPECT_EQ(bits(mma_one(row_operand<mxfp4>(a2, s_a), row_operand<mxfp4>(b2, s_b), 0.0f)), 0x00000001u);
  // 1 * 2^127 * 2^127 overflows: +Inf (not FLT_MAX).
  const std::vector<std::uint8_t> huge = {pow2(127), pow2(0)};
  EXPECT_EQ(mma_one(row_operand<mxfp4>(a2, huge), row_operand<mxfp4>(b2, huge), 0.0f), std::numeric_limits<float>::infinity());
  a2[0] = -1.0f;
  EXPECT_EQ(mma_one(row_operand<mxfp4>(a2, huge), row_operand<mxfp4>(b2, huge), 0.0f), -std::numeric_limits<float>::infinity());
}

TEST(MmaRule7, NanScalesAndNanOrInfAccumulators) {
  std::vector<float> a(64, 1.0f), b(64, 1.0f);
  const std::vector<std::uint8_t> ones = {0x38, 0x38, 0x38, 0x38};
  const float nan_payload = std::bit_cast<float>(0xFFC01234u);
  const float inf = std::numeric_limits<float>::infinity();
  for (std::uint8_t nan_scale : {std::uint8_t{0x7F}, std::uint8_t{0xFF}}) {
    const std::vector<std::uint8_t> with_nan = {0x38, nan_scale, 0x38, 0x38};
    EXPECT_EQ(bits(mma_one(row_operand<nvfp4_1x16>(a, with_nan), row_operand<nvfp4_1x16>(b, ones), 1.0f)), 0x7FFFFFFFu);
    EXPECT_EQ(bits(mma_one(row_operand<nvfp4_1x16>(a, ones), row_operand<nvfp4_1x16>(b, with_nan), inf)), 0x7FFFFFFFu);
  }
  EXPECT_EQ(bits(mma_one(row_operand<mxfp4>(a, {0xFF, pow2(0)}), row_operand<mxfp4>(b, {pow2(0), pow2(0)}), 0.0f)), 0x7FFFFFFFu);
  EXPECT_EQ(bits(mma_one(row_operand<nvfp4_1x16>(a, ones), row_operand<nvfp4_1x16>(b, ones), nan_payload)), 0x7FFFFFFFu);
  EXPECT_EQ(mma_one(row_operand<nvfp4_1x16>(a, ones), row_operand<nvfp4_1x16>(b, ones), -inf), -inf);
}

TEST(MmaRule8, KIsSteppedBy64InOrderAndPaddedWithZeros) {
  // Each step adds 2^-24 to c = 1: 1 + 2^-24 rounds toward zero to 1, twice. Fused over the
  // whole K the sum would be 1 + 2^-23, which fp32 holds.
  std::vector<float> a(128, 0.0f), b(128, 0.0f);
  a[0] = b[0] = 1.0f;
  a[64] = b[64] = 1.0f;
  const std::vector<std::uint8_t> s = {pow2(-12), pow2(0), pow2(-12), pow2(0)};
  EXPECT_EQ(mma_one(row_operand<mxfp4>(a, s), row_operand<mxfp4>(b, s), 1.0f), 1.0f);
  // K = 40 is padded to 64 with zeros: the same as K = 64 with zeros there.
  std::vector<float> a40(40, 2.0f), b40(40, 0.5f), a64(64, 0.0f), b64(64, 0.0f);
  std::copy(a40.begin(), a40.end(), a64.begin());
  std::copy(b40.begin(), b40.end(), b64.begin());
  const std::vector<std::uint8_t> three = {0x38, 0x38, 0x38}, four = {0x38, 0x38, 0x38, 0x00};
  EXPECT_EQ(mma_one(row_operand<nvfp4_1x16>(a40, three), row_operand<nvfp4_1x16>(b40, three), 0.5f), 40.5f);
  EXPECT_EQ(mma_one(row_operand<nvfp4_1x16>(a64, four), row_operand<nvfp4_1x16>(b64, four), 0.5f), 40.5f);
}

TEST(MmaRule9, AlphaIsTheProductOfTheTensorAmaxesOverTheFormatRange) {
  std::vector<float> x(64, 0.0f);
  x[0] = 2688.0f;  // amax 2688 for both: alpha = 2688^2 / (6*6*448*448) = 1
  const auto a = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), 1, 64));
  EXPECT_EQ(gemm_alpha(a, a), 1.0f);
  // The element 2688 quantizes to 6 with scale 448: D = 36 * 448^2, alpha 1.
  EXPECT_EQ(gemm(a, a)[0], 36.0f * 448.0f * 448.0f);
  std::vector<float> y(64, 0.0f);
  y[0] = 1344.0f;
  const auto b = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(y.data(), 1, 64));
  EXPECT_EQ(gemm_alpha(a, b), 2688.0f * 1344.0f * (1.0f / (6.0f * 6.0f * 448.0f * 448.0f)));
  const auto m = quantize<mxfp4>(matrix_view<const float>::row_major(x.data(), 1, 64));
  EXPECT_EQ(gemm_alpha(m, m), 1.0f);
}

}  // namespace gemm_fp4_mma_model_test
}  // namespace
}  // namespace nvfp4
