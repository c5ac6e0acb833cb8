// Tests for nvfp4/gemm/fp4/gemm.hpp: the fast path equals the reference bit for bit on random operands
// over every corner of §6 (exact and relaxed modes, 1 and 2 threads), the epilogue, bad input.
// NVFP4_TEST_ALL_ISAS
#include "nvfp4/gemm/fp4/gemm.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>

#include "nvfp4/scaling/quantize.hpp"
#include "random_operands.hpp"

#if NVFP4_HAS_OPENMP
#include <omp.h>
#endif

namespace nvfp4 {
namespace {
namespace gemm_fp4_gemm_test {

using gemm_test_data::random_accumulator;
using gemm_test_data::random_operand;
using gemm_test_data::style;

/// Runs the reference and the fast path (1 and 2 threads) on one random problem; returns the
/// number of outputs compared.
template <class Format>
index_t check_problem(index_t m, index_t n, index_t k, style s, gemm_mode mode, unsigned seed) {
  std::mt19937 rng(seed);
  const auto a_bytes = random_operand<Format>(m, k, s, rng);
  const auto b_bytes = random_operand<Format>(n, k, s, rng);
  const auto a = quantized_tensor<Format>::from_bytes(m, k, a_bytes.data, a_bytes.scales);
  const auto b = quantized_tensor<Format>::from_bytes(n, k, b_bytes.data, b_bytes.scales);
  const auto c = random_accumulator(m * n, s, rng);
  const auto c_view = matrix_view<const float>::row_major(c.data(), m, n);
  std::vector<float> expected(c.size()), got(c.size());
  reference::block_scaled_mma(a, b, c_view, matrix_view<float>::row_major(expected.data(), m, n), mode);
  for (int threads : {1, 2}) {
#if NVFP4_HAS_OPENMP
    omp_set_num_threads(threads);
#endif
    block_scaled_mma(a, b, c_view, matrix_view<float>::row_major(got.data(), m, n), mode);
    index_t mismatches = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(expected[i]) && mismatches++ < 3)
        ADD_FAILURE() << "D[" << i / static_cast<std::size_t>(n) << "][" << i % static_cast<std::size_t>(n) << "] fast " << std::hexfloat
                      << got[i] << " reference " << expected[i] << std::defaultfloat << " (" << m << "x" << n << "x" << k << ", style "
                      << static_cast<int>(s) << ", " << threads << " threads)";
    EXPECT_EQ(mismatches, 0);
  }
#if NVFP4_HAS_OPENMP
  omp_set_num_threads(2);
#endif
  return m * n;
}

template <class Format>
class FastGemmEqualsReference : public ::testing::Test {};
using GemmFormats = ::testing::Types<nvfp4_1x16, mxfp4>;
TYPED_TEST_SUITE(FastGemmEqualsReference, GemmFormats);

// The shapes leave every remainder of the kernels' register blocks (4 rows by 2 tiles; 2 by 1 on
// AVX2) and of the 8-tile panels, and span several panels.
TYPED_TEST(FastGemmEqualsReference, OnRandomOperandsOfEveryStyle) {
  const std::tuple<index_t, index_t, index_t> shapes[] = {{1, 1, 1},    {1, 1, 64},    {3, 17, 70},   {5, 33, 130},  {33, 47, 200},
                                                          {16, 8, 256}, {64, 48, 512}, {97, 101, 96}, {10, 200, 128}};
  index_t outputs = 0;
  unsigned seed = 1;
  for (auto mode : {gemm_mode::exact, gemm_mode::relaxed})
    for (auto s : {style::normal, style::wide_scales, style::cancel, style::zero_groups, style::nan_scales, style::extremes})
      for (auto [m, n, k] : shapes) outputs += check_problem<TypeParam>(m, n, k, s, mode, seed++);
  EXPECT_GT(outputs, 100000);
}

// The packed operand rows and panels are working memory kept from call to call
// (detail/scratch.hpp): a smaller product after a larger one, whose bytes are still there, must
// read none of them.
TYPED_TEST(FastGemmEqualsReference, AfterALargerProductOnTheSameThread) {
  check_problem<TypeParam>(200, 70, 640, style::nan_scales, gemm_mode::exact, 7);
  check_problem<TypeParam>(9, 40, 130, style::normal, gemm_mode::exact, 8);
  check_problem<TypeParam>(9, 40, 130, style::wide_scales, gemm_mode::relaxed, 9);
}

TYPED_TEST(FastGemmEqualsReference, OnALargeProblem) {
  // 2^20 outputs of 4 steps each in the exact mode; then relaxed, with several row items per panel
  // (on two threads B is then packed once and shared).
  EXPECT_EQ(check_problem<TypeParam>(1024, 1024, 256, style::wide_scales, gemm_mode::exact, 99), 1 << 20);
  EXPECT_EQ(check_problem<TypeParam>(300, 200, 256, style::extremes, gemm_mode::relaxed, 98), 300 * 200);
}

TEST(Gemm, RealDataIsCloseToTheFloatProductAndRelaxedDriftsLittle) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const index_t m = 64, n = 48, k = 256;
  std::vector<float> x(static_cast<std::size_t>(m * k)), w(static_cast<std::size_t>(n * k));
  for (auto& v : x) v = normal(rng);
  for (auto& v : w) v = normal(rng);
  const auto a = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), m, k));
  const auto b = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(w.data(), n, k));
  const auto exact = gemm(a, b);
  const auto relaxed = gemm(a, b, {.mode = gemm_mode::relaxed});
  const auto xa = dequantize(a), wb = dequantize(b);
  double error = 0, signal = 0, drift = 0;
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      double dot = 0;
      for (index_t kk = 0; kk < k; ++kk) dot += double(xa[static_cast<std::size_t>(i * k + kk)]) * wb[static_cast<std::size_t>(j * k + kk)];
      const float e = exact[static_cast<std::size_t>(i * n + j)];
      error = std::max(error, std::fabs(e - dot));
      signal = std::max(signal, std::fabs(dot));
      drift = std::max(drift, std::fabs(double(e) - relaxed[static_cast<std::size_t>(i * n + j)]));
    }
  // The exact MMA loses only truncated bits (2^-35 relative per term) and the RZ steps, and alpha
  // differs from S_dec_a * S_dec_b by a few ulps: far below 1e-4 of the largest output.
  EXPECT_LT(error, 1e-4 * signal);
  EXPECT_LT(drift, 1e-4 * signal);
}

TEST(Gemm, EpilogueAppliesAlphaThenBetaCAndRoundsToBf16) {
  std::mt19937 rng(6);
  std::normal_distribution<float> normal;
  const index_t m = 8, n = 24, k = 96;
  std::vector<float> x(static_cast<std::size_t>(m * k)), w(static_cast<std::size_t>(n * k)), c(static_cast<std::size_t>(m * n));
  for (auto& v : x) v = normal(rng);
  for (auto& v : w) v = normal(rng);
  for (auto& v : c) v = normal(rng);
  const auto a = quantize<nvfp4_16x16>(matrix_view<const float>::row_major(x.data(), m, k));
  const auto b = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(w.data(), n, k));
  std::vector<float> d(c.size()), out(c.size());
  block_scaled_mma(a, b, {}, matrix_view<float>::row_major(d.data(), m, n));
  const auto c_view = matrix_view<const float>::row_major(c.data(), m, n);
  gemm(a, b, matrix_view<float>::row_major(out.data(), m, n), {.beta = 0.5f}, c_view);
  std::vector<bf16> out_bf16(c.size());
  gemm(a, b, matrix_view<bf16>::row_major(out_bf16.data(), m, n), {.beta = 0.5f}, c_view);
  const float alpha = gemm_alpha(a, b);
  for (std::size_t i = 0; i < d.size(); ++i) {
    EXPECT_EQ(out[i], std::fma(0.5f, c[i], alpha * d[i]));
    EXPECT_EQ(out_bf16[i], bf16::from_float(out[i]));
  }
  const auto unscaled = gemm(a, b, {.apply_alpha = false});
  EXPECT_TRUE(std::equal(unscaled.begin(), unscaled.end(), d.begin()));
}

TEST(GemmErrors, KMismatchWrongAxisAndOutputShapes) {
  std::vector<float> x(32 * 64, 1.0f), w(16 * 64, 1.0f);
  const auto a = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), 32, 64));
  const auto b = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(w.data(), 16, 64));
  const auto expect_code = [](auto&& call, errc code) {
    try {
      call();
      ADD_FAILURE() << "no error";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
    }
  };
  std::vector<float> d(32 * 16, -7.0f);
  const auto d_view = matrix_view<float>::row_major(d.data(), 32, 16);
  // B given as the columnwise copy ([K, N] instead of [N, K]): K does not match.
  const auto b_columnwise = quantize_rowwise_and_columnwise<nvfp4_1x16>(matrix_view<const float>::row_major(w.data(), 16, 64)).columnwise;
  expect_code([&] { block_scaled_mma(a, b_columnwise, {}, d_view); }, errc::shape_mismatch);
  std::vector<float> x48(32 * 48, 1.0f);
  const auto a48 = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x48.data(), 32, 48));
  expect_code([&] { (void)gemm(a48, b); }, errc::shape_mismatch);
  expect_code([&] { block_scaled_mma(a, b, {}, matrix_view<float>::row_major(d.data(), 16, 32)); }, errc::shape_mismatch);
  expect_code([&] { block_scaled_mma(a, b, matrix_view<const float>::row_major(d.data(), 32, 8), d_view); }, errc::shape_mismatch);
  expect_code([&] { block_scaled_mma(a, b, {}, matrix_view<float>(nullptr, 32, 16, 16, 1)); }, errc::null_pointer);
  for (float v : d) EXPECT_EQ(v, -7.0f) << "an output was written before the checks";
}

// Mixing NVFP4 with MXFP4, or passing MXFP8 (8-bit elements), does not compile.
template <class A, class B>
concept multipliable = requires(const quantized_tensor<A>& a, const quantized_tensor<B>& b) {
  gemm(a, b);
};
static_assert(multipliable<nvfp4_1x16, nvfp4_1x16> && multipliable<nvfp4_16x16, nvfp4_1x16> && multipliable<mxfp4, mxfp4>);
static_assert(!multipliable<nvfp4_1x16, mxfp4> && !multipliable<mxfp4, nvfp4_16x16>);
static_assert(!multipliable<mxfp8, mxfp8> && !multipliable<mxfp8, mxfp4>);

template <class F>
std::pair<errc, std::string> gemm_error_of(F&& call) {
  try {
    call();
  } catch (const error& e) {
    return {e.code(), e.what()};
  }
  return {errc{}, ""};
}

TEST(GemmErrors, AlphaOverflowIsReportedNamingTheOperandsAndWritesNothing) {
  // amax 2e19 each: amax_A * amax_B = 4e38 overflows float before the 1/(6*6*448*448) factor.
  std::vector<float> x(2 * 64, 2e19f);
  const auto a = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), 2, 64));
  std::vector<float> out(4, -7.0f);
  const auto [code, what] = gemm_error_of([&] { gemm(a, a, matrix_view<float>::row_major(out.data(), 2, 2)); });
  EXPECT_EQ(code, errc::overflow);
  EXPECT_NE(what.find("amax_A (2e+19) * amax_B (2e+19)"), std::string::npos) << what;
  for (float v : out) EXPECT_EQ(v, -7.0f);
  // Without alpha the scaled-domain product is fine.
  EXPECT_EQ(gemm(a, a, {.apply_alpha = false}).size(), 4u);

  // amax 1e19 each: alpha = 1e38 / 7225344 is finite, but alpha * D = 64 * 1e38 is not.
  std::vector<float> y(64, 1e19f);
  const auto b = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(y.data(), 1, 64));
  ASSERT_TRUE(std::isfinite(gemm_alpha(b, b)));
  const auto [code_2, what_2] = gemm_error_of([&] { (void)gemm(b, b); });
  EXPECT_EQ(code_2, errc::overflow);
  EXPECT_NE(what_2.find("at (0, 0) overflows float"), std::string::npos) << what_2;

  // An amax that is NaN or negative (set by hand) is an invalid argument, not an overflow.
  auto bad = b;
  bad.set_tensor_scale(NAN, 1.0f, 1.0f);
  EXPECT_EQ(gemm_error_of([&] { (void)gemm(bad, b); }).first, errc::invalid_argument);
}

TEST(GemmEmpty, AHugeDimensionBesideAZeroOneReturnsAtOnce) {
  const index_t huge = max_element_count;
  const quantized_tensor<nvfp4_1x16> a(huge, 0), b(0, 0), b_wide(huge, 0), b_k(5, 0);
  EXPECT_TRUE(gemm(a, b).empty());  // D is [2^40, 0]
  gemm(a, b, matrix_view<float>::row_major(nullptr, huge, 0));
  block_scaled_mma(a, b, {}, matrix_view<float>::row_major(nullptr, huge, 0));
  // K = 0 with a real output: D = 0.
  const quantized_tensor<nvfp4_1x16> small(3, 0);
  EXPECT_EQ(gemm(small, b_k), std::vector<float>(15, 0.0f));
  // [2^40, 0] x [2^40, 0]^T would be 2^80 elements: refused, not allocated.
  EXPECT_EQ(gemm_error_of([&] { (void)gemm(a, b_wide); }).first, errc::invalid_argument);
}

}  // namespace gemm_fp4_gemm_test
}  // namespace
}  // namespace nvfp4
