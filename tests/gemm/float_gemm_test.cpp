// Tests of nvfp4/gemm/float_gemm.hpp: a hand-worked product whose K order shows, the fast path
// against the reference (B read in place or packed: K-major, padded, row-major and doubly strided
// views; C aliasing D, sizes across the blocking)
// on every ISA build and for 1 and 2 threads, and bad shapes.
// NVFP4_TEST_ALL_ISAS
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "nvfp4/gemm/float_gemm.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {

TEST(FloatGemm, OneFmaChainInKOrder) {
  // [1e8, 1, -1e8, 1] . [1, 1, 1, 1]: in K order with one rounding per step, 1e8 + 1 rounds to 1e8
  // (ulp 8), then 0, then 1. A pairwise sum would give 2.
  const std::vector<float> a = {1e8f, 1.0f, -1e8f, 1.0f}, b = {1.0f, 1.0f, 1.0f, 1.0f};
  float d = 0.0f;
  float_gemm(matrix_view<const float>::row_major(a.data(), 1, 4), matrix_view<const float>::row_major(b.data(), 1, 4), {},
             matrix_view<float>::row_major(&d, 1, 1));
  EXPECT_EQ(d, 1.0f);
  // With C = 0.5: the chain starts from it.
  const float c = 0.5f;
  float_gemm(matrix_view<const float>::row_major(a.data(), 1, 4), matrix_view<const float>::row_major(b.data(), 1, 4),
             matrix_view<const float>::row_major(&c, 1, 1), matrix_view<float>::row_major(&d, 1, 1));
  EXPECT_EQ(d, 1.0f);  // (0.5 + 1e8) -> 1e8, + 1 -> 1e8, - 1e8 -> 0, + 1 -> 1
}

TEST(FloatGemm, FastEqualsReference) {
  std::mt19937 gen(3);
  std::normal_distribution<float> normal;
  for (auto [m, n, k] : {std::tuple<index_t, index_t, index_t>{1, 1, 1}, {5, 70, 300}, {130, 300, 70}, {70, 260, 513}, {16, 64, 40}}) {
    // B's storage holds it four ways: K-major without and with padding (the fast path reads both
    // in place, copying only a last block narrower than 64 columns), row-major, and with both
    // strides > 1 (packed panel by panel).
    const index_t ld = n + 3;
    std::vector<float> a(m * k), b(k * ld * 2), c(m * n);
    for (auto& v : a) v = normal(gen);
    for (auto& v : b) v = normal(gen);
    for (auto& v : c) v = normal(gen);
    const auto av = matrix_view<const float>::row_major(a.data(), m, k);
    const auto cv = matrix_view<const float>::row_major(c.data(), m, n);
    const matrix_view<const float> layouts[] = {
        matrix_view<const float>::row_major(b.data(), k, n).transposed(),
        matrix_view<const float>(b.data(), n, k, 1, ld),
        matrix_view<const float>::row_major(b.data(), n, k),
        matrix_view<const float>(b.data(), n, k, 2, 2 * n),
    };
    for (int layout = 0; layout < 4; ++layout) {
      const auto bv = layouts[layout];
      std::vector<float> want(m * n), got(m * n);
      reference::float_gemm(av, bv, cv, matrix_view<float>::row_major(want.data(), m, n));
      for (int threads : {1, 2}) {
#if defined(_OPENMP)
        omp_set_num_threads(threads);
#endif
        float_gemm(av, bv, cv, matrix_view<float>::row_major(got.data(), m, n));
        EXPECT_EQ(test::float_bits(got), test::float_bits(want)) << m << " " << n << " " << k << " layout " << layout << " threads " << threads;
      }
      // C aliasing D.
      std::vector<float> in_place = c;
      float_gemm(av, bv, matrix_view<const float>::row_major(in_place.data(), m, n), matrix_view<float>::row_major(in_place.data(), m, n));
      EXPECT_EQ(test::float_bits(in_place), test::float_bits(want)) << "layout " << layout;
    }
  }
}

TEST(FloatGemm, BadShapes) {
  std::vector<float> a(12), b(12), d(16);
  const auto av = matrix_view<const float>::row_major(a.data(), 4, 3), bv = matrix_view<const float>::row_major(b.data(), 3, 4);
  EXPECT_EQ(test::error_code_of([&] { float_gemm(av, bv, {}, matrix_view<float>::row_major(d.data(), 4, 3)); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { float_gemm(av, av, {}, matrix_view<float>::row_major(d.data(), 4, 3)); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { float_gemm(av, av, {}, matrix_view<float>(nullptr, 4, 4, 4, 1)); }), errc::null_pointer);
  EXPECT_EQ(test::error_code_of([&] { float_gemm(av, av, {}, matrix_view<float>::row_major(d.data(), 4, 4)); }), errc{});
}

}  // namespace
}  // namespace nvfp4
