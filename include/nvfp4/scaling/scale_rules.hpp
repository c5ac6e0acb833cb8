// nvfp4/scaling/scale_rules.hpp: how tensor and block scales are chosen, one function per rule of
// docs/numerics_spec.md §2 (NVFP4, TransformerEngine bit-exact) and §7 (MX). Shared by the scalar reference
// and the SIMD kernels, so both pick the very same scales.
#pragma once

#include <cfloat>
#include <cstdint>

#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e8m0.hpp"
#include "nvfp4/formats/traits.hpp"
#include "nvfp4/scaling/quantize_options.hpp"

namespace nvfp4 {

/// NVFP4's FP32 second-level scale pair.
struct tensor_scale {
  float encode;  ///< S_enc = 2688 / amax (clamped), so amax maps to 6 * 448
  float decode;  ///< S_dec = 1 / S_enc
};

/// §2 step 2: S_enc = fp32(2688 / amax) clamped to FLT_MAX; 1 when amax is 0 or S_enc is 0.
constexpr tensor_scale nvfp4_tensor_scale(float amax) {
  // The zero test comes first and the clamp is written !(encode <= FLT_MAX) on purpose: GCC 13.3
  // (Ubuntu 24.04, -O1 and above, its jump threading) compiled the earlier form "divide, clamp
  // when > FLT_MAX, then 1 when amax or encode is 0" into encode = 1 for every amax whose quotient
  // overflows (amax < 2688 / FLT_MAX), as if such an amax were 0. Found on the device machine by
  // the golden row-scaled case 'tiny'; tests/scaling/reference_test.cpp keeps the value at run time.
  if (amax == 0.0f) return {1.0f, 1.0f};
  float encode = 2688.0f / amax;
  if (!(encode <= FLT_MAX)) encode = FLT_MAX;
  if (encode == 0.0f) encode = 1.0f;
  return {encode, 1.0f / encode};
}

/// fp32 RN of 1/6, the constant TE multiplies the tensor scale by.
inline constexpr float one_sixth = 1.0f / 6.0f;

/// §2 step 3: the UE4M3 block scale for a block whose max |x| is block_amax.
constexpr ue4m3 nvfp4_block_scale(float block_amax, float encode_scale) {
  float d = block_amax * (encode_scale * one_sixth);
  if (d > FLT_MAX) d = FLT_MAX;
  return ue4m3::from_float(d);
}

/// §2 step 4: the factor each element of the block is multiplied by before E2M1 rounding.
constexpr float nvfp4_block_encode_factor(ue4m3 scale, float decode_scale) {
  const float factor = 1.0f / (scale.to_float() * decode_scale);
  return factor > FLT_MAX ? FLT_MAX : factor;
}

namespace detail {
/// floor(log2 v) for finite v > 0, subnormals included.
constexpr int floor_log2(float v) {
  const std::uint32_t bits = float_bits(v);
  const int biased = static_cast<int>(bits >> 23);
  if (biased != 0) return biased - 127;
  int e = -127;  // subnormal: find the leading significand bit
  for (std::uint32_t m = bits & 0x7FFFFFu; m < 0x400000u; m <<= 1) --e;
  return e;
}
constexpr bool is_power_of_two(float v) {
  const std::uint32_t bits = float_bits(v);
  const std::uint32_t m = bits & 0x7FFFFFu;
  return (bits >> 23) != 0 ? m == 0 : (m & (m - 1)) == 0;
}
}  // namespace detail

/// §7: the E8M0 scale of an MX block with element format Element. A zero block gets the
/// smallest scale, 2^-127.
template <class Element>
constexpr e8m0 mx_block_scale(float block_amax, mx_scale_rule rule) {
  constexpr float element_max = Element::max().to_float();
  constexpr int element_emax = detail::floor_log2(element_max);
  if (block_amax == 0.0f) return e8m0::from_exponent(-e8m0::bias);
  if (rule == mx_scale_rule::ocp_floor) {
    return e8m0::from_exponent(detail::floor_log2(block_amax) - element_emax);
  }
  const float ratio = block_amax / element_max;
  if (ratio == 0.0f) return e8m0::from_exponent(-e8m0::bias);
  const int e = detail::floor_log2(ratio) + (detail::is_power_of_two(ratio) ? 0 : 1);
  return e8m0::from_exponent(e);
}

/// The factor an MX element is multiplied by before rounding: 1 / 2^e, exact.
constexpr float mx_block_encode_factor(e8m0 scale) { return detail::exp2i(-scale.exponent()); }

}  // namespace nvfp4
