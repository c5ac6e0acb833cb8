// nvfp4/transforms/detail/exact_rounding.hpp: exact sums of float32 terms and their one rounding to
// bfloat16 (RNE), the arithmetic behind the Hadamard transform's rule (docs/numerics_spec.md §4).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

namespace nvfp4::detail {

/// The exact sum of signed float32 terms, held as a fixed-point integer (32-bit digits in int64
/// limbs, least significant first, lowest bit worth 2^-180): no rounding ever happens in add().
class exact_sum {
 public:
  static constexpr int lowest_exponent = -180;  // below fp32's smallest bit, 2^-172 as m * 2^e
  static constexpr int limb_count = 11;         // 352 bits: up to 2^172, room for 2^128 * 256 terms

  /// Adds sign * value (sign = +1 or -1, value finite).
  void add(float value, int sign) {
    if (value == 0.0f) return;
    int exponent = 0;
    const float fraction = std::frexp(std::fabs(value), &exponent);              // value = fraction * 2^exponent
    const auto mantissa = static_cast<std::uint64_t>(std::ldexp(fraction, 24));  // exact, < 2^24
    const int position = exponent - 24 - lowest_exponent;
    const std::uint64_t shifted = mantissa << (position % 32);
    const int limb = position / 32;
    const auto low = static_cast<std::int64_t>(shifted & 0xFFFFFFFFu), high = static_cast<std::int64_t>(shifted >> 32);
    const bool negative = (sign < 0) != std::signbit(value);
    limbs_[limb] += negative ? -low : low;
    limbs_[limb + 1] += negative ? -high : high;
  }

  /// The sum times 2^scale_exponent, rounded to nearest-even to `precision` significant bits,
  /// no bit below 2^min_lsb_exponent (the format's subnormal spacing); returned as a double, which
  /// holds it exactly (precision <= 53). An exact zero is +0; a negative sum that rounds to zero
  /// is -0.
  double rounded(int precision, int min_lsb_exponent, int scale_exponent) const {
    std::array<std::int64_t, limb_count + 1> digits{};
    std::copy(limbs_.begin(), limbs_.end(), digits.begin());
    for (int k = 0; k < limb_count; ++k) {  // carry into 32-bit digits; the top limb keeps the sign
      digits[k + 1] += digits[k] >> 32;     // arithmetic shift: floor division by 2^32
      digits[k] &= 0xFFFFFFFF;
    }
    const bool negative = digits[limb_count] < 0;
    if (negative) {  // two's complement negation of the whole fixed-point number
      std::int64_t carry = 1;
      for (int k = 0; k <= limb_count; ++k) {
        const std::int64_t v = (~digits[k] & 0xFFFFFFFF) + carry;
        digits[k] = v & 0xFFFFFFFF;
        carry = v >> 32;
      }
    }
    int top_bit = -1;
    for (int k = limb_count; k >= 0 && top_bit < 0; --k)
      if (digits[k] != 0) top_bit = 32 * k + (63 - std::countl_zero(static_cast<std::uint64_t>(digits[k])));
    if (top_bit < 0) return 0.0;
    const int msb_exponent = top_bit + lowest_exponent + scale_exponent;
    const int lsb_exponent = std::max(msb_exponent - (precision - 1), min_lsb_exponent);
    const int drop = lsb_exponent - (lowest_exponent + scale_exponent);  // bits below the result's lsb
    auto bit = [&](int i) { return i < 0 ? 0 : static_cast<int>((digits[i / 32] >> (i % 32)) & 1); };
    std::uint64_t kept = 0;
    for (int i = top_bit; i >= std::max(drop, 0); --i) kept = (kept << 1) | static_cast<std::uint64_t>(bit(i));
    if (drop > 0) {
      const int round_bit = bit(drop - 1);
      bool sticky = false;
      for (int i = 0; i < drop - 1 && !sticky; ++i) sticky = bit(i) != 0;
      if (round_bit && (sticky || (kept & 1))) ++kept;
    }
    const double magnitude = std::ldexp(static_cast<double>(kept), drop > 0 ? lsb_exponent : lowest_exponent + scale_exponent);
    return negative ? -magnitude : magnitude;
  }

 private:
  std::array<std::int64_t, limb_count> limbs_{};
};

/// bf16 bits of a double that is a bf16 value or +-Inf-bound overflow (>= 2^128 gives Inf).
inline std::uint16_t bf16_bits_of_exact(double value) {
  const auto f = static_cast<float>(value);  // exact, or Inf on overflow
  return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(f) >> 16);
}

/// bfloat16 bits of a double rounded once, to nearest even (bf16 subnormals included; beyond the
/// largest finite value, Inf). The sign of zero follows the sign of y. y must be finite and zero or
/// of magnitude above 2^-1000 (a double normal far from underflow).
inline std::uint16_t bf16_bits_from_double_rne(double y) {
  const auto bits = std::bit_cast<std::uint64_t>(y);
  const auto sign = static_cast<std::uint16_t>((bits >> 63) << 15);
  const std::uint64_t magnitude = bits & 0x7FFFFFFFFFFFFFFFull;
  if (magnitude == 0) return sign;
  const int biased = static_cast<int>(magnitude >> 52);
  const std::uint64_t mantissa = (magnitude & 0xFFFFFFFFFFFFFull) | (1ull << 52);
  const int msb_exponent = biased - 1023;
  const int lsb_exponent = std::max(msb_exponent - 7, -133);           // 8 significant bits, subnormal step 2^-133
  const int shift = std::min(lsb_exponent - (msb_exponent - 52), 54);  // >= 45; 54 drops every bit
  std::uint64_t kept = mantissa >> shift;
  const std::uint64_t rest = mantissa & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) ++kept;
  // kept * 2^lsb: the exponent field is lsb + 134 with the implicit bit (128) folded in, so a
  // carry out of the significand (kept = 256) and the subnormal case (kept < 128) come out right.
  const std::int64_t code = ((static_cast<std::int64_t>(lsb_exponent) + 134) << 7) + static_cast<std::int64_t>(kept) - 128;
  return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::min<std::int64_t>(code, 0x7F80)));
}

}  // namespace nvfp4::detail
