// nvfp4/gemm/fp4/mma_model.hpp: one K=64 step of the Blackwell block-scaled MMA (kind::mxf4nvf4, FP32
// accumulate), bit-accurate, as docs/numerics_spec.md §6 states it (the MMA-Sim model). Scalar and plain on
// purpose: this is the reference every fast GEMM path is checked against.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e8m0.hpp"
#include "nvfp4/formats/traits.hpp"

namespace nvfp4::fp4::mma {

/// Elements one MMA step consumes per output, and the group size of the exact partial sums.
inline constexpr int step_k = 64;
inline constexpr int group_k = 16;
inline constexpr int groups_per_step = step_k / group_k;

/// Exponent of a zero UE4M3 scale and of c = 0 (§6 steps 3-4): such terms are zero but still
/// take part in E_max with this exponent.
inline constexpr int zero_exponent = -126;
/// Fractional bits kept below the largest term's exponent (§6 step 5).
inline constexpr int fraction_bits = 35;

/// A block scale written as m * 2^e (§6 step 1), with m held in eighths so it is an integer:
/// UE4M3 gives m/8 in [1, 2) for normal codes and m/8 < 1 for subnormal ones (e clamped at -6);
/// E8M0 gives m/8 = 1. A zero scale has m = 0.
struct scale_parts {
  bool is_nan = false;
  int m_eighths = 0;
  int exponent = 0;
};

/// §6 step 1 for a UE4M3 scale byte (the sign bit is ignored; 0x7F and 0xFF are NaN; a zero
/// scale has m = 0 and e = -126, step 3).
constexpr scale_parts decompose(ue4m3 scale) {
  const int code = scale.bits() & 0x7F;
  if (code == 0x7F) return {true, 0, 0};
  if (code == 0) return {false, 0, zero_exponent};
  const int exponent_field = code >> 3, mantissa = code & 7;
  if (exponent_field == 0) return {false, mantissa, -6};
  return {false, 8 + mantissa, exponent_field - 7};
}

/// §6 step 1 for an E8M0 scale byte (0xFF is NaN).
constexpr scale_parts decompose(e8m0 scale) {
  if (scale.is_nan()) return {true, 0, 0};
  return {false, 8, scale.exponent()};
}

/// The scale parts of a group past K: K is padded with zero elements whose scale bytes are zero,
/// as in the padded scale layouts cuBLAS reads. Their exponent (-126 for UE4M3, -127 for E8M0,
/// so at most -252 for the pair) is below c's, which is at least -126: padding never moves E_max.
template <class ScaleType>
constexpr scale_parts padding_scale() {
  return decompose(ScaleType::from_bits(0));
}

/// The scale's value as a float (NaN for a NaN scale; E8M0 beyond the float range gives Inf or 0
/// only through the product the caller forms, as the value itself is in range).
constexpr float scale_value(const scale_parts& s) {
  if (s.is_nan) return std::numeric_limits<float>::quiet_NaN();
  return static_cast<float>(s.m_eighths) * detail::exp2i(s.exponent - 3);  // exact: e - 3 >= -130
}

/// Twice the value of an E2M1 code: an integer in [-12, 12], so products are exact integers.
constexpr int e2m1_doubled(std::uint8_t code) {
  constexpr int magnitude[8] = {0, 1, 2, 3, 4, 6, 8, 12};
  return (code & 8) ? -magnitude[code & 7] : magnitude[code & 7];
}

/// v * 2^shift, truncated toward zero (sign-magnitude), for |v| < 2^52.
/// A zero (e.g. c = 0, whose lsb exponent is arbitrary) stays zero whatever the shift; a non-zero
/// term is never shifted left by more than 27 bits.
constexpr std::int64_t shift_toward_zero(std::int64_t v, int shift) {
  if (v == 0) return 0;
  if (shift >= 0) return v << shift;
  if (shift <= -63) return 0;
  return v < 0 ? -((-v) >> -shift) : (v >> -shift);
}

/// S * 2^lsb_exponent converted to fp32 toward zero, keeping `fraction_bits` bits below the
/// leading one (23, a full fp32, for the FP4 step of §6 step 6; 13 for Hopper's FP8 step, §9
/// step 6); below 2^-126 the quantum stays 2^(-126 - fraction_bits) (gradual underflow at the
/// same granularity); |S| >= 2^128 gives ±Inf; an exact zero gives +0.
inline float round_toward_zero(std::int64_t sum, int lsb_exponent, int fraction_bits = 23) {
  if (sum == 0) return 0.0f;
  const bool negative = sum < 0;
  const std::uint64_t magnitude = negative ? 0 - static_cast<std::uint64_t>(sum) : static_cast<std::uint64_t>(sum);
  const int exponent = 63 - std::countl_zero(magnitude) + lsb_exponent;  // floor(log2 |S|)
  float result;
  if (exponent >= 128) {
    result = std::numeric_limits<float>::infinity();
  } else {
    const int result_lsb = (exponent >= -126 ? exponent : -126) - fraction_bits;  // the quantum there
    const int drop = result_lsb - lsb_exponent;
    const std::uint64_t kept = drop <= 0 ? magnitude << -drop : (drop >= 64 ? 0 : magnitude >> drop);
    result = static_cast<float>(std::ldexp(static_cast<double>(kept), result_lsb));  // exact
  }
  return negative ? -result : result;
}

/// One step: c + Σ_g P_g · s_a,g · s_b,g for 64 elements, exactly as the tensor core does it.
/// a2 and b2 hold twice the E2M1 values (e2m1_doubled) of the 64 elements; scale_a[g] and
/// scale_b[g] are the decomposed scales of group g (for MXFP4, groups 0-1 and 2-3 share one).
template <class Value>
float step(const Value* a2, const Value* b2, const scale_parts* scale_a, const scale_parts* scale_b, float c) {
  constexpr std::uint32_t canonical_nan = 0x7FFFFFFFu;  // §6 step 7
  for (int g = 0; g < groups_per_step; ++g)
    if (scale_a[g].is_nan || scale_b[g].is_nan) return std::bit_cast<float>(canonical_nan);
  if (std::isnan(c)) return std::bit_cast<float>(canonical_nan);
  if (std::isinf(c)) return c;

  // Steps 2-3: exact group sums and their alignment exponents. Term g is
  // P4 * M * 2^(E_g - 8): P4 = Σ a2*b2 = 4 P_g, M = m_a * m_b in 64ths. E_g is the scales'
  // exponents alone: a group whose products are all zero, or whose scale is zero, still counts.
  std::int64_t term_mantissa[groups_per_step];
  int term_exponent[groups_per_step];
  for (int g = 0; g < groups_per_step; ++g) {
    std::int64_t sum = 0;
    for (int k = g * group_k; k < (g + 1) * group_k; ++k) sum += static_cast<int>(a2[k]) * static_cast<int>(b2[k]);
    term_mantissa[g] = sum * (scale_a[g].m_eighths * scale_b[g].m_eighths);
    term_exponent[g] = scale_a[g].exponent + scale_b[g].exponent;
  }

  // Step 4: the accumulator as significand * 2^lsb, E_c = max(floor(log2 |c|), -126); c = 0 has
  // E_c = -126 too. The lsb of a zero c does not matter (a zero is never shifted).
  const std::uint32_t c_bits = std::bit_cast<std::uint32_t>(c) & 0x7FFFFFFFu;
  const int biased = static_cast<int>(c_bits >> 23);
  std::int64_t c_significand = biased ? ((c_bits & 0x7FFFFFu) | 0x800000u) : c_bits;
  const int c_lsb = (biased ? biased : 1) - 150;
  if (c < 0) c_significand = -c_significand;
  const int c_exponent = biased ? biased - 127 : zero_exponent;

  // Step 5's E_max over all five terms.
  int max_exponent = c_exponent;
  for (int g = 0; g < groups_per_step; ++g) max_exponent = std::max(max_exponent, term_exponent[g]);

  // Step 5: truncate each term to a multiple of 2^(E_max - 35), then add exactly (in units of it).
  const int unit_exponent = max_exponent - fraction_bits;
  std::int64_t sum = shift_toward_zero(c_significand, c_lsb - unit_exponent);
  for (int g = 0; g < groups_per_step; ++g) sum += shift_toward_zero(term_mantissa[g], term_exponent[g] - 8 - unit_exponent);
  // Step 6.
  return round_toward_zero(sum, unit_exponent);
}

/// One step of the relaxed mode: for each group in order, acc = fma(P_g, s_a,g * s_b,g, acc) in
/// fp32 (P_g is exact; the scale product is exact for UE4M3, may overflow for extreme E8M0).
template <class Value>
float relaxed_step(const Value* a2, const Value* b2, const scale_parts* scale_a, const scale_parts* scale_b, float acc) {
  for (int g = 0; g < groups_per_step; ++g) {
    int doubled_sum = 0;
    for (int k = g * group_k; k < (g + 1) * group_k; ++k) doubled_sum += static_cast<int>(a2[k]) * static_cast<int>(b2[k]);
    const float group_sum = static_cast<float>(doubled_sum) * 0.25f;  // exact
    acc = std::fma(group_sum, scale_value(scale_a[g]) * scale_value(scale_b[g]), acc);
  }
  return acc;
}

}  // namespace nvfp4::fp4::mma
