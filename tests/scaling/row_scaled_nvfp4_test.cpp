// Tests of nvfp4/scaling/row_scaled_nvfp4.hpp: each row quantized with its own amax (a row of
// small values keeps its resolution next to a row of large ones), the hand-worked scales of a row,
// the columnwise copy's per-column amaxes, fast == reference, dequantization, bad input.
// NVFP4_TEST_ALL_ISAS
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "nvfp4/scaling/row_scaled_nvfp4.hpp"

namespace nvfp4 {
namespace {
namespace scaling_row_scaled_nvfp4_test {

std::vector<std::uint8_t> bytes_of(const row_scaled_nvfp4_tensor& q) {
  std::vector<std::uint8_t> out;
  for (auto u : q.values.data()) out.push_back(u.bits());
  for (auto s : q.values.scales()) out.push_back(s.bits());
  return out;
}

TEST(RowScaledNvfp4, EachRowHasItsOwnTensorScale) {
  // Row 0: amax 1000; row 1: amax 0.001, same shape of values. With one amax per row both rows get
  // the same codes and scales; a per-tensor amax would flush row 1 to zero.
  // Shapes chosen away from E2M1 ties (x * 6 / amax never lands on a midpoint).
  const float shape[16] = {1.0f, -0.9f, 0.6f, -0.4f, 0.2f, 0.1f, -0.6f, 0.9f, 0.0f, -1.0f, 0.3f, -0.2f, 0.45f, -0.1f, 0.7f, 0.8f};
  std::vector<float> x(2 * 16);
  for (int c = 0; c < 16; ++c) {
    x[std::size_t(c)] = 1000.0f * shape[c];
    x[std::size_t(16 + c)] = 0.001f * shape[c];
  }
  const auto v = matrix_view<const float>::row_major(x.data(), 2, 16);
  const auto q = quantize_row_scaled(v);
  EXPECT_EQ(q.row_amax, (std::vector<float>{1000.0f, 0.001f}));
  for (int c = 0; c < 16; ++c) EXPECT_EQ(q.values.element(0, c), q.values.element(1, c)) << c;
  EXPECT_EQ(q.values.scale(0, 0), q.values.scale(1, 0));
  // By hand: the block amax is the row amax, so d = amax * (2688 / amax * 1/6) = 448 (up to the
  // fp32 roundings) -> E4M3 448 (0x7E).
  EXPECT_EQ(q.values.scale(0, 0).bits(), 0x7E);
  const auto per_tensor = quantize<nvfp4_1x16>(v);
  EXPECT_EQ(per_tensor.scale(1, 0).bits(), 0x00);  // what row scaling avoids
  std::vector<float> back(32);
  dequantize(q, matrix_view<float>::row_major(back.data(), 2, 16));
  for (int c = 0; c < 16; ++c) EXPECT_NEAR(back[std::size_t(16 + c)], x[std::size_t(16 + c)], 1.7e-4f) << c;
}

TEST(RowScaledNvfp4, RowsMatchTheOneRowQuantizerAndColumnsUseColumnAmaxes) {
  std::mt19937 gen(2);
  std::normal_distribution<float> normal;
  const index_t rows = 70, cols = 48;
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c) x[std::size_t(r * cols + c)] = normal(gen) * std::ldexp(1.0f, int(r % 9) - 4);
  const auto v = matrix_view<const float>::row_major(x.data(), rows, cols);
  const auto q = quantize_row_scaled(v);
  for (index_t r = 0; r < rows; ++r) {
    const matrix_view<const float> row(&v(r, 0), 1, cols, cols, 1);
    const auto one = reference::quantize<nvfp4_1x16>(row);
    EXPECT_EQ(q.row_amax[std::size_t(r)], one.amax());
    for (index_t c = 0; c < cols; ++c) ASSERT_EQ(q.values.element(r, c), one.element(0, c)) << r << "," << c;
  }
  const auto t = quantize_row_scaled(v.transposed(), quantized_axis::columnwise);
  ASSERT_EQ(t.row_amax.size(), std::size_t(cols));
  for (index_t c = 0; c < cols; ++c) {
    float m = 0.0f;
    for (index_t r = 0; r < rows; ++r) m = std::max(m, std::fabs(v(r, c)));
    EXPECT_EQ(t.row_amax[std::size_t(c)], m);
  }
  EXPECT_EQ(bytes_of(q), bytes_of(reference::quantize_row_scaled(v)));
  EXPECT_EQ(bytes_of(t), bytes_of(reference::quantize_row_scaled(v.transposed())));
}

TEST(RowScaledNvfp4, FastEqualsReferenceOnLargeInputs) {
  std::mt19937 gen(4);
  std::normal_distribution<float> normal;
  const index_t rows = 400, cols = 200;
  std::vector<bf16> x(static_cast<std::size_t>(rows * cols));
  for (auto& v : x) v = bf16::from_float(normal(gen));
  const auto v = matrix_view<const bf16>::row_major(x.data(), rows, cols);
  EXPECT_EQ(bytes_of(quantize_row_scaled(v)), bytes_of(reference::quantize_row_scaled(v)));
  x[77] = bf16::from_float(INFINITY);
  EXPECT_THROW(quantize_row_scaled(v), non_finite_error);
}

}  // namespace scaling_row_scaled_nvfp4_test
}  // namespace
}  // namespace nvfp4
