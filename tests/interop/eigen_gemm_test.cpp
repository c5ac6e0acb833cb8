// Tests for nvfp4/interop/eigen_gemm.hpp: the Eigen-in / Eigen-out GEMMs give the core GEMM's
// bits in row-major order, take either storage order, and a hand-worked exact product.
#include "nvfp4/interop/eigen_gemm.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace nvfp4 {
namespace {
namespace interop_eigen_gemm_test {

Eigen::MatrixXf random_matrix(index_t rows, index_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Eigen::MatrixXf m(rows, cols);
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c) m(r, c) = normal(rng);
  return m;
}

TEST(EigenGemm, HandWorkedExactProduct) {
  // Every row of x repeats ±(0.5, 1, 2, 3, 4, 6): E2M1 values under one block scale (amax 6 ->
  // S_enc 448, each block's scale 448), so quantization is exact and, without alpha, the
  // scaled-domain product of rows r and s is ±448² Σ_c values[c % 6]² = ±448² (10 · 66.25 + 14.25).
  const float values[6] = {0.5f, 1.0f, 2.0f, 3.0f, 4.0f, 6.0f};
  Eigen::MatrixXf x(16, 64);
  for (index_t r = 0; r < 16; ++r)
    for (index_t c = 0; c < 64; ++c) x(r, c) = values[c % 6] * (r % 2 ? -1.0f : 1.0f);
  gemm_options no_alpha;
  no_alpha.apply_alpha = false;
  const float expected = 448.0f * 448.0f * 676.75f;
  for (const auto mode : {gemm_mode::exact, gemm_mode::relaxed}) {
    no_alpha.mode = mode;
    const eigen::row_major_matrix_f32 d = eigen::gemm<nvfp4_1x16>(x, x.transpose(), no_alpha);
    ASSERT_EQ(d.rows(), 16);
    ASSERT_EQ(d.cols(), 16);
    for (index_t r = 0; r < 16; ++r)
      for (index_t s = 0; s < 16; ++s) EXPECT_EQ(d(r, s), (r % 2 == s % 2 ? 1.0f : -1.0f) * expected) << r << "," << s;
  }
}

TEST(EigenGemm, QuantizedOverloadIsTheCoreGemmInRowMajorOrder) {
  const Eigen::MatrixXf a = random_matrix(20, 96, 1), b = random_matrix(12, 96, 2);
  const auto qa = eigen::quantize<nvfp4_1x16>(a);
  const auto qb = eigen::quantize<nvfp4_16x16>(b);
  for (const auto mode : {gemm_mode::exact, gemm_mode::relaxed}) {
    gemm_options options;
    options.mode = mode;
    const std::vector<float> core = nvfp4::gemm(qa, qb, options);
    const eigen::row_major_matrix_f32 d = eigen::gemm(qa, qb, options);
    ASSERT_EQ(d.rows(), 20);
    ASSERT_EQ(d.cols(), 12);
    EXPECT_TRUE(std::equal(core.begin(), core.end(), d.data()));
  }
}

TEST(EigenGemm, EigenOverloadQuantizesAAlongRowsAndBAlongColumns) {
  // B given as [K, N] in both storage orders; the recipe is quantize(A), quantize(Bᵀ).
  const Eigen::MatrixXf a = random_matrix(8, 64, 3), b_t = random_matrix(24, 64, 4);
  const Eigen::MatrixXf b = b_t.transpose();          // [K, N], column-major
  const eigen::row_major_matrix_f32 b_row_major = b;  // [K, N], row-major
  const auto expected = nvfp4::gemm(eigen::quantize<nvfp4_1x16>(a), eigen::quantize<nvfp4_16x16>(b_t));
  for (const eigen::row_major_matrix_f32& d :
       {eigen::gemm<nvfp4_1x16, nvfp4_16x16>(a, b), eigen::gemm<nvfp4_1x16, nvfp4_16x16>(a, b_row_major),
        eigen::gemm<nvfp4_1x16, nvfp4_16x16>(a, b_t.transpose())}) {
    ASSERT_EQ(d.rows(), 8);
    ASSERT_EQ(d.cols(), 24);
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), d.data()));
  }
  // MXFP4 operands (E8M0 scales per 32) go through the same door.
  const auto mx = nvfp4::gemm(eigen::quantize<mxfp4>(a), eigen::quantize<mxfp4>(b_t));
  const eigen::row_major_matrix_f32 d_mx = eigen::gemm<mxfp4>(a, b);
  EXPECT_TRUE(std::equal(mx.begin(), mx.end(), d_mx.data()));
}

TEST(EigenGemm, RejectsOperandsThatDoNotChain) {
  const Eigen::MatrixXf a = random_matrix(8, 64, 5), b = random_matrix(32, 8, 6);
  try {
    eigen::gemm<nvfp4_1x16>(a, b);
    ADD_FAILURE() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::shape_mismatch);
    EXPECT_NE(std::string(e.what()).find("8x64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(eigen::gemm(eigen::quantize<nvfp4_1x16>(a), eigen::quantize<nvfp4_1x16>(b)), error);
}

TEST(EigenGemm, DequantizeThenGemmIsCloseToTheExactProduct) {
  const Eigen::MatrixXf a = random_matrix(16, 128, 7), b = random_matrix(16, 128, 8);
  const auto qa = eigen::quantize<nvfp4_1x16>(a), qb = eigen::quantize<nvfp4_1x16>(b);
  const eigen::row_major_matrix_f32 exact = eigen::gemm(qa, qb);
  const eigen::row_major_matrix_f32 baseline = eigen::dequantize_then_gemm(qa, qb);
  // Same products, different summation order and alpha rounding: fp32-close, not equal bits.
  EXPECT_GT(eigen::compare(exact, baseline).sqnr_db, 100.0);
}

}  // namespace interop_eigen_gemm_test
}  // namespace
}  // namespace nvfp4
