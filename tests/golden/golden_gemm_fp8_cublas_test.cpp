// Golden test, kinds `gemm_fp8_cublas` and `gemm_fp8_h100_epilogue`: whole FP8 GEMMs as an H100's
// cuBLASLt computes them (torch._scaled_mm; producers: the shared set's and
// tests/golden/producers/run_h100_judge.py), every output bit compared through the public
// fp8_gemm (and, for the small epilogue cases, its scalar reference too): fast accumulation
// (promotion_interval 0) and the split accumulator (128), per-tensor and per-row scales, fp32
// and bf16 outputs, a bf16 bias.
#include <gtest/gtest.h>

#include <bit>

#include "golden/golden_support.hpp"
#include "nvfp4/gemm/fp8/gemm.hpp"

namespace nvfp4 {
namespace {

fp8_format format_of(const nlohmann::json& c, const char* field) {
  const std::string name = c.at(field);
  EXPECT_TRUE(name == "e4m3" || name == "e5m2") << name;
  return name == "e4m3" ? fp8_format::e4m3 : fp8_format::e5m2;
}

/// An FP8 tensor of the case's codes with one decode scale (per_row false) or one per row.
fp8_tensor operand(const nlohmann::json& c, const char* field, const char* format_field, index_t rows, index_t k, bool per_row,
                   const std::vector<float>& scales) {
  fp8_tensor t(rows, k, format_of(c, format_field), per_row ? 1 : 0, 0);
  const auto codes = golden::load_as<std::uint8_t>(c, field);
  EXPECT_EQ(codes.size(), t.codes().size());
  std::copy(codes.begin(), codes.end(), t.codes().begin());
  EXPECT_EQ(scales.size(), t.scale_inv().size());
  std::copy(scales.begin(), scales.end(), t.scale_inv().begin());
  return t;
}

/// Counts the outputs whose bits differ (reports the first three).
template <class T>
int mismatches(const std::vector<T>& got, const std::vector<T>& expected, index_t n, const char* what) {
  int count = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const auto g = std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint16_t>>(got[i]);
    const auto e = std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint16_t>>(expected[i]);
    if (g != e && count++ < 3)
      ADD_FAILURE() << what << " D[" << i / static_cast<std::size_t>(n) << "][" << i % static_cast<std::size_t>(n) << "]: ours 0x"
                    << std::hex << g << ", the H100's 0x" << e << std::dec;
  }
  if (got.size() != expected.size()) ++count;
  return count;
}

bool check_cublas_case(const nlohmann::json& c) {
  const index_t m = c.at("m"), n = c.at("n"), k = c.at("k");
  const auto a = operand(c, "a", "a_format", m, k, false, {c.at("scale_inv_a").get<float>()});
  const auto b = operand(c, "b", "b_format", n, k, false, {c.at("scale_inv_b").get<float>()});
  const bool split = c.at("use_split_accumulator");
  std::vector<float> d(static_cast<std::size_t>(m * n));
  fp8_gemm(a, b, matrix_view<float>::row_major(d.data(), m, n),
           {.core = fp8::mma::tensor_core::hopper, .promotion_interval = split ? 128 : 0});
  return mismatches(d, golden::load_as<float>(c, "d"), n, "fp8_gemm") == 0;
}

TEST(GoldenGemmFp8Cublas, EveryCaseBitForBit) {
  const auto cases = golden::cases_of("gemm_fp8_cublas");
  ASSERT_FALSE(cases.empty()) << "no gemm_fp8_cublas cases in " << golden::directory();
  for (const auto& c : cases) {
    SCOPED_TRACE(golden::describe(c) + " " + c.at("a_format").get<std::string>() + "x" + c.at("b_format").get<std::string>() +
                 (c.at("use_split_accumulator").get<bool>() ? " split" : " fast"));
    golden::tally::instance().record("gemm_fp8_cublas", check_cublas_case(c));
  }
}

template <class Out>
int run_epilogue(const nlohmann::json& c, const fp8_tensor& a, const fp8_tensor& b, const fp8_gemm_options& options,
                 const std::vector<Out>& expected) {
  const index_t m = a.rows(), n = b.rows();
  std::vector<Out> fast(static_cast<std::size_t>(m * n)), ref(fast.size());
  fp8_gemm(a, b, matrix_view<Out>::row_major(fast.data(), m, n), options);
  reference::fp8_gemm(a, b, matrix_view<Out>::row_major(ref.data(), m, n), options);
  (void)c;
  return mismatches(fast, expected, n, "fp8_gemm") + mismatches(ref, expected, n, "reference::fp8_gemm");
}

bool check_epilogue_case(const nlohmann::json& c) {
  const index_t m = c.at("m"), n = c.at("n"), k = c.at("k");
  const bool per_row = c.at("scaling") == "row";
  const auto a = operand(c, "a", "a_format", m, k, per_row, golden::load_as<float>(c, "a_scale_inv"));
  const auto b = operand(c, "b", "b_format", n, k, per_row, golden::load_as<float>(c, "b_scale_inv"));
  std::vector<float> bias;
  if (c.contains("bias_bf16")) bias = golden::load_bf16_as_float(c, "bias_bf16");
  const fp8_gemm_options options{.core = fp8::mma::tensor_core::hopper,
                                 .promotion_interval = c.at("use_split_accumulator").get<bool>() ? 128 : 0,
                                 .bias = bias};
  if (c.at("out_dtype") == "float32") return run_epilogue(c, a, b, options, golden::load_as<float>(c, "d")) == 0;
  std::vector<bf16> expected;
  for (std::uint16_t bits : golden::load_as<std::uint16_t>(c, "d_bf16")) expected.push_back(bf16::from_bits(bits));
  return run_epilogue(c, a, b, options, expected) == 0;
}

TEST(GoldenGemmFp8H100Epilogue, EveryCaseBitForBit) {
  const auto cases = golden::cases_or_absent("gemm_fp8_h100_epilogue");
  if (golden::shipped()) {
    ASSERT_FALSE(cases.empty());
  }
  if (cases.empty()) GTEST_SKIP() << "gemm_fp8_h100_epilogue absent from " << golden::directory();
  for (const auto& c : cases) {
    SCOPED_TRACE(golden::describe(c) + " " + c.at("a_format").get<std::string>() + "x" + c.at("b_format").get<std::string>() + " " +
                 c.at("scaling").get<std::string>() + " " + c.at("out_dtype").get<std::string>() +
                 (c.contains("bias_bf16") ? " bias" : "") + (c.at("use_split_accumulator").get<bool>() ? " split" : " fast"));
    golden::tally::instance().record("gemm_fp8_h100_epilogue", check_epilogue_case(c));
  }
}

}  // namespace
}  // namespace nvfp4
