// nvfp4/formats/packed_fp4.hpp: e2m1x2, one byte holding two E2M1 codes: element 2i in the LOW
// nibble, element 2i+1 in the HIGH nibble (docs/numerics_spec.md §1, the layout every NVFP4 kernel reads).
#pragma once

#include <cstdint>

#include "nvfp4/formats/e2m1.hpp"

namespace nvfp4 {

class e2m1x2 {
 public:
  constexpr e2m1x2() = default;
  constexpr e2m1x2(e2m1 low, e2m1 high) : bits_(static_cast<std::uint8_t>(low.bits() | (high.bits() << 4))) {}
  static constexpr e2m1x2 from_bits(std::uint8_t byte) {
    e2m1x2 v;
    v.bits_ = byte;
    return v;
  }
  constexpr std::uint8_t bits() const { return bits_; }
  /// Element 2i.
  constexpr e2m1 low() const { return e2m1::from_bits(bits_ & 0xF); }
  /// Element 2i+1.
  constexpr e2m1 high() const { return e2m1::from_bits(bits_ >> 4); }
  /// Element `which` (0 = low, 1 = high).
  constexpr e2m1 operator[](int which) const { return which ? high() : low(); }
  /// This pair with element `which` (0 = low, 1 = high) replaced by e: how a writer fills a packed
  /// row one element at a time (element c goes to byte c / 2 as .with(c & 1, e)).
  constexpr e2m1x2 with(int which, e2m1 e) const { return which ? e2m1x2(low(), e) : e2m1x2(e, high()); }
  friend constexpr bool operator==(e2m1x2 a, e2m1x2 b) { return a.bits_ == b.bits_; }

 private:
  std::uint8_t bits_ = 0;
};

static_assert(sizeof(e2m1x2) == 1);

}  // namespace nvfp4
