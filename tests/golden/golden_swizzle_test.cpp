// Golden test, kind `swizzle_128x4`: compact scale bytes -> cuBLAS 128x4 layout, against torchao.
#include <gtest/gtest.h>

#include "golden/golden_support.hpp"
#include "nvfp4/scaling/layout.hpp"

namespace nvfp4 {
namespace {
namespace golden_swizzle_test {

bool check_case(const nlohmann::json& c) {
  golden::case_fields f(c, "swizzle_128x4 case", {"shape", "compact", "swizzled"});
  const auto [rows, cols] = f.shape("shape");
  const auto bytes = f.load_shaped<std::uint8_t>("compact", {rows, cols});
  const auto expected = f.load_as<std::uint8_t>("swizzled");
  const auto got = swizzle_128x4(bytes, rows, cols);
  const long diff = golden::first_difference(got.bytes(), expected);
  EXPECT_EQ(diff, -1) << "first differing byte";
  EXPECT_EQ(unswizzle_128x4(got), bytes);
  return f.finish() && diff == -1 && unswizzle_128x4(got) == bytes;
}

const bool registered = golden::register_check("swizzle_128x4", check_case);

TEST(GoldenSwizzle128x4, EveryCaseBitForBit) { golden::check_every_case("swizzle_128x4"); }

}  // namespace golden_swizzle_test
}  // namespace
}  // namespace nvfp4
