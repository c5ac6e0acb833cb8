// Tests of nvfp4/gemm/float_gemm.hpp: a hand-worked product whose K order shows, the fast path
// (packed tile kernel, gemm/detail/float_tile_kernel.hpp) against the reference for every edge of
// its blocking (M, N, K around the tile, the K chunk, the row block and the column group; K = 0
// and 1), every operand layout (row-major, transposed, doubly strided A and B; C absent,
// row-major, transposed or aliasing D; strided D), special values, on every ISA build and for 1
// and 2 threads, and bad shapes.
// NVFP4_TEST_ALL_ISAS
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "nvfp4/gemm/float_gemm.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace gemm_float_gemm_test {

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
    // B's storage holds it four ways: K-major without and with padding, row-major, and with both
    // strides > 1 (each packed by its own loop).
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
        EXPECT_EQ(test::float_bits(got), test::float_bits(want))
            << m << " " << n << " " << k << " layout " << layout << " threads " << threads;
      }
      // C aliasing D.
      std::vector<float> in_place = c;
      float_gemm(av, bv, matrix_view<const float>::row_major(in_place.data(), m, n), matrix_view<float>::row_major(in_place.data(), m, n));
      EXPECT_EQ(test::float_bits(in_place), test::float_bits(want)) << "layout " << layout;
    }
  }
}

/// The storage of a [rows, cols] operand in one of four layouts: row-major, transposed (column-major),
/// row-major with a padded row, both strides > 1.
struct stored_matrix {
  std::vector<float> storage;
  matrix_view<float> view;
  stored_matrix(index_t rows, index_t cols, int layout)
      : storage(static_cast<std::size_t>(std::max<index_t>(1, 2 * (rows + 3) * (cols + 3)))) {
    float* p = storage.data();
    switch (layout) {
      case 0:
        view = matrix_view<float>::row_major(p, rows, cols);
        break;
      case 1:
        view = matrix_view<float>::row_major(p, cols, rows).transposed();
        break;
      case 2:
        view = matrix_view<float>(p, rows, cols, cols + 3, 1);
        break;
      default:
        view = matrix_view<float>(p, rows, cols, 2 * (cols + 1), 2);
        break;
    }
  }
  void fill(unsigned seed) {
    const std::vector<float> values = test::random_values(view.rows() * view.cols(), seed);
    for (index_t i = 0; i < view.rows(); ++i)
      for (index_t j = 0; j < view.cols(); ++j) view(i, j) = values[static_cast<std::size_t>(i * view.cols() + j)];
  }
  std::vector<float> values() const {
    std::vector<float> out;
    for (index_t i = 0; i < view.rows(); ++i)
      for (index_t j = 0; j < view.cols(); ++j) out.push_back(view(i, j));
    return out;
  }
};

TEST(FloatGemm, FastEqualsReferenceAcrossTheBlocking) {
  // Tiles are 12 x 32 (AVX-512), 6 x 16 (AVX2) or 4 x 4 (scalar), last tiles of a third or two
  // thirds of their rows; K chunks of 256; row blocks of 16 tiles (one block: B packed per item);
  // column groups of 256 (128 for at most 16 rows).
  const std::tuple<index_t, index_t, index_t> shapes[] = {{1, 1, 1},     {3, 5, 0},      {13, 33, 1},  {12, 32, 256},
                                                          {25, 65, 257}, {16, 1030, 9},  {7, 300, 70}, {17, 1100, 5},
                                                          {193, 47, 40}, {97, 131, 600}, {200, 40, 3}};
  int combination = 0;
  for (auto [m, n, k] : shapes)
    for (int a_layout = 0; a_layout < 4; ++a_layout)
      for (int b_layout = 0; b_layout < 4; ++b_layout, ++combination) {
        stored_matrix a(m, k, a_layout), b(n, k, b_layout);
        a.fill(1 + combination);
        b.fill(1000 + combination);
        // C: absent, or in one of the layouts; D: row-major or strided; by turns.
        const int c_layout = combination % 5 - 1, d_layout = combination % 3 == 0 ? 3 : (combination % 3 == 1 ? 1 : 0);
        stored_matrix c(m, n, std::max(c_layout, 0));
        c.fill(2000 + combination);
        const matrix_view<const float> cv = c_layout < 0 ? matrix_view<const float>{} : matrix_view<const float>(c.view);
        stored_matrix want(m, n, 0);
        reference::float_gemm(a.view, b.view, cv, want.view);
        for (int threads : {1, 2}) {
          test::set_threads(threads);
          stored_matrix got(m, n, d_layout);
          float_gemm(a.view, b.view, cv, got.view);
          EXPECT_EQ(test::float_bits(got.values()), test::float_bits(want.values()))
              << m << "x" << n << "x" << k << " A layout " << a_layout << " B layout " << b_layout << " C layout " << c_layout
              << " D layout " << d_layout << " threads " << threads;
        }
        if (c_layout >= 0) {  // C aliasing D, in C's layout
          float_gemm(a.view, b.view, cv, c.view);
          EXPECT_EQ(test::float_bits(c.values()), test::float_bits(want.values())) << m << "x" << n << "x" << k << " C aliasing D";
        }
      }
}

TEST(FloatGemm, SpecialValuesFollowTheChain) {
  // Infinities, NaNs, signed zeros and subnormals in A and B: the fast path's padding lanes must
  // not leak into outputs, and each output must be the reference's chain bit for bit.
  const index_t m = 29, n = 70, k = 300;
  std::vector<float> a = test::random_values(m * k, 5), b = test::random_values(n * k, 6);
  const float specials[] = {INFINITY, -INFINITY, NAN, -0.0f, 0.0f, 1e-40f, -1e-42f, 3e38f};
  for (std::size_t i = 0; i < a.size(); i += 97) a[i] = specials[i % 8];
  for (std::size_t i = 0; i < b.size(); i += 89) b[i] = specials[(i / 89) % 8];
  const auto av = matrix_view<const float>::row_major(a.data(), m, k), bv = matrix_view<const float>::row_major(b.data(), n, k);
  std::vector<float> want(m * n), got(m * n);
  reference::float_gemm(av, bv, {}, matrix_view<float>::row_major(want.data(), m, n));
  float_gemm(av, bv, {}, matrix_view<float>::row_major(got.data(), m, n));
  EXPECT_EQ(test::float_bits(got), test::float_bits(want));
  // -0 products into an absent C give +0 (the chain starts from +0), as the reference's.
  const std::vector<float> neg = {-1.0f}, zero = {0.0f};
  float out = 1.0f;
  float_gemm(matrix_view<const float>::row_major(neg.data(), 1, 1), matrix_view<const float>::row_major(zero.data(), 1, 1), {},
             matrix_view<float>::row_major(&out, 1, 1));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(out), 0u);
}

TEST(FloatGemm, BadShapes) {
  std::vector<float> a(12), b(12), d(16);
  const auto av = matrix_view<const float>::row_major(a.data(), 4, 3), bv = matrix_view<const float>::row_major(b.data(), 3, 4);
  EXPECT_EQ(test::error_code_of([&] { float_gemm(av, bv, {}, matrix_view<float>::row_major(d.data(), 4, 3)); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { float_gemm(av, av, {}, matrix_view<float>::row_major(d.data(), 4, 3)); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { float_gemm(av, av, {}, matrix_view<float>(nullptr, 4, 4, 4, 1)); }), errc::null_pointer);
  EXPECT_EQ(test::error_code_of([&] { float_gemm(av, av, {}, matrix_view<float>::row_major(d.data(), 4, 4)); }), errc{});
}

}  // namespace gemm_float_gemm_test
}  // namespace
}  // namespace nvfp4
