// nvfp4/formats/minifloat.hpp: minifloat<Traits>, the one-byte value type every small float
// format of the library is (e2m1, e4m3, ue4m3, e5m2). Construct from a code or encode a float.
#pragma once

#include <compare>
#include <cstdint>

#include "nvfp4/formats/traits.hpp"

namespace nvfp4 {

template <minifloat_traits Traits>
class minifloat {
 public:
  static constexpr minifloat_traits traits = Traits;
  static constexpr int bit_width = Traits.exponent_bits + Traits.mantissa_bits + (Traits.has_sign ? 1 : 0);
  static constexpr int code_count = 1 << bit_width;

  constexpr minifloat() = default;

  /// The value with this code (the low bit_width bits are used).
  static constexpr minifloat from_bits(std::uint8_t code) {
    minifloat v;
    v.bits_ = static_cast<std::uint8_t>(code & (code_count - 1));
    return v;
  }

  /// Round-to-nearest-even encode with the given overflow policy (docs/numerics_spec.md §1).
  static constexpr minifloat from_float(float x, overflow_policy policy = overflow_policy::saturate) {
    return from_bits(detail::encode_minifloat<Traits>(x, policy));
  }

  constexpr std::uint8_t bits() const { return bits_; }

  /// The exact float32 value of this code.
  constexpr float to_float() const { return table_.values[bits_]; }
  constexpr explicit operator float() const { return to_float(); }

  /// The largest finite value and its code.
  static constexpr minifloat max() { return from_bits(Traits.max_code); }

  friend constexpr bool operator==(minifloat a, minifloat b) { return a.bits_ == b.bits_; }

 private:
  static constexpr detail::decode_table<Traits, code_count> table_{};
  std::uint8_t bits_ = 0;
};

}  // namespace nvfp4
