// Tests for nvfp4/interop/eigen.hpp: every Eigen storage order and stride quantizes exactly like
// the same values in a plain row-major buffer; bf16 in and out.
#include "nvfp4/interop/eigen.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <type_traits>
#include <utility>

namespace nvfp4 {
namespace {
namespace interop_eigen_test {

eigen::row_major_matrix_f32 random_matrix(index_t rows, index_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  eigen::row_major_matrix_f32 m(rows, cols);
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c) m(r, c) = normal(rng);
  return m;
}

template <class Format>
void expect_same(const quantized_tensor<Format>& a, const quantized_tensor<Format>& b) {
  ASSERT_EQ(a.rows(), b.rows());
  ASSERT_EQ(a.cols(), b.cols());
  EXPECT_TRUE(std::equal(a.data().begin(), a.data().end(), b.data().begin()));
  EXPECT_TRUE(std::equal(a.scales().begin(), a.scales().end(), b.scales().begin()));
  EXPECT_EQ(a.amax(), b.amax());
}

TEST(EigenInterop, EveryLayoutQuantizesLikeTheRowMajorBuffer) {
  const eigen::row_major_matrix_f32 x = random_matrix(40, 48, 1);
  const auto expected = nvfp4::quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), 40, 48));

  const Eigen::MatrixXf column_major = x;
  expect_same(eigen::quantize<nvfp4_1x16>(column_major), expected);
  expect_same(eigen::quantize<nvfp4_1x16>(Eigen::Map<const eigen::row_major_matrix_f32>(x.data(), 40, 48)), expected);
  const Eigen::Ref<const Eigen::MatrixXf> ref = column_major;
  expect_same(eigen::quantize<nvfp4_1x16>(ref), expected);
  // A block of a bigger matrix: strided rows.
  eigen::row_major_matrix_f32 bigger = eigen::row_major_matrix_f32::Zero(50, 64);
  bigger.block(3, 5, 40, 48) = x;
  expect_same(eigen::quantize<nvfp4_1x16>(bigger.block(3, 5, 40, 48)), expected);
  // An expression without direct access is evaluated first.
  expect_same(eigen::quantize<nvfp4_1x16>(x * 1.0f), expected);
}

TEST(EigenInterop, TransposedExpressionGivesTheColumnwiseCopy) {
  const eigen::row_major_matrix_f32 x = random_matrix(32, 64, 2);
  const auto pair = eigen::quantize_rowwise_and_columnwise<nvfp4_1x16>(x);
  const eigen::row_major_matrix_f32 xt = x.transpose();
  const auto columnwise =
      nvfp4::quantize_with_amax<nvfp4_1x16>(matrix_view<const float>::row_major(xt.data(), 64, 32), pair.rowwise.amax());
  EXPECT_EQ(pair.columnwise.rows(), 64);
  EXPECT_TRUE(std::equal(columnwise.data().begin(), columnwise.data().end(), pair.columnwise.data().begin()));
}

TEST(EigenInterop, Bfloat16InAndOut) {
  const eigen::row_major_matrix_f32 x = random_matrix(16, 32, 3);
  const eigen::row_major_matrix_bf16 xb = x.cast<Eigen::bfloat16>();
  const eigen::row_major_matrix_f32 widened = xb.cast<float>();
  expect_same(eigen::quantize<nvfp4_1x16>(xb), eigen::quantize<nvfp4_1x16>(widened));

  const auto q = eigen::quantize<mxfp8>(xb);
  const eigen::row_major_matrix_f32 back = eigen::dequantize(q);
  const eigen::row_major_matrix_bf16 back_bf16 = eigen::dequantize_bf16(q);
  ASSERT_EQ(back.rows(), 16);
  for (index_t r = 0; r < 16; ++r)
    for (index_t c = 0; c < 32; ++c) EXPECT_EQ(static_cast<float>(back_bf16(r, c)), static_cast<float>(Eigen::bfloat16(back(r, c))));
}

TEST(EigenInterop, DequantizeMatchesTheCoreCall) {
  const eigen::row_major_matrix_f32 x = random_matrix(17, 33, 4);
  const auto q = eigen::quantize<nvfp4_16x16>(x);
  const auto core = nvfp4::dequantize(q);
  const eigen::row_major_matrix_f32 m = eigen::dequantize(q);
  EXPECT_TRUE(std::equal(core.begin(), core.end(), m.data()));
}

TEST(EigenInterop, DequantizeReturnsARowMajorMatrixByItsTypeName) {
  static_assert(eigen::row_major_matrix_f32::IsRowMajor);
  static_assert(eigen::row_major_matrix_bf16::IsRowMajor);
  static_assert(std::is_same_v<decltype(eigen::dequantize(std::declval<const nvfp4_tensor&>())), eigen::row_major_matrix_f32>);
}

TEST(EigenInterop, CompareMatchesElementsByPositionWhateverTheLayouts) {
  // x and y differ in one element by a known amount, so the metrics are known by hand:
  // x = 1 everywhere (6x8 = 48 elements), y(2, 5) = 1.5 -> MSE = 0.25 / 48, max |err| 0.5,
  // SQNR = 10 log10(Σ reference² / 0.25): 48 with x as the reference, 47 + 2.25 with y.
  const Eigen::MatrixXf x = Eigen::MatrixXf::Ones(6, 8);  // column-major
  eigen::row_major_matrix_f32 y = eigen::row_major_matrix_f32::Ones(6, 8);
  y(2, 5) = 1.5f;
  const double x_ref = 10.0 * std::log10(48.0 / 0.25), y_ref = 10.0 * std::log10(49.25 / 0.25);
  const std::pair<error_report, double> cases[] = {
      {eigen::compare(x, y), x_ref},
      {eigen::compare(x, y * 1.0f), x_ref},  // an expression
      {eigen::compare(y.cast<Eigen::bfloat16>().eval(), x), y_ref},
      {eigen::compare(Eigen::MatrixXf(y), x), y_ref},
  };
  for (const auto& [e, expected_sqnr] : cases) {
    EXPECT_DOUBLE_EQ(e.mse, 0.25 / 48);
    EXPECT_DOUBLE_EQ(e.max_abs_error, 0.5);
    EXPECT_NEAR(e.sqnr_db, expected_sqnr, 1e-12);
  }
  // The raw buffers of the two layouts put y(2, 5) at different offsets: comparing .data() is
  // what eigen::compare avoids. A strided block compares its own elements only.
  eigen::row_major_matrix_f32 big = eigen::row_major_matrix_f32::Zero(10, 12);
  big.block(1, 2, 6, 8) = y;
  const error_report block = eigen::compare(x, big.block(1, 2, 6, 8));
  EXPECT_DOUBLE_EQ(block.max_abs_error, 0.5);
  EXPECT_DOUBLE_EQ(block.mse, 0.25 / 48);
}

TEST(EigenInterop, CompareRejectsDifferentShapes) {
  try {
    eigen::compare(Eigen::MatrixXf::Zero(4, 6), Eigen::MatrixXf::Zero(6, 4));
    ADD_FAILURE() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::shape_mismatch);
    EXPECT_NE(std::string(e.what()).find("4x6"), std::string::npos) << e.what();
  }
}

// Only float and bfloat16 are accepted: other scalars do not compile (checked as a concept-like
// trait rather than a failing build).
static_assert(eigen::detail::supported_scalar<float>);
static_assert(eigen::detail::supported_scalar<Eigen::bfloat16>);
static_assert(!eigen::detail::supported_scalar<double>);
static_assert(!eigen::detail::supported_scalar<Eigen::half>);

}  // namespace interop_eigen_test
}  // namespace
}  // namespace nvfp4
