// nvfp4/random/philox.hpp: Philox4x32-10 (Salmon et al., SC'11), a counter-based generator: the
// random bits of element i depend only on (key, i), never on thread count or SIMD width.
#pragma once

#include <array>
#include <cstdint>

namespace nvfp4 {

/// Philox4x32's round multipliers and key increments (Weyl sequence), shared by the scalar block
/// below and the vector one (random/random_bytes.hpp).
struct philox4x32_constants {
  static constexpr std::uint32_t multiplier0 = 0xD2511F53u, multiplier1 = 0xCD9E8D57u;
  static constexpr std::uint32_t weyl0 = 0x9E3779B9u, weyl1 = 0xBB67AE85u;
};

/// One Philox4x32-10 block: 128 random bits for a 128-bit counter under a 64-bit key.
constexpr std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter, std::array<std::uint32_t, 2> key) {
  using c = philox4x32_constants;
  constexpr std::uint32_t multiplier0 = c::multiplier0, multiplier1 = c::multiplier1, weyl0 = c::weyl0, weyl1 = c::weyl1;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t product0 = std::uint64_t{multiplier0} * counter[0];
    const std::uint64_t product1 = std::uint64_t{multiplier1} * counter[2];
    counter = {static_cast<std::uint32_t>(product1 >> 32) ^ counter[1] ^ key[0], static_cast<std::uint32_t>(product1),
               static_cast<std::uint32_t>(product0 >> 32) ^ counter[3] ^ key[1], static_cast<std::uint32_t>(product0)};
    key[0] += weyl0;
    key[1] += weyl1;
  }
  return counter;
}

/// The 8 random bits stochastic rounding uses for element `index` of a stream keyed by `seed`:
/// byte index % 16 of the Philox block with counter (index / 16, 0).
constexpr std::uint8_t random_byte(std::uint64_t seed, std::uint64_t index) {
  const std::uint64_t block = index / 16;
  const auto bits = philox4x32_10({static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0u, 0u},
                                  {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  const unsigned byte = static_cast<unsigned>(index % 16);
  return static_cast<std::uint8_t>(bits[byte / 4] >> (8 * (byte % 4)));
}

}  // namespace nvfp4
