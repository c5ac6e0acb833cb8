// Tests for nvfp4/gemm/fp8/packed_weight.hpp: products with an FP8 / MXFP8 weight packed once give
// the reference's bits (per-tensor and block-scaled FP8, MXFP8 of either element format; both
// tensor cores, exact and relaxed, split accumulation on and off; several A against one packed
// B; N not a multiple of 16; 1 and 2 threads), bias and bf16 outputs give the unpacked product's
// bits, copies share the packed form, and an empty weight or a shape mismatch is refused before
// anything is written.
// NVFP4_TEST_ALL_ISAS
#include "nvfp4/gemm/fp8/packed_weight.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace gemm_fp8_packed_weight_test {

using fp8::mma::tensor_core;

std::vector<float> random_matrix(index_t rows, index_t cols, float sigma, unsigned seed) {
  return test::random_values(rows * cols, seed, {.sigma = sigma, .log2_spread = 2.0, .zero_every = 11});
}
matrix_view<const float> view(const std::vector<float>& v, index_t rows, index_t cols) {
  return matrix_view<const float>::row_major(v.data(), rows, cols);
}

TEST(Fp8PackedWeight, PerTensorAndBlockScaledProductsEqualTheReference) {
  const index_t n = 37, k = 300;
  const auto w = random_matrix(n, k, 3.0f, 1);
  const fp8_tensor w_current = quantize_fp8_current(view(w, n, k), fp8_format::e4m3);
  const fp8_tensor w_block = quantize_fp8_blockwise(view(w, n, k), fp8_format::e4m3, fp8_block_shape::block_128x128);
  const fp8_packed_weight<fp8_tensor> packed_current(w_current), packed_block(w_block);
  EXPECT_EQ(packed_current.rows(), n);
  EXPECT_EQ(packed_current.cols(), k);
  EXPECT_GT(packed_current.packed_bytes(), static_cast<std::size_t>(n * k));
  for (index_t m : {1, 16, 70}) {
    const auto x = random_matrix(m, k, 1.0f, static_cast<unsigned>(m));
    const fp8_tensor x_current = quantize_fp8_current(view(x, m, k), fp8_format::e5m2);
    const fp8_tensor x_block = quantize_fp8_blockwise(view(x, m, k), fp8_format::e4m3, fp8_block_shape::block_1x128);
    for (tensor_core core : {tensor_core::hopper, tensor_core::blackwell})
      for (gemm_mode mode : {gemm_mode::exact, gemm_mode::relaxed})
        for (index_t interval : {index_t{0}, index_t{128}}) {
          const fp8_gemm_options options{.core = core, .mode = mode, .promotion_interval = interval};
          std::vector<float> want(static_cast<std::size_t>(m * n)), got(want.size());
          const auto want_view = matrix_view<float>::row_major(want.data(), m, n),
                     got_view = matrix_view<float>::row_major(got.data(), m, n);
          reference::fp8_gemm(x_current, w_current, want_view, options);
          for (int threads : {1, 2}) {
            test::set_threads(threads);
            fp8_gemm(x_current, packed_current, got_view, options);
            ASSERT_EQ(test::float_bits(got), test::float_bits(want)) << "per-tensor, M " << m << ", " << threads << " threads";
          }
          reference::fp8_gemm(x_block, w_block, want_view, options);
          for (int threads : {1, 2}) {
            test::set_threads(threads);
            fp8_gemm(x_block, packed_block, got_view, options);
            ASSERT_EQ(test::float_bits(got), test::float_bits(want)) << "block-scaled, M " << m << ", " << threads << " threads";
          }
        }
  }
}

template <class FormatB>
void check_mxfp8(gemm_mode mode) {
  const index_t n = 45, k = 200;
  const auto w = random_matrix(n, k, 5.0f, 3);
  const fp8_packed_weight<quantized_tensor<FormatB>> packed(quantize_mxfp8_te<FormatB>(view(w, n, k)));
  for (index_t m : {2, 16, 33}) {
    const auto x = random_matrix(m, k, 1.0f, static_cast<unsigned>(10 + m));
    const auto xq = quantize_mxfp8_te<mxfp8>(view(x, m, k));
    for (index_t interval : {index_t{0}, index_t{64}}) {
      const fp8_gemm_options options{.mode = mode, .promotion_interval = interval};
      std::vector<float> want(static_cast<std::size_t>(m * n)), got(want.size());
      reference::mxfp8_gemm(xq, packed.tensor(), matrix_view<float>::row_major(want.data(), m, n), options);
      for (int threads : {1, 2}) {
        test::set_threads(threads);
        mxfp8_gemm(xq, packed, matrix_view<float>::row_major(got.data(), m, n), options);
        ASSERT_EQ(test::float_bits(got), test::float_bits(want)) << "M " << m << ", " << threads << " threads";
      }
    }
  }
}
TEST(Fp8PackedWeight, MxProductsEqualTheReference) {
  for (gemm_mode mode : {gemm_mode::exact, gemm_mode::relaxed}) {
    check_mxfp8<mxfp8>(mode);
    check_mxfp8<mxfp8_e5m2>(mode);
  }
}

std::vector<std::uint16_t> bf16_bits(const std::vector<bf16>& values) {
  std::vector<std::uint16_t> out;
  for (bf16 v : values) out.push_back(v.bits());
  return out;
}

/// The packed product against the unpacked one (`unpacked(out, options)`) on the same operands and
/// options: fp32 and bf16 outputs with the bias, and bf16 without, each bit for bit. The bias must
/// change the fp32 result, or the comparison would not show it is applied.
template <class Packed, class Unpacked>
void expect_packed_equals_unpacked(index_t m, index_t n, const fp8_gemm_options& options, Packed packed, Unpacked unpacked,
                                   const std::string& what) {
  ASSERT_FALSE(options.bias.empty());
  const auto size = static_cast<std::size_t>(m * n);
  std::vector<float> want(size), got(size, -1.0f), no_bias(size);
  std::vector<bf16> want16(size), got16(size, bf16::from_bits(0x7FC1));
  unpacked(matrix_view<float>::row_major(want.data(), m, n), options);
  unpacked(matrix_view<bf16>::row_major(want16.data(), m, n), options);
  fp8_gemm_options without_bias = options;
  without_bias.bias = {};
  unpacked(matrix_view<float>::row_major(no_bias.data(), m, n), without_bias);
  ASSERT_NE(test::float_bits(want), test::float_bits(no_bias)) << what << ": the bias changes nothing";
  for (int threads : {1, 2}) {
    test::set_threads(threads);
    const std::string where = what + ", " + std::to_string(threads) + " threads";
    packed(matrix_view<float>::row_major(got.data(), m, n), options);
    EXPECT_EQ(test::float_bits(got), test::float_bits(want)) << where << ", fp32 + bias";
    packed(matrix_view<bf16>::row_major(got16.data(), m, n), options);
    EXPECT_EQ(bf16_bits(got16), bf16_bits(want16)) << where << ", bf16 + bias";
    std::vector<bf16> want16_plain(size), got16_plain(size, bf16::from_bits(0x7FC1));
    unpacked(matrix_view<bf16>::row_major(want16_plain.data(), m, n), without_bias);
    packed(matrix_view<bf16>::row_major(got16_plain.data(), m, n), without_bias);
    EXPECT_EQ(bf16_bits(got16_plain), bf16_bits(want16_plain)) << where << ", bf16";
  }
}

// The epilogue options (bias, a bf16 output) on the packed path give the unpacked fp8_gemm's /
// mxfp8_gemm's bits: the header promises the packed products equal fp8_gemm(a, b.tensor(), ...).
TEST(Fp8PackedWeight, BiasAndBf16OutputEqualTheUnpackedProduct) {
  const index_t n = 37, k = 300;  // N not a multiple of the 16-column tiles
  const auto w = random_matrix(n, k, 3.0f, 20);
  std::vector<float> bias(static_cast<std::size_t>(n));
  for (index_t j = 0; j < n; ++j) bias[static_cast<std::size_t>(j)] = 0.375f * static_cast<float>(j) - 5.0f;
  const fp8_tensor w_current = quantize_fp8_current(view(w, n, k), fp8_format::e4m3);
  const fp8_tensor w_block = quantize_fp8_blockwise(view(w, n, k), fp8_format::e4m3, fp8_block_shape::block_128x128);
  const fp8_packed_weight<fp8_tensor> packed_current(w_current), packed_block(w_block);
  const auto w_mx = quantize_mxfp8_te<mxfp8>(view(w, n, k));
  const fp8_packed_weight<quantized_tensor<mxfp8>> packed_mx(w_mx);
  for (index_t m : {1, 19}) {
    const auto x = random_matrix(m, k, 1.0f, static_cast<unsigned>(30 + m));
    const fp8_tensor x_current = quantize_fp8_current(view(x, m, k), fp8_format::e5m2);
    const fp8_tensor x_block = quantize_fp8_blockwise(view(x, m, k), fp8_format::e4m3, fp8_block_shape::block_1x128);
    const auto x_mx = quantize_mxfp8_te<mxfp8>(view(x, m, k));
    for (tensor_core core : {tensor_core::hopper, tensor_core::blackwell})
      for (gemm_mode mode : {gemm_mode::exact, gemm_mode::relaxed})
        for (index_t interval : {index_t{0}, index_t{128}}) {
          const fp8_gemm_options options{.core = core, .mode = mode, .promotion_interval = interval, .bias = bias};
          const std::string what = "M " + std::to_string(m) + (core == tensor_core::hopper ? ", hopper" : ", blackwell") +
                                   (mode == gemm_mode::exact ? ", exact" : ", relaxed") + ", interval " + std::to_string(interval);
          expect_packed_equals_unpacked(
              m, n, options, [&](auto out, const fp8_gemm_options& o) { fp8_gemm(x_current, packed_current, out, o); },
              [&](auto out, const fp8_gemm_options& o) { fp8_gemm(x_current, w_current, out, o); }, "per-tensor, " + what);
          expect_packed_equals_unpacked(
              m, n, options, [&](auto out, const fp8_gemm_options& o) { fp8_gemm(x_block, packed_block, out, o); },
              [&](auto out, const fp8_gemm_options& o) { fp8_gemm(x_block, w_block, out, o); }, "block-scaled, " + what);
          if (core == tensor_core::blackwell)  // MXFP8 runs on Blackwell's step whatever the option says
            expect_packed_equals_unpacked(
                m, n, options, [&](auto out, const fp8_gemm_options& o) { mxfp8_gemm(x_mx, packed_mx, out, o); },
                [&](auto out, const fp8_gemm_options& o) { mxfp8_gemm(x_mx, w_mx, out, o); }, "MXFP8, " + what);
        }
  }
}

TEST(Fp8PackedWeight, CopiesShareThePackedForm) {
  const auto w = random_matrix(20, 64, 1.0f, 5);
  const fp8_packed_weight<fp8_tensor> a(quantize_fp8_current(view(w, 20, 64), fp8_format::e4m3));
  const fp8_packed_weight<fp8_tensor> b = a;
  EXPECT_EQ(&a.tensor(), &b.tensor());
  EXPECT_EQ(&a.operand(), &b.operand());
}

TEST(Fp8PackedWeight, EmptyWeightAndMismatchedShapesAreRefused) {
  const auto w = random_matrix(20, 64, 1.0f, 6);
  const auto x = random_matrix(4, 64, 1.0f, 7);
  const fp8_tensor xq = quantize_fp8_current(view(x, 4, 64), fp8_format::e4m3);
  std::vector<float> out(4 * 20, -1.0f);
  const auto out_view = matrix_view<float>::row_major(out.data(), 4, 20);
  const fp8_packed_weight<fp8_tensor> empty;
  EXPECT_FALSE(empty);
  EXPECT_EQ(empty.packed_bytes(), 0u);
  EXPECT_EQ(test::error_code_of([&] { fp8_gemm(xq, empty, out_view); }), errc::invalid_argument);
  const fp8_packed_weight<fp8_tensor> other_k(quantize_fp8_current(matrix_view<const float>(w.data(), 20, 32, 64, 1), fp8_format::e4m3));
  EXPECT_EQ(test::error_code_of([&] { fp8_gemm(xq, other_k, out_view); }), errc::shape_mismatch);
  const fp8_packed_weight<fp8_tensor> packed(quantize_fp8_current(view(w, 20, 64), fp8_format::e4m3));
  EXPECT_EQ(test::error_code_of([&] { fp8_gemm(xq, packed, matrix_view<float>::row_major(out.data(), 4, 19)); }), errc::shape_mismatch);
  const fp8_packed_weight<quantized_tensor<mxfp8>> empty_mx;
  const auto xmx = quantize_mxfp8_te<mxfp8>(view(x, 4, 64));
  EXPECT_EQ(test::error_code_of([&] { mxfp8_gemm(xmx, empty_mx, out_view); }), errc::invalid_argument);
  for (float v : out) EXPECT_EQ(v, -1.0f);
}

}  // namespace gemm_fp8_packed_weight_test
}  // namespace
}  // namespace nvfp4
