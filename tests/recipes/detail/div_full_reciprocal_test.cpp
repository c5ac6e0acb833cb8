// Tests of nvfp4/recipes/detail/div_full_reciprocal.hpp against an H100's div.full.f32 reciprocal
// (tests/golden/producers/run_te_compiled_update.py's sweep of the binade [1, 2), torch 2.11 +
// Triton 3.6). The expected counts and the FNV-1a hash of the GPU's 2^23 offsets were computed by
// make_div_full_table.py from the GPU's sweep file itself, not from the table: the whole binade
// decoded here must hash to them. The range rules (powers of two, the 1/4 scaling above 2^126)
// are checked through TE's compiled update in delayed_scaling_test.cpp.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "nvfp4/recipes/detail/div_full_reciprocal.hpp"

namespace nvfp4::detail {
namespace {
namespace recipes_detail_div_full_reciprocal_test {

constexpr std::uint32_t mantissas = 1u << 23;
constexpr std::uint32_t block = 1u << div_full_table::block_bits;

std::vector<std::int8_t> whole_binade() {
  std::vector<std::int8_t> offsets(mantissas);
  for (std::uint32_t b = 0; b < mantissas / block; ++b) div_full_unit_offsets(b, offsets.data() + std::size_t{b} * block);
  return offsets;
}

TEST(DivFullReciprocal, TheWholeBinadeIsTheGpusSweep) {
  const std::vector<std::int8_t> offsets = whole_binade();
  std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64 over the offsets as bytes
  std::size_t up = 0, down = 0;
  for (const std::int8_t o : offsets) {
    hash = (hash ^ static_cast<std::uint8_t>(o)) * 0x100000001b3ull;
    up += o > 0;
    down += o < 0;
  }
  EXPECT_EQ(up, 733799u);
  EXPECT_EQ(down, 374723u);
  EXPECT_EQ(hash, 0x823bfc4d537311f9ull);
}

TEST(DivFullReciprocal, OneMantissaAtATimeAgreesWithTheBlockDecoder) {
  const std::vector<std::int8_t> offsets = whole_binade();
  // Every mantissa of the first and last blocks, then a stride through the rest (band members at
  // the ends of blocks included: their index counts the most band members).
  for (std::uint32_t m = 0; m < mantissas; m += (m < block || m >= mantissas - block) ? 1 : 997)
    ASSERT_EQ(div_full_unit_offset(m), offsets[m]) << m;
  for (std::uint32_t b = 0; b < mantissas / block; b += 37)
    ASSERT_EQ(div_full_unit_offset((b + 1) * block - 1), offsets[(b + 1) * block - 1]) << b;
}

TEST(DivFullReciprocal, IsFaithfulAndScalesByPowersOfTwo) {
  for (const float x : {1.0f, 1.5f, 1.2345678f, 1.9999999f, 3.0f, 1e-30f, 7.5e20f, 0x1p126f, 0x1p-126f}) {
    const float r = div_full_reciprocal(x);
    const double exact = 1.0 / static_cast<double>(x);
    EXPECT_LT(std::fabs(static_cast<double>(r) - exact), std::fabs(static_cast<double>(std::nextafter(r, 0.0f)) - r)) << x;
    const int e = std::ilogb(x);
    EXPECT_EQ(r, std::ldexp(div_full_reciprocal(std::ldexp(x, -e)), -e)) << x;
  }
  EXPECT_EQ(div_full_reciprocal(1.0f), 1.0f);
  EXPECT_EQ(div_full_reciprocal(0x1p126f), 0x1p-126f);
  EXPECT_EQ(div_full_reciprocal(std::numeric_limits<float>::max()),
            0.25f * div_full_reciprocal(std::numeric_limits<float>::max() / 4));  // subnormal quotient
  EXPECT_EQ(div_full_reciprocal(std::numeric_limits<float>::denorm_min()), std::numeric_limits<float>::infinity());
}

}  // namespace recipes_detail_div_full_reciprocal_test
}  // namespace
}  // namespace nvfp4::detail
