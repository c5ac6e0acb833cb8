// Tests for nvfp4/formats/minifloat.hpp and its formats (e2m1, e4m3, ue4m3, e5m2): typed tests of
// the properties every format shares, then the hand-checked values docs/numerics_spec.md §1 states.
#include "nvfp4/formats.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace nvfp4 {
namespace {
namespace formats_minifloat_test {

template <class Format>
class MinifloatTest : public ::testing::Test {};
using MinifloatFormats = ::testing::Types<e2m1, e4m3, ue4m3, e5m2>;
TYPED_TEST_SUITE(MinifloatTest, MinifloatFormats);

template <class F>
bool is_finite_code(int code) {
  return std::isfinite(F::from_bits(static_cast<std::uint8_t>(code)).to_float());
}

TYPED_TEST(MinifloatTest, EncodeOfEveryFiniteDecodeGivesTheCodeBack) {
  using F = TypeParam;
  for (int code = 0; code < F::code_count; ++code) {
    if (!is_finite_code<F>(code)) continue;
    const float value = F::from_bits(static_cast<std::uint8_t>(code)).to_float();
    EXPECT_EQ(F::from_float(value).bits(), code) << "code 0x" << std::hex << code << " value " << value;
  }
}

TYPED_TEST(MinifloatTest, PositiveCodesIncreaseUpToTheMaximum) {
  using F = TypeParam;
  const int magnitude_codes = F::traits.has_sign ? F::code_count / 2 : F::code_count;
  float previous = -1.0f;
  for (int code = 0; code <= F::traits.max_code; ++code) {
    const float value = F::from_bits(static_cast<std::uint8_t>(code)).to_float();
    EXPECT_GT(value, previous) << code;
    previous = value;
  }
  EXPECT_LE(F::traits.max_code, magnitude_codes - 1);
  EXPECT_EQ(F::max().to_float(), previous);
}

TYPED_TEST(MinifloatTest, MidpointsRoundToTheEvenCodeAndNeighboursToTheNearest) {
  using F = TypeParam;
  for (int code = 0; code < F::traits.max_code; ++code) {
    const float low = F::from_bits(static_cast<std::uint8_t>(code)).to_float();
    const float high = F::from_bits(static_cast<std::uint8_t>(code + 1)).to_float();
    const float mid = (low + high) / 2;  // exact: both are short binary fractions
    ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(low) + high) / 2);
    const int even = (code % 2 == 0) ? code : code + 1;
    EXPECT_EQ(F::from_float(mid).bits(), even) << "midpoint " << mid;
    EXPECT_EQ(F::from_float(std::nextafter(mid, 0.0f)).bits(), code) << mid;
    EXPECT_EQ(F::from_float(std::nextafter(mid, 1e30f)).bits(), code + 1) << mid;
  }
}

template <class Format>
class SignedMinifloatTest : public ::testing::Test {};
using SignedMinifloatFormats = ::testing::Types<e2m1, e4m3, e5m2>;  // UE4M3 ignores its sign bit
TYPED_TEST_SUITE(SignedMinifloatTest, SignedMinifloatFormats);

TYPED_TEST(SignedMinifloatTest, NegativeValuesMirrorPositiveOnes) {
  using F = TypeParam;
  const int sign = 1 << (F::bit_width - 1);
  for (int code = 0; code <= F::traits.max_code; ++code) {
    const float value = F::from_bits(static_cast<std::uint8_t>(code)).to_float();
    EXPECT_EQ(F::from_float(-value).bits(), code | sign);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(F::from_bits(static_cast<std::uint8_t>(code | sign)).to_float()),
              std::bit_cast<std::uint32_t>(-value));
  }
}

TYPED_TEST(MinifloatTest, SaturatesByDefaultAndOverflowsOnRequest) {
  using F = TypeParam;
  const float beyond = F::max().to_float() * 4;
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(F::from_float(beyond).bits(), F::traits.max_code);
  EXPECT_EQ(F::from_float(inf).bits(), F::traits.max_code);
  EXPECT_EQ(F::from_float(std::numeric_limits<float>::max()).bits(), F::traits.max_code);
  if (F::traits.has_inf) {
    EXPECT_TRUE(std::isinf(F::from_float(beyond, overflow_policy::propagate).to_float()));
  } else if (F::traits.has_nan) {
    EXPECT_TRUE(std::isnan(F::from_float(beyond, overflow_policy::propagate).to_float()));
  }
  if (F::traits.has_nan) {
    EXPECT_TRUE(std::isnan(F::from_float(std::numeric_limits<float>::quiet_NaN()).to_float()));
  }
}

TEST(E2m1, TiesFromTheSpec) {
  // docs/numerics_spec.md §1: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4.
  const std::pair<float, float> ties[] = {{0.25f, 0}, {0.75f, 1}, {1.25f, 1}, {1.75f, 2}, {2.5f, 2}, {3.5f, 4}, {5.0f, 4}};
  for (auto [x, expected] : ties) {
    EXPECT_EQ(e2m1::from_float(x).to_float(), expected) << x;
    EXPECT_EQ(e2m1::from_float(-x).to_float(), -expected) << -x;
  }
  EXPECT_EQ(e2m1::from_float(-0.1f).bits(), 0x8);  // rounds to -0, sign kept as the hardware does
  EXPECT_EQ(e2m1::from_float(6.0f).bits(), 0x7);
  EXPECT_EQ(e2m1::from_float(-6.0f).bits(), 0xF);
}

TEST(E4m3, RangeFromTheSpec) {
  EXPECT_EQ(e4m3::from_float(448.0f).bits(), 0x7E);
  EXPECT_EQ(e4m3::from_float(464.0f).bits(), 0x7E);    // tie between 448 and 480 (NaN slot): even
  EXPECT_EQ(e4m3::from_float(0x1p-9f).bits(), 0x01);   // smallest subnormal
  EXPECT_EQ(e4m3::from_float(0x1p-10f).bits(), 0x00);  // |x| <= 2^-10 -> 0
  EXPECT_EQ(e4m3::from_float(-0x1p-10f).bits(), 0x80);
  EXPECT_EQ(e4m3::from_float(0x1.01p-10f).bits(), 0x01);
  EXPECT_EQ(e4m3::from_float(1.0f).bits(), 0x38);
  EXPECT_TRUE(std::isnan(e4m3::from_bits(0x7F).to_float()));
  EXPECT_TRUE(std::isnan(e4m3::from_bits(0xFF).to_float()));
}

TEST(Ue4m3, IgnoresTheSignBit) {
  EXPECT_EQ(ue4m3::from_bits(0xB8).to_float(), 1.0f);  // 0x80 | 0x38
  EXPECT_TRUE(std::isnan(ue4m3::from_bits(0xFF).to_float()));
  EXPECT_EQ(ue4m3::from_float(448.0f).bits(), 0x7E);
}

TEST(E5m2, RangeFromTheSpec) {
  EXPECT_EQ(e5m2::from_float(57344.0f).bits(), 0x7B);
  EXPECT_EQ(e5m2::from_float(1e9f).bits(), 0x7B);
  EXPECT_EQ(e5m2::from_float(1e9f, overflow_policy::propagate).bits(), 0x7C);
  EXPECT_TRUE(std::isinf(e5m2::from_bits(0x7C).to_float()));
  EXPECT_EQ(e5m2::from_float(0x1p-16f).bits(), 0x01);
}

// NaN under satfinite (overflow_policy::saturate): what an H100's cvt.rn.satfinite.e4m3x2.f32 /
// e5m2x2.f32 wrote for quiet and signalling NaNs of both signs, 0x7F for every one of these inputs
// in both formats (tests/formats/data/h100_nan_codes.json, from
// tests/golden/producers/probe_fp8_nan_codes.py). torch's cast keeps the sign (0x7F / 0xFF) and
// ml_dtypes writes 0x7E / 0xFE for E5M2: overflow_policy::propagate keeps ml_dtypes' codes.
TEST(Fp8, SatfiniteNanCodesAreTheH100s) {
  const std::uint32_t h100_inputs[] = {0x7fc00000, 0x7fc00001, 0x7fffffff, 0x7f800001, 0x7fa00000, 0x7fbfffff, 0x7fd55555, 0x7faaaaaa,
                                       0xffc00000, 0xffc00001, 0xffffffff, 0xff800001, 0xffa00000, 0xffbfffff, 0xffd55555, 0xffaaaaaa};
  for (const std::uint32_t bits : h100_inputs) {
    const float nan = std::bit_cast<float>(bits);
    EXPECT_EQ(e4m3::from_float(nan).bits(), 0x7F) << std::hex << bits;
    EXPECT_EQ(e5m2::from_float(nan).bits(), 0x7F) << std::hex << bits;
    EXPECT_EQ(e5m2::from_float(nan, overflow_policy::propagate).bits(), (bits >> 31) ? 0xFE : 0x7E) << std::hex << bits;
  }
}

// Everything is constexpr: a codec can run at compile time.
static_assert(e2m1::from_float(2.5f).bits() == 0x4);
static_assert(e4m3::from_bits(0x7E).to_float() == 448.0f);

}  // namespace formats_minifloat_test
}  // namespace
}  // namespace nvfp4
