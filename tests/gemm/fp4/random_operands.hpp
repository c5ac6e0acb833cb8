// tests/gemm/random_operands.hpp: random GEMM operands (E2M1 codes and scale bytes) and
// accumulators in styles that reach every corner of §6, shared by the GEMM tests.
#pragma once

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "nvfp4/scaling/quantized_tensor.hpp"

namespace nvfp4::gemm_test_data {

enum class style { normal, wide_scales, cancel, zero_groups, nan_scales, extremes };

struct operand_bytes {
  std::vector<std::uint8_t> data, scales;
};

/// Random operand bytes for a [rows, k] tensor of Format in the given style.
template <class Format>
operand_bytes random_operand(index_t rows, index_t k, style s, std::mt19937& rng) {
  constexpr bool nvfp4 = std::is_same_v<typename Format::scale_type, ue4m3>;
  const index_t stride = (k + 1) / 2, scale_cols = (k + Format::block_cols - 1) / Format::block_cols;
  operand_bytes out{std::vector<std::uint8_t>(static_cast<std::size_t>(rows * stride)),
                    std::vector<std::uint8_t>(static_cast<std::size_t>(rows * scale_cols))};
  std::uniform_int_distribution<int> code(0, 15), byte(0, 255), coin(0, 99);
  for (index_t r = 0; r < rows; ++r) {
    std::vector<int> codes(static_cast<std::size_t>(k));
    for (auto& c : codes) c = code(rng);
    if (s == style::cancel) {  // second half of each 16 = first half negated, paired elsewhere
      for (index_t g = 0; g + 16 <= k; g += 16)
        for (int e = 0; e < 8; ++e) codes[static_cast<std::size_t>(g + 8 + e)] = codes[static_cast<std::size_t>(g + e)] ^ 8;
    }
    if (s == style::zero_groups)
      for (index_t g = 0; g < k; g += 16)
        if (coin(rng) < 40)
          for (index_t e = g; e < std::min(k, g + 16); ++e) codes[static_cast<std::size_t>(e)] = coin(rng) < 50 ? 0 : 8;
    for (index_t c = 0; c < k; ++c)
      out.data[static_cast<std::size_t>(r * stride + c / 2)] |=
          static_cast<std::uint8_t>(codes[static_cast<std::size_t>(c)] << ((c & 1) * 4));
    for (index_t b = 0; b < scale_cols; ++b) {
      int value;
      if (nvfp4) {
        value = (s == style::wide_scales || s == style::extremes) ? byte(rng) & 0x7F : 0x28 + code(rng) * 2;
        if (value == 0x7F) value = 0x7E;
        if (s == style::nan_scales && coin(rng) < 3) value = coin(rng) < 50 ? 0x7F : 0xFF;
        if (s == style::zero_groups && coin(rng) < 10) value = 0;
      } else {
        value = s == style::wide_scales ? byte(rng) % 255 : (s == style::extremes ? 230 + byte(rng) % 25 : 120 + code(rng));
        if (s == style::nan_scales && coin(rng) < 3) value = 0xFF;
        if (s == style::extremes && coin(rng) < 20) value = byte(rng) % 20;
      }
      out.scales[static_cast<std::size_t>(r * scale_cols + b)] = static_cast<std::uint8_t>(value);
    }
  }
  return out;
}

std::vector<float> random_accumulator(index_t count, style s, std::mt19937& rng) {
  std::vector<float> c(static_cast<std::size_t>(count));
  std::uniform_int_distribution<std::uint32_t> bits;
  std::normal_distribution<float> normal(0.0f, 100.0f);
  std::uniform_int_distribution<int> coin(0, 99);
  for (auto& v : c) {
    const int pick = coin(rng);
    if (pick < 30)
      v = 0.0f;
    else if (pick < 60)
      v = normal(rng);
    else if (pick < 70)
      v = std::bit_cast<float>(bits(rng) & 0x807FFFFFu);  // subnormals
    else if (pick < 80)
      v = (pick & 1 ? 1 : -1) * FLT_MAX * std::ldexp(1.0f, -(pick % 5));
    else if (pick < 97 || s != style::extremes)
      v = std::ldexp(normal(rng), (pick % 40) - 20);
    else
      v = pick == 97 ? std::numeric_limits<float>::infinity()
                     : (pick == 98 ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN());
  }
  return c;
}

/// Adds a failure for each of the first three outputs of a row-major [*, n] result whose bits
/// differ from the expected ones (`what` says which problem); returns how many differ.
inline index_t count_mismatches(const std::vector<float>& got, const std::vector<float>& expected, index_t n, const std::string& what) {
  index_t mismatches = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(expected[i]) && mismatches++ < 3) {
      std::ostringstream text;
      text << "D[" << i / static_cast<std::size_t>(n) << "][" << i % static_cast<std::size_t>(n) << "] " << std::hexfloat << got[i]
           << ", reference " << expected[i] << " (" << what << ")";
      ADD_FAILURE() << text.str();
    }
  return mismatches;
}

}  // namespace nvfp4::gemm_test_data
