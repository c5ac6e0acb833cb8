// Tests for nvfp4/metrics/error_metrics.hpp against values worked out by hand.
#include "nvfp4/metrics/error_metrics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace nvfp4 {
namespace {
namespace metrics_error_metrics_test {

TEST(ErrorMetrics, HandComputedExample) {
  // errors: 0, 0.5, -1, 0 -> noise 1.25, signal 1+4+16+0 = 21.
  const std::vector<float> x = {1, 2, 4, 0};
  const std::vector<float> y = {1, 2.5f, 3, 0};
  const auto r = compare(x, y);
  EXPECT_DOUBLE_EQ(r.mse, 1.25 / 4);
  EXPECT_DOUBLE_EQ(r.rmse, std::sqrt(1.25 / 4));
  EXPECT_DOUBLE_EQ(r.sqnr_db, 10 * std::log10(21 / 1.25));
  EXPECT_DOUBLE_EQ(r.max_abs_error, 1.0);
  EXPECT_DOUBLE_EQ(r.max_rel_error, 0.25);  // 0.5/2 and 1/4 tie; the zero reference is skipped
  // <x,y> = 1 + 5 + 12 = 18; |y|^2 = 1 + 6.25 + 9 = 16.25.
  EXPECT_DOUBLE_EQ(r.cosine_similarity, 18 / std::sqrt(21 * 16.25));
  EXPECT_DOUBLE_EQ(mse(x, y), r.mse);
  EXPECT_DOUBLE_EQ(sqnr_db(x, y), r.sqnr_db);
  EXPECT_DOUBLE_EQ(max_rel_error(x, y), r.max_rel_error);
  EXPECT_DOUBLE_EQ(cosine_similarity(x, y), r.cosine_similarity);
}

TEST(ErrorMetrics, ExactCopyHasInfiniteSqnr) {
  const std::vector<float> x = {3, -1, 0.5f};
  const auto r = compare(x, x);
  EXPECT_EQ(r.mse, 0.0);
  EXPECT_TRUE(std::isinf(r.sqnr_db) && r.sqnr_db > 0);
  EXPECT_DOUBLE_EQ(r.cosine_similarity, 1.0);
}

TEST(ErrorMetrics, OppositeVectorsHaveCosineMinusOne) {
  const std::vector<float> x = {1, 2}, y = {-1, -2};
  EXPECT_DOUBLE_EQ(cosine_similarity(x, y), -1.0);
}

TEST(ErrorMetrics, EmptyInputsAreDefined) {
  const auto r = compare({}, {});
  EXPECT_EQ(r.mse, 0.0);
  EXPECT_DOUBLE_EQ(r.cosine_similarity, 1.0);
}

TEST(ErrorMetrics, LengthMismatchIsAShapeError) {
  const std::vector<float> x = {1, 2}, y = {1};
  try {
    compare(x, y);
    FAIL() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::shape_mismatch);
  }
}

TEST(ErrorMetrics, NanPropagates) {
  // std::max dropped NaN: compare(x, all-NaN) reported max_abs_error 0 (issue 34).
  const std::vector<float> x = {1, 2, 3}, nan(3, NAN), one_nan = {1, NAN, 3};
  for (const auto& y : {nan, one_nan}) {
    const auto r = compare(x, y);
    EXPECT_TRUE(std::isnan(r.max_abs_error));
    EXPECT_TRUE(std::isnan(r.max_rel_error));
    EXPECT_TRUE(std::isnan(r.mse));
    EXPECT_TRUE(std::isnan(r.sqnr_db));
  }
  EXPECT_TRUE(std::isnan(compare(nan, x).max_abs_error));
}

}  // namespace metrics_error_metrics_test
}  // namespace
}  // namespace nvfp4
