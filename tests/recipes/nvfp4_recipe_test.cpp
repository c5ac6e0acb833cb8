// Tests of nvfp4/recipes/nvfp4_recipe.hpp: each role's copies against the primitives and the
// recipe's rules (docs/numerics_spec.md §8), the recipe switches, the wgrad product with RHT on both
// operands against a double-precision dense product, determinism, bad shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nvfp4/recipes/nvfp4_recipe.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {

using test::bytes_of;
/// Gaussian values that are bf16 values (as a model's tensors are).
std::vector<float> gaussian(index_t n, unsigned seed) {
  std::vector<float> out;
  for (bf16 v : test::random_values<bf16>(n, seed)) out.push_back(v.to_float());
  return out;
}

constexpr index_t M = 64, K = 48, N = 32;

TEST(Nvfp4Recipe, ActivationRoles) {
  const auto values = gaussian(M * K, 1);
  const auto x = matrix_view<const float>::row_major(values.data(), M, K);
  const auto ops = quantize_activation(x);
  EXPECT_EQ(bytes_of(ops.rowwise.tensor), bytes_of(quantize<nvfp4_1x16>(x)));
  EXPECT_EQ(bytes_of(ops.columnwise.tensor), bytes_of(quantize_columnwise_rht(x)));
  EXPECT_EQ(ops.columnwise.tensor.amax(), rht_columnwise(x).amax);  // taken after the transform
  EXPECT_EQ(ops.columnwise.tensor.rows(), K);
  const auto plain = quantize_activation(x, {.disable_rht = true});
  EXPECT_EQ(bytes_of(plain.columnwise.tensor), bytes_of(quantize_rowwise_and_columnwise<nvfp4_1x16>(x).columnwise));
}

TEST(Nvfp4Recipe, WeightTilesServeBothDirections) {
  const auto values = gaussian(N * K, 2);
  const auto w = matrix_view<const float>::row_major(values.data(), N, K);
  const auto ops = quantize_weight(w);
  for (index_t r = 0; r < N; ++r)
    for (index_t c = 0; c < K; ++c) {
      ASSERT_EQ(ops.rowwise.tensor.element(r, c), ops.columnwise.tensor.element(c, r)) << r << "," << c;
      ASSERT_EQ(ops.rowwise.tensor.scale(r, c / 16), ops.columnwise.tensor.scale(c, r / 16));
      ASSERT_EQ(ops.rowwise.tensor.scale(r, c / 16), ops.rowwise.tensor.scale(r / 16 * 16, c / 16));  // one scale per tile
    }
  const auto tiles = quantize<nvfp4_16x16>(w);
  EXPECT_EQ(bytes_of(ops.rowwise.tensor), bytes_of(detail::as_row_blocks(tiles)));
  const auto one_d = quantize_weight(w, {.disable_2d_quantization = true});
  EXPECT_EQ(bytes_of(one_d.rowwise.tensor), bytes_of(quantize<nvfp4_1x16>(w)));
}

TEST(Nvfp4Recipe, GradientsUseStochasticRoundingAndRht) {
  const auto values = gaussian(M * N, 3);
  const auto dy = matrix_view<const float>::row_major(values.data(), M, N);
  const auto sr = quantize_gradient(dy, {.seed = 5});
  const auto rn = quantize_gradient(dy, {.disable_stochastic_rounding = true, .seed = 5});
  EXPECT_EQ(bytes_of(rn.rowwise.tensor), bytes_of(quantize<nvfp4_1x16>(dy)));
  EXPECT_EQ(bytes_of(rn.columnwise.tensor), bytes_of(quantize_columnwise_rht(dy)));
  EXPECT_NE(bytes_of(sr.rowwise.tensor), bytes_of(rn.rowwise.tensor));
  EXPECT_NE(bytes_of(sr.columnwise.tensor), bytes_of(rn.columnwise.tensor));
  // Same scales (SR changes elements only), same seed -> same result, other seed -> other draw.
  EXPECT_TRUE(std::equal(sr.rowwise.tensor.scales().begin(), sr.rowwise.tensor.scales().end(), rn.rowwise.tensor.scales().begin()));
  EXPECT_EQ(bytes_of(quantize_gradient(dy, {.seed = 5}).rowwise.tensor), bytes_of(sr.rowwise.tensor));
  EXPECT_NE(bytes_of(quantize_gradient(dy, {.seed = 6}).rowwise.tensor), bytes_of(sr.rowwise.tensor));
}

// The wgrad operands carry the same T along M, so A·Bᵀ estimates dYᵀ X (T Tᵀ = I): compared with
// a double dense product, the relative Frobenius error is that of 4-bit quantization (well under
// 20%), and a mismatched transform on one side (no RHT) would make it ~100%.
TEST(Nvfp4Recipe, WgradProductWithRhtMatchesDenseProduct) {
  const auto xv = gaussian(M * K, 4), wv = gaussian(N * K, 5), dyv = gaussian(M * N, 6);
  const auto x = matrix_view<const float>::row_major(xv.data(), M, K);
  const auto w = matrix_view<const float>::row_major(wv.data(), N, K);
  const auto dy = matrix_view<const float>::row_major(dyv.data(), M, N);
  const auto ops = quantize_linear_operands(x, w, dy);
  auto relative_error = [](const nvfp4_tensor& a, const nvfp4_tensor& b, auto exact) {
    const auto da = dequantize(a), db = dequantize(b);
    double error = 0, norm = 0;
    for (index_t i = 0; i < a.rows(); ++i)
      for (index_t j = 0; j < b.rows(); ++j) {
        double got = 0;
        for (index_t k = 0; k < a.cols(); ++k) got += double(da[std::size_t(i * a.cols() + k)]) * db[std::size_t(j * b.cols() + k)];
        const double want = exact(i, j);
        error += (got - want) * (got - want);
        norm += want * want;
      }
    return std::sqrt(error / norm);
  };
  const auto wgrad = ops.wgrad();
  const double wgrad_error = relative_error(wgrad.a->tensor, wgrad.b->tensor, [&](index_t n, index_t k) {
    double s = 0;
    for (index_t m = 0; m < M; ++m) s += double(dy(m, n)) * x(m, k);
    return s;
  });
  EXPECT_LT(wgrad_error, 0.2);
  const auto fprop = ops.fprop();
  EXPECT_LT(relative_error(fprop.a->tensor, fprop.b->tensor, [&](index_t m, index_t n) {
              double s = 0;
              for (index_t k = 0; k < K; ++k) s += double(x(m, k)) * w(n, k);
              return s;
            }),
            0.2);
  const auto dgrad = ops.dgrad();
  EXPECT_LT(relative_error(dgrad.a->tensor, dgrad.b->tensor, [&](index_t m, index_t k) {
              double s = 0;
              for (index_t n = 0; n < N; ++n) s += double(dy(m, n)) * w(n, k);
              return s;
            }),
            0.2);
  // RHT on only one side breaks the product: the check above can fail.
  const auto unrotated = quantize_activation(x, {.disable_rht = true});
  EXPECT_GT(relative_error(wgrad.a->tensor, unrotated.columnwise.tensor, [&](index_t n, index_t k) {
              double s = 0;
              for (index_t m = 0; m < M; ++m) s += double(dy(m, n)) * x(m, k);
              return s;
            }),
            0.5);
}

TEST(Nvfp4Recipe, BadShapes) {
  const auto v = gaussian(M * K, 7);
  const auto x = matrix_view<const float>::row_major(v.data(), M, K);
  const auto w = matrix_view<const float>::row_major(v.data(), N, K + 16);
  try {
    (void)quantize_linear_operands(x, w, x);
    ADD_FAILURE();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::shape_mismatch);
  }
  const auto odd = matrix_view<const float>::row_major(v.data(), 24, 16);  // M = 24, not a multiple of 16
  try {
    (void)quantize_activation(odd);
    ADD_FAILURE();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::shape_mismatch);
  }
  EXPECT_NO_THROW((void)quantize_activation(odd, {.disable_rht = true}));
}

}  // namespace
}  // namespace nvfp4
