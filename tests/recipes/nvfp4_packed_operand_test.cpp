// Tests of nvfp4/recipes/nvfp4_packed_operand.hpp: nvfp4_gemm on a packed B gives TE's epilogue on
// hand-made operands, the scalar reference MMA times alpha on quantized ones, and the bits of the
// unpacked product for every operand kind (per tensor, row-scaled on either side, the 4over6
// bound), both modes, fp32 and bf16 outputs, bias, several A, 1 and 2 threads; copies share the
// packed form; an empty operand, bad shapes and row-amax counts other than the row count are
// refused before anything is written.
#include "nvfp4/recipes/nvfp4_packed_operand.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <vector>

#include "nvfp4/gemm/fp4/reference.hpp"
#include "test_support.hpp"

#if NVFP4_HAS_OPENMP
#include <omp.h>
#endif

namespace nvfp4 {
namespace {
namespace recipes_nvfp4_packed_operand_test {

constexpr index_t M = 48, N = 40, K = 96;

std::vector<float> random_matrix(index_t rows, index_t cols, unsigned seed) {
  return test::random_values(rows * cols, seed, {.sigma = 2.0, .log2_spread = 1.5, .zero_every = 13});
}
matrix_view<const float> view(const std::vector<float>& v, index_t rows, index_t cols) {
  return matrix_view<const float>::row_major(v.data(), rows, cols);
}
constexpr float poison = std::bit_cast<float>(0x7FC0DEADu);

/// Every output bit of out equals the reference's; the first mismatch is reported.
template <class T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(static_cast<float>(got[i])) != std::bit_cast<std::uint32_t>(static_cast<float>(want[i]))) {
      ADD_FAILURE() << what << ": output " << i << " is " << static_cast<float>(got[i]) << ", expected " << static_cast<float>(want[i]);
      return;
    }
  }
}

// The hand-made case of nvfp4_recipe_test's epilogue test, on a packed B: one K = 16 block whose
// MMA result D is 1 for every output, so each value is the epilogue's alone.
TEST(Nvfp4PackedOperand, EpilogueOnHandMadeOperands) {
  const auto make = [](index_t rows, float amax) {
    nvfp4_tensor t(rows, 16);
    for (index_t r = 0; r < rows; ++r) {
      t.data()[static_cast<std::size_t>(r * t.data_row_stride())] = e2m1x2(e2m1::from_bits(0x2), e2m1::from_bits(0));  // 1.0, 0
      t.scales()[static_cast<std::size_t>(r)] = ue4m3::from_bits(0x38);                                                // 1.0
    }
    t.set_tensor_scale(amax, 1.0f, 1.0f);
    return t;
  };
  const nvfp4_operand a{make(2, 10.0f), 448.0f, {}};
  const nvfp4_packed_operand b(nvfp4_operand{make(3, 3.0f), 256.0f, {}});
  EXPECT_EQ(b.e4m3_max(), 256.0f);
  std::vector<float> out(6);
  const std::vector<float> bias = {0.5f, -1.0f, 2.0f};
  nvfp4_gemm(a, b, matrix_view<float>::row_major(out.data(), 2, 3), gemm_mode::exact, bias);
  const float factor = 1.0f / (6.0f * 6.0f * 448.0f * 256.0f);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(out[std::size_t(3 + j)], 30.0f * factor + bias[std::size_t(j)]) << j;
  // B row-scaled (amaxes 7, 11, 13), A per tensor: factor * D times (10 * c_j).
  const nvfp4_packed_operand b_rows(nvfp4_operand{make(3, 1.0f), 448.0f, {7.0f, 11.0f, 13.0f}});
  nvfp4_gemm(a, b_rows, matrix_view<float>::row_major(out.data(), 2, 3));
  const float factor_448 = 1.0f / (6.0f * 6.0f * 448.0f * 448.0f);
  EXPECT_EQ(out[2], factor_448 * (10.0f * 13.0f));
  EXPECT_EQ(out[4], factor_448 * (10.0f * 11.0f));
}

// Quantized per-tensor operands: the scalar reference MMA times TE's alpha, bit for bit.
TEST(Nvfp4PackedOperand, ProductEqualsTheReferenceMmaTimesAlpha) {
  const auto w = random_matrix(N, K, 1);
  const nvfp4_packed_operand b(quantize_weight_rowwise(view(w, N, K)));
  for (gemm_mode mode : {gemm_mode::exact, gemm_mode::relaxed}) {
    const auto x = random_matrix(M, K, 2);
    const nvfp4_operand a = quantize_activation_rowwise(view(x, M, K));
    std::vector<float> d(M * N), want(M * N), got(M * N, poison);
    reference::block_scaled_mma(a.tensor, b.tensor(), {}, matrix_view<float>::row_major(d.data(), M, N), mode);
    const float alpha = simd::materialize(a.tensor.amax() * b.tensor().amax()) * nvfp4_alpha_factor(448.0f, 448.0f);
    for (std::size_t i = 0; i < d.size(); ++i) want[i] = alpha * d[i];
    nvfp4_gemm(a, b, matrix_view<float>::row_major(got.data(), M, N), mode);
    expect_same_bits(got, want, mode == gemm_mode::exact ? "exact" : "relaxed");
  }
}

// Every operand kind against the unpacked product: several A against one packed B, both modes,
// fp32 and bf16 outputs with a bias, 1 and 2 threads.
TEST(Nvfp4PackedOperand, ProductsEqualTheUnpackedOnes) {
  nvfp4_block_scaling row_scaled;
  row_scaled.row_scaled_activation = true;
  row_scaled.disable_rht = true;
  nvfp4_block_scaling four_over_six;
  four_over_six.nvfp4_4over6 = four_over_six_scope::weights;
  const auto w = random_matrix(N, K, 3);
  struct weight_kind {
    const char* name;
    nvfp4_operand operand;
  };
  const weight_kind weights[] = {
      {"per tensor", quantize_weight_rowwise(view(w, N, K))},
      {"4over6 (bound 256)", quantize_weight_rowwise(view(w, N, K), four_over_six)},
      {"row-scaled", quantize_activation_rowwise(view(w, N, K), row_scaled)},
  };
  ASSERT_EQ(weights[1].operand.e4m3_max, 256.0f);
  ASSERT_TRUE(weights[2].operand.row_scaled());
  std::vector<float> bias(N);
  for (index_t j = 0; j < N; ++j) bias[static_cast<std::size_t>(j)] = 0.25f * static_cast<float>(j) - 3.0f;
  for (const weight_kind& kind : weights) {
    const nvfp4_packed_operand b(kind.operand);
    EXPECT_GT(b.packed_bytes(), 0u);
    for (unsigned seed = 10; seed < 13; ++seed) {
      const auto x = random_matrix(M, K, seed);
      const nvfp4_operand a = quantize_activation_rowwise(view(x, M, K), seed == 11 ? row_scaled : nvfp4_block_scaling{});
      for (gemm_mode mode : {gemm_mode::exact, gemm_mode::relaxed}) {
        const std::string what =
            std::string(kind.name) + ", seed " + std::to_string(seed) + (mode == gemm_mode::exact ? ", exact" : ", relaxed");
        std::vector<float> want(M * N);
        std::vector<bf16> want16(M * N);
        nvfp4_gemm(a, kind.operand, matrix_view<float>::row_major(want.data(), M, N), mode, bias);
        nvfp4_gemm(a, kind.operand, matrix_view<bf16>::row_major(want16.data(), M, N), mode, bias);
        for (int threads : {1, 2}) {
#if NVFP4_HAS_OPENMP
          omp_set_num_threads(threads);
#endif
          std::vector<float> got(M * N, poison);
          std::vector<bf16> got16(M * N, bf16::from_bits(0x7FC1));
          nvfp4_gemm(a, b, matrix_view<float>::row_major(got.data(), M, N), mode, bias);
          nvfp4_gemm(a, b, matrix_view<bf16>::row_major(got16.data(), M, N), mode, bias);
          expect_same_bits(got, want, what + ", " + std::to_string(threads) + " threads");
          expect_same_bits(got16, want16, what + ", bf16, " + std::to_string(threads) + " threads");
        }
      }
    }
  }
#if NVFP4_HAS_OPENMP
  omp_set_num_threads(omp_get_num_procs());
#endif
}

TEST(Nvfp4PackedOperand, CopiesShareThePackedForm) {
  const auto w = random_matrix(N, K, 4);
  const nvfp4_packed_operand b(quantize_weight_rowwise(view(w, N, K)));
  const nvfp4_packed_operand copy = b;  // NOLINT(performance-unnecessary-copy-initialization): the point
  EXPECT_EQ(&copy.packed(), &b.packed());
  EXPECT_EQ(copy.rows(), N);
  EXPECT_EQ(copy.cols(), K);
}

TEST(Nvfp4PackedOperand, EmptyOperandAndBadShapesAreRefusedBeforeWriting) {
  const auto x = random_matrix(M, K, 5);
  const nvfp4_operand a = quantize_activation_rowwise(view(x, M, K));
  std::vector<float> out(M * N, poison);
  const auto out_view = matrix_view<float>::row_major(out.data(), M, N);
  const nvfp4_packed_operand empty;
  EXPECT_FALSE(empty);
  EXPECT_EQ(empty.rows(), 0);
  EXPECT_EQ(empty.packed_bytes(), 0u);
  EXPECT_EQ(test::error_code_of([&] { nvfp4_gemm(a, empty, out_view); }), errc::invalid_argument);
  const auto w = random_matrix(N, K + 16, 6);
  const nvfp4_packed_operand wide(quantize_weight_rowwise(view(w, N, K + 16)));  // K differs
  EXPECT_EQ(test::error_code_of([&] { nvfp4_gemm(a, wide, out_view); }), errc::shape_mismatch);
  const nvfp4_packed_operand b(quantize_weight_rowwise(matrix_view<const float>(w.data(), N, K, K + 16, 1)));
  EXPECT_EQ(test::error_code_of([&] { nvfp4_gemm(a, b, matrix_view<float>::row_major(out.data(), M, N - 1)); }), errc::shape_mismatch);
  const std::vector<float> short_bias(N - 1, 1.0f);
  EXPECT_EQ(test::error_code_of([&] { nvfp4_gemm(a, b, out_view, gemm_mode::exact, short_bias); }), errc::shape_mismatch);
  for (float v : out) ASSERT_EQ(std::bit_cast<std::uint32_t>(v), std::bit_cast<std::uint32_t>(poison));
}

// A row-scaled operand carries one amax per row (nvfp4_operand); nvfp4_gemm throws shape_mismatch
// for operands that do not fit, and the packed product does as nvfp4_gemm. One amax too few or too
// many, on A and on the packed B, for both output types.
TEST(Nvfp4PackedOperand, RowAmaxCountOtherThanTheRowCountIsRefusedBeforeWriting) {
  nvfp4_block_scaling row_scaled;
  row_scaled.row_scaled_activation = true;
  row_scaled.disable_rht = true;
  const auto x = random_matrix(M, K, 7), w = random_matrix(N, K, 8);
  const nvfp4_operand a = quantize_activation_rowwise(view(x, M, K), row_scaled);
  const nvfp4_operand b = quantize_activation_rowwise(view(w, N, K), row_scaled);
  ASSERT_EQ(a.row_amax.size(), std::size_t{M});
  ASSERT_EQ(b.row_amax.size(), std::size_t{N});
  std::vector<float> out(M * N, poison);
  std::vector<bf16> out16(M * N, bf16::from_bits(0x7FC1));
  const auto out_view = matrix_view<float>::row_major(out.data(), M, N);
  const auto out16_view = matrix_view<bf16>::row_major(out16.data(), M, N);
  const nvfp4_packed_operand good_b(b);
  for (const bool longer : {false, true}) {
    nvfp4_operand bad_a = a, bad_b = b;
    if (longer) {
      bad_a.row_amax.push_back(1.0f);
      bad_b.row_amax.push_back(1.0f);
    } else {
      bad_a.row_amax.pop_back();
      bad_b.row_amax.pop_back();
    }
    const nvfp4_packed_operand packed_bad_b(bad_b);
    const std::string what = longer ? "one amax too many" : "one amax too few";
    EXPECT_EQ(test::error_code_of([&] { nvfp4_gemm(bad_a, good_b, out_view); }), errc::shape_mismatch) << "A, " << what;
    EXPECT_EQ(test::error_code_of([&] { nvfp4_gemm(a, packed_bad_b, out_view); }), errc::shape_mismatch) << "B, " << what;
    EXPECT_EQ(test::error_code_of([&] { nvfp4_gemm(bad_a, good_b, out16_view); }), errc::shape_mismatch) << "A, bf16, " << what;
    EXPECT_EQ(test::error_code_of([&] { nvfp4_gemm(a, packed_bad_b, out16_view); }), errc::shape_mismatch) << "B, bf16, " << what;
  }
  for (float v : out) ASSERT_EQ(std::bit_cast<std::uint32_t>(v), std::bit_cast<std::uint32_t>(poison));
  for (bf16 v : out16) ASSERT_EQ(v.bits(), 0x7FC1);
  // The same operands with the right counts are accepted: the refusals above are the counts'.
  EXPECT_EQ(test::error_code_of([&] { nvfp4_gemm(a, good_b, out_view); }), errc{});
}

}  // namespace recipes_nvfp4_packed_operand_test
}  // namespace
}  // namespace nvfp4
