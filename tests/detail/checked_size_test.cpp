// Tests for nvfp4/detail/checked_size.hpp: the bounded products and sums, and the element count
// of a shape checked against nvfp4::max_element_count (hand-worked values at every edge).
#include "nvfp4/detail/checked_size.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace nvfp4 {
namespace {
namespace detail_checked_size_test {

constexpr index_t max_index = std::numeric_limits<index_t>::max();
constexpr index_t limit = max_element_count;

static_assert(limit == index_t{1099511627776});  // 2^40, as docs/errors.md states
static_assert(detail::bounded_product(0, max_index) == 0);
static_assert(detail::bounded_product(limit, 1) == limit);
static_assert(detail::bounded_product(limit, 2) == -1);
static_assert(detail::bounded_product(index_t{1} << 20, index_t{1} << 20) == limit);
static_assert(detail::bounded_product((index_t{1} << 20) + 1, index_t{1} << 20) == -1);
static_assert(detail::bounded_product(max_index, max_index, max_index) == -1);
static_assert(detail::bounded_product(-1, 0) == -1);
static_assert(detail::bounded_sum(limit - 1, 1) == limit);
static_assert(detail::bounded_sum(limit, 1) == -1);
static_assert(detail::bounded_sum(max_index, max_index, max_index) == -1);
static_assert(detail::bounded_sum(3, -1) == -1);

struct outcome {
  index_t count = -1;
  errc code{};
  std::string what;
};

outcome count_of(std::vector<std::int64_t> shape) {
  outcome o;
  try {
    o.count = detail::checked_element_count(shape, errc::malformed_file, "x.npy");
  } catch (const error& e) {
    o.code = e.code();
    o.what = e.what();
  }
  return o;
}

TEST(CheckedElementCount, CountsShapesUpToTheLimit) {
  EXPECT_EQ(count_of({}).count, 1);  // a scalar
  EXPECT_EQ(count_of({3, 5, 7}).count, 105);
  EXPECT_EQ(count_of({limit}).count, limit);
  EXPECT_EQ(count_of({index_t{1} << 20, index_t{1} << 20}).count, limit);
  EXPECT_EQ(count_of({limit, 0}).count, 0);
  EXPECT_EQ(count_of({0, limit, 1}).count, 0);
}

TEST(CheckedElementCount, RefusesNegativeHugeAndOverflowingShapesWithTheCallersCode) {
  const auto negative = count_of({4, -1});
  EXPECT_EQ(negative.code, errc::malformed_file);
  EXPECT_NE(negative.what.find("x.npy: shape [4, -1] has a negative dimension"), std::string::npos) << negative.what;
  // One dimension above the limit, even beside a zero one (its loops would still run).
  const auto huge = count_of({index_t{1} << 51, 0});
  EXPECT_EQ(huge.code, errc::malformed_file);
  EXPECT_NE(huge.what.find("dimension 2251799813685248"), std::string::npos) << huge.what;
  // The non-zero dimensions' product above the limit, even when the whole product is 0: an
  // N-D array seen as a matrix has that many rows.
  EXPECT_EQ(count_of({limit, 2, 0}).code, errc::malformed_file);
  EXPECT_EQ(count_of({(index_t{1} << 20) + 1, index_t{1} << 20}).code, errc::malformed_file);
  // Products that would wrap around int64 are caught, not computed.
  EXPECT_EQ(count_of({index_t{1} << 32, index_t{1} << 32}).code, errc::malformed_file);
  EXPECT_EQ(count_of({max_index, max_index}).code, errc::malformed_file);
  try {
    (void)detail::checked_element_count(3, -4, errc::invalid_argument, "quantize input");
    ADD_FAILURE() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_EQ(std::string(e.what()), "nvfp4: quantize input: shape [3, -4] has a negative dimension");
  }
}

}  // namespace detail_checked_size_test
}  // namespace
}  // namespace nvfp4
