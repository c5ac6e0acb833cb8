// Golden test, kind `gemm_fp8`: D = C + A·Bᵀ over FP8 codes against MMA-Sim (Hopper wgmma,
// Blackwell kind::f8f6f4 and kind::mxf8f6f4), float bits compared (NaN bits included), through
// the reference and through the public (fast) path.
#include <gtest/gtest.h>

#include <bit>

#include "golden/golden_support.hpp"
#include "nvfp4/gemm/fp8/gemm.hpp"

namespace nvfp4 {
namespace {
namespace golden_gemm_fp8_test {

fp8_format format_of(golden::case_fields& f, const char* field) {
  return f.choice(field, {"e4m3", "e5m2"}) == "e4m3" ? fp8_format::e4m3 : fp8_format::e5m2;
}

fp8_tensor codes_tensor(index_t rows, index_t cols, fp8_format format, const std::vector<std::uint8_t>& codes) {
  fp8_tensor t(rows, cols, format);
  std::copy(codes.begin(), codes.end(), t.codes().begin());
  return t;
}

int count_mismatches(const std::vector<float>& got, const std::vector<float>& expected, index_t n, const char* path) {
  int mismatches = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(expected[i]) && mismatches++ < 3)
      ADD_FAILURE() << path << " D[" << i / static_cast<std::size_t>(n) << "][" << i % static_cast<std::size_t>(n)
                    << "] = " << std::hexfloat << got[i] << ", MMA-Sim " << expected[i] << std::defaultfloat;
  return mismatches;
}

/// kind::mxf8f6f4: E8M0 scales per 32 elements of K.
template <class FormatA, class FormatB>
int run_mx(golden::case_fields& f, index_t m, index_t n, index_t k, matrix_view<const float> c_view, const std::vector<float>& expected) {
  const index_t scale_cols = (k + 31) / 32;
  const auto a = quantized_tensor<FormatA>::from_bytes(m, k, f.load_shaped<std::uint8_t>("a", {m, k}),
                                                       f.load_shaped<std::uint8_t>("a_scale", {m, scale_cols}));
  const auto b = quantized_tensor<FormatB>::from_bytes(n, k, f.load_shaped<std::uint8_t>("b", {n, k}),
                                                       f.load_shaped<std::uint8_t>("b_scale", {n, scale_cols}));
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

/// The case's `arch` is the tensor core MMA-Sim modelled: Hopper wgmma, Blackwell kind::f8f6f4,
/// or Blackwell kind::mxf8f6f4 (scaled). MMA-Sim runs one instruction chain over all of K, so
/// nothing is promoted (promotion_interval 0).
bool check_case(const nlohmann::json& c) {
  golden::case_fields f(c, "gemm_fp8 case", {"arch", "a_format", "b_format", "m", "n", "k", "a", "b", "c", "d", "a_scale", "b_scale"},
                        {"style", "semantics"});
  const index_t m = f.integer("m"), n = f.integer("n"), k = f.integer("k");
  const std::string arch = f.choice("arch", {"hopper_wgmma", "blackwell_f8f6f4", "blackwell_mxf8f6f4"});
  const fp8_format fa = format_of(f, "a_format"), fb = format_of(f, "b_format");
  const auto accumulator = f.load_shaped<float>("c", {m, n});
  const auto expected = f.load_shaped<float>("d", {m, n});
  const auto c_view = matrix_view<const float>::row_major(accumulator.data(), m, n);
  const bool scaled = arch == "blackwell_mxf8f6f4";
  if (!scaled && (f.has("a_scale") || f.has("b_scale"))) throw golden::refusal("scales in a case of arch " + arch + ", which takes none");
  int mismatches = 0;
  if (scaled) {
    if (fa == fp8_format::e4m3 && fb == fp8_format::e4m3)
      mismatches = run_mx<mxfp8, mxfp8>(f, m, n, k, c_view, expected);
    else if (fa == fp8_format::e4m3)
      mismatches = run_mx<mxfp8, mxfp8_e5m2>(f, m, n, k, c_view, expected);
    else if (fb == fp8_format::e4m3)
      mismatches = run_mx<mxfp8_e5m2, mxfp8>(f, m, n, k, c_view, expected);
    else
      mismatches = run_mx<mxfp8_e5m2, mxfp8_e5m2>(f, m, n, k, c_view, expected);
    return f.finish() && mismatches == 0;
  }
  const auto core = arch == "hopper_wgmma" ? fp8::mma::tensor_core::hopper : fp8::mma::tensor_core::blackwell;
  const auto a = codes_tensor(m, k, fa, f.load_shaped<std::uint8_t>("a", {m, k}));
  const auto b = codes_tensor(n, k, fb, f.load_shaped<std::uint8_t>("b", {n, k}));
  for (bool fast_path : {false, true}) {
    std::vector<float> d(static_cast<std::size_t>(m * n));
    const auto d_view = matrix_view<float>::row_major(d.data(), m, n);
    const fp8_gemm_options options{.core = core, .promotion_interval = 0};
    if (fast_path) {
      fp8_mma(a, b, c_view, d_view, options);
    } else {
      reference::fp8_mma(a, b, c_view, d_view, options);
    }
    mismatches += count_mismatches(d, expected, n, fast_path ? "fast" : "reference");
  }
  return f.finish() && mismatches == 0;
}

const bool registered = golden::register_check("gemm_fp8", check_case);

TEST(GoldenGemmFp8, EveryCaseBitForBit) { golden::check_every_case("gemm_fp8"); }

}  // namespace golden_gemm_fp8_test
}  // namespace
}  // namespace nvfp4
