// nvfp4/nn/init.hpp: deterministic parameter initialization. Value i of a stream is drawn from a
// counter-based generator keyed by (seed, stream, i), so it never depends on threads or on the
// order in which parameters are created.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <span>
#include <utility>

#include "nvfp4/random/philox.hpp"

namespace nvfp4::nn {

/// A uniform float in (0, 1) from 24 random bits: (bits + 0.5) / 2^24.
constexpr float uniform_from_bits(std::uint32_t bits) { return (static_cast<float>(bits >> 8) + 0.5f) * (1.0f / 16777216.0f); }

/// Two uniforms in (0, 1) for index `index` of stream `stream` under `seed` (one Philox4x32-10
/// block; its other two words are unused).
inline std::pair<float, float> uniform_pair(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const auto block = philox4x32_10({static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                                    static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)},
                                   {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  return {uniform_from_bits(block[0]), uniform_from_bits(block[1])};
}

/// values[i] = stddev · N(0, 1) by Box-Muller over uniform_pair(seed, stream, i).
inline void fill_normal(std::span<float> values, float stddev, std::uint64_t seed, std::uint64_t stream) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto [u1, u2] = uniform_pair(seed, stream, i);
    const float radius = std::sqrt(-2.0f * std::log(u1));
    values[i] = stddev * radius * std::cos(2.0f * std::numbers::pi_v<float> * u2);
  }
}

}  // namespace nvfp4::nn
