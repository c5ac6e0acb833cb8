// Tests of nn/detail/linear_checks.hpp's dtype copies (to_dtype, to_bf16, in_place_or_copy,
// write_in_dtype) and the bias gradient's row sum: every value as the scalar rule
// (bf16::from_float) gives it, NaN / Inf refused at the first position in row-major order, and
// the same bits for any thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "nvfp4/nn/detail/linear_checks.hpp"
#include "test_support.hpp"

namespace {
namespace nn_detail_linear_checks_test {

using namespace nvfp4;
namespace nd = nvfp4::nn::detail;

/// Values that exercise the rounding: ties to even either way, carries into the exponent and to
/// Inf, subnormals, signed zeros, the largest finite float, quiet and signalling NaNs.
std::vector<float> edge_values() {
  std::vector<std::uint32_t> bits = {0x00000000u, 0x80000000u, 0x3F808000u, 0x3F818000u, 0x3F80FFFFu, 0x3FFFFFFFu, 0x7F7FFFFFu,
                                     0xFF7FFFFFu, 0x7F7F8000u, 0x00000001u, 0x00008000u, 0x00018000u, 0x807FFFFFu, 0x3F800001u,
                                     0xBF808001u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0xFFA00000u};
  std::vector<float> out;
  for (std::uint32_t b : bits) out.push_back(std::bit_cast<float>(b));
  for (float v : test::random_values(300, 9, {.sigma = 1.0, .log2_spread = 30.0})) out.push_back(v);
  return out;
}

TEST(LinearDtypeCopies, EveryValueAsTheScalarRule) {
  const std::vector<float> in = edge_values();
  const index_t n = static_cast<index_t>(in.size());
  const auto v = matrix_view<const float>::row_major(in.data(), 1, n);
  for (high_precision dtype : {high_precision::fp32, high_precision::bf16}) {
    std::vector<float> buffer;
    const auto out = nd::to_dtype(v, "x", buffer, dtype, /*allow_non_finite=*/true);
    for (index_t i = 0; i < n; ++i)
      EXPECT_EQ(std::bit_cast<std::uint32_t>(out(0, i)), std::bit_cast<std::uint32_t>(nd::in_dtype(in[static_cast<std::size_t>(i)], dtype)))
          << "value " << i << " bits " << std::bit_cast<std::uint32_t>(in[static_cast<std::size_t>(i)]);
    std::vector<float> written(in.size());
    nd::write_in_dtype(v, matrix_view<float>::row_major(written.data(), 1, n), dtype);
    EXPECT_EQ(test::float_bits(written), test::float_bits(std::span<const float>(out.data(), in.size())));
  }
  std::vector<bf16> halves;
  float known_amax = 0.0f;
  const auto b = nd::to_bf16(v, "x", halves, /*allow_non_finite=*/true, known_amax);
  for (index_t i = 0; i < n; ++i) EXPECT_EQ(b(0, i).bits(), bf16::from_float(in[static_cast<std::size_t>(i)]).bits()) << "value " << i;
}

TEST(LinearDtypeCopies, StridedViewsAndThreadCounts) {
  // 300 x 400 (above the parallel threshold), read through its transpose too.
  const index_t rows = 300, cols = 400;
  const std::vector<float> in = test::random_values(rows * cols, 3, {.sigma = 1.0, .log2_spread = 8.0});
  const auto v = matrix_view<const float>::row_major(in.data(), rows, cols);
  std::vector<std::vector<std::uint32_t>> results;
  std::vector<std::vector<std::uint16_t>> halves_results;
  for (int threads : {1, 2, 3}) {
    test::set_threads(threads);
    for (const auto& view : {v, v.transposed()}) {
      std::vector<float> buffer;
      const auto out = nd::to_dtype(view, "x", buffer, high_precision::bf16);
      std::vector<float> want;
      for (index_t r = 0; r < view.rows(); ++r)
        for (index_t c = 0; c < view.cols(); ++c) want.push_back(nd::in_dtype(view(r, c), high_precision::bf16));
      EXPECT_EQ(test::float_bits(std::span<const float>(out.data(), want.size())), test::float_bits(want));
      results.push_back(test::float_bits(std::span<const float>(out.data(), want.size())));
      std::vector<bf16> halves;
      float known_amax = 0.0f;
      const auto b = nd::to_bf16(view, "x", halves, false, known_amax);
      float want_amax = 0.0f;
      for (index_t r = 0; r < b.rows(); ++r)
        for (index_t c = 0; c < b.cols(); ++c) want_amax = std::max(want_amax, std::fabs(b(r, c).to_float()));
      EXPECT_EQ(known_amax, want_amax) << "the amax of the bf16 values handed over";
      std::vector<std::uint16_t> bits;
      for (index_t r = 0; r < b.rows(); ++r)
        for (index_t c = 0; c < b.cols(); ++c) bits.push_back(b(r, c).bits());
      halves_results.push_back(bits);
    }
  }
  test::set_threads(2);
  for (std::size_t i = 2; i < results.size(); ++i) EXPECT_EQ(results[i], results[i % 2]);
  for (std::size_t i = 2; i < halves_results.size(); ++i) EXPECT_EQ(halves_results[i], halves_results[i % 2]);
}

TEST(LinearDtypeCopies, NonFiniteRefusedAtItsFirstPosition) {
  const index_t rows = 300, cols = 400;
  std::vector<float> in = test::random_values(rows * cols, 4);
  in[static_cast<std::size_t>(250 * cols + 7)] = std::numeric_limits<float>::infinity();
  in[static_cast<std::size_t>(120 * cols + 390)] = std::numeric_limits<float>::quiet_NaN();
  const auto v = matrix_view<const float>::row_major(in.data(), rows, cols);
  for (int threads : {1, 2}) {
    test::set_threads(threads);
    for (high_precision dtype : {high_precision::fp32, high_precision::bf16}) {
      std::vector<float> buffer;
      try {
        (void)nd::to_dtype(v, "input", buffer, dtype);
        ADD_FAILURE() << "no error";
      } catch (const non_finite_error& e) {
        EXPECT_EQ(e.row(), 120);
        EXPECT_EQ(e.col(), 390);
        EXPECT_NE(std::string(e.what()).find("input holds NaN"), std::string::npos) << e.what();
      }
      try {
        float known_amax = 0.0f;
        (void)nd::in_place_or_copy(v.transposed(), "weight", buffer, dtype, false, false, known_amax);
        ADD_FAILURE() << "no error";
      } catch (const non_finite_error& e) {  // the transpose: (7, 250) comes first
        EXPECT_EQ(e.row(), 7);
        EXPECT_EQ(e.col(), 250);
      }
    }
    std::vector<bf16> halves;
    float known_amax = 0.0f;
    EXPECT_EQ(test::error_code_of([&] { (void)nd::to_bf16(v, "x", halves, false, known_amax); }), errc::non_finite_input);
    EXPECT_EQ(test::error_code_of([&] { (void)nd::to_bf16(v, "x", halves, true, known_amax); }), errc{});
  }
  test::set_threads(2);
}

TEST(LinearDtypeCopies, Fp32ReadInPlaceUnlessKept) {
  const std::vector<float> in = test::random_values(64 * 32, 5);
  const auto v = matrix_view<const float>::row_major(in.data(), 64, 32);
  float want_amax = 0.0f;
  for (float x : in) want_amax = std::max(want_amax, std::fabs(x));
  std::vector<float> buffer;
  float known_amax = 0.0f;
  EXPECT_EQ(nd::in_place_or_copy(v, "x", buffer, high_precision::fp32, false, /*needs_copy=*/false, known_amax).data(), in.data());
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(known_amax, want_amax);
  known_amax = 0.0f;
  const auto kept = nd::in_place_or_copy(v, "x", buffer, high_precision::fp32, false, /*needs_copy=*/true, known_amax);
  EXPECT_EQ(kept.data(), buffer.data());
  EXPECT_EQ(test::float_bits(buffer), test::float_bits(in));
  EXPECT_EQ(known_amax, want_amax);
  EXPECT_NE(nd::in_place_or_copy(v, "x", buffer, high_precision::bf16, false, false, known_amax).data(), in.data());
  // Values a policy takes as they are (NaN / Inf allowed): no amax handed over, -1.
  EXPECT_EQ(nd::in_place_or_copy(v, "x", buffer, high_precision::fp32, /*allow_non_finite=*/true, false, known_amax).data(), in.data());
  EXPECT_EQ(known_amax, -1.0f);
}

TEST(LinearBiasGradient, RowSumInRowOrderForAnyThreadCount) {
  const index_t rows = 700, cols = 130;  // columns not a multiple of the work item's 64
  const std::vector<float> in = test::random_values(rows * cols, 6, {.sigma = 1.0, .log2_spread = 10.0});
  const auto v = matrix_view<const float>::row_major(in.data(), rows, cols);
  std::vector<float> want(static_cast<std::size_t>(cols), 0.0f);
  for (index_t i = 0; i < rows; ++i)
    for (index_t j = 0; j < cols; ++j) want[static_cast<std::size_t>(j)] += v(i, j);
  for (int threads : {1, 2, 3}) {
    test::set_threads(threads);
    std::vector<float> got(static_cast<std::size_t>(cols), 123.0f);
    nd::sum_rows(v, std::span<float>(got));
    EXPECT_EQ(test::float_bits(got), test::float_bits(want)) << threads << " threads";
  }
  test::set_threads(2);
}

}  // namespace nn_detail_linear_checks_test
}  // namespace
