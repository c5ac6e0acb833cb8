// Tests for nvfp4/nn/matmul.hpp: the FP32 product against a double-precision oracle, strided and
// transposed operands, accumulate, 1 vs 2 threads bit for bit, and bad shapes.
#include "nvfp4/nn/matmul.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#if NVFP4_HAS_OPENMP
#include <omp.h>
#endif

namespace nvfp4::nn {
namespace {

std::vector<float> random_values(index_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(count));
  for (auto& x : v) x = normal(rng);
  return v;
}

using cview = matrix_view<const float>;
using view = matrix_view<float>;

TEST(Matmul, HandWorked2x2) {
  const std::vector<float> a{1, 2, 3, 4}, b{5, 6, 7, 8};
  std::vector<float> c(4, -1.0f);
  matmul(cview::row_major(a.data(), 2, 2), cview::row_major(b.data(), 2, 2), view::row_major(c.data(), 2, 2));
  EXPECT_EQ(c, (std::vector<float>{19, 22, 43, 50}));
  matmul(cview::row_major(a.data(), 2, 2), cview::row_major(b.data(), 2, 2), view::row_major(c.data(), 2, 2), true);
  EXPECT_EQ(c, (std::vector<float>{38, 44, 86, 100}));
  // Aᵀ·B through a transposed view: [1 3; 2 4]·[5 6; 7 8]
  matmul(cview::row_major(a.data(), 2, 2).transposed(), cview::row_major(b.data(), 2, 2), view::row_major(c.data(), 2, 2));
  EXPECT_EQ(c, (std::vector<float>{26, 30, 38, 44}));
}

TEST(Matmul, MatchesDoubleOracleForAnyLayout) {
  for (index_t m : {1, 3, 4, 9, 33}) {
    for (index_t n : {1, 5, 16, 70}) {
      const index_t k = 37;
      const auto a = random_values(m * k, 1), bt = random_values(n * k, 2);
      std::vector<float> c(static_cast<std::size_t>(m * n));
      // B given as the transpose of a row-major [N, K] matrix (what Y = X·Wᵀ uses).
      matmul(cview::row_major(a.data(), m, k), cview::row_major(bt.data(), n, k).transposed(), view::row_major(c.data(), m, n));
      for (index_t i = 0; i < m; ++i)
        for (index_t j = 0; j < n; ++j) {
          double s = 0.0, mag = 0.0;
          for (index_t q = 0; q < k; ++q) {
            s += static_cast<double>(a[static_cast<std::size_t>(i * k + q)]) * bt[static_cast<std::size_t>(j * k + q)];
            mag += std::fabs(static_cast<double>(a[static_cast<std::size_t>(i * k + q)]) * bt[static_cast<std::size_t>(j * k + q)]);
          }
          // FP32 accumulation of k terms: error below k·2^-24·Σ|terms| (with margin).
          EXPECT_NEAR(c[static_cast<std::size_t>(i * n + j)], s, 1e-6 * static_cast<double>(k) * mag + 1e-30) << m << "x" << n;
        }
    }
  }
}

TEST(Matmul, SameBitsForOneAndTwoThreads) {
#if NVFP4_HAS_OPENMP
  const index_t m = 130, n = 96, k = 64;
  const auto a = random_values(m * k, 3), b = random_values(k * n, 4);
  std::vector<float> one(static_cast<std::size_t>(m * n)), two(one.size());
  omp_set_num_threads(1);
  matmul(cview::row_major(a.data(), m, k), cview::row_major(b.data(), k, n), view::row_major(one.data(), m, n));
  omp_set_num_threads(2);
  matmul(cview::row_major(a.data(), m, k), cview::row_major(b.data(), k, n), view::row_major(two.data(), m, n));
  EXPECT_EQ(one, two);
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}

TEST(Matmul, RejectsBadShapes) {
  std::vector<float> a(6), b(6), c(4);
  EXPECT_THROW(matmul(cview::row_major(a.data(), 2, 3), cview::row_major(b.data(), 2, 3), view::row_major(c.data(), 2, 2)), error);
  try {
    matmul(cview::row_major(a.data(), 2, 3), cview::row_major(b.data(), 3, 2), view::row_major(c.data(), 2, 3));
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::shape_mismatch);
  }
  EXPECT_THROW(matmul(cview::row_major(nullptr, 2, 3), cview::row_major(b.data(), 3, 2), view::row_major(c.data(), 2, 2)), error);
}

}  // namespace
}  // namespace nvfp4::nn
