// nvfp4/formats/bf16.hpp: bf16, a bfloat16 value type for the core (layout-compatible with
// Eigen::bfloat16, which the Eigen interop maps onto it). Conversion from float is RNE.
#pragma once

#include <cstdint>

#include "nvfp4/formats/traits.hpp"

namespace nvfp4 {

class bf16 {
 public:
  constexpr bf16() = default;
  static constexpr bf16 from_bits(std::uint16_t code) {
    bf16 v;
    v.bits_ = code;
    return v;
  }
  /// Round to nearest even; NaN stays a (quiet) NaN with its sign.
  static constexpr bf16 from_float(float x) {
    const std::uint32_t b = detail::float_bits(x);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return from_bits(static_cast<std::uint16_t>((b >> 16) | 0x40u));
    const std::uint32_t rounding = 0x7FFFu + ((b >> 16) & 1u);
    return from_bits(static_cast<std::uint16_t>((b + rounding) >> 16));
  }
  constexpr std::uint16_t bits() const { return bits_; }
  constexpr float to_float() const { return detail::bits_float(static_cast<std::uint32_t>(bits_) << 16); }
  constexpr explicit operator float() const { return to_float(); }
  friend constexpr bool operator==(bf16 a, bf16 b) { return a.bits_ == b.bits_; }

 private:
  std::uint16_t bits_ = 0;
};

static_assert(sizeof(bf16) == 2);

}  // namespace nvfp4
