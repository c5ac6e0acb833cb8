// Tests for nvfp4/formats/e8m0.hpp: every code's value, rounding of the cast, specials.
#include "nvfp4/formats/e8m0.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace nvfp4 {
namespace {
namespace formats_e8m0_test {

TEST(E8m0, EveryCodeIsAPowerOfTwo) {
  for (int code = 0; code < 255; ++code) {
    const auto v = e8m0::from_bits(static_cast<std::uint8_t>(code));
    EXPECT_EQ(v.to_float(), std::ldexp(1.0f, code - 127)) << code;
    EXPECT_EQ(e8m0::from_float(v.to_float()).bits(), code);
    EXPECT_EQ(e8m0::from_exponent(code - 127).bits(), code);
  }
  EXPECT_TRUE(std::isnan(e8m0::from_bits(0xFF).to_float()));
}

TEST(E8m0, SignificandsFromOneAndAHalfRoundUp) {
  EXPECT_EQ(e8m0::from_float(1.49f).to_float(), 1.0f);
  EXPECT_EQ(e8m0::from_float(1.5f).to_float(), 2.0f);
  EXPECT_EQ(e8m0::from_float(3.0f).to_float(), 4.0f);
  EXPECT_EQ(e8m0::from_float(0.74f).to_float(), 0.5f);
}

TEST(E8m0, FloatSubnormalsRoundToTheNearestCode) {
  EXPECT_EQ(e8m0::from_float(0x1p-127f).bits(), 0);
  EXPECT_EQ(e8m0::from_float(0x1.7p-127f).bits(), 0);
  EXPECT_EQ(e8m0::from_float(0x1.8p-127f).bits(), 1);  // the tie goes up, as for normal inputs
  EXPECT_EQ(e8m0::from_float(0x1p-140f).bits(), 0);
}

TEST(E8m0, SpecialsAndRange) {
  EXPECT_TRUE(e8m0::from_float(0.0f).is_nan());
  EXPECT_TRUE(e8m0::from_float(-1.0f).is_nan());
  EXPECT_TRUE(e8m0::from_float(std::numeric_limits<float>::quiet_NaN()).is_nan());
  EXPECT_EQ(e8m0::from_float(std::numeric_limits<float>::max()).bits(), 254);  // saturate
  EXPECT_TRUE(e8m0::from_float(std::numeric_limits<float>::max(), overflow_policy::propagate).is_nan());
  EXPECT_EQ(e8m0::from_exponent(-500).bits(), 0);
  EXPECT_EQ(e8m0::from_exponent(500).bits(), 254);
}

}  // namespace formats_e8m0_test
}  // namespace
}  // namespace nvfp4
