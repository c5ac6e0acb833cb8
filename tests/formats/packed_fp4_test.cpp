// Tests for nvfp4/formats/packed_fp4.hpp: element 2i in the low nibble, 2i+1 in the high one.
#include "nvfp4/formats/packed_fp4.hpp"

#include <gtest/gtest.h>

namespace nvfp4 {
namespace {
namespace formats_packed_fp4_test {

TEST(E2m1x2, LowNibbleHoldsTheEvenElement) {
  const e2m1x2 pair(e2m1::from_float(1.0f), e2m1::from_float(-6.0f));
  EXPECT_EQ(pair.bits(), 0xF2);
  EXPECT_EQ(pair.low().to_float(), 1.0f);
  EXPECT_EQ(pair.high().to_float(), -6.0f);
  EXPECT_EQ(pair[0], pair.low());
  EXPECT_EQ(pair[1], pair.high());
  for (int byte = 0; byte < 256; ++byte) {
    const auto p = e2m1x2::from_bits(static_cast<std::uint8_t>(byte));
    EXPECT_EQ(e2m1x2(p.low(), p.high()).bits(), byte);
  }
}

}  // namespace formats_packed_fp4_test
}  // namespace
}  // namespace nvfp4
