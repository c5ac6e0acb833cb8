// Tests for nvfp4/scaling/layout.hpp: the 128x4 swizzle against its formula and its inverse.
#include "nvfp4/scaling/layout.hpp"
#include "nvfp4/scaling/quantize.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace nvfp4 {
namespace {
namespace scaling_layout_test {

TEST(Swizzle128x4, FirstTileMatchesTheDocumentedInterleave) {
  // Row r of the first 32 goes to 16-byte row r; rows 32..63 sit 4 bytes further along.
  std::vector<std::uint8_t> compact(128 * 4);
  std::iota(compact.begin(), compact.end(), 0);
  const auto s = swizzle_128x4(compact, 128, 4);
  ASSERT_EQ(s.bytes().size(), 512u);
  EXPECT_EQ(s.bytes()[0], compact[0]);                       // (0,0)
  EXPECT_EQ(s.bytes()[3], compact[3]);                       // (0,3)
  EXPECT_EQ(s.bytes()[4], compact[32 * 4]);                  // (32,0)
  EXPECT_EQ(s.bytes()[12], compact[96 * 4]);                 // (96,0)
  EXPECT_EQ(s.bytes()[16], compact[1 * 4]);                  // (1,0)
  EXPECT_EQ(s.bytes()[16 * 31 + 15], compact[127 * 4 + 3]);  // (127,3)
}

TEST(Swizzle128x4, PadsWithZerosAndRoundTrips) {
  for (auto [rows, cols] : {std::pair<index_t, index_t>{1, 1}, {7, 3}, {129, 5}, {300, 20}, {0, 0}}) {
    std::vector<std::uint8_t> compact(static_cast<std::size_t>(rows * cols));
    for (std::size_t i = 0; i < compact.size(); ++i) compact[i] = static_cast<std::uint8_t>(1 + i % 250);
    const auto s = swizzle_128x4(compact, rows, cols);
    EXPECT_EQ(static_cast<index_t>(s.bytes().size()), s.padded_rows() * s.padded_cols());
    const auto nonzero = std::count_if(s.bytes().begin(), s.bytes().end(), [](auto b) { return b != 0; });
    EXPECT_EQ(nonzero, rows * cols) << rows << "x" << cols;
    EXPECT_EQ(unswizzle_128x4(s), compact);
  }
}

TEST(Swizzle128x4, OfAQuantizedTensorPlacesEachBlockScaleByTheFormula) {
  std::vector<float> x(130 * 80);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) - 50.0f;
  const auto q = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), 130, 80));
  const auto s = swizzle_128x4(q);
  EXPECT_EQ(s.rows(), 130);
  EXPECT_EQ(s.cols(), 5);
  EXPECT_EQ(s.padded_rows(), 256);
  EXPECT_EQ(s.padded_cols(), 8);
  for (index_t r = 0; r < 130; ++r)
    for (index_t c = 0; c < 5; ++c) EXPECT_EQ(s.bytes()[static_cast<std::size_t>(swizzled_offset_128x4(r, c, 5))], q.scale(r, c).bits());
}

TEST(Swizzle128x4, RejectsAByteCountThatDoesNotMatchTheShape) {
  std::vector<std::uint8_t> compact(10);
  EXPECT_THROW(swizzle_128x4(compact, 3, 4), error);
  try {
    swizzle_128x4(compact, 3, 4);
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::shape_mismatch);
  }
}

TEST(Swizzle128x4, ConstructorRejectsBytesThatDoNotFillThePaddedTiles) {
  // A 130x5 scale matrix pads to 256x8: 2048 bytes, no fewer, no more.
  EXPECT_NO_THROW(swizzled_scales(130, 5, std::vector<std::uint8_t>(2048)));
  for (std::size_t n : {std::size_t{0}, std::size_t{650}, std::size_t{2047}, std::size_t{2049}}) {
    try {
      swizzled_scales(130, 5, std::vector<std::uint8_t>(n));
      ADD_FAILURE() << n << " bytes accepted";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::shape_mismatch) << n;
    }
  }
  EXPECT_THROW(swizzled_scales(-1, 4, {}), error);
}

TEST(Swizzle128x4, EmptyShapesReturnAtOnceAndHugeOnesAreRefused) {
  const index_t huge = max_element_count;
  // 2^40 rows of no scale columns: nothing to move, and no loop over the rows.
  const swizzled_scales empty_rows{huge, 0, {}};
  EXPECT_TRUE(unswizzle_128x4(empty_rows).empty());
  EXPECT_TRUE(unswizzle_128x4(swizzled_scales{0, huge, {}}).empty());
  const auto swizzled = swizzle_128x4(std::span<const std::uint8_t>(), huge, 0);
  EXPECT_EQ(swizzled.rows(), huge);
  EXPECT_TRUE(swizzled.bytes().empty());
  auto code_of = [](auto&& call) {
    try {
      call();
    } catch (const error& e) {
      return e.code();
    }
    return errc{};
  };
  EXPECT_EQ(code_of([&] { swizzled_scales(huge, huge, {}); }), errc::invalid_argument);
  EXPECT_EQ(code_of([&] { swizzled_scales(-4, 4, {}); }), errc::invalid_argument);
  EXPECT_EQ(code_of([&] { swizzled_scales(2 * huge, 0, {}); }), errc::invalid_argument);
  EXPECT_EQ(code_of([&] { (void)swizzle_128x4(std::span<const std::uint8_t>(), std::numeric_limits<index_t>::max(), 0); }),
            errc::invalid_argument);
  EXPECT_EQ(code_of([&] { swizzled_scales(1, 1, {}); }), errc::shape_mismatch);
}

}  // namespace scaling_layout_test
}  // namespace
}  // namespace nvfp4
