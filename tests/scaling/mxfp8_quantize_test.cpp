// Tests of nvfp4/scaling/mxfp8_quantize.hpp: TE's round-up E8M0 rule on hand-worked values
// (powers of two, just above, subnormals, saturation, specials), the block scale as a product with
// the rounded reciprocal, elements by the exact reciprocal, both copies from the high-precision
// tensor, fast == reference on every ISA build (rows, and the columnwise copies' walk across
// lanes, at 1, 2 and 3 threads; both copies from one pass; kept tensors reused), bad input.
// NVFP4_TEST_ALL_ISAS
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "nvfp4/scaling/mxfp8_quantize.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace scaling_mxfp8_quantize_test {

template <class Format>
bool same(const quantized_tensor<Format>& a, const quantized_tensor<Format>& b) {
  const auto* da = reinterpret_cast<const std::uint8_t*>(a.data().data());
  const auto* db = reinterpret_cast<const std::uint8_t*>(b.data().data());
  return a.rows() == b.rows() && a.cols() == b.cols() && a.axis() == b.axis() && a.amax() == b.amax() &&
         a.encode_scale() == b.encode_scale() && a.decode_scale() == b.decode_scale() && a.data().size() == b.data().size() &&
         a.scales().size() == b.scales().size() && std::equal(da, da + a.data().size(), db) &&
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
  EXPECT_EQ(e8m0_round_up(std::ldexp(1.5f, 127)).bits(), 0xFE);  // saturates at 2^127
  EXPECT_EQ(e8m0_round_up(std::ldexp(1.0f, -127)).bits(), 0);    // subnormal 2^-127 exactly
  EXPECT_EQ(e8m0_round_up(std::ldexp(1.0f, -130)).bits(), 0);    // below: 2^-127
  EXPECT_EQ(e8m0_round_up(std::ldexp(1.5f, -127)).bits(), 1);    // above 2^-127: 2^-126
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
  const float edges[] = {0.0f,
                         std::numeric_limits<float>::denorm_min(),
                         std::ldexp(1.0f, -127) * 448.0f,
                         std::nextafter(std::ldexp(1.0f, -127) * 448.0f, 1.0f),
                         std::ldexp(1.0f, -126),
                         std::bit_cast<float>(0x7F7F0000u) /* bf16's largest */,
                         448.0f,
                         449.0f,
                         57344.0f,
                         1.0f};
  for (std::size_t i = 0; i + 1 < x.size(); i += 97) x[i] = (i % 2 ? -1.0f : 1.0f) * edges[(i / 97) % std::size(edges)];
  for (std::size_t i = 0; i < x.size() / 7; ++i) x[i * 7 % x.size()] = 0.0f;  // sparse zeros; some blocks all zero below
  for (index_t c = 0; c < std::min<index_t>(cols, 40); ++c) x[static_cast<std::size_t>(c)] = 0.0f;
  return x;
}

TEST(Mxfp8Quantize, FastEqualsReference) {
  // Shapes around the 32 x 128 source tiles (scaling/detail/mxfp8_tiles.hpp) and their partial
  // blocks: 1100 x 70's copy has ragged tiles both ways; 40 x 300's, a partial block and a tile
  // row of 8; 5 x 33, no whole block.
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

TEST(Mxfp8Quantize, BothCopiesInOnePassEqualTheTwoReferences) {
  // quantize_mxfp8_te_both_into(x) = quantize_mxfp8_te(x) and quantize_mxfp8_te(xᵀ): x row-major,
  // x with contiguous columns, a window of a wider buffer (rows 3 elements longer, 2 in), and x
  // with both strides above 1 (every other column of a buffer twice as wide: the path that
  // gathers), float and bf16, around the 32 x 128 tiles' edges, on 1, 2 and 3 threads.
  for (auto [rows, cols] : {std::pair<index_t, index_t>{1, 1}, {5, 33}, {31, 129}, {32, 128}, {70, 300}, {130, 100}}) {
    const std::vector<float> x = mxfp8_test_values(rows, cols, static_cast<unsigned>(rows + 13 * cols));
    std::vector<float> wide(2 * x.size()), padded(static_cast<std::size_t>(rows * (cols + 3) + 2));
    std::vector<bf16> xb;
    for (std::size_t i = 0; i < x.size(); ++i) wide[2 * i] = x[i];
    for (index_t r = 0; r < rows; ++r) std::copy_n(x.begin() + r * cols, cols, padded.begin() + 2 + r * (cols + 3));
    for (float f : x) xb.push_back(bf16::from_float(f));
    const auto v = matrix_view<const float>::row_major(x.data(), rows, cols);
    const auto window = matrix_view<const float>(padded.data() + 2, rows, cols, cols + 3, 1);
    const auto strided = matrix_view<const float>(wide.data(), rows, cols, 2 * cols, 2);
    const auto vb = matrix_view<const bf16>::row_major(xb.data(), rows, cols);
    for (int threads : {1, 2, 3}) {
      test::set_threads(threads);
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + ", threads " + std::to_string(threads));
      const auto check = [](auto view) {
        quantized_tensor<mxfp8> row, col;
        quantize_mxfp8_te_both_into(view, row, col);
        EXPECT_TRUE(same(row, reference::quantize_mxfp8_te<mxfp8>(view)));
        EXPECT_TRUE(same(col, reference::quantize_mxfp8_te<mxfp8>(view.transposed(), quantized_axis::columnwise)));
        EXPECT_EQ(col.axis(), quantized_axis::columnwise);
        quantized_tensor<mxfp8_e5m2> row5, col5;
        quantize_mxfp8_te_both_into(view, row5, col5);
        EXPECT_TRUE(same(row5, reference::quantize_mxfp8_te<mxfp8_e5m2>(view)));
        EXPECT_TRUE(same(col5, reference::quantize_mxfp8_te<mxfp8_e5m2>(view.transposed(), quantized_axis::columnwise)));
      };
      check(v);
      check(v.transposed());
      check(window);
      check(window.transposed());
      check(strided);
      check(vb);
      check(vb.transposed());
      // One copy at a time: float rows in place (row-major, the window), the transposes and the
      // gathered view.
      for (const auto& one : {v, v.transposed(), window, window.transposed(), strided}) {
        EXPECT_TRUE(same(quantize_mxfp8_te<mxfp8>(one), reference::quantize_mxfp8_te<mxfp8>(one)));
        EXPECT_TRUE(same(quantize_mxfp8_te<mxfp8_e5m2>(one), reference::quantize_mxfp8_te<mxfp8_e5m2>(one)));
      }
    }
  }
  test::set_threads(2);
}

TEST(Mxfp8Quantize, IntoReusesAKeptTensorAndWritesEveryByte) {
  quantized_tensor<mxfp8> q, row, col;
  for (auto [rows, cols] : {std::pair<index_t, index_t>{70, 300}, {40, 64}, {70, 300}}) {
    const std::vector<float> x = mxfp8_test_values(rows, cols, 21);
    const auto v = matrix_view<const float>::row_major(x.data(), rows, cols);
    for (auto* kept : {&q, &row, &col}) {  // stale bytes everywhere
      std::fill(kept->data().begin(), kept->data().end(), e4m3::from_bits(0x55));
      std::fill(kept->scales().begin(), kept->scales().end(), e8m0::from_bits(0xAA));
    }
    const auto* storage = q.data().data();
    const bool same_shape = q.rows() == rows && q.cols() == cols && q.axis() == quantized_axis::rowwise;
    quantize_mxfp8_te_into(v, q);
    EXPECT_TRUE(same(q, reference::quantize_mxfp8_te<mxfp8>(v)));
    if (same_shape) {
      EXPECT_EQ(q.data().data(), storage) << "a kept tensor of the same shape is reused";
    }
    quantize_mxfp8_te_both_into(v, row, col);
    EXPECT_TRUE(same(row, reference::quantize_mxfp8_te<mxfp8>(v)));
    EXPECT_TRUE(same(col, reference::quantize_mxfp8_te<mxfp8>(v.transposed(), quantized_axis::columnwise)));
  }
}

TEST(Mxfp8Quantize, NonFiniteInputLeavesKeptTensorsUntouched) {
  std::vector<float> x = mxfp8_test_values(40, 70, 8);
  const auto v = matrix_view<const float>::row_major(x.data(), 40, 70);
  quantized_tensor<mxfp8> row, col;
  quantize_mxfp8_te_both_into(v, row, col);
  const auto row_before = row, col_before = col;
  x.back() = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(quantize_mxfp8_te_both_into(v, row, col), non_finite_error);
  EXPECT_THROW(quantize_mxfp8_te_into(v.transposed(), col, quantized_axis::columnwise), non_finite_error);
  EXPECT_TRUE(same(row, row_before));
  EXPECT_TRUE(same(col, col_before));
}

TEST(Mxfp8Quantize, BadInput) {
  std::vector<float> x(32, 1.0f);
  x[3] = INFINITY;
  EXPECT_THROW(quantize_mxfp8_te<mxfp8>(matrix_view<const float>::row_major(x.data(), 1, 32)), non_finite_error);
  EXPECT_THROW(quantize_mxfp8_te<mxfp8>(matrix_view<const float>(nullptr, 2, 2, 2, 1)), error);
}

}  // namespace scaling_mxfp8_quantize_test
}  // namespace
}  // namespace nvfp4
