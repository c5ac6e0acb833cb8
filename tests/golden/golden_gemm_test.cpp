// Golden test, kind `gemm_block_scaled`: D = C + A·Bᵀ against MMA-Sim, the bit-accurate Blackwell
// tensor-core model, float bits compared (NaN bits included), for NVFP4 and MXFP4 (the case's
// `format`), through the reference and through the fast path.
#include <gtest/gtest.h>

#include <bit>

#include "golden/golden_support.hpp"
#include "nvfp4/gemm/fp4/gemm.hpp"

namespace nvfp4 {
namespace {
namespace golden_gemm_test {

template <class Format>
bool run_format(golden::case_fields& f) {
  const index_t m = f.integer("m"), n = f.integer("n"), k = f.integer("k");
  constexpr index_t block = Format::block_cols;  // 16 (UE4M3 scales) or 32 (E8M0)
  const auto a = quantized_tensor<Format>::from_bytes(m, k, f.load_shaped<std::uint8_t>("a_packed", {m, (k + 1) / 2}),
                                                      f.load_shaped<std::uint8_t>("a_scale", {m, (k + block - 1) / block}));
  const auto b = quantized_tensor<Format>::from_bytes(n, k, f.load_shaped<std::uint8_t>("b_packed", {n, (k + 1) / 2}),
                                                      f.load_shaped<std::uint8_t>("b_scale", {n, (k + block - 1) / block}));
  const auto accumulator = f.load_shaped<float>("c", {m, n});
  const auto expected = f.load_shaped<float>("d", {m, n});
  const auto c_view = matrix_view<const float>::row_major(accumulator.data(), m, n);
  bool ok = true;
  for (bool fast_path : {false, true}) {
    std::vector<float> d(static_cast<std::size_t>(m * n));
    const auto d_view = matrix_view<float>::row_major(d.data(), m, n);
    if (fast_path) {
      block_scaled_mma(a, b, c_view, d_view);
    } else {
      reference::block_scaled_mma(a, b, c_view, d_view);
    }
    int mismatches = 0;
    for (std::size_t i = 0; i < d.size(); ++i) {
      if (std::bit_cast<std::uint32_t>(d[i]) != std::bit_cast<std::uint32_t>(expected[i]) && mismatches++ < 3) {
        ADD_FAILURE() << (fast_path ? "fast" : "reference") << " D[" << i / static_cast<std::size_t>(n) << "]["
                      << i % static_cast<std::size_t>(n) << "] = " << std::hexfloat << d[i] << ", MMA-Sim " << expected[i]
                      << std::defaultfloat;
      }
    }
    ok = ok && mismatches == 0;
  }
  return ok;
}

bool check_case(const nlohmann::json& c) {
  golden::case_fields f(c, "gemm_block_scaled case", {"format", "m", "n", "k", "a_packed", "b_packed", "a_scale", "b_scale", "c", "d"},
                        {"style", "semantics"});
  const bool ok = f.choice("format", {"nvfp4", "mxfp4"}) == "nvfp4" ? run_format<nvfp4_1x16>(f) : run_format<mxfp4>(f);
  return f.finish() && ok;
}

const bool registered = golden::register_check("gemm_block_scaled", check_case);

TEST(GoldenGemm, EveryCaseBitForBit) { golden::check_every_case("gemm_block_scaled"); }

}  // namespace golden_gemm_test
}  // namespace
}  // namespace nvfp4
