// nvfp4/simd/minifloat_lanes.hpp: the minifloat codecs over an ISA's lane operations (RNE encode of
// float bits to any format, bulk encode / decode, run and lane amax), bit-identical to formats/'
// scalar codecs; shared by scaling/ and transforms/. Tails go through the scalar Ops.
#pragma once

#include <algorithm>
#include <cstdint>

#include "nvfp4/config.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/formats/e2m1.hpp"
#include "nvfp4/formats/traits.hpp"
#include "nvfp4/simd/scalar/ops.hpp"

namespace nvfp4::simd {

/// Bits of |x| (sign cleared): for non-negative floats the integer order is the float order, and
/// anything at or above float_inf_bits is Inf or NaN.
inline constexpr std::uint32_t abs_bits_mask = 0x7FFFFFFFu;
inline constexpr std::uint32_t float_inf_bits = 0x7F800000u;

/// True when format T's codes are 4 bits wide (stored two per byte).
template <minifloat_traits T>
inline constexpr bool is_packed_format = T.exponent_bits + T.mantissa_bits + 1 == 4;

template <class Ops>
struct minifloat_lanes {
  static constexpr int width = Ops::width;
  using vf = typename Ops::vf;
  using vi = typename Ops::vi;
  /// What the last (width - 1) or fewer elements of a run go through.
  using tail = minifloat_lanes<scalar::ops>;

  /// Round-to-nearest-even encode of `width` floats (given as bits) to format T, bit-identical to
  /// detail::encode_minifloat<T> for every input, NaN, Inf and subnormals included.
  template <minifloat_traits T, overflow_policy Policy>
  static NVFP4_ALWAYS_INLINE vi encode_bits(vi bits) {
    constexpr int magnitude_bits = T.exponent_bits + T.mantissa_bits;
    constexpr int shift = 23 - T.mantissa_bits;
    constexpr int min_exponent = 1 - T.bias;
    constexpr std::uint32_t min_normal_bits = nvfp4::detail::float_bits(nvfp4::detail::exp2i(min_exponent));
    constexpr float subnormal_magic = nvfp4::detail::exp2i(min_exponent - T.mantissa_bits + 23);
    constexpr std::uint32_t normal_offset = static_cast<std::uint32_t>(127 - T.bias) << T.mantissa_bits;
    constexpr std::uint32_t overflow_code =
        Policy == overflow_policy::saturate ? T.max_code : (T.has_inf ? (((1u << T.exponent_bits) - 1) << T.mantissa_bits) : T.nan_code);
    const vi magnitude_in = Ops::bit_and(bits, Ops::set_int(abs_bits_mask));
    // T's normal range: round the float's significand to T's mantissa width in place (add just
    // under half a quantum, plus the kept LSB for ties to even); a carry bumps the exponent.
    const vi kept_lsb = Ops::bit_and(Ops::template shift_right<shift>(magnitude_in), Ops::set_int(1));
    const vi biased = Ops::add(Ops::add(magnitude_in, Ops::set_int((1u << (shift - 1)) - 1)), kept_lsb);
    const vi normal = Ops::sub(Ops::template shift_right<shift>(biased), Ops::set_int(normal_offset));
    // Below T's smallest normal the quantum is fixed, 2^(emin - m). Adding 2^(emin - m + 23)
    // makes that quantum the float's last place, so the FPU's own RNE rounds; what is left above
    // the magic constant's bits is the code.
    const vi subnormal = Ops::sub(Ops::as_int(Ops::add(Ops::as_float(magnitude_in), Ops::set(subnormal_magic))),
                                  Ops::set_int(nvfp4::detail::float_bits(subnormal_magic)));
    vi magnitude = Ops::select(Ops::greater(Ops::set_int(min_normal_bits), magnitude_in), subnormal, normal);
    if constexpr (overflow_code == T.max_code) {
      magnitude = Ops::min(magnitude, Ops::set_int(T.max_code));
    } else {
      magnitude = Ops::select(Ops::greater(magnitude, Ops::set_int(T.max_code)), Ops::set_int(overflow_code), magnitude);
    }
    const vi sign = T.has_sign ? Ops::template shift_left<magnitude_bits>(Ops::template shift_right<31>(bits)) : Ops::set_int(0);
    vi code = Ops::bit_or(sign, magnitude);
    if constexpr (T.has_nan) {
      // The satfinite conversion writes the positive all-ones code; the propagating one keeps the sign.
      const vi nan =
          Policy == overflow_policy::saturate ? Ops::set_int(satfinite_nan_code(T)) : Ops::bit_or(sign, Ops::set_int(T.nan_code));
      code = Ops::select(Ops::greater(magnitude_in, Ops::set_int(float_inf_bits)), nan, code);
    }
    return code;
  }

  /// max of the |x| bits over x[0..n): the amax when below float_inf_bits, else a NaN/Inf is there.
  static std::uint32_t abs_max_bits(const float* x, index_t n) {
    const vi mask = Ops::set_int(abs_bits_mask);
    vi m0 = Ops::set_int(0), m1 = m0, m2 = m0, m3 = m0;
    index_t i = 0;
    for (; i + 4 * width <= n; i += 4 * width) {
      m0 = Ops::max(m0, Ops::bit_and(Ops::as_int(Ops::load(x + i)), mask));
      m1 = Ops::max(m1, Ops::bit_and(Ops::as_int(Ops::load(x + i + width)), mask));
      m2 = Ops::max(m2, Ops::bit_and(Ops::as_int(Ops::load(x + i + 2 * width)), mask));
      m3 = Ops::max(m3, Ops::bit_and(Ops::as_int(Ops::load(x + i + 3 * width)), mask));
    }
    for (; i + width <= n; i += width) m0 = Ops::max(m0, Ops::bit_and(Ops::as_int(Ops::load(x + i)), mask));
    const std::uint32_t head = Ops::reduce_max(Ops::max(Ops::max(m0, m1), Ops::max(m2, m3)));
    if constexpr (width == 1)
      return head;
    else
      return std::max(head, tail::abs_max_bits(x + i, n - i));
  }

  static std::uint32_t abs_max_bits(const bf16* x, index_t n) {
    const vi mask = Ops::set_int(abs_bits_mask);
    vi m0 = Ops::set_int(0), m1 = m0;
    index_t i = 0;
    for (; i + 2 * width <= n; i += 2 * width) {
      m0 = Ops::max(m0, Ops::bit_and(Ops::load_bf16_bits(x + i), mask));
      m1 = Ops::max(m1, Ops::bit_and(Ops::load_bf16_bits(x + i + width), mask));
    }
    for (; i + width <= n; i += width) m0 = Ops::max(m0, Ops::bit_and(Ops::load_bf16_bits(x + i), mask));
    const std::uint32_t head = Ops::reduce_max(Ops::max(m0, m1));
    if constexpr (width == 1)
      return head;
    else
      return std::max(head, tail::abs_max_bits(x + i, n - i));
  }

  /// E2M1 codes (round to nearest even, saturating) of a's and b's lanes in Ops::narrow_to_words
  /// order: the ISA's own word encoder where it has one, else encode_bits per vector.
  static NVFP4_ALWAYS_INLINE vi e2m1_codes_as_words(vf a, vf b) {
    if constexpr (requires { Ops::e2m1_codes_as_words(a, b); }) {
      return Ops::e2m1_codes_as_words(a, b);
    } else {
      return Ops::narrow_to_words(encode_bits<e2m1_traits, overflow_policy::saturate>(Ops::as_int(a)),
                                  encode_bits<e2m1_traits, overflow_policy::saturate>(Ops::as_int(b)));
    }
  }

  /// E2M1 codes (round to nearest even, saturating) of a's and b's lanes, each in its lane:
  /// through the ISA's word encoder where it has one.
  static NVFP4_ALWAYS_INLINE void e2m1_codes(vf a, vf b, vi& code_a, vi& code_b) {
    if constexpr (requires { Ops::e2m1_codes_as_words(a, b); }) {
      Ops::widen_words(Ops::e2m1_codes_as_words(a, b), code_a, code_b);
    } else {
      code_a = encode_bits<e2m1_traits, overflow_policy::saturate>(Ops::as_int(a));
      code_b = encode_bits<e2m1_traits, overflow_policy::saturate>(Ops::as_int(b));
    }
  }

  /// Per lane, the max |v[i]| over N registers, as float bits (the block amax of blocks held
  /// across lanes).
  template <int N>
  static NVFP4_ALWAYS_INLINE vi lane_abs_max_bits(const vf (&v)[N]) {
    const vi abs_mask = Ops::set_int(abs_bits_mask);
    vi amax = Ops::bit_and(Ops::as_int(v[0]), abs_mask);
#pragma GCC unroll 31
    for (int i = 1; i < N; ++i) amax = Ops::max(amax, Ops::bit_and(Ops::as_int(v[i]), abs_mask));
    return amax;
  }

  /// Four byte values per lane (each below 256) in one 32-bit lane, b0 in the low byte.
  static NVFP4_ALWAYS_INLINE vi bytes_to_word(vi b0, vi b1, vi b2, vi b3) {
    return Ops::bit_or(Ops::bit_or(b0, Ops::template shift_left<8>(b1)),
                       Ops::bit_or(Ops::template shift_left<16>(b2), Ops::template shift_left<24>(b3)));
  }

  /// One code per byte for each x[i] in format T with the given overflow policy.
  template <minifloat_traits T, overflow_policy Policy>
  static void encode(const float* x, index_t n, std::uint8_t* out) {
    index_t i = 0;
    for (; i + width <= n; i += width) Ops::store_bytes(out + i, encode_bits<T, Policy>(Ops::as_int(Ops::load(x + i))));
    if constexpr (width > 1) tail::encode<T, Policy>(x + i, n - i, out + i);
  }

  /// out[i] = value of code codes[i] in format T (one code per byte).
  template <minifloat_traits T>
  static void decode(const std::uint8_t* codes, index_t n, float* out) {
    constexpr bool packed = is_packed_format<T>;
    static constexpr nvfp4::detail::decode_table<T, packed ? 16 : 256> table{};
    index_t i = 0;
    for (; i + width <= n; i += width) {
      const vi code = Ops::load_bytes(codes + i);
      Ops::store(out + i, packed ? Ops::lookup16(code, table.values) : Ops::gather(code, table.values));
    }
    if constexpr (width > 1) tail::decode<T>(codes + i, n - i, out + i);
  }
};

}  // namespace nvfp4::simd
