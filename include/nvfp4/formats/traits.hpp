// nvfp4/formats/traits.hpp: the numbers that define each small float format, stated once, and
// the one generic float32 <-> code conversion every format type is built on (docs/numerics_spec.md §1).
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

#include "nvfp4/config.hpp"

namespace nvfp4 {

/// What an encoder does with a finite value beyond the largest finite code, and with ±Inf.
enum class overflow_policy {
  saturate,  ///< clamp to ±max finite (the hardware's `.satfinite`; the default)
  propagate  ///< overflow to Inf where the format has it, else NaN (ml_dtypes' plain cast)
};

/// A format's defining numbers. Codes hold the sign (when present) in bit `exponent_bits +
/// mantissa_bits`, the biased exponent above the mantissa, IEEE style with subnormals.
struct minifloat_traits {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool has_sign;
  bool has_inf;           ///< IEEE Inf at exponent all-ones, mantissa zero (E5M2)
  bool has_nan;           ///< some code decodes to NaN
  std::uint8_t max_code;  ///< largest finite magnitude code
  std::uint8_t nan_code;  ///< magnitude code a sign-keeping cast writes for NaN (when has_nan; ml_dtypes' choice)
};

/// The code the hardware's satfinite conversion (cvt.rn.satfinite) writes for any NaN input: the
/// positive all-ones pattern, 0x7F for E4M3 and E5M2 (an H100, quiet and signalling NaNs of both
/// signs: tests/formats/data/h100_nan_codes.json). Sign-keeping casts differ: torch writes 0x7F /
/// 0xFF, ml_dtypes 0x7E / 0xFE for E5M2 (its `nan_code`, what overflow_policy::propagate writes).
constexpr std::uint8_t satfinite_nan_code(const minifloat_traits& t) {
  return static_cast<std::uint8_t>((1u << (t.exponent_bits + t.mantissa_bits)) - 1u);
}

namespace detail {

constexpr std::uint32_t float_bits(float x) { return std::bit_cast<std::uint32_t>(x); }
constexpr float bits_float(std::uint32_t b) { return std::bit_cast<float>(b); }

/// 2^e as a float for e in [-149, 127], exactly.
constexpr float exp2i(int e) { return e >= -126 ? bits_float(static_cast<std::uint32_t>(e + 127) << 23) : bits_float(1u << (e + 149)); }

/// Decodes a code of format T to the float32 it stands for (exact for every format here).
template <minifloat_traits T>
constexpr float decode_minifloat(std::uint32_t code) {
  const int magnitude_bits = T.exponent_bits + T.mantissa_bits;
  const std::uint32_t magnitude = code & ((1u << magnitude_bits) - 1);
  const bool negative = T.has_sign && ((code >> magnitude_bits) & 1u);
  const std::uint32_t exponent_field = magnitude >> T.mantissa_bits;
  const std::uint32_t mantissa = magnitude & ((1u << T.mantissa_bits) - 1);
  const std::uint32_t exponent_all_ones = (1u << T.exponent_bits) - 1;
  float value;
  if (T.has_inf && exponent_field == exponent_all_ones) {
    value = mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (T.has_nan && !T.has_inf && magnitude > T.max_code) {
    value = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent_field == 0) {
    value = static_cast<float>(mantissa) * exp2i(1 - T.bias - T.mantissa_bits);
  } else {
    value = static_cast<float>(mantissa + (1u << T.mantissa_bits)) * exp2i(static_cast<int>(exponent_field) - T.bias - T.mantissa_bits);
  }
  return negative ? -value : value;
}

/// Encodes a float32 to format T: round to nearest, ties to even, subnormals included, then the
/// overflow policy. NaN gives the NaN code (formats without NaN get max: callers that must not
/// see NaN reject it first, see the tensor-level APIs).
template <minifloat_traits T>
constexpr std::uint8_t encode_minifloat(float x, overflow_policy policy) {
  const std::uint32_t bits = float_bits(x);
  const int magnitude_bits = T.exponent_bits + T.mantissa_bits;
  const std::uint32_t sign = T.has_sign ? ((bits >> 31) << magnitude_bits) : 0u;
  const std::uint32_t abs_bits = bits & 0x7FFFFFFFu;
  const std::uint32_t overflow_code =
      policy == overflow_policy::saturate ? T.max_code : (T.has_inf ? (((1u << T.exponent_bits) - 1) << T.mantissa_bits) : T.nan_code);
  if (abs_bits > 0x7F800000u) {
    // NaN: the hardware's satfinite conversion writes the positive all-ones code whatever the
    // input's sign (checked on an H100 over every NaN pattern); ml_dtypes' cast keeps the sign.
    if (!T.has_nan) return static_cast<std::uint8_t>(sign | T.max_code);
    return policy == overflow_policy::saturate ? satfinite_nan_code(T) : static_cast<std::uint8_t>(sign | T.nan_code);
  }
  if (abs_bits == 0x7F800000u) return static_cast<std::uint8_t>(sign | overflow_code);

  // |x| = significand * 2^(float_exponent - 150), with float subnormals read as exponent 1.
  const int biased = static_cast<int>(abs_bits >> 23);
  const std::uint32_t significand = (abs_bits & 0x7FFFFFu) | (biased ? 0x800000u : 0u);
  const int exponent = (biased ? biased : 1) - 127;
  const int min_exponent = 1 - T.bias;
  // Quantum of the target binade: 2^(max(exponent, emin) - mantissa_bits).
  const int kept_exponent = exponent > min_exponent ? exponent : min_exponent;
  const int shift = (kept_exponent - T.mantissa_bits) - (exponent - 23);
  std::uint32_t rounded;
  if (shift >= 26) {
    rounded = 0;  // below half the smallest quantum
  } else {
    rounded = significand >> shift;
    const std::uint32_t remainder = significand & ((1u << shift) - 1);
    const std::uint32_t half = 1u << (shift - 1);
    if (remainder > half || (remainder == half && (rounded & 1u))) ++rounded;
  }
  // Code = (binade above the subnormal one) << mantissa_bits + rounded significand; a carry out
  // of the mantissa moves to the next binade by itself.
  const std::uint32_t magnitude = (static_cast<std::uint32_t>(kept_exponent - min_exponent) << T.mantissa_bits) + rounded;
  const bool overflows = magnitude > T.max_code || (T.has_inf && magnitude >= (((1u << T.exponent_bits) - 1) << T.mantissa_bits));
  return static_cast<std::uint8_t>(sign | (overflows ? overflow_code : magnitude));
}

/// A 2^bits-entry decode table, built at compile time.
template <minifloat_traits T, int Codes>
struct decode_table {
  float values[Codes];
  constexpr decode_table() : values{} {
    for (int c = 0; c < Codes; ++c) values[c] = decode_minifloat<T>(static_cast<std::uint32_t>(c));
  }
};

}  // namespace detail
}  // namespace nvfp4
