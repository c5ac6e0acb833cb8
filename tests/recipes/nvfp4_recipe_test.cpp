// Tests of nvfp4/recipes/nvfp4_recipe.hpp: each role's copies against the primitives and the
// recipe's rules (docs/numerics_spec.md §8), the recipe switches, the wgrad product with RHT on both
// operands against a double-precision dense product, determinism, bad shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "nvfp4/recipes/nvfp4_recipe.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace recipes_nvfp4_recipe_test {

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
  EXPECT_EQ(bytes_of(ops.rowwise.tensor), bytes_of(tiles));  // the tiles' bytes, relabelled as 1x16 rows
  EXPECT_EQ(ops.rowwise.tensor.amax(), tiles.amax());
  const auto one_d = quantize_weight(w, {.disable_2d_quantization = true});
  EXPECT_EQ(bytes_of(one_d.rowwise.tensor), bytes_of(quantize<nvfp4_1x16>(w)));
}

// W's columnwise copy is made by transposing its rowwise 16x16 tiles (one quantization of W): the
// bytes quantizing Wᵀ in 16x16 tiles gives, for shapes with partial tiles and odd lengths too, from
// fp32 and bf16 values, into operands that held other shapes before.
TEST(Nvfp4Recipe, WeightColumnwiseCopyIsTheTilesOfTheTranspose) {
  nvfp4_operand row, col;
  nvfp4_role_storage storage;
  for (const auto& [rows, cols] : {std::pair<index_t, index_t>{32, 48}, {37, 50}, {16, 17}, {1, 1}, {5, 33}, {48, 3}, {64, 128}, {130, 96}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    const auto values = gaussian(rows * cols, 11);
    const auto w = matrix_view<const float>::row_major(values.data(), rows, cols);
    const auto expected = quantize<nvfp4_16x16>(w.transposed(), {.axis = quantized_axis::columnwise});
    quantize_weight_into(w, {}, {}, row, &col, storage);
    EXPECT_EQ(bytes_of(col.tensor), bytes_of(expected));
    EXPECT_EQ(col.tensor.rows(), cols);
    EXPECT_EQ(col.tensor.axis(), quantized_axis::columnwise);
    EXPECT_EQ(col.tensor.amax(), expected.amax());
    EXPECT_EQ(col.tensor.encode_scale(), expected.encode_scale());
    std::vector<bf16> narrow;
    for (float v : values) narrow.push_back(bf16::from_float(v));
    const auto wb = matrix_view<const bf16>::row_major(narrow.data(), rows, cols);
    quantize_weight_into(wb, {}, {}, row, &col, storage);
    EXPECT_EQ(bytes_of(col.tensor), bytes_of(quantize<nvfp4_16x16>(wb.transposed(), {.axis = quantized_axis::columnwise})));
  }
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
  EXPECT_LT(relative_error(fprop.a->tensor, fprop.b->tensor,
                           [&](index_t m, index_t n) {
                             double s = 0;
                             for (index_t k = 0; k < K; ++k) s += double(x(m, k)) * w(n, k);
                             return s;
                           }),
            0.2);
  const auto dgrad = ops.dgrad();
  EXPECT_LT(relative_error(dgrad.a->tensor, dgrad.b->tensor,
                           [&](index_t m, index_t k) {
                             double s = 0;
                             for (index_t n = 0; n < N; ++n) s += double(dy(m, n)) * w(n, k);
                             return s;
                           }),
            0.2);
  // RHT on only one side breaks the product: the check above can fail.
  const auto unrotated = quantize_activation(x, {.disable_rht = true});
  EXPECT_GT(relative_error(wgrad.a->tensor, unrotated.columnwise.tensor,
                           [&](index_t n, index_t k) {
                             double s = 0;
                             for (index_t m = 0; m < M; ++m) s += double(dy(m, n)) * x(m, k);
                             return s;
                           }),
            0.5);
}

// TE's NVFP4 epilogue on hand-made operands: one K=16 block whose MMA result D is known.
TEST(Nvfp4Recipe, GemmEpilogueAlphaBoundsRowScalingBias) {
  // A: 2 rows, B: 3 rows, K = 16; every element code 0x2 (E2M1 1.0) at k = 0 only, block scale
  // 1.0 (UE4M3 0x38): D = 1 for every output.
  const auto make = [](index_t rows) {
    nvfp4_tensor t(rows, 16);
    for (index_t r = 0; r < rows; ++r) {
      t.data()[static_cast<std::size_t>(r * t.data_row_stride())] = e2m1x2(e2m1::from_bits(0x2), e2m1::from_bits(0));
      t.scales()[static_cast<std::size_t>(r)] = ue4m3::from_bits(0x38);
    }
    return t;
  };
  nvfp4_operand a{make(2), 448.0f, {}}, b{make(3), 256.0f, {}};
  a.tensor.set_tensor_scale(10.0f, 1.0f, 1.0f);
  b.tensor.set_tensor_scale(3.0f, 1.0f, 1.0f);
  std::vector<float> out(6);
  const auto view = matrix_view<float>::row_major(out.data(), 2, 3);
  // Per tensor: alpha = (10 * 3) * (1 / (36 * 448 * 256)), B's bound 256 (a 4over6 tensor).
  const std::vector<float> bias = {0.5f, -1.0f, 2.0f};
  nvfp4_gemm(a, b, view, gemm_mode::exact, bias);
  const float factor = 1.0f / (6.0f * 6.0f * 448.0f * 256.0f);
  EXPECT_EQ(nvfp4_alpha_factor(448.0f, 256.0f), factor);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(out[std::size_t(3 + j)], 30.0f * factor + bias[std::size_t(j)]) << j;
  // Row-scaled A (amaxes 2 and 5) with per-tensor B: factor * D, times r_i * 3.
  a.row_amax = {2.0f, 5.0f};
  nvfp4_gemm(a, b, view);
  EXPECT_EQ(out[0], factor * (2.0f * 3.0f));
  EXPECT_EQ(out[4], factor * (5.0f * 3.0f));
  // Both row-scaled: times r_i, then times c_j.
  b.row_amax = {7.0f, 11.0f, 13.0f};
  nvfp4_gemm(a, b, view);
  EXPECT_EQ(out[5], (factor * 5.0f) * 13.0f);
  // bf16 output: the fp32 value rounded once.
  std::vector<bf16> out16(6);
  nvfp4_gemm(a, b, matrix_view<bf16>::row_major(out16.data(), 2, 3));
  EXPECT_EQ(out16[5], bf16::from_float((factor * 5.0f) * 13.0f));
  // A bad row-amax count is a shape mismatch.
  b.row_amax.pop_back();
  EXPECT_EQ(test::error_code_of([&] { nvfp4_gemm(a, b, view); }), errc::shape_mismatch);
}

/// An operand's bits: its tensor's bytes and tensor scale, its bound and row amaxes.
std::vector<float> operand_bits(const nvfp4_operand& op) {
  std::vector<float> out{op.tensor.amax(), op.e4m3_max, static_cast<float>(op.tensor.rows()), static_cast<float>(op.tensor.cols())};
  for (std::uint8_t b : bytes_of(op.tensor)) out.push_back(b);
  out.insert(out.end(), op.row_amax.begin(), op.row_amax.end());
  return out;
}

// NVFP4's role rules are written once: the into forms write the value forms' bits into operands
// and storage the caller keeps, whatever those held before (other shapes, other recipes), and a
// known amax (the caller's finite pass) gives the same bits as the quantizers' own.
TEST(Nvfp4Recipe, IntoFormsGiveTheValueFormsBits) {
  const nvfp4_amax_rule half = [](const nvfp4_amax_query& q) { return 0.5f * q.amax; };
  const std::vector<nvfp4_block_scaling> recipes = {{},
                                                    {.disable_rht = true},
                                                    {.disable_2d_quantization = true},
                                                    {.disable_stochastic_rounding = true, .seed = 7},
                                                    {.disable_rht = true, .nvfp4_4over6 = four_over_six_scope::all},
                                                    {.nvfp4_4over6 = four_over_six_scope::weights},
                                                    {.disable_rht = true, .row_scaled_activation = true}};
  nvfp4_operand row, col;  // kept across every case below, as a layer keeps them
  nvfp4_role_storage storage;
  for (const auto& [rows, cols] : {std::pair<index_t, index_t>{64, 48}, {32, 96}, {80, 64}}) {
    const auto xs = gaussian(rows * cols, 3);
    const auto x = matrix_view<const float>::row_major(xs.data(), rows, cols);
    for (const nvfp4_block_scaling& r : recipes) {
      for (const bool with_rule : {false, true}) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + (with_rule ? " with a rule" : ""));
        const nvfp4_amax_rule rule = with_rule && !r.row_scaled_activation ? half : nvfp4_amax_rule{};
        for (const float known : {-1.0f, amax(x)}) {
          const operand_pair a = quantize_activation(x, r, rule);
          quantize_activation_into(x, r, rule, row, &col, storage, known);
          EXPECT_EQ(operand_bits(row), operand_bits(a.rowwise));
          EXPECT_EQ(operand_bits(col), operand_bits(a.columnwise));
          quantize_activation_into(x, r, rule, row, nullptr, storage, known);
          EXPECT_EQ(operand_bits(row), operand_bits(quantize_activation_rowwise(x, r, rule)));
          const operand_pair w = quantize_weight(x, r, rule);
          quantize_weight_into(x, r, rule, row, &col, storage, known);
          EXPECT_EQ(operand_bits(row), operand_bits(w.rowwise));
          EXPECT_EQ(operand_bits(col), operand_bits(w.columnwise));
          EXPECT_EQ(operand_bits(quantize_weight_rowwise(x, r, rule)), operand_bits(w.rowwise));
          if (r.row_scaled_activation || r.uses_4over6(tensor_role::input)) continue;  // gradients: neither
          const operand_pair g = quantize_gradient(x, r, rule);
          quantize_gradient_into(x, r, rule, row, col, storage, known);
          EXPECT_EQ(operand_bits(row), operand_bits(g.rowwise));
          EXPECT_EQ(operand_bits(col), operand_bits(g.columnwise));
        }
      }
    }
  }
  // Without a known amax the into forms refuse NaN as the value forms do, writing nothing.
  std::vector<float> nan_values(64 * 48, 1.0f);
  nan_values[5] = std::nanf("");
  const auto bad = matrix_view<const float>::row_major(nan_values.data(), 64, 48);
  const auto before = operand_bits(row);
  EXPECT_EQ(test::error_code_of([&] { quantize_activation_into(bad, {}, {}, row, &col, storage); }), errc::non_finite_input);
  EXPECT_EQ(operand_bits(row), before);
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

}  // namespace recipes_nvfp4_recipe_test
}  // namespace
}  // namespace nvfp4
