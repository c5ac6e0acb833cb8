// Golden test, kind `swizzle_128x4`: compact scale bytes -> cuBLAS 128x4 layout, against torchao.
#include <gtest/gtest.h>

#include "golden/golden_support.hpp"
#include "nvfp4/scaling/layout.hpp"

namespace nvfp4 {
namespace {

TEST(GoldenSwizzle128x4, EveryCaseBitForBit) {
  const auto cases = golden::cases_of("swizzle_128x4");
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    SCOPED_TRACE(golden::describe(c));
    const auto compact = golden::load(c, "compact");
    ASSERT_EQ(compact.shape.size(), 2u);
    const auto expected = golden::load_as<std::uint8_t>(c, "swizzled");
    const auto bytes = compact.as<std::uint8_t>();
    const auto got = swizzle_128x4(bytes, compact.shape[0], compact.shape[1]);
    const long diff = golden::first_difference(got.bytes(), expected);
    EXPECT_EQ(diff, -1) << "first differing byte";
    EXPECT_EQ(unswizzle_128x4(got), bytes);
    golden::tally::instance().record("swizzle_128x4", diff == -1);
  }
}

}  // namespace
}  // namespace nvfp4
