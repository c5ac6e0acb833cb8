// Golden test, kind `gemm_block_scaled`: D = C + A·Bᵀ against MMA-Sim, the bit-accurate Blackwell
// tensor-core model, float bits compared (NaN bits included), for NVFP4 and MXFP4, through the
// reference and through the fast path.
#include <gtest/gtest.h>

#include <bit>

#include "golden/golden_support.hpp"
#include "nvfp4/gemm/fp4/gemm.hpp"

namespace nvfp4 {
namespace {

template <class Format>
bool check_case(const nlohmann::json& c) {
  const index_t m = c.at("m"), n = c.at("n"), k = c.at("k");
  const auto a = quantized_tensor<Format>::from_bytes(m, k, golden::load_as<std::uint8_t>(c, "a_packed"),
                                                      golden::load_as<std::uint8_t>(c, "a_scale"));
  const auto b = quantized_tensor<Format>::from_bytes(n, k, golden::load_as<std::uint8_t>(c, "b_packed"),
                                                      golden::load_as<std::uint8_t>(c, "b_scale"));
  const auto accumulator = golden::load_as<float>(c, "c");
  const auto expected = golden::load_as<float>(c, "d");
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
        ADD_FAILURE() << (fast_path ? "fast" : "reference") << " D[" << i / n << "][" << i % n << "] = " << std::hexfloat
                      << d[i] << ", MMA-Sim " << expected[i] << std::defaultfloat;
      }
    }
    ok = ok && mismatches == 0;
  }
  return ok;
}

TEST(GoldenGemm, EveryCaseBitForBit) {
  const auto cases = golden::cases_of("gemm_block_scaled");
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    SCOPED_TRACE(golden::describe(c));
    const std::string format = c.at("format");
    ASSERT_TRUE(format == "nvfp4" || format == "mxfp4") << format;
    const bool ok = format == "nvfp4" ? check_case<nvfp4_1x16>(c) : check_case<mxfp4>(c);
    golden::tally::instance().record("gemm_block_scaled", ok);
  }
}

}  // namespace
}  // namespace nvfp4
