// Golden test, kinds `gemm_fp8_block_cublas` and `fp8_block_quantize_h100`: FP8 block scaling
// (TE Float8BlockScaling) as an H100 computes it. The GEMMs (cuBLASLt's blockwise scaling through
// torch._scaled_mm; 1x128 x 128x128, 1x128 x 1x128, 128x128 x 1x128) through the public fp8_gemm
// with its default (hardware) block epilogue, fp32 and bf16 outputs, every bit; with power-of-two
// scales TE's reference order must agree as well. The quantizer (1x128 / 128x128 block amax, the
// scale rule, torch's FP8 cast of the scaled values) through quantize_fp8_blockwise and its
// reference: codes and decode scales, every bit.
#include <gtest/gtest.h>

#include <bit>
#include <cstdio>

#include "golden/golden_support.hpp"
#include "nvfp4/gemm/fp8/gemm.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"

namespace nvfp4 {
namespace {

index_t block_rows_of(const nlohmann::json& c, const char* field) {
  const std::string block = c.at(field);
  EXPECT_TRUE(block == "1x128" || block == "128x128") << block;
  return block == "1x128" ? 1 : fp8_block_size;
}

fp8_tensor block_operand(const nlohmann::json& c, const char* codes_field, const char* scale_field, const char* block_field,
                         index_t rows, index_t k) {
  fp8_tensor t(rows, k, fp8_format::e4m3, block_rows_of(c, block_field), fp8_block_size);
  const auto codes = golden::load_as<std::uint8_t>(c, codes_field);
  const auto scales = golden::load_as<float>(c, scale_field);
  EXPECT_EQ(codes.size(), t.codes().size());
  EXPECT_EQ(scales.size(), t.scale_inv().size());
  std::copy(codes.begin(), codes.end(), t.codes().begin());
  std::copy(scales.begin(), scales.end(), t.scale_inv().begin());
  return t;
}

template <class T>
int count_differences(const std::vector<T>& got, const std::vector<std::uint32_t>& expected_bits, const char* what, bool report) {
  int count = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    std::uint32_t bits = 0;
    if constexpr (std::is_same_v<T, float>) {
      bits = std::bit_cast<std::uint32_t>(got[i]);
    } else {
      bits = got[i].bits();
    }
    if (bits != expected_bits[i] && count++ < 3 && report)
      ADD_FAILURE() << what << " output " << i << ": ours 0x" << std::hex << bits << ", the H100's 0x" << expected_bits[i] << std::dec;
  }
  return got.size() == expected_bits.size() ? count : count + 1;
}

bool check_gemm_case(const nlohmann::json& c) {
  const index_t m = c.at("m"), n = c.at("n"), k = c.at("k");
  EXPECT_EQ(c.at("a_format"), "e4m3");
  EXPECT_EQ(c.at("b_format"), "e4m3");
  const auto a = block_operand(c, "a", "a_scale_inv", "a_block", m, k);
  const auto b = block_operand(c, "b", "b_scale_inv", "b_block", n, k);
  std::vector<std::uint32_t> want32, want16;
  for (float v : golden::load_as<float>(c, "d")) want32.push_back(std::bit_cast<std::uint32_t>(v));
  for (std::uint16_t v : golden::load_as<std::uint16_t>(c, "d_bf16")) want16.push_back(v);
  int mismatches = 0;
  for (const auto epilogue : {fp8_block_epilogue::hardware, fp8_block_epilogue::te_reference}) {
    const bool hardware = epilogue == fp8_block_epilogue::hardware;
    // TE's order is held to the GPU's bits only where the orders agree: power-of-two scales.
    if (!hardware && !c.at("power_of_2_scales").get<bool>()) continue;
    const fp8_gemm_options options{.core = fp8::mma::tensor_core::hopper, .promotion_interval = 128, .block_epilogue = epilogue};
    std::vector<float> d(static_cast<std::size_t>(m * n));
    std::vector<bf16> d16(d.size());
    fp8_gemm(a, b, matrix_view<float>::row_major(d.data(), m, n), options);
    fp8_gemm(a, b, matrix_view<bf16>::row_major(d16.data(), m, n), options);
    const char* label = hardware ? "hardware epilogue" : "TE reference epilogue";
    mismatches += count_differences(d, want32, label, true) + count_differences(d16, want16, label, true);
    if (hardware && m * n * k <= (1 << 21)) {  // the scalar reference too, where it is quick
      std::vector<float> r(d.size());
      reference::fp8_gemm(a, b, matrix_view<float>::row_major(r.data(), m, n), options);
      mismatches += count_differences(r, want32, "reference::fp8_gemm", true);
    }
  }
  return mismatches == 0;
}

TEST(GoldenGemmFp8BlockCublas, EveryCaseBitForBit) {
  const auto cases = golden::cases_of("gemm_fp8_block_cublas");
  ASSERT_FALSE(cases.empty()) << "no gemm_fp8_block_cublas cases in " << golden::directory();
  int te_differs = 0, te_outputs = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(golden::describe(c) + " " + c.at("a_block").get<std::string>() + " x " + c.at("b_block").get<std::string>() +
                 (c.at("power_of_2_scales").get<bool>() ? " pow2" : " fp32 scales"));
    golden::tally::instance().record("gemm_fp8_block_cublas", check_gemm_case(c));
    // How far TE's reference order is from the GPU where the scales are arbitrary (printed, the
    // documented difference; not a failure).
    if (!c.at("power_of_2_scales").get<bool>()) {
      const index_t m = c.at("m"), n = c.at("n"), k = c.at("k");
      const auto a = block_operand(c, "a", "a_scale_inv", "a_block", m, k);
      const auto b = block_operand(c, "b", "b_scale_inv", "b_block", n, k);
      std::vector<float> d(static_cast<std::size_t>(m * n));
      fp8_gemm(a, b, matrix_view<float>::row_major(d.data(), m, n),
               {.core = fp8::mma::tensor_core::hopper, .promotion_interval = 128, .block_epilogue = fp8_block_epilogue::te_reference});
      std::vector<std::uint32_t> want;
      for (float v : golden::load_as<float>(c, "d")) want.push_back(std::bit_cast<std::uint32_t>(v));
      te_differs += count_differences(d, want, "", false);
      te_outputs += static_cast<int>(d.size());
    }
  }
  std::printf("gemm_fp8_block_cublas: TE's reference epilogue differs from the H100 in %d of %d fp32 outputs (arbitrary scales)\n",
              te_differs, te_outputs);
}

bool check_quantize_case(const nlohmann::json& c) {
  const auto shape = c.at("shape");
  const index_t rows = shape.at(0), cols = shape.at(1);
  EXPECT_EQ(c.at("format"), "e4m3");
  const auto shape_kind = c.at("block") == "1x128" ? fp8_block_shape::block_1x128 : fp8_block_shape::block_128x128;
  std::vector<bf16> x;
  for (std::uint16_t bits : golden::load_as<std::uint16_t>(c, "input_bf16")) x.push_back(bf16::from_bits(bits));
  const auto view = matrix_view<const bf16>::row_major(x.data(), rows, cols);
  const fp8_scale_options options{.power_2_scale = c.at("power_2_scale").get<bool>()};
  const auto codes = golden::load_as<std::uint8_t>(c, "codes");
  const auto scales = golden::load_as<float>(c, "scale_inv");
  bool ok = true;
  for (bool fast : {true, false}) {
    const fp8_tensor q = fast ? quantize_fp8_blockwise(view, fp8_format::e4m3, shape_kind, options)
                              : reference::quantize_fp8_blockwise(view, fp8_format::e4m3, shape_kind, options);
    const long code_at = golden::first_difference(std::vector<std::uint8_t>(q.codes().begin(), q.codes().end()), codes);
    std::vector<std::uint32_t> ours, theirs;
    for (float s : q.scale_inv()) ours.push_back(std::bit_cast<std::uint32_t>(s));
    for (float s : scales) theirs.push_back(std::bit_cast<std::uint32_t>(s));
    const long scale_at = golden::first_difference(ours, theirs);
    EXPECT_EQ(code_at, -1) << (fast ? "quantize_fp8_blockwise" : "reference") << ": first differing code";
    EXPECT_EQ(scale_at, -1) << (fast ? "quantize_fp8_blockwise" : "reference") << ": first differing scale_inv";
    ok = ok && code_at == -1 && scale_at == -1;
  }
  return ok;
}

TEST(GoldenFp8BlockQuantizeH100, EveryCaseBitForBit) {
  const auto cases = golden::cases_or_absent("fp8_block_quantize_h100");
  if (golden::shipped()) {
    ASSERT_FALSE(cases.empty());
  }
  if (cases.empty()) GTEST_SKIP() << "fp8_block_quantize_h100 absent from " << golden::directory();
  for (const auto& c : cases) {
    SCOPED_TRACE(golden::describe(c) + " " + c.at("block").get<std::string>() + (c.at("power_2_scale").get<bool>() ? " pow2" : ""));
    golden::tally::instance().record("fp8_block_quantize_h100", check_quantize_case(c));
  }
}

}  // namespace
}  // namespace nvfp4
