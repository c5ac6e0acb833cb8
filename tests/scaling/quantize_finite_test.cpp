// Tests of nvfp4/scaling/quantize_finite.hpp: for finite input, quantize_finite_with_amax_into
// writes quantize_with_amax_into's bytes (NVFP4 1x16 and 16x16, rowwise and columnwise, nearest
// and stochastic rounding, fp32 and bf16 input, an amax below the data's), reusing the caller's
// tensor; a bad amax or rounding is refused before anything is written.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nvfp4/scaling/quantize_finite.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace scaling_quantize_finite_test {

using test::bytes_of;

template <class Format, class T>
void expect_same_as_checked(matrix_view<const T> x, float global_amax, const quantize_options& options, quantized_tensor<Format>& kept) {
  quantized_tensor<Format> want;
  quantize_with_amax_into(x, global_amax, want, options);
  quantize_finite_with_amax_into(x, global_amax, kept, options);
  EXPECT_EQ(bytes_of(kept), bytes_of(want));
  EXPECT_EQ(kept.amax(), want.amax());
  EXPECT_EQ(kept.axis(), want.axis());
}

TEST(QuantizeFinite, WritesTheCheckedFormsBytes) {
  const auto values = test::random_values(96 * 64, 4, {.sigma = 2.0});
  const auto x = matrix_view<const float>::row_major(values.data(), 96, 64);
  std::vector<bf16> halves;
  for (float v : values) halves.push_back(bf16::from_float(v));
  const auto xb = matrix_view<const bf16>::row_major(halves.data(), 96, 64);
  quantized_tensor<nvfp4_1x16> rows;
  nvfp4_tile_tensor tiles;
  for (const float a : {amax(x), 0.5f * amax(x)}) {
    for (const quantize_options& o : {quantize_options{}, quantize_options{.rounding = rounding_mode::stochastic, .seed = 9}}) {
      expect_same_as_checked(x, a, o, rows);
      expect_same_as_checked(x.transposed(), a, {.rounding = o.rounding, .seed = o.seed, .axis = quantized_axis::columnwise}, rows);
      expect_same_as_checked(xb, a, o, rows);
    }
    expect_same_as_checked(x, a, {}, tiles);
    expect_same_as_checked(x.transposed(), a, {.axis = quantized_axis::columnwise}, tiles);
  }
}

TEST(QuantizeFinite, RefusesABadAmaxBeforeWriting) {
  const auto values = test::random_values(32 * 32, 5);
  const auto x = matrix_view<const float>::row_major(values.data(), 32, 32);
  quantized_tensor<nvfp4_1x16> out;
  quantize_finite_with_amax_into(x, amax(x), out);
  const auto before = bytes_of(out);
  for (const float bad : {-1.0f, std::nanf(""), INFINITY})
    EXPECT_EQ(test::error_code_of([&] { quantize_finite_with_amax_into(x, bad, out); }), errc::invalid_argument) << bad;
  EXPECT_EQ(bytes_of(out), before);
}

}  // namespace scaling_quantize_finite_test
}  // namespace
}  // namespace nvfp4
