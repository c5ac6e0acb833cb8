// Tests for nvfp4/scaling/reference.hpp (and the checks of the public entry points in
// quantize.hpp): hand-worked examples of docs/numerics_spec.md §2 and §7, properties, and bad input.
#include "nvfp4/scaling/reference.hpp"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>

#include "nvfp4/scaling/quantize.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace scaling_reference_test {

std::vector<float> random_values(index_t n, unsigned seed, float sigma = 1.0f) { return test::random_values(n, seed, {.sigma = sigma}); }

matrix_view<const float> view_of(const std::vector<float>& v, index_t rows, index_t cols) {
  return matrix_view<const float>::row_major(v.data(), rows, cols);
}

TEST(Nvfp4Reference, HandWorkedBlocks) {
  // Tensor amax 2688 makes S_enc = S_dec = 1 exactly. Block 0 (amax 2688): d = 2688 * RN(1/6) =
  // 448.00001 -> UE4M3 448 (0x7E). Block 1 (amax 12): d = 12 * RN(1/6) = 2.0000001 -> 2 (0x40),
  // factor 1/2: 12 -> 6, 5 -> 2.5 -> tie -> 2, 1 -> 0.5, -3 -> -1.5. Block 2 is all zero: scale
  // 0, factor 1/0 -> FLT_MAX, codes 0.
  std::vector<float> x(48, 0.0f);
  x[0] = 2688.0f;
  x[16] = 12.0f;
  x[17] = 5.0f;
  x[18] = 1.0f;
  x[19] = -3.0f;
  const auto q = reference::quantize<nvfp4_1x16>(view_of(x, 1, 48));
  EXPECT_EQ(q.amax(), 2688.0f);
  EXPECT_EQ(q.encode_scale(), 1.0f);
  EXPECT_EQ(q.decode_scale(), 1.0f);
  EXPECT_EQ(q.scale(0, 0).bits(), 0x7E);
  EXPECT_EQ(q.scale(0, 1).bits(), 0x40);
  EXPECT_EQ(q.scale(0, 2).bits(), 0x00);
  EXPECT_EQ(q.element(0, 0).to_float(), 6.0f);
  EXPECT_EQ(q.element(0, 16).to_float(), 6.0f);
  EXPECT_EQ(q.element(0, 17).to_float(), 2.0f);
  EXPECT_EQ(q.element(0, 18).to_float(), 0.5f);
  EXPECT_EQ(q.element(0, 19).bits(), 0xB);  // -1.5
  for (index_t c = 32; c < 48; ++c) EXPECT_EQ(q.element(0, c).bits(), 0);
  EXPECT_EQ(nvfp4_block_encode_factor(ue4m3::from_bits(0), 1.0f), FLT_MAX);
}

TEST(Nvfp4Reference, TensorScaleRule) {
  EXPECT_EQ(nvfp4_tensor_scale(0.0f).encode, 1.0f);  // amax 0 -> 1
  EXPECT_EQ(nvfp4_tensor_scale(2688.0f).encode, 1.0f);
  EXPECT_EQ(nvfp4_tensor_scale(1e-45f).encode, FLT_MAX);  // 2688 / tiny overflows -> clamped
  EXPECT_EQ(nvfp4_tensor_scale(FLT_MAX).encode, 2688.0f / FLT_MAX);
  const auto s = nvfp4_tensor_scale(3.0f);
  EXPECT_EQ(s.encode, 896.0f);
  EXPECT_EQ(s.decode, 1.0f / 896.0f);
}

TEST(Nvfp4Reference, TensorScaleRuleOnRunTimeValues) {
  // The same rule on values the compiler cannot see: GCC 13.3 at -O1+ once turned every
  // overflowing quotient (amax < 2688 / FLT_MAX) into encode = 1 (see nvfp4_tensor_scale).
  volatile float tiny_amaxes[] = {0x1.08p-123f, 1e-38f, 1e-45f, 7.8e-36f};
  for (const float amax : tiny_amaxes) {
    const tensor_scale s = nvfp4_tensor_scale(amax);
    EXPECT_EQ(s.encode, FLT_MAX) << amax;
    EXPECT_EQ(s.decode, 1.0f / FLT_MAX) << amax;
  }
  volatile float zero = 0.0f, exact = 2688.0f;
  EXPECT_EQ(nvfp4_tensor_scale(zero).encode, 1.0f);
  EXPECT_EQ(nvfp4_tensor_scale(zero).decode, 1.0f);
  EXPECT_EQ(nvfp4_tensor_scale(exact).encode, 1.0f);
}

TEST(MxReference, OcpAndTransformerEngineScaleRules) {
  // amax 5: OCP 2^(floor(log2 5) - 2) = 1; TE 2^ceil(log2(5/6)) = 1.
  EXPECT_EQ(mx_block_scale<e2m1>(5.0f, mx_scale_rule::ocp_floor).to_float(), 1.0f);
  EXPECT_EQ(mx_block_scale<e2m1>(5.0f, mx_scale_rule::te_ceil).to_float(), 1.0f);
  // amax 7: OCP keeps 1 (7 clips to 6); TE picks 2 (7/2 = 3.5 fits).
  EXPECT_EQ(mx_block_scale<e2m1>(7.0f, mx_scale_rule::ocp_floor).to_float(), 1.0f);
  EXPECT_EQ(mx_block_scale<e2m1>(7.0f, mx_scale_rule::te_ceil).to_float(), 2.0f);
  // amax 6 exactly: TE's ratio is 1, a power of two: 2^0.
  EXPECT_EQ(mx_block_scale<e2m1>(6.0f, mx_scale_rule::te_ceil).to_float(), 1.0f);
  // E4M3 elements: emax 8. amax 500 -> OCP 2^0, TE 2^ceil(log2(500/448)) = 2.
  EXPECT_EQ(mx_block_scale<e4m3>(500.0f, mx_scale_rule::ocp_floor).to_float(), 1.0f);
  EXPECT_EQ(mx_block_scale<e4m3>(500.0f, mx_scale_rule::te_ceil).to_float(), 2.0f);
  // Zero block -> smallest scale; huge and tiny amax clamp to the E8M0 range.
  EXPECT_EQ(mx_block_scale<e2m1>(0.0f, mx_scale_rule::ocp_floor).bits(), 0);
  EXPECT_EQ(mx_block_scale<e2m1>(FLT_MAX, mx_scale_rule::ocp_floor).exponent(), 125);
  EXPECT_EQ(mx_block_scale<e2m1>(1e-45f, mx_scale_rule::ocp_floor).bits(), 0);
}

TEST(MxReference, HandWorkedBlock) {
  std::vector<float> x(32, 0.0f);
  x[0] = 7.0f;
  x[1] = 5.0f;
  x[2] = -0.75f;
  const auto ocp = reference::quantize<mxfp4>(view_of(x, 1, 32));
  EXPECT_EQ(ocp.scale(0, 0).to_float(), 1.0f);
  EXPECT_EQ(ocp.element(0, 0).to_float(), 6.0f);   // clipped
  EXPECT_EQ(ocp.element(0, 1).to_float(), 4.0f);   // tie 4|6 -> even
  EXPECT_EQ(ocp.element(0, 2).to_float(), -1.0f);  // tie 0.5|1 -> even
  const auto te = reference::quantize<mxfp4>(view_of(x, 1, 32), {.mx_rule = mx_scale_rule::te_ceil});
  EXPECT_EQ(te.scale(0, 0).to_float(), 2.0f);
  EXPECT_EQ(te.element(0, 0).to_float(), 4.0f);   // 3.5 -> tie -> 4
  EXPECT_EQ(te.element(0, 1).to_float(), 2.0f);   // 2.5 -> 2
  EXPECT_EQ(te.element(0, 2).to_float(), -0.5f);  // -0.375 -> -0.5
  EXPECT_EQ(te.encode_scale(), 1.0f);
}

template <class Format>
class ReferenceProperties : public ::testing::Test {};
using AllFormats = ::testing::Types<nvfp4_1x16, nvfp4_16x16, mxfp4, mxfp8>;
TYPED_TEST_SUITE(ReferenceProperties, AllFormats);

TYPED_TEST(ReferenceProperties, QuantizingTheDequantizedTensorGivesItBack) {
  const index_t rows = 48, cols = 96;
  const auto x = random_values(rows * cols, 7, 3.0f);
  const auto q = reference::quantize<TypeParam>(view_of(x, rows, cols));
  std::vector<float> y(x.size());
  reference::dequantize(q, matrix_view<float>::row_major(y.data(), rows, cols));
  const auto again = reference::quantize_with_amax<TypeParam>(view_of(y, rows, cols), q.amax());
  EXPECT_TRUE(std::equal(q.data().begin(), q.data().end(), again.data().begin()));
  EXPECT_TRUE(std::equal(q.scales().begin(), q.scales().end(), again.scales().begin()));
}

TYPED_TEST(ReferenceProperties, ShapesThatAreNotAMultipleOfTheBlockArePaddedWithZeros) {
  const index_t rows = 19, cols = 37;
  const index_t padded_rows = 32, padded_cols = 64;
  const auto x = random_values(rows * cols, 8);
  std::vector<float> padded(static_cast<std::size_t>(padded_rows * padded_cols), 0.0f);
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c) padded[static_cast<std::size_t>(r * padded_cols + c)] = x[static_cast<std::size_t>(r * cols + c)];
  const auto q = reference::quantize<TypeParam>(view_of(x, rows, cols));
  const auto qp = reference::quantize<TypeParam>(view_of(padded, padded_rows, padded_cols));
  EXPECT_EQ(q.scale_cols(), (cols + TypeParam::block_cols - 1) / TypeParam::block_cols);
  for (index_t r = 0; r < rows; ++r) {
    for (index_t c = 0; c < cols; ++c) EXPECT_EQ(q.element(r, c), qp.element(r, c));
    for (index_t b = 0; b < q.scale_cols(); ++b) EXPECT_EQ(q.scale(r, b), qp.scale(r, b));
  }
  if constexpr (TypeParam::is_fp4) {
    // The unused high nibble of a row of odd length is zero.
    EXPECT_EQ(q.data()[static_cast<std::size_t>(q.data_row_stride() - 1)].high().bits(), 0);
  }
}

TYPED_TEST(ReferenceProperties, ZeroSizedTensorsAreDefined) {
  for (auto [rows, cols] : {std::pair<index_t, index_t>{0, 0}, {0, 16}, {5, 0}}) {
    const auto q = nvfp4::quantize<TypeParam>(matrix_view<const float>(nullptr, rows, cols, cols, 1));
    EXPECT_EQ(q.rows(), rows);
    EXPECT_EQ(q.cols(), cols);
    EXPECT_TRUE(q.data().empty());
    EXPECT_EQ(q.amax(), 0.0f);
    EXPECT_EQ(q.encode_scale(), 1.0f);
    EXPECT_TRUE(nvfp4::dequantize(q).empty());
  }
}

TEST(Nvfp4Reference, BlockScalesGrowWithTheBlockAmax) {
  const float encode = nvfp4_tensor_scale(10.0f).encode;
  float previous = 0.0f;
  for (float amax = 1e-4f; amax <= 10.0f; amax *= 1.01f) {
    const float scale = nvfp4_block_scale(amax, encode).to_float();
    EXPECT_GE(scale, previous) << amax;
    previous = scale;
  }
}

TEST(Nvfp4Reference, TileScalingGivesTheTransposeForTheColumnwiseCopy) {
  const index_t rows = 48, cols = 80;
  const auto x = random_values(rows * cols, 9, 2.0f);
  const auto pair = nvfp4::quantize_rowwise_and_columnwise<nvfp4_16x16>(view_of(x, rows, cols));
  ASSERT_EQ(pair.columnwise.rows(), cols);
  EXPECT_EQ(pair.columnwise.axis(), quantized_axis::columnwise);
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c) {
      EXPECT_EQ(pair.rowwise.element(r, c), pair.columnwise.element(c, r));
      EXPECT_EQ(pair.rowwise.scale(r, c / 16), pair.columnwise.scale(c, r / 16));
    }
}

TEST(QuantizeErrors, NonFiniteInputIsReportedWithItsPosition) {
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    auto x = random_values(8 * 32, 10);
    x[3 * 32 + 5] = bad;
    x[6 * 32 + 1] = bad;  // a later one is not the one reported
    try {
      (void)nvfp4::quantize<nvfp4_1x16>(view_of(x, 8, 32));
      FAIL() << "no error for " << bad;
    } catch (const non_finite_error& e) {
      EXPECT_EQ(e.code(), errc::non_finite_input);
      EXPECT_EQ(e.row(), 3);
      EXPECT_EQ(e.col(), 5);
      EXPECT_NE(std::string(e.what()).find("(3, 5)"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)nvfp4::amax(view_of(x, 8, 32)), non_finite_error);
    EXPECT_THROW((void)nvfp4::quantize<mxfp8>(view_of(x, 8, 32)), non_finite_error);
  }
}

TEST(QuantizeErrors, NullAndNegativeShapes) {
  try {
    (void)nvfp4::quantize<nvfp4_1x16>(matrix_view<const float>(nullptr, 4, 16, 16, 1));
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::null_pointer);
  }
  std::vector<float> x(16);
  try {
    (void)nvfp4::quantize<nvfp4_1x16>(matrix_view<const float>(x.data(), -1, 16, 16, 1));
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
}

TEST(QuantizeErrors, DequantizeIntoTheWrongShape) {
  const auto x = random_values(32, 11);
  const auto q = nvfp4::quantize<nvfp4_1x16>(view_of(x, 2, 16));
  std::vector<float> out(32);
  try {
    nvfp4::dequantize(q, matrix_view<float>::row_major(out.data(), 1, 32));
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::shape_mismatch);
  }
  EXPECT_THROW(nvfp4::dequantize(q, matrix_view<float>(nullptr, 2, 16, 16, 1)), error);
}

TEST(QuantizeErrors, StochasticRoundingNeedsFp4Elements) {
  const auto x = random_values(32, 12);
  try {
    (void)nvfp4::quantize<mxfp8>(view_of(x, 1, 32), {.rounding = rounding_mode::stochastic});
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
  }
}

// A bf16/fp32 mix-up cannot compile: the quantizers take views of float or nvfp4::bf16 only, and
// a raw uint16_t buffer of bf16 bits is not a bf16 view.
template <class T>
concept quantizable = requires(matrix_view<const T> v) {
  nvfp4::quantize<nvfp4_1x16>(v);
};
static_assert(quantizable<float> && quantizable<bf16>);
static_assert(!quantizable<std::uint16_t> && !quantizable<double> && !quantizable<std::uint8_t>);

}  // namespace scaling_reference_test
}  // namespace
}  // namespace nvfp4
