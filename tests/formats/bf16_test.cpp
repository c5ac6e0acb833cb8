// Tests for nvfp4/formats/bf16.hpp: RNE conversion from float and exact widening back.
#include "nvfp4/formats/bf16.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

namespace nvfp4 {
namespace {
namespace formats_bf16_test {

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(bf16::from_float(1.0f).bits(), 0x3F80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(bf16::from_float(1.0f + 0x1p-8f).bits(), 0x3F80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6: rounds up to even.
  EXPECT_EQ(bf16::from_float(1.0f + 3 * 0x1p-8f).bits(), 0x3F82);
  EXPECT_EQ(bf16::from_float(1.0f + 0x1p-8f + 0x1p-20f).bits(), 0x3F81);
}

TEST(Bf16, EveryCodeWidensExactlyAndConvertsBack) {
  for (std::uint32_t code = 0; code < 0x10000; ++code) {
    const auto v = bf16::from_bits(static_cast<std::uint16_t>(code));
    const float f = v.to_float();
    EXPECT_EQ(std::bit_cast<std::uint32_t>(f), code << 16);
    if (!std::isnan(f)) {
      EXPECT_EQ(bf16::from_float(f).bits(), code);
    }
  }
  EXPECT_TRUE(std::isnan(bf16::from_float(std::numeric_limits<float>::quiet_NaN()).to_float()));
  EXPECT_TRUE(std::isinf(bf16::from_float(std::numeric_limits<float>::max()).to_float()));  // RNE overflow
}

}  // namespace formats_bf16_test
}  // namespace
}  // namespace nvfp4
