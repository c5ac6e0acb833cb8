// Tests for nvfp4/scaling/quantizer_flavor.hpp: each flavor rule on values worked out by hand
// from the peer's code (the bit-exactness against the peers themselves is golden_flavor_test),
// the flavors' whole-tensor behaviour (zero blocks, signs of zero, shapes they refuse), and that
// the result does not depend on the thread count.
#include "nvfp4/scaling/quantizer_flavor.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

namespace nvfp4 {
namespace {
namespace scaling_quantizer_flavor_test {

namespace rules = flavor_rules;

TEST(QuantizerFlavor, NamesParseBothWays) {
  for (auto f : all_quantizer_flavors) EXPECT_EQ(parse_quantizer_flavor(quantizer_flavor_name(f)), f);
  EXPECT_EQ(parse_quantizer_flavor("compressed-tensors"), quantizer_flavor::compressed_tensors);
  EXPECT_FALSE(parse_quantizer_flavor("TE").has_value());
}

TEST(QuantizerFlavor, TorchFloat8CastIsNotSaturating) {
  EXPECT_EQ(rules::torch_float8_e4m3fn_byte(448.0f), 0x7E);
  EXPECT_EQ(rules::torch_float8_e4m3fn_byte(464.0f), 0x7E);                          // the midpoint rounds to even (448)
  EXPECT_EQ(rules::torch_float8_e4m3fn_byte(std::nextafter(464.0f, 500.0f)), 0x7F);  // NaN, not 448
  EXPECT_EQ(rules::torch_float8_e4m3fn_byte(1000.0f), 0x7F);
  EXPECT_EQ(rules::torch_float8_e4m3fn_byte(-1000.0f), 0xFF);
  EXPECT_EQ(rules::torch_float8_e4m3fn_byte(std::nanf("")), 0x7F);
  EXPECT_EQ(rules::torch_float8_e4m3fn_byte(1.0f), 0x38);
  EXPECT_EQ(rules::torch_float8_e4m3fn_byte(0.0009765625f), 0x00);  // 2^-10: the tie to 0 below 2^-9
}

TEST(QuantizerFlavor, ModelOptRules) {
  // weight_scale_2 on a GPU: amax * fp32(1/2688), not amax / 2688; for amax 8.25 the two differ
  // by one ulp (so does TE's 1 / fp32(2688 / amax)).
  const float inv = 1.0f / 2688.0f;
  for (float amax : {1.0f, 40.0f, 3.75f, 8.25f, 1e-20f}) EXPECT_EQ(rules::modelopt_weight_scale_2(amax), amax * inv);
  EXPECT_NE(rules::modelopt_weight_scale_2(8.25f), 8.25f / 2688.0f);
  // Zero block: scale 1.0 (0x38), not 0.
  EXPECT_EQ(rules::modelopt_block_scale(0.0f, 0.01f), 0x38);
  // amax 0 everywhere: 0/0 is NaN, the scale byte 0x7F, every element NaN -> code 7.
  EXPECT_EQ(rules::modelopt_block_scale(0.0f, 0.0f), 0x7F);
  EXPECT_EQ(rules::modelopt_element_code(0.0f, 0x7F, 0.0f), 7);
  // _cast_fp4: ties to even, -0.0 -> +0, a small negative -> 0x8, beyond 6 saturates.
  EXPECT_EQ(rules::modelopt_e2m1_code(0.25f), 0x0);
  EXPECT_EQ(rules::modelopt_e2m1_code(0.75f), 0x2);
  EXPECT_EQ(rules::modelopt_e2m1_code(1.25f), 0x2);
  EXPECT_EQ(rules::modelopt_e2m1_code(1.75f), 0x4);
  EXPECT_EQ(rules::modelopt_e2m1_code(2.5f), 0x4);
  EXPECT_EQ(rules::modelopt_e2m1_code(3.5f), 0x6);
  EXPECT_EQ(rules::modelopt_e2m1_code(5.0f), 0x6);
  EXPECT_EQ(rules::modelopt_e2m1_code(5.01f), 0x7);
  EXPECT_EQ(rules::modelopt_e2m1_code(100.0f), 0x7);
  EXPECT_EQ(rules::modelopt_e2m1_code(-0.0f), 0x0);
  EXPECT_EQ(rules::modelopt_e2m1_code(-0.1f), 0x8);
  EXPECT_EQ(rules::modelopt_e2m1_code(-2.6f), 0xD);
}

TEST(QuantizerFlavor, TorchaoRules) {
  // The block scale is clamped up to 2^-6 (0x08): a zero block gets 0x08.
  EXPECT_EQ(rules::torchao_block_scale(0.0f, 1.0f), 0x08);
  EXPECT_EQ(rules::torchao_block_scale(6.0f * 448.0f * 4.0f, 1.0f), 0x7E);  // clamped down to 448
  // E2M1: ties to even, the sign of zero kept.
  EXPECT_EQ(rules::torchao_e2m1_code(0.25f), 0x0);
  EXPECT_EQ(rules::torchao_e2m1_code(0.75f), 0x2);
  EXPECT_EQ(rules::torchao_e2m1_code(2.5f), 0x4);
  EXPECT_EQ(rules::torchao_e2m1_code(5.0f), 0x6);
  EXPECT_EQ(rules::torchao_e2m1_code(6.0f), 0x7);
  EXPECT_EQ(rules::torchao_e2m1_code(-0.0f), 0x8);
  EXPECT_EQ(rules::torchao_e2m1_code(-0.1f), 0x8);
  EXPECT_EQ(rules::torchao_e2m1_code(std::nanf("")), 0x4);  // what its integer formula gives a GPU NaN
}

TEST(QuantizerFlavor, CompressedTensorsRules) {
  // Global scale for bf16 weights: bf16(bf16(1/amax) * 2688). amax 40: 1/40 -> bf16 0.0250244,
  // * 2688 = 67.2656 -> bf16 67.5 (not 2688/40 = 67.2 -> 67.0).
  EXPECT_EQ(rules::compressed_tensors_global_scale(40.0f, true), 67.5f);
  EXPECT_EQ(rules::compressed_tensors_global_scale(40.0f, false), (1.0f / 40.0f) * 2688.0f);
  EXPECT_EQ(rules::compressed_tensors_global_scale(0.0f, true), 1.0f);  // 2688 / tiny overflows -> 1
  EXPECT_EQ(rules::compressed_tensors_global_scale(1e-37f, false), 1.0f);
  // Zero block: float8_e4m3fn's "eps" 0.125 (0x20).
  EXPECT_EQ(rules::compressed_tensors_block_scale(0.0f, 67.5f, true), 0x20);
  // -0.0 keeps no sign (torch.sign(-0.0) is 0), a negative that rounds to zero does.
  EXPECT_EQ(rules::compressed_tensors_element_code(-0.0f, 0x38, 1.0f), 0x0);
  EXPECT_EQ(rules::compressed_tensors_element_code(-0.1f, 0x38, 1.0f), 0x8);
  EXPECT_EQ(rules::compressed_tensors_element_code(2.5f, 0x38, 1.0f), 0x4);
  EXPECT_EQ(rules::compressed_tensors_element_code(-100.0f, 0x38, 1.0f), 0xF);
}

TEST(QuantizerFlavor, GgmlRules) {
  // ggml_fp32_to_ue4m3 rounds half up: 1.0625 (between 1.0 and 1.125) -> 1.125 (0x39), where
  // round-to-even gives 1.0 (0x38).
  EXPECT_EQ(rules::ggml_fp32_to_ue4m3(1.0625f), 0x39);
  EXPECT_EQ(e4m3::from_float(1.0625f).bits(), 0x38);
  EXPECT_EQ(rules::ggml_fp32_to_ue4m3(0.0f), 0x00);
  EXPECT_EQ(rules::ggml_fp32_to_ue4m3(-1.0f), 0x00);
  EXPECT_EQ(rules::ggml_fp32_to_ue4m3(1000.0f), 0x7E);
  // Below 2^-6 the mantissa is int(x * 512 + 0.5), limited to 7: 0.0155 would round to 2^-6
  // (0x08) but stays 0x07.
  EXPECT_EQ(rules::ggml_fp32_to_ue4m3(0.0155f), 0x07);
  EXPECT_EQ(rules::ggml_ue4m3_half(0x38), 0.5f);
  EXPECT_EQ(rules::ggml_ue4m3_half(0x7F), 0.0f);
  EXPECT_EQ(rules::ggml_ue4m3_half(0xB8), 0.5f);  // the sign bit ignored
  // best_index: with d = 0.5 the doubled table is the E2M1 values. A tie keeps the lower code:
  // 2.5 -> 2.0 (code 4) here too, but 1.25 -> 1.0 and 0.75 -> 0.5 (toward zero, not to even).
  EXPECT_EQ(rules::ggml_best_index(2.5f, 0.5f), 4);
  EXPECT_EQ(rules::ggml_best_index(1.25f, 0.5f), 2);
  EXPECT_EQ(rules::ggml_best_index(0.75f, 0.5f), 1);
  EXPECT_EQ(rules::ggml_best_index(-0.1f, 0.5f), 0);  // +0 for a negative that rounds to zero
  EXPECT_EQ(rules::ggml_best_index(-5.0f, 0.5f), 0xE);
  EXPECT_EQ(rules::ggml_mxfp4_scale(6.0f), 127);  // floor(log2 6) - 2 + 127
  EXPECT_EQ(rules::ggml_mxfp4_scale(0.0f), 0);
  EXPECT_EQ(rules::ggml_e8m0_half(127), 0.5f);
}

std::vector<float> sample(index_t rows, index_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (auto& v : x) v = bf16::from_float(normal(rng)).to_float();
  for (index_t c = 0; c < 16; ++c) x[static_cast<std::size_t>(c)] = 0.0f;  // a zero block
  x[20] = -0.0f;
  x[100] = 30.0f;
  return x;
}

TEST(QuantizerFlavor, TeFlavorIsTheDefaultQuantizer) {
  const auto x = sample(32, 64, 1);
  const auto view = matrix_view<const float>::row_major(x.data(), 32, 64);
  const auto a = quantize_nvfp4_flavor(view, quantizer_flavor::te);
  const auto b = quantize<nvfp4_1x16>(view);
  EXPECT_TRUE(std::equal(a.data().begin(), a.data().end(), b.data().begin(), [](auto p, auto q) { return p.bits() == q.bits(); }));
  EXPECT_EQ(a.decode_scale(), b.decode_scale());
}

TEST(QuantizerFlavor, ZeroBlocksAndTensorScales) {
  const auto x = sample(32, 64, 2);
  const auto view = matrix_view<const float>::row_major(x.data(), 32, 64);
  EXPECT_EQ(quantize_nvfp4_flavor(view, quantizer_flavor::te).scale(0, 0).bits(), 0x00);
  EXPECT_EQ(quantize_nvfp4_flavor(view, quantizer_flavor::modelopt).scale(0, 0).bits(), 0x38);
  EXPECT_EQ(quantize_nvfp4_flavor(view, quantizer_flavor::torchao).scale(0, 0).bits(), 0x08);
  EXPECT_EQ(quantize_nvfp4_flavor(view, quantizer_flavor::compressed_tensors).scale(0, 0).bits(), 0x20);
  EXPECT_EQ(quantize_nvfp4_flavor(view, quantizer_flavor::ggml).scale(0, 0).bits(), 0x00);
  // The stored sense: ModelOpt / torchao decode = amax * fp32(1/2688); compressed-tensors encode.
  const float amax = 30.0f;
  EXPECT_EQ(quantize_nvfp4_flavor(view, quantizer_flavor::modelopt).decode_scale(), amax * (1.0f / 2688.0f));
  EXPECT_EQ(quantize_nvfp4_flavor(view, quantizer_flavor::ggml).decode_scale(), 1.0f);
}

TEST(QuantizerFlavor, ShapesEachProjectRefuses) {
  std::vector<float> x(3 * 24, 1.0f);
  const auto view = matrix_view<const float>::row_major(x.data(), 3, 24);
  EXPECT_NO_THROW(quantize_nvfp4_flavor(view, quantizer_flavor::modelopt));  // zero padding, as ModelOpt
  for (auto f : {quantizer_flavor::torchao, quantizer_flavor::compressed_tensors, quantizer_flavor::ggml}) {
    try {
      (void)quantize_nvfp4_flavor(view, f);
      ADD_FAILURE() << "24 columns accepted by " << quantizer_flavor_name(f);
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::shape_mismatch);
    }
  }
  EXPECT_THROW(quantize_mxfp4_flavor(view, quantizer_flavor::modelopt), error);
  x[5] = std::nanf("");
  try {
    (void)quantize_nvfp4_flavor(view, quantizer_flavor::modelopt);
    ADD_FAILURE();
  } catch (const non_finite_error& e) {
    EXPECT_EQ(e.col(), 5);
  }
}

TEST(QuantizerFlavor, ResultsDoNotDependOnThreadCount) {
  const index_t rows = 256, cols = 512;  // large enough for the parallel loop
  const auto x = sample(rows, cols, 3);
  const auto view = matrix_view<const float>::row_major(x.data(), rows, cols);
  for (auto f : all_quantizer_flavors) {
    omp_set_num_threads(1);
    const auto one = quantize_nvfp4_flavor(view, f);
    omp_set_num_threads(2);
    const auto two = quantize_nvfp4_flavor(view, f);
    EXPECT_TRUE(std::equal(one.data().begin(), one.data().end(), two.data().begin(), [](auto p, auto q) { return p.bits() == q.bits(); }))
        << quantizer_flavor_name(f);
    EXPECT_TRUE(
        std::equal(one.scales().begin(), one.scales().end(), two.scales().begin(), [](auto p, auto q) { return p.bits() == q.bits(); }));
  }
  omp_set_num_threads(1);
  const auto m1 = quantize_mxfp4_flavor(view, quantizer_flavor::ggml);
  omp_set_num_threads(2);
  const auto m2 = quantize_mxfp4_flavor(view, quantizer_flavor::ggml);
  EXPECT_TRUE(std::equal(m1.data().begin(), m1.data().end(), m2.data().begin(), [](auto p, auto q) { return p.bits() == q.bits(); }));
}

}  // namespace scaling_quantizer_flavor_test
}  // namespace
}  // namespace nvfp4
