// Golden test, kind `gemm_fp8`: D = C + A·Bᵀ over FP8 codes against MMA-Sim (Hopper wgmma,
// Blackwell kind::f8f6f4 and kind::mxf8f6f4), float bits compared (NaN bits included), through
// the reference and through the public (fast) path.
#include <gtest/gtest.h>

#include <bit>

#include "golden/golden_support.hpp"
#include "nvfp4/gemm/fp8/gemm.hpp"

namespace nvfp4 {
namespace {

fp8_format format_of(const std::string& name) {
  EXPECT_TRUE(name == "e4m3" || name == "e5m2") << name;
  return name == "e4m3" ? fp8_format::e4m3 : fp8_format::e5m2;
}

fp8_tensor codes_tensor(index_t rows, index_t cols, fp8_format format, const std::vector<std::uint8_t>& codes) {
  fp8_tensor t(rows, cols, format);
  EXPECT_EQ(codes.size(), t.codes().size());
  std::copy(codes.begin(), codes.end(), t.codes().begin());
  return t;
}

template <class Format>
quantized_tensor<Format> mx_tensor(index_t rows, index_t cols, const std::vector<std::uint8_t>& codes,
                                   const std::vector<std::uint8_t>& scales) {
  return quantized_tensor<Format>::from_bytes(rows, cols, codes, scales);
}

int count_mismatches(const std::vector<float>& got, const std::vector<float>& expected, index_t n, const char* path) {
  int mismatches = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(expected[i]) && mismatches++ < 3)
      ADD_FAILURE() << path << " D[" << i / static_cast<std::size_t>(n) << "][" << i % static_cast<std::size_t>(n) << "] = " << std::hexfloat
                    << got[i] << ", MMA-Sim " << expected[i] << std::defaultfloat;
  return mismatches;
}

template <class FormatA, class FormatB>
int run_mx(const nlohmann::json& c, index_t m, index_t n, index_t k, matrix_view<const float> c_view,
           const std::vector<float>& expected) {
  const auto a = mx_tensor<FormatA>(m, k, golden::load_as<std::uint8_t>(c, "a"), golden::load_as<std::uint8_t>(c, "a_scale"));
  const auto b = mx_tensor<FormatB>(n, k, golden::load_as<std::uint8_t>(c, "b"), golden::load_as<std::uint8_t>(c, "b_scale"));
  int mismatches = 0;
  for (bool fast_path : {false, true}) {
    std::vector<float> d(static_cast<std::size_t>(m * n));
    const auto d_view = matrix_view<float>::row_major(d.data(), m, n);
    const fp8_gemm_options options{.core = fp8::mma::tensor_core::blackwell, .promotion_interval = 0};
    if (fast_path) {
      mxfp8_mma(a, b, c_view, d_view, options);
    } else {
      reference::mxfp8_mma(a, b, c_view, d_view, options);
    }
    mismatches += count_mismatches(d, expected, n, fast_path ? "fast" : "reference");
  }
  return mismatches;
}

bool check_case(const nlohmann::json& c) {
  const index_t m = c.at("m"), n = c.at("n"), k = c.at("k");
  const std::string arch = c.at("arch");
  const fp8_format fa = format_of(c.at("a_format")), fb = format_of(c.at("b_format"));
  const auto accumulator = golden::load_as<float>(c, "c");
  const auto expected = golden::load_as<float>(c, "d");
  const auto c_view = matrix_view<const float>::row_major(accumulator.data(), m, n);
  if (arch == "blackwell_mxf8f6f4") {
    if (fa == fp8_format::e4m3 && fb == fp8_format::e4m3) return run_mx<mxfp8, mxfp8>(c, m, n, k, c_view, expected) == 0;
    if (fa == fp8_format::e4m3) return run_mx<mxfp8, mxfp8_e5m2>(c, m, n, k, c_view, expected) == 0;
    if (fb == fp8_format::e4m3) return run_mx<mxfp8_e5m2, mxfp8>(c, m, n, k, c_view, expected) == 0;
    return run_mx<mxfp8_e5m2, mxfp8_e5m2>(c, m, n, k, c_view, expected) == 0;
  }
  EXPECT_TRUE(arch == "hopper_wgmma" || arch == "blackwell_f8f6f4") << arch;
  const auto core = arch == "hopper_wgmma" ? fp8::mma::tensor_core::hopper : fp8::mma::tensor_core::blackwell;
  const auto a = codes_tensor(m, k, fa, golden::load_as<std::uint8_t>(c, "a"));
  const auto b = codes_tensor(n, k, fb, golden::load_as<std::uint8_t>(c, "b"));
  int mismatches = 0;
  for (bool fast_path : {false, true}) {
    std::vector<float> d(static_cast<std::size_t>(m * n));
    const auto d_view = matrix_view<float>::row_major(d.data(), m, n);
    const fp8_gemm_options options{.core = core, .promotion_interval = 0};  // MMA-Sim: the plain chain
    if (fast_path) {
      fp8_mma(a, b, c_view, d_view, options);
    } else {
      reference::fp8_mma(a, b, c_view, d_view, options);
    }
    mismatches += count_mismatches(d, expected, n, fast_path ? "fast" : "reference");
  }
  return mismatches == 0;
}

TEST(GoldenGemmFp8, EveryCaseBitForBit) {
  const auto cases = golden::cases_of("gemm_fp8");
  ASSERT_FALSE(cases.empty()) << "no gemm_fp8 cases in " << golden::directory();
  for (const auto& c : cases) {
    SCOPED_TRACE(golden::describe(c) + " " + c.at("arch").get<std::string>() + " " + c.at("a_format").get<std::string>() + "x" +
                 c.at("b_format").get<std::string>());
    golden::tally::instance().record("gemm_fp8", check_case(c));
  }
}

}  // namespace
}  // namespace nvfp4
