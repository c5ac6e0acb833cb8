// Tests for nvfp4/gemm/fp4/packed_weight.hpp: products with a weight packed once equal the reference bit
// for bit (exact and relaxed, NVFP4 and MXFP4, every operand style, 1 and 2 threads, several A
// against one packed B), gemm()'s epilogue gives what it gives with the plain tensor, a packed
// weight stays right when the kernel choice changes after packing, and bad shapes are refused.
// NVFP4_TEST_ALL_ISAS
#include "nvfp4/gemm/fp4/packed_weight.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <random>
#include <vector>

#include "nvfp4/scaling/quantize.hpp"
#include "random_operands.hpp"
#include "test_support.hpp"

#if NVFP4_HAS_OPENMP
#include <omp.h>
#endif

namespace nvfp4 {
namespace {
namespace gemm_fp4_packed_weight_test {

using gemm_test_data::count_mismatches;
using gemm_test_data::random_accumulator;
using gemm_test_data::random_operand;
using gemm_test_data::style;

template <class Format>
quantized_tensor<Format> random_tensor(index_t rows, index_t k, style s, std::mt19937& rng) {
  const auto bytes = random_operand<Format>(rows, k, s, rng);
  return quantized_tensor<Format>::from_bytes(rows, k, bytes.data, bytes.scales);
}

/// Three different A against one packed B, each compared with the reference; returns outputs compared.
template <class Format>
index_t check_packed(index_t m, index_t n, index_t k, style s, gemm_mode mode, unsigned seed) {
  std::mt19937 rng(seed);
  const packed_weight<Format> w(random_tensor<Format>(n, k, s, rng));
  index_t compared = 0;
  for (int round = 0; round < 3; ++round) {
    const auto a = random_tensor<Format>(m, k, s, rng);
    const auto c = random_accumulator(m * n, s, rng);
    const auto c_view = matrix_view<const float>::row_major(c.data(), m, n);
    std::vector<float> expected(c.size()), got(c.size());
    reference::block_scaled_mma(a, w.tensor(), c_view, matrix_view<float>::row_major(expected.data(), m, n), mode);
    for (int threads : {1, 2}) {
#if NVFP4_HAS_OPENMP
      omp_set_num_threads(threads);
#endif
      std::fill(got.begin(), got.end(), std::bit_cast<float>(0x7FC0DEADu));
      block_scaled_mma(a, w, c_view, matrix_view<float>::row_major(got.data(), m, n), mode);
      EXPECT_EQ(count_mismatches(got, expected, n,
                                 "packed, " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + ", style " +
                                     std::to_string(static_cast<int>(s)) + ", " + std::to_string(threads) + " threads"),
                0);
    }
    compared += m * n;
  }
#if NVFP4_HAS_OPENMP
  omp_set_num_threads(2);
#endif
  return compared;
}

template <class Format>
class PackedWeight : public ::testing::Test {};
using Formats = ::testing::Types<nvfp4_1x16, mxfp4>;
TYPED_TEST_SUITE(PackedWeight, Formats);

TYPED_TEST(PackedWeight, EqualsTheReferenceOnEveryStyle) {
  const std::tuple<index_t, index_t, index_t> shapes[] = {{1, 1, 1}, {16, 33, 130}, {5, 130, 200}, {17, 300, 64}};
  index_t outputs = 0;
  unsigned seed = 10;
  for (auto mode : {gemm_mode::exact, gemm_mode::relaxed})
    for (auto s : {style::normal, style::wide_scales, style::cancel, style::zero_groups, style::nan_scales, style::extremes})
      for (auto [m, n, k] : shapes) outputs += check_packed<TypeParam>(m, n, k, s, mode, seed++);
  EXPECT_GT(outputs, 100000);
}

TEST(PackedWeight, GemmEpilogueMatchesThePlainTensor) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  const index_t m = 16, n = 72, k = 320;
  std::vector<float> x(static_cast<std::size_t>(m * k)), w(static_cast<std::size_t>(n * k)), c(static_cast<std::size_t>(m * n));
  for (auto& v : x) v = normal(rng);
  for (auto& v : w) v = normal(rng);
  for (auto& v : c) v = normal(rng);
  const auto a = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), m, k));
  const auto b = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(w.data(), n, k));
  const packed_weight<nvfp4_1x16> packed(b);
  EXPECT_EQ(packed.rows(), n);
  EXPECT_EQ(packed.cols(), k);
  EXPECT_GT(packed.packed_bytes(), 0u);
  const auto c_view = matrix_view<const float>::row_major(c.data(), m, n);
  for (auto mode : {gemm_mode::exact, gemm_mode::relaxed}) {
    const gemm_options options{.mode = mode, .beta = 0.25f};
    std::vector<bf16> plain(c.size()), with_packed(c.size());
    gemm(a, b, matrix_view<bf16>::row_major(plain.data(), m, n), options, c_view);
    gemm(a, packed, matrix_view<bf16>::row_major(with_packed.data(), m, n), options, c_view);
    EXPECT_EQ(plain, with_packed);
    std::vector<float> plain_f(c.size()), packed_f(c.size());
    gemm(a, b, matrix_view<float>::row_major(plain_f.data(), m, n), {.mode = mode});
    gemm(a, packed, matrix_view<float>::row_major(packed_f.data(), m, n), {.mode = mode});
    EXPECT_EQ(plain_f, packed_f);
  }
}

TEST(PackedWeight, StaysRightWhenTheKernelChoiceChangesAfterPacking) {
  // Packed for AMX where it runs (turned on for the packing); the products below run with AMX
  // off (the vector kernels then pack B themselves), then on. Elsewhere this runs the vector
  // kernels twice.
  std::mt19937 rng(4);
  const index_t m = 20, n = 40, k = 192;
  simd::amx::set_allowed(true);
  const packed_weight<nvfp4_1x16> w(random_tensor<nvfp4_1x16>(n, k, style::normal, rng));
  const auto a = random_tensor<nvfp4_1x16>(m, k, style::normal, rng);
  std::vector<float> expected(static_cast<std::size_t>(m * n)), got(expected.size());
  reference::block_scaled_mma(a, w.tensor(), {}, matrix_view<float>::row_major(expected.data(), m, n));
  for (bool allowed : {false, true}) {
    simd::amx::set_allowed(allowed);
    block_scaled_mma(a, w, {}, matrix_view<float>::row_major(got.data(), m, n));
    EXPECT_EQ(got, expected) << "AMX allowed: " << allowed;
  }
  simd::amx::set_allowed(false);
}

TEST(PackedWeight, ShapesAreChecked) {
  // As the unpacked calls (docs/api.md): shape_mismatch for a different K or a D of the wrong
  // shape, before D is written.
  std::vector<float> x(8 * 64, 1.0f), w(16 * 96, 1.0f), d(8 * 16, -7.0f);
  const auto a = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), 8, 64));
  const packed_weight<nvfp4_1x16> b(quantize<nvfp4_1x16>(matrix_view<const float>::row_major(w.data(), 16, 96)));
  const auto d_view = matrix_view<float>::row_major(d.data(), 8, 16);
  EXPECT_EQ(test::error_code_of([&] { block_scaled_mma(a, b, {}, d_view); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { gemm(a, b, d_view); }), errc::shape_mismatch);
  const packed_weight<nvfp4_1x16> same_k(quantize<nvfp4_1x16>(matrix_view<const float>::row_major(w.data(), 16, 64)));
  const auto short_d = matrix_view<float>::row_major(d.data(), 8, 15);
  EXPECT_EQ(test::error_code_of([&] { block_scaled_mma(a, same_k, {}, short_d); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { gemm(a, same_k, short_d); }), errc::shape_mismatch);
  for (float v : d) EXPECT_EQ(v, -7.0f);
}

}  // namespace gemm_fp4_packed_weight_test
}  // namespace
}  // namespace nvfp4
