// nvfp4/formats/e8m0.hpp: E8M0, the MX block scale: 2^(b - 127) for b = 0..254, NaN = 0xFF, no
// zero, no sign (NUMERICS.md §1, OCP MX v1.0).
#pragma once

#include <cstdint>
#include <limits>

#include "nvfp4/formats/traits.hpp"

namespace nvfp4 {

class e8m0 {
 public:
  static constexpr int bias = 127;
  static constexpr std::uint8_t nan_code = 0xFF;
  static constexpr int code_count = 256;

  constexpr e8m0() = default;

  static constexpr e8m0 from_bits(std::uint8_t code) {
    e8m0 v;
    v.bits_ = code;
    return v;
  }

  /// 2^exponent, with exponent clamped to the representable [-127, 127].
  static constexpr e8m0 from_exponent(int exponent) {
    const int clamped = exponent < -bias ? -bias : (exponent > bias ? bias : exponent);
    return from_bits(static_cast<std::uint8_t>(clamped + bias));
  }

  /// Nearest power of two, ties (significand exactly 1.5) away from the smaller one, as
  /// ml_dtypes' `float8_e8m0fnu` cast does; NaN, negative and zero inputs give NaN, +Inf gives
  /// NaN too (no Inf in the format), values past 2^127 saturate.
  static constexpr e8m0 from_float(float x) {
    if (!(x > 0.0f) || x == std::numeric_limits<float>::infinity()) return from_bits(nan_code);
    const std::uint32_t bits = detail::float_bits(x);
    const int biased = static_cast<int>(bits >> 23);
    if (biased == 0) {
      // Float subnormals (< 2^-126): 2^-127 is the smallest code; [1.5, 2) x 2^-127 rounds up.
      return from_bits(bits >= 0x00600000u ? 1 : 0);
    }
    const bool round_up = (bits & 0x400000u) != 0;  // significand >= 1.5
    const int code = biased + (round_up ? 1 : 0);  // the float's biased exponent is the code
    return from_bits(static_cast<std::uint8_t>(code > 254 ? 254 : code));
  }

  constexpr std::uint8_t bits() const { return bits_; }
  constexpr bool is_nan() const { return bits_ == nan_code; }
  /// The power of two's exponent (meaningless for NaN).
  constexpr int exponent() const { return static_cast<int>(bits_) - bias; }

  constexpr float to_float() const {
    if (is_nan()) return std::numeric_limits<float>::quiet_NaN();
    return detail::exp2i(exponent());
  }
  constexpr explicit operator float() const { return to_float(); }

  friend constexpr bool operator==(e8m0 a, e8m0 b) { return a.bits_ == b.bits_; }

 private:
  std::uint8_t bits_ = bias;
};

}  // namespace nvfp4
