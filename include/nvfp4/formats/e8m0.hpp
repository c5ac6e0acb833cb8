// nvfp4/formats/e8m0.hpp: E8M0, the MX block scale: 2^(b - 127) for b = 0..254, NaN = 0xFF, no
// zero, no sign (docs/numerics_spec.md §1, OCP MX v1.0).
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

  /// The nearest power of two, ties (significand exactly 1.5) up, as ml_dtypes'
  /// `float8_e8m0fnu` cast rounds. Below 2^-126 (float subnormals) the nearest code is taken too:
  /// 2^-127 up to 1.5 x 2^-127, then 2^-126 (ml_dtypes differs there: it gives 2^-126 from 2^-127
  /// on). NaN, zero, negative and -Inf give NaN (the format has neither zero nor sign); +Inf and
  /// values rounding past 2^127 give 2^127 (saturate) or NaN (propagate, ml_dtypes' cast).
  static constexpr e8m0 from_float(float x, overflow_policy policy = overflow_policy::saturate) {
    if (!(x > 0.0f)) return from_bits(nan_code);
    const std::uint32_t bits = detail::float_bits(x);
    if (bits < 0x00800000u) return from_bits(bits >= 0x00600000u ? 1 : 0);
    const std::uint32_t code = (bits + 0x400000u) >> 23;  // adds half a binade: ties go up
    if (code >= nan_code) return from_bits(policy == overflow_policy::saturate ? nan_code - 1 : nan_code);
    return from_bits(static_cast<std::uint8_t>(code));
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
