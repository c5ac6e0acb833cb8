// Tests of nvfp4/scaling/four_over_six.hpp: hand-worked blocks where map-to-6 wins, where map-to-4
// wins, a tie (map-to-6), MAE and MSE choosing differently, the 256 / 448 bounds of the tensor
// scale, the 16x16 tile sharing one choice and the tree order of its row errors, fast ==
// reference for any thread count, and bad options.
// NVFP4_TEST_ALL_ISAS
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "nvfp4/scaling/four_over_six.hpp"

namespace nvfp4 {
namespace {
namespace scaling_four_over_six_test {

template <class Format>
std::vector<std::uint8_t> bytes_of(const quantized_tensor<Format>& q) {
  std::vector<std::uint8_t> out;
  for (auto u : q.data()) out.push_back(u.bits());
  for (auto s : q.scales()) out.push_back(s.bits());
  return out;
}

// With the tensor amax 6 and the bound 256, S_enc = 1536 / 6 = 256: a block of amax 6 has
// base = 256, map6 = 256 (E4M3 0x78, element factor 1) and map4 = 384 (0x7C, factor 1 / 1.5).
// Dequantized, map6 gives the E2M1 grid {0, .5, 1, 1.5, 2, 3, 4, 6} and map4 1.5 times it.
constexpr std::uint8_t map6_code = 0x78, map4_code = 0x7C;

nvfp4_tensor one_block(std::vector<float> values, four_over_six_error mode) {
  values.resize(16, 0.0f);
  return quantize_4over6_with_amax<nvfp4_1x16>(matrix_view<const float>::row_major(values.data(), 1, 16), 6.0f, {.error = mode});
}

TEST(FourOverSix, TensorScaleBound) {
  const auto s256 = detail::four_over_six_tensor_scale(6.0f, 256);
  EXPECT_EQ(s256.encode, 256.0f);
  EXPECT_EQ(detail::four_over_six_tensor_scale(6.0f, 448).encode, 448.0f);
  EXPECT_EQ(detail::four_over_six_tensor_scale(0.0f, 256).encode, 1.0f);
  const auto scales = detail::four_over_six_block_scales(6.0f, s256);
  EXPECT_EQ(scales.map6.bits(), map6_code);
  EXPECT_EQ(scales.map4.bits(), map4_code);
  EXPECT_EQ(scales.factor6, 1.0f);
  EXPECT_EQ(scales.factor4, 1.0f / 1.5f);
  // A block near the top: 1.5 * base beyond 448 is clamped.
  EXPECT_EQ(detail::four_over_six_block_scales(6.0f, detail::four_over_six_tensor_scale(6.0f, 448)).map4.bits(), 0x7E);
}

TEST(FourOverSix, ChoosesTheCandidateWithTheSmallerError) {
  // [6, 4, 4, 4]: map6 is exact; map4 puts each 4 at 4.5 -> map6.
  EXPECT_EQ(one_block({6, 4, 4, 4}, four_over_six_error::mae).scale(0, 0).bits(), map6_code);
  // [6, 5, 5, 5]: map6 rounds 5 to 4 (error 1 each), map4 to 4.5 (error 0.5 each) -> map4, whose
  // codes are then 6 -> 4 (x 1.5 = 6) and 5 -> 3 (x 1.5 = 4.5).
  const auto q = one_block({6, 5, 5, 5}, four_over_six_error::mae);
  EXPECT_EQ(q.scale(0, 0).bits(), map4_code);
  EXPECT_EQ(q.element(0, 0).to_float(), 4.0f);
  EXPECT_EQ(q.element(0, 1).to_float(), 3.0f);
  // [6]: both exact (map4 maps 6 to 4 * 1.5): a tie keeps map6.
  EXPECT_EQ(one_block({6}, four_over_six_error::mae).scale(0, 0).bits(), map6_code);
  EXPECT_EQ(one_block({6}, four_over_six_error::mse).scale(0, 0).bits(), map6_code);
}

TEST(FourOverSix, MaeAndMseCanDisagree) {
  // [6, 5, 4, 4]: map6 errors {0, 1, 0, 0}: MAE 1, MSE 1. map4 errors {0, .5, .5, .5}: MAE 1.5,
  // MSE 0.75. MAE keeps map6, MSE takes map4.
  EXPECT_EQ(one_block({6, 5, 4, 4}, four_over_six_error::mae).scale(0, 0).bits(), map6_code);
  EXPECT_EQ(one_block({6, 5, 4, 4}, four_over_six_error::mse).scale(0, 0).bits(), map4_code);
}

TEST(FourOverSix, TileSharesOneChoiceAndSumsRowsAsATree) {
  // The tree of TE's warp reduction is not the sequential order: [1e8, 1, -1e8, 1] gives 2, a
  // left-to-right sum 1.
  float e[16] = {1e8f, 1.0f, -1e8f, 1.0f};
  EXPECT_EQ(detail::four_over_six_tree_sum(e), 2.0f);
  // A 16x16 tile whose rows are all the MSE example: one choice (map4 under MSE) for every row.
  std::vector<float> tile(16 * 16, 0.0f);
  for (int r = 0; r < 16; ++r) {
    tile[std::size_t(r * 16 + 0)] = 6;
    tile[std::size_t(r * 16 + 1)] = 5;
    tile[std::size_t(r * 16 + 2)] = 4;
    tile[std::size_t(r * 16 + 3)] = 4;
  }
  // Row 7 alone would prefer map6 under MSE too (all exact on both): the tile still follows the sum.
  for (int c = 1; c < 4; ++c) tile[std::size_t(7 * 16 + c)] = 0.0f;
  const auto q = quantize_4over6_with_amax<nvfp4_16x16>(matrix_view<const float>::row_major(tile.data(), 16, 16), 6.0f,
                                                        {.error = four_over_six_error::mse});
  for (int r = 0; r < 16; ++r) EXPECT_EQ(q.scale(r, 0).bits(), map4_code) << r;
}

TEST(FourOverSix, FastEqualsReferenceForAnyThreadCount) {
  std::mt19937 gen(7);
  std::student_t_distribution<float> heavy(3.0f);
  // Shapes: no full group; one AVX-512 group (two AVX2 ones) and a partial band; several groups
  // of either kernel and a rest of columns.
  for (auto [rows, cols] : {std::pair<index_t, index_t>{20, 40}, {300, 272}, {37, 816}}) {
    std::vector<float> x(static_cast<std::size_t>(rows * cols));
    for (auto& v : x) v = heavy(gen);
    const auto v = matrix_view<const float>::row_major(x.data(), rows, cols);
    const float a = amax(v);
    for (auto mode : {four_over_six_error::mae, four_over_six_error::mse})
      for (int bound : {256, 448}) {
        const four_over_six_options options{mode, bound};
        const auto r1 = bytes_of(reference::quantize_4over6_with_amax<nvfp4_1x16>(v, a, options));
        const auto r2 = bytes_of(reference::quantize_4over6_with_amax<nvfp4_16x16>(v.transposed(), a, options));
        for (int threads : {1, 2}) {
#if defined(_OPENMP)
          omp_set_num_threads(threads);
#endif
          EXPECT_EQ(bytes_of(quantize_4over6_with_amax<nvfp4_1x16>(v, a, options)), r1) << threads;
          EXPECT_EQ(bytes_of(quantize_4over6_with_amax<nvfp4_16x16>(v.transposed(), a, options)), r2) << threads;
        }
      }
  }
}

TEST(FourOverSix, DequantizesWithItsOwnTensorScaleAndRejectsBadInput) {
  const auto q = one_block({6, 5, 5, 5}, four_over_six_error::mae);
  EXPECT_EQ(q.encode_scale(), 256.0f);
  const auto restored = dequantize(q);
  EXPECT_EQ(restored[0], 6.0f);
  EXPECT_EQ(restored[1], 4.5f);
  std::vector<float> x(16, 1.0f);
  const auto v = matrix_view<const float>::row_major(x.data(), 1, 16);
  try {
    quantize_4over6<nvfp4_1x16>(v, {.e4m3_max = 300});
    ADD_FAILURE();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
  x[2] = std::nanf("");
  EXPECT_THROW(quantize_4over6<nvfp4_1x16>(v), non_finite_error);
}

}  // namespace scaling_four_over_six_test
}  // namespace
}  // namespace nvfp4
