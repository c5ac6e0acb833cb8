// nvfp4/scaling/detail/fp8_lanes.hpp: the FP8 quantizers' lane encoder (E4M3 / E5M2, round to
// nearest even, saturating) for inputs that are not NaN, over an ISA's lane operations: the same
// codes as simd::minifloat_lanes::encode_bits (and so the scalar codecs) for every non-NaN float,
// in 12 lane operations instead of 17. The FP8 block and MXFP8 quantizers refuse NaN before they
// encode (and a finite element times a finite block scale cannot be NaN), so they can use it.
#pragma once

#include <cstdint>

#include "nvfp4/config.hpp"
#include "nvfp4/formats/traits.hpp"

namespace nvfp4::detail {

template <class Ops>
struct fp8_lanes {
  using vf = typename Ops::vf;
  using vi = typename Ops::vi;

  /// The code of each lane of x in FP8 format T (RNE, satfinite), x not NaN (finite or +-Inf).
  /// The FPU rounds: with e = max(exponent of |x|, T's least normal exponent), |x| + 2^(e + 23 - m)
  /// lies in a binade whose last place is 2^(e - m), T's quantum at |x| (m = T's mantissa bits),
  /// so the addition rounds |x| to T's grid to nearest even, and subtracting the constant again
  /// is exact. The rounded value r times 2^(bias_T - 127) is a float (normal or subnormal) whose
  /// bits, shifted right by 23 - m, are r's code in T: the exponent field lands in T's exponent
  /// bits, T's subnormals in float's. Past T's range the code exceeds max_code and saturates;
  /// where the constant's exponent overflows (|x| >= 2^(128 - 23 + m - 1)) the sum and difference
  /// are Inf, NaN or |x| itself, each far past max_code, so the min saturates them too. Checked
  /// against encode_bits on every non-NaN float (2^32 patterns, AVX2 build) when written, and on
  /// every rounding edge of every binade by tests/scaling/detail/fp8_lanes_test.cpp.
  template <minifloat_traits T>
  static NVFP4_ALWAYS_INLINE vi codes(vf x) {
    static_assert(T.exponent_bits + T.mantissa_bits == 7 && T.has_sign, "FP8 formats only");
    constexpr int shift = 23 - T.mantissa_bits;
    constexpr std::uint32_t least_exponent_bits = static_cast<std::uint32_t>(128 - T.bias) << 23;
    const vi bits = Ops::as_int(x);
    const vi magnitude = Ops::bit_and(bits, Ops::set_int(0x7FFFFFFFu));
    const vi exponent = Ops::max(Ops::bit_and(magnitude, Ops::set_int(0x7F800000u)), Ops::set_int(least_exponent_bits));
    const vf magic = Ops::as_float(Ops::add(exponent, Ops::set_int(static_cast<std::uint32_t>(shift) << 23)));
    const vf rounded = Ops::sub(Ops::add(Ops::as_float(magnitude), magic), magic);
    const vi code = Ops::template shift_right<shift>(Ops::as_int(Ops::mul(rounded, Ops::set(exp2i(T.bias - 127)))));
    const vi sign = Ops::template shift_left<7>(Ops::template shift_right<31>(bits));
    return Ops::bit_or(Ops::min(code, Ops::set_int(T.max_code)), sign);
  }
};

}  // namespace nvfp4::detail
