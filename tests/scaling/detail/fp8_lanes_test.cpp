// Tests of nvfp4/scaling/detail/fp8_lanes.hpp: the FP8 lane encoder for non-NaN inputs gives the
// codec's codes (minifloat<T>::from_float, satfinite) for E4M3 and E5M2 on every rounding edge of
// every float binade (normal, subnormal, both signs, zero, Inf) and on random floats, in the
// native, AVX2 and scalar builds.
// NVFP4_TEST_ALL_ISAS
#include "nvfp4/scaling/detail/fp8_lanes.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e5m2.hpp"
#include "nvfp4/simd/dispatch.hpp"

namespace nvfp4 {
namespace {
namespace scaling_detail_fp8_lanes_test {

using ops = simd::ops;

/// Every float bit pattern that decides a rounding, for a format with m mantissa bits: for each
/// exponent field (0 .. 255, so float subnormals, every binade and Inf) and sign, the top m + 1
/// mantissa bits (the kept bits and the rounding bit) in every combination, each with the bits
/// below them zero, one, just under half, half, just over, all ones (ties, sticky bits, carries
/// into the next binade); NaN patterns left out.
std::vector<std::uint32_t> rounding_edges(int m) {
  const int low = 23 - (m + 1);  // bits below the rounding bit
  const std::uint32_t low_mask = (1u << low) - 1, half = 1u << (low - 1);
  const std::uint32_t lows[] = {0u, 1u, half - 1, half, half + 1, low_mask};
  std::vector<std::uint32_t> out;
  for (std::uint32_t sign = 0; sign < 2; ++sign)
    for (std::uint32_t exponent = 0; exponent < 256; ++exponent)
      for (std::uint32_t top = 0; top < (1u << (m + 1)); ++top)
        for (std::uint32_t l : lows) {
          const std::uint32_t bits = sign << 31 | exponent << 23 | top << low | l;
          if ((bits & 0x7FFFFFFFu) > 0x7F800000u) continue;  // NaN
          out.push_back(bits);
        }
  return out;
}

template <minifloat_traits T>
void expect_codec_codes(const std::vector<std::uint32_t>& inputs) {
  ASSERT_EQ(inputs.size() % ops::width, 0u);
  alignas(64) std::uint32_t codes[ops::width];
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < inputs.size(); i += ops::width) {
    ops::store_bits(codes, detail::fp8_lanes<ops>::codes<T>(ops::as_float(ops::load_bits(inputs.data() + i))));
    for (int l = 0; l < ops::width; ++l) {
      const std::uint32_t want = minifloat<T>::from_float(std::bit_cast<float>(inputs[i + l])).bits();
      if (codes[l] != want && ++wrong <= 5)
        ADD_FAILURE() << std::hex << "input 0x" << inputs[i + l] << ": code 0x" << codes[l] << ", codec 0x" << want;
    }
  }
  EXPECT_EQ(wrong, 0u);
}

/// Pads to a whole number of vectors with zeros.
std::vector<std::uint32_t> padded(std::vector<std::uint32_t> v) {
  while (v.size() % ops::width) v.push_back(0);
  return v;
}

TEST(Fp8Lanes, CodesEqualTheCodecOnEveryRoundingEdgeOfEveryBinade) {
  const auto e4m3_edges = padded(rounding_edges(3)), e5m2_edges = padded(rounding_edges(2));
  EXPECT_GT(e4m3_edges.size(), 30000u);
  expect_codec_codes<e4m3_traits>(e4m3_edges);
  expect_codec_codes<e5m2_traits>(e5m2_edges);
}

TEST(Fp8Lanes, CodesEqualTheCodecOnRandomFloats) {
  std::mt19937 gen(11);
  std::vector<std::uint32_t> inputs;
  while (inputs.size() < (1u << 18)) {
    const std::uint32_t bits = static_cast<std::uint32_t>(gen());
    if ((bits & 0x7FFFFFFFu) <= 0x7F800000u) inputs.push_back(bits);
  }
  // And values where the codes live: |x| in [2^-20, 2^17].
  std::uniform_int_distribution<std::uint32_t> exponent(127 - 20, 127 + 17), mantissa(0, (1u << 23) - 1);
  for (int i = 0; i < (1 << 18); ++i) inputs.push_back((gen() & 1u) << 31 | exponent(gen) << 23 | mantissa(gen));
  inputs = padded(inputs);
  expect_codec_codes<e4m3_traits>(inputs);
  expect_codec_codes<e5m2_traits>(inputs);
}

TEST(Fp8Lanes, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<std::uint32_t> inputs;
  for (float v : {0.0f, -0.0f, inf, -inf, 448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f, 3.0e38f, std::ldexp(1.0f, -9), std::ldexp(1.0f, -10),
                  std::ldexp(1.5f, -10), std::ldexp(1.0f, -16), std::ldexp(1.0f, -17), std::numeric_limits<float>::denorm_min()})
    inputs.push_back(std::bit_cast<std::uint32_t>(v));
  inputs = padded(inputs);
  expect_codec_codes<e4m3_traits>(inputs);
  expect_codec_codes<e5m2_traits>(inputs);
  // Satfinite: Inf and overflow give the largest finite code, not Inf / NaN.
  alignas(64) std::uint32_t codes[ops::width];
  ops::store_bits(codes, detail::fp8_lanes<ops>::codes<e4m3_traits>(ops::set(inf)));
  EXPECT_EQ(codes[0], 0x7Eu);
  ops::store_bits(codes, detail::fp8_lanes<ops>::codes<e5m2_traits>(ops::set(-inf)));
  EXPECT_EQ(codes[0], 0xFBu);
}

}  // namespace scaling_detail_fp8_lanes_test
}  // namespace
}  // namespace nvfp4
