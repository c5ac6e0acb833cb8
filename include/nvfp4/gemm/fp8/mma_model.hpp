// nvfp4/gemm/fp8/mma_model.hpp: one K=32 step of the FP8 tensor-core MMA with fp32 accumulation,
// bit-accurate, as docs/numerics_spec.md §9 states it (the MMA-Sim model): Hopper `wgmma` (13 fractional
// bits, results cut to 13 mantissa bits), Blackwell `kind::f8f6f4` (25 bits) and
// `kind::mxf8f6f4` (25 bits, one E8M0 scale per 32). Scalar and plain on purpose: this is the
// reference every fast FP8 GEMM path is checked against.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "nvfp4/detail/enum_names.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e5m2.hpp"
#include "nvfp4/formats/e8m0.hpp"
#include "nvfp4/gemm/fp4/mma_model.hpp"
#include "nvfp4/scaling/fp8_tensor.hpp"

namespace nvfp4::fp8::mma {

/// Elements one MMA step consumes per output (K of wgmma / tcgen05.mma for 8-bit types).
inline constexpr int step_k = 32;

/// Which tensor core's accumulation a step follows (docs/numerics_spec.md §9 steps 5-6).
enum class tensor_core {
  hopper,    ///< wgmma, FP8 inputs: terms truncated to 13 fractional bits, result to 13 mantissa bits
  blackwell  ///< tcgen05.mma kind::f8f6f4 / kind::mxf8f6f4: 25 fractional bits, result to fp32 (RZ)
};

/// Fractional bits kept below the largest term's exponent (§9 step 5).
constexpr int alignment_bits(tensor_core core) { return core == tensor_core::hopper ? 13 : 25; }
/// Fraction bits of the step's fp32 result (§9 step 6).
constexpr int result_fraction_bits(tensor_core core) { return core == tensor_core::hopper ? 13 : 23; }

/// An FP8 value written as (sign) m * 2^(e - mantissa_bits) with m an integer (§9 step 1):
/// e = max(floor(log2 |v|), emin), so a subnormal has m < 2^mantissa_bits; a zero has m = 0 and
/// e = -126. NaN and Inf codes are flagged (they decide the step through §9 step 3).
struct element_parts {
  bool is_nan = false;
  bool is_inf = false;
  bool negative = false;
  int m = 0;
  int exponent = -126;
  int mantissa_bits = 3;
};

/// §9 step 1 for one FP8 code of the given format.
constexpr element_parts decompose(std::uint8_t code, fp8_format format) {
  element_parts p;
  const bool e4m3 = format == fp8_format::e4m3;
  const int mantissa_bits = e4m3 ? 3 : 2;
  const int bias = e4m3 ? 7 : 15;
  const int magnitude = code & 0x7F;
  p.mantissa_bits = mantissa_bits;
  p.negative = (code & 0x80) != 0;
  if (e4m3 && magnitude == 0x7F) {
    p.is_nan = true;
    return p;
  }
  if (!e4m3 && magnitude >= 0x7C) {
    (magnitude == 0x7C ? p.is_inf : p.is_nan) = true;
    return p;
  }
  const int field = magnitude >> mantissa_bits, mantissa = magnitude & ((1 << mantissa_bits) - 1);
  if (field == 0) {
    p.m = mantissa;
    p.exponent = mantissa == 0 ? -126 : 1 - bias;
  } else {
    p.m = (1 << mantissa_bits) | mantissa;
    p.exponent = field - bias;
  }
  return p;
}

/// The exact value of an FP8 code as a double (NaN / ±Inf for those codes).
constexpr double value_of(std::uint8_t code, fp8_format format) {
  const element_parts p = decompose(code, format);
  if (p.is_nan) return std::numeric_limits<double>::quiet_NaN();
  if (p.is_inf) return p.negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  const double v = static_cast<double>(p.m) * std::ldexp(1.0, p.exponent - p.mantissa_bits);
  return p.negative ? -v : v;
}

/// The canonical NaN every step writes (§9 step 3).
inline constexpr std::uint32_t canonical_nan_bits = 0x7FFFFFFFu;

/// v * 2^shift truncated toward zero (sign-magnitude); the FP4 model's (§6 step 5).
using fp4::mma::shift_toward_zero;

/// One step, D = c + Σ_k a_k b_k (times 2^sa 2^sb for kind::mxf8f6f4), exactly as the tensor core
/// computes it (§9 steps 3-6). a and b hold `step_k` FP8 codes of formats fa and fb; scale_a and
/// scale_b are the E8M0 block scales of the step (pass e8m0 code 127, i.e. 1.0, for the
/// unscaled kinds).
inline float step(const std::uint8_t* a, fp8_format fa, const std::uint8_t* b, fp8_format fb, float c, tensor_core core,
                  e8m0 scale_a = e8m0::from_bits(127), e8m0 scale_b = e8m0::from_bits(127)) {
  // Step 3: NaN / Inf decided on the exact (here fp64, which cannot overflow) sum of the terms.
  double special = static_cast<double>(c);
  if (scale_a.is_nan() || scale_b.is_nan()) special = std::numeric_limits<double>::quiet_NaN();
  for (int k = 0; k < step_k; ++k) special += value_of(a[k], fa) * value_of(b[k], fb);
  if (std::isnan(special)) return std::bit_cast<float>(canonical_nan_bits);
  if (std::isinf(special)) return special > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();

  // Step 4: every term as an integer significand times a power of two, and its exponent.
  const int scale_exponent = scale_a.exponent() + scale_b.exponent();
  std::int64_t term_m[step_k];
  int term_lsb[step_k];  // the term is term_m * 2^term_lsb
  int term_exponent[step_k];
  int max_exponent = -126;
  for (int k = 0; k < step_k; ++k) {
    const element_parts pa = decompose(a[k], fa), pb = decompose(b[k], fb);
    const std::int64_t product = static_cast<std::int64_t>(pa.m) * pb.m;
    term_m[k] = (pa.negative != pb.negative) ? -product : product;
    term_exponent[k] = pa.exponent + pb.exponent + scale_exponent;
    term_lsb[k] = term_exponent[k] - pa.mantissa_bits - pb.mantissa_bits;
    if (term_exponent[k] > max_exponent) max_exponent = term_exponent[k];
  }
  // The accumulator: E_c = max(floor(log2 |c|), -126); c = 0 has exponent -126.
  const std::uint32_t c_bits = std::bit_cast<std::uint32_t>(c) & 0x7FFFFFFFu;
  std::int64_t c_m = 0;
  int c_lsb = 0;
  if (c_bits != 0) {
    const int biased = static_cast<int>(c_bits >> 23);
    c_m = biased ? ((c_bits & 0x7FFFFFu) | 0x800000u) : c_bits;
    c_lsb = (biased ? biased : 1) - 150;
    const int c_exponent = biased ? biased - 127 : -126;
    if (c_exponent > max_exponent) max_exponent = c_exponent;
    if (std::signbit(c)) c_m = -c_m;
  }

  // Step 5: truncate every term to a multiple of 2^(E_max - F), add exactly in units of it.
  const int unit = max_exponent - alignment_bits(core);
  std::int64_t sum = shift_toward_zero(c_m, c_lsb - unit);
  for (int k = 0; k < step_k; ++k) sum += shift_toward_zero(term_m[k], term_lsb[k] - unit);
  // Step 6.
  return fp4::mma::round_toward_zero(sum, unit, result_fraction_bits(core));
}

/// 2^(sa + sb) as a float (Inf / 0 beyond the float range, NaN for a NaN scale).
inline float scale_product(e8m0 scale_a, e8m0 scale_b) {
  if (scale_a.is_nan() || scale_b.is_nan()) return std::numeric_limits<float>::quiet_NaN();
  return static_cast<float>(std::ldexp(1.0, scale_a.exponent() + scale_b.exponent()));
}

/// The relaxed step, a defined stand-in for the tensor core (not what any GPU computes): the 32
/// exact products summed in fp32 from zero in the pair order of x86's BF16 dot product
/// (VDPBF16PS: for k = 0, 2, 4, ...: P += a[k+1] b[k+1], then P += a[k] b[k], each rounded to
/// nearest), then acc = fma(P, 2^(sa + sb), acc). FP8 values are exact in bf16 and their products
/// in fp32; every partial sum is a multiple of 2^-32 or zero, so no subnormal ever occurs and the
/// instruction's flush-to-zero cannot change anything.
inline float relaxed_step(const std::uint8_t* a, fp8_format fa, const std::uint8_t* b, fp8_format fb, float acc,
                          e8m0 scale_a = e8m0::from_bits(127), e8m0 scale_b = e8m0::from_bits(127)) {
  float partial = 0.0f;
  for (int k = 0; k < step_k; k += 2) {
    partial = std::fma(static_cast<float>(value_of(a[k + 1], fa)), static_cast<float>(value_of(b[k + 1], fb)), partial);
    partial = std::fma(static_cast<float>(value_of(a[k], fa)), static_cast<float>(value_of(b[k], fb)), partial);
  }
  return std::fma(partial, scale_product(scale_a, scale_b), acc);
}

}  // namespace nvfp4::fp8::mma

/// Its names in checkpoints, the CLI and Python (one table: nvfp4/detail/enum_names.hpp).
namespace nvfp4::detail {
template <>
struct enum_table<fp8::mma::tensor_core> {
  static constexpr enum_entry<fp8::mma::tensor_core> entries[] = {{"hopper", fp8::mma::tensor_core::hopper},
                                                                  {"blackwell", fp8::mma::tensor_core::blackwell}};
};
}  // namespace nvfp4::detail
