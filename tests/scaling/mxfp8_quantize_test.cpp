// Tests of nvfp4/scaling/mxfp8_quantize.hpp: TE's round-up E8M0 rule on hand-worked values
// (powers of two, just above, subnormals, saturation, specials), the block scale as a product with
// the rounded reciprocal, elements by the exact reciprocal, both copies from the high-precision
// tensor, fast == reference on every ISA build (rows, and the columnwise copies' walk across
// lanes, at 1 and 2 threads), bad input.
// NVFP4_TEST_ALL_ISAS
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <string>
#include <random>
#include <vector>

#include "nvfp4/scaling/mxfp8_quantize.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {

template <class Format>
bool same(const quantized_tensor<Format>& a, const quantized_tensor<Format>& b) {
  const auto* da = reinterpret_cast<const std::uint8_t*>(a.data().data());
  const auto* db = reinterpret_cast<const std::uint8_t*>(b.data().data());
  return a.rows() == b.rows() && a.cols() == b.cols() && std::equal(da, da + a.data().size(), db) &&
         std::equal(a.scales().begin(), a.scales().end(), b.scales().begin());
}

TEST(Mxfp8Quantize, RoundUpE8m0) {
  EXPECT_EQ(e8m0_round_up(1.0f).bits(), 127);
  EXPECT_EQ(e8m0_round_up(std::nextafter(1.0f, 2.0f)).bits(), 128);  // any mantissa bit rounds up
  EXPECT_EQ(e8m0_round_up(1.5f).bits(), 128);
  EXPECT_EQ(e8m0_round_up(0.75f).bits(), 127);
  EXPECT_EQ(e8m0_round_up(0.0f).bits(), 0);
  EXPECT_EQ(e8m0_round_up(std::nanf("")).bits(), 0xFF);
  EXPECT_EQ(e8m0_round_up(INFINITY).bits(), 0xFE);
  EXPECT_EQ(e8m0_round_up(std::ldexp(1.5f, 127)).bits(), 0xFE);       // saturates at 2^127
  EXPECT_EQ(e8m0_round_up(std::ldexp(1.0f, -127)).bits(), 0);         // subnormal 2^-127 exactly
  EXPECT_EQ(e8m0_round_up(std::ldexp(1.0f, -130)).bits(), 0);         // below: 2^-127
  EXPECT_EQ(e8m0_round_up(std::ldexp(1.5f, -127)).bits(), 1);         // above 2^-127: 2^-126
  EXPECT_EQ(e8m0_round_up(std::ldexp(1.0f, -126)).bits(), 1);
}

TEST(Mxfp8Quantize, BlockScaleAndElementsByHand) {
  // Block amax 448 -> 448 * fp32(1/448) = 1 exactly -> 2^0; amax 449 -> 2^1; amax 1 -> 2^-8
  // (1/448 = 1.14 * 2^-9, rounded up).
  EXPECT_EQ(mxfp8_te_block_scale<mxfp8>(448.0f).bits(), 127);
  EXPECT_EQ(mxfp8_te_block_scale<mxfp8>(449.0f).bits(), 128);
  EXPECT_EQ(mxfp8_te_block_scale<mxfp8>(1.0f).bits(), 127 - 8);
  EXPECT_EQ(mxfp8_te_block_scale<mxfp8_e5m2>(57344.0f).bits(), 127);
  EXPECT_EQ(mxfp8_te_encode_factor(e8m0::from_bits(254)), std::ldexp(1.0f, -127));
  EXPECT_EQ(mxfp8_te_encode_factor(e8m0::from_bits(0)), std::ldexp(1.0f, 127));
  // One row of 40: block 0 holds 1 and 3 (amax 3 -> 3/448 -> 2^-7), block 1 holds 0.25 only.
  std::vector<float> x(40, 0.0f);
  x[0] = 1.0f;
  x[1] = -3.0f;
  x[35] = 0.25f;
  const auto q = quantize_mxfp8_te<mxfp8>(matrix_view<const float>::row_major(x.data(), 1, 40));
  ASSERT_EQ(q.scale_cols(), 2);
  EXPECT_EQ(q.scale(0, 0).bits(), 127 - 7);
  EXPECT_EQ(q.scale(0, 1).bits(), 127 - 10);  // 0.25 / 448 = 1.14 * 2^-11 -> 2^-10
  EXPECT_EQ(q.element(0, 0).to_float(), 128.0f);
  EXPECT_EQ(q.element(0, 1).to_float(), -384.0f);
  EXPECT_EQ(q.element(0, 35).to_float(), 256.0f);
  EXPECT_EQ(q.element(0, 2).bits(), 0);
}

TEST(Mxfp8Quantize, CopiesFromTheHighPrecisionTensor) {
  std::mt19937 gen(3);
  std::normal_distribution<float> normal;
  std::vector<float> x(64 * 96);
  for (auto& v : x) v = normal(gen);
  const auto v = matrix_view<const float>::row_major(x.data(), 64, 96);
  const auto col = quantize_mxfp8_te<mxfp8>(v.transposed(), quantized_axis::columnwise);
  EXPECT_EQ(col.rows(), 96);
  EXPECT_EQ(col.axis(), quantized_axis::columnwise);
  // Each columnwise block is 32 consecutive rows of one column, scaled by its own amax.
  for (index_t c = 0; c < 96; ++c)
    for (index_t b = 0; b < 2; ++b) {
      float m = 0.0f;
      for (index_t r = 32 * b; r < 32 * b + 32; ++r) m = std::max(m, std::fabs(v(r, c)));
      ASSERT_EQ(col.scale(c, b).bits(), mxfp8_te_block_scale<mxfp8>(m).bits());
    }
}

/// Random magnitudes over a wide range, with a block of zeros, blocks at float's extremes (near
/// the largest bf16, subnormal) and values whose block scale sits at the round-up rule's edges.
std::vector<float> mxfp8_test_values(index_t rows, index_t cols, unsigned seed) {
  std::mt19937 gen{seed};
  std::lognormal_distribution<float> wide(0.0f, 4.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (auto& v : x) v = (gen() & 1 ? -1.0f : 1.0f) * wide(gen);
  const float edges[] = {0.0f, std::numeric_limits<float>::denorm_min(), std::ldexp(1.0f, -127) * 448.0f,
                         std::nextafter(std::ldexp(1.0f, -127) * 448.0f, 1.0f), std::ldexp(1.0f, -126), std::bit_cast<float>(0x7F7F0000u) /* bf16's largest */, 448.0f, 449.0f,
                         57344.0f, 1.0f};
  for (std::size_t i = 0; i + 1 < x.size(); i += 97) x[i] = (i % 2 ? -1.0f : 1.0f) * edges[(i / 97) % std::size(edges)];
  for (std::size_t i = 0; i < x.size() / 7; ++i) x[i * 7 % x.size()] = 0.0f;  // sparse zeros; some blocks all zero below
  for (index_t c = 0; c < std::min<index_t>(cols, 40); ++c) x[static_cast<std::size_t>(c)] = 0.0f;
  return x;
}

TEST(Mxfp8Quantize, FastEqualsReference) {
  // Shapes around the row kernel's partial block and the columnwise walk (scaling/detail/
  // column_bands.hpp): 1100 x 70's copy has two groups of bands and view rows past the last
  // vector; 40 x 300's, two chunks of view rows and a partial block; 5 x 33, no whole block.
  for (auto [rows, cols] : {std::pair<index_t, index_t>{5, 33}, {130, 100}, {260, 300}, {1100, 70}, {40, 300}, {64, 64}}) {
    const std::vector<float> x = mxfp8_test_values(rows, cols, static_cast<unsigned>(rows * 7 + cols));
    std::vector<bf16> xb;
    for (float f : x) xb.push_back(bf16::from_float(f));
    const auto v = matrix_view<const float>::row_major(x.data(), rows, cols);
    const auto vb = matrix_view<const bf16>::row_major(xb.data(), rows, cols);
    for (int threads : {1, 2}) {
      test::set_threads(threads);
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + ", threads " + std::to_string(threads));
      EXPECT_TRUE(same(quantize_mxfp8_te<mxfp8>(v), reference::quantize_mxfp8_te<mxfp8>(v)));
      EXPECT_TRUE(same(quantize_mxfp8_te<mxfp8>(v.transposed()), reference::quantize_mxfp8_te<mxfp8>(v.transposed())));
      EXPECT_TRUE(same(quantize_mxfp8_te<mxfp8_e5m2>(v.transposed()), reference::quantize_mxfp8_te<mxfp8_e5m2>(v.transposed())));
      EXPECT_TRUE(same(quantize_mxfp8_te<mxfp8>(vb), reference::quantize_mxfp8_te<mxfp8>(vb)));
      EXPECT_TRUE(same(quantize_mxfp8_te<mxfp8>(vb.transposed()), reference::quantize_mxfp8_te<mxfp8>(vb.transposed())));
      EXPECT_TRUE(same(quantize_mxfp8_te<mxfp8_e5m2>(vb.transposed()), reference::quantize_mxfp8_te<mxfp8_e5m2>(vb.transposed())));
    }
  }
  test::set_threads(2);
}

TEST(Mxfp8Quantize, BadInput) {
  std::vector<float> x(32, 1.0f);
  x[3] = INFINITY;
  EXPECT_THROW(quantize_mxfp8_te<mxfp8>(matrix_view<const float>::row_major(x.data(), 1, 32)), non_finite_error);
  EXPECT_THROW(quantize_mxfp8_te<mxfp8>(matrix_view<const float>(nullptr, 2, 2, 2, 1)), error);
}

}  // namespace
}  // namespace nvfp4
