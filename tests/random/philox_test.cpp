// Tests of nvfp4/random/philox.hpp and random_bytes.hpp: Philox4x32-10 against the published
// Random123 known-answer vectors, the byte layout, and the batched generator against the scalar one.
// NVFP4_TEST_ALL_ISAS
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nvfp4/random/philox.hpp"
#include "nvfp4/random/random_bytes.hpp"

namespace nvfp4 {
namespace {
namespace random_philox_test {

// Random123 kat_vectors, "philox4x32 10" lines: counter[4], key[2] -> output[4].
TEST(Philox, KnownAnswerVectors) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (std::array<std::uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<std::uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<std::uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, RandomByteIsLittleEndianBytesOfTheBlock) {
  // Seed 0, indices 0..15: block counter 0, key 0, whose words the first KAT line gives.
  const std::uint32_t words[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(random_byte(0, static_cast<std::uint64_t>(i)), (words[i / 4] >> (8 * (i % 4))) & 0xFF) << i;
}

TEST(Philox, FillRandomBytesEqualsRandomByte) {
  const std::uint64_t seed = 0x0123456789abcdefull;
  // Unaligned starts and lengths, a batch boundary, and a block index whose low word wraps.
  const std::pair<std::uint64_t, std::size_t> ranges[] = {
      {0, 0}, {0, 1}, {0, 256}, {5, 1000}, {255, 2}, {4093, 4099}, {(0xFFFFFFF8ull << 4) + 3, 700}, {(1ull << 40) + 7, 513}};
  for (const auto& [first, count] : ranges) {
    std::vector<std::uint8_t> bytes(count + 1, 0xAB);
    fill_random_bytes(seed, first, count, bytes.data());
    for (std::size_t k = 0; k < count; ++k) ASSERT_EQ(bytes[k], random_byte(seed, first + k)) << first << "+" << k;
    EXPECT_EQ(bytes[count], 0xAB) << "wrote past the end";
  }
}

TEST(Philox, BytesAreUniform) {
  // Chi-square over 256 byte values: 255 degrees of freedom, mean 255, sd sqrt(510) ~ 22.6; the
  // bound is 6 sd above the mean. Fixed seed, so the test is deterministic.
  constexpr std::size_t draws = 1 << 20;
  std::vector<std::uint8_t> bytes(draws);
  fill_random_bytes(42, 0, draws, bytes.data());
  std::vector<double> counts(256, 0.0);
  for (auto b : bytes) counts[b] += 1;
  double chi2 = 0;
  const double expected = static_cast<double>(draws) / 256;
  for (double c : counts) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 255 + 6 * std::sqrt(510.0));
  // Different seeds give different streams.
  EXPECT_NE(random_byte(1, 0) * 256 + random_byte(1, 1), random_byte(2, 0) * 256 + random_byte(2, 1));
}

}  // namespace random_philox_test
}  // namespace
}  // namespace nvfp4
