// nvfp4/recipes/detail/div_full_reciprocal.hpp: 1 / x as an H100 computes Triton's `1 / x` (PTX
// div.full.f32 with dividend 1.0, no flush to zero), the reciprocal inside TE's torch.compile'd
// unfused delayed-scaling update. It is faithful, not correctly rounded: over [1, 2) it is one ulp
// above or below IEEE 1 / x for 13.2% of the inputs, with no closed rule found, so the offsets
// come from a table of the GPU's whole-binade sweep (div_full_reciprocal_table.hpp, generated
// and verified by tests/golden/producers/make_div_full_table.py; docs/recipes.md).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "nvfp4/recipes/detail/div_full_reciprocal_table.hpp"

namespace nvfp4::detail {

namespace div_full_table {

/// (0.5 - the fraction of the exact quotient 2^47 / (2^23 + m) in ulps), in units of
/// 2^-(unit_bits + 1) ulp, truncated towards zero.
inline std::int64_t midpoint_gap(std::uint32_t m) {
  const std::int64_t den = (std::int64_t{1} << 23) + m;
  const std::int64_t n = den - 2 * ((std::int64_t{1} << 47) % den);
  const std::int64_t gap = ((n < 0 ? -n : n) << unit_bits) / den;
  return n < 0 ? -gap : gap;
}

/// The block's fitted line of the GPU's error at mantissa m, in the same units.
inline std::int64_t error_line(std::uint32_t m) {
  const std::uint32_t block = m >> block_bits;
  const std::int64_t t = static_cast<std::int64_t>(m - (block << block_bits));
  return line_at_start[block] + ((static_cast<std::int64_t>(line_slope[block]) * t) >> block_bits);
}

/// Whether the line is too close to the midpoint to decide, so a bit is stored for m.
inline bool in_band(std::uint32_t m, std::int64_t gap, std::int64_t line) {
  const std::int64_t distance = line - gap;
  return gap == 0 || (distance < 0 ? -distance : distance) <= band_half_width[m >> block_bits];
}

/// The offset (-1, 0, +1) given whether the GPU is off; the side follows from the gap's sign.
inline int offset(bool off, std::int64_t gap) { return off ? (gap > 0 ? 1 : -1) : 0; }

inline bool stored_bit(std::uint32_t index) { return ((bits[index >> 6] >> (index & 63u)) & 1u) != 0; }

}  // namespace div_full_table

/// How far an H100's 1 / (1 + m / 2^23) lies from the correctly rounded quotient, in ulps: -1, 0
/// or +1, for a mantissa field m < 2^23. Where the GPU is off it is off towards the exact
/// quotient, so the direction is the side of the midpoint the exact quotient lies on, and the
/// table only says whether: a fitted line of the GPU's error decides far from the midpoint, a
/// stored bit near it (its index counts the block's band members before m). The arithmetic is
/// the generator's, integer for integer.
inline int div_full_unit_offset(std::uint32_t m) {
  using namespace div_full_table;
  const std::int64_t gap = midpoint_gap(m), line = error_line(m);
  if (!in_band(m, gap, line)) return offset(gap > 0 ? line > gap : line < gap, gap);
  std::uint32_t index = first_bit[m >> block_bits];
  for (std::uint32_t before = (m >> block_bits) << block_bits; before < m; ++before)
    index += in_band(before, midpoint_gap(before), error_line(before)) ? 1u : 0u;
  return offset(stored_bit(index), gap);
}

/// div_full_unit_offset for every mantissa of table block `block` (4096 of them) in one pass.
inline void div_full_unit_offsets(std::uint32_t block, std::int8_t* out) {
  using namespace div_full_table;
  std::uint32_t index = first_bit[block];
  for (std::uint32_t t = 0; t < (1u << block_bits); ++t) {
    const std::uint32_t m = (block << block_bits) + t;
    const std::int64_t gap = midpoint_gap(m), line = error_line(m);
    const bool off = in_band(m, gap, line) ? stored_bit(index++) : (gap > 0 ? line > gap : line < gap);
    out[t] = static_cast<std::int8_t>(offset(off, gap));
  }
}

/// 1 / x as an H100's div.full.f32 gives it, for a positive finite x. Normal x up to 2^126: the
/// binade's reciprocal (the table) scaled by the power of two, exact. Above 2^126 the instruction
/// scales its operands by 1/4 first, so the quotient is fl(0.25 * 1 / (x / 4)), rounded into the
/// subnormals. Subnormal x: +Inf (the GPU's quotient there was not measured; every scale the
/// update computes from it overflowed to the same FLT_MAX on the GPU, margins -1 to 2).
/// Checked: the whole binade [1, 2) (a hash of the GPU's sweep) and 87,023 amaxes through TE's
/// compiled update, tests/recipes/delayed_scaling_test.cpp.
inline float div_full_reciprocal(float x) {
  if (x < std::numeric_limits<float>::min()) return std::numeric_limits<float>::infinity();
  if (x > 0x1p126f) return 0.25f * div_full_reciprocal(x * 0.25f);
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t mantissa = bits & 0x7FFFFFu;
  const int exponent = static_cast<int>(bits >> 23) - 127;
  const float unit = std::bit_cast<float>(0x3F800000u | mantissa);
  const float unit_reciprocal = std::bit_cast<float>(
      static_cast<std::uint32_t>(static_cast<std::int64_t>(std::bit_cast<std::uint32_t>(1.0f / unit)) + div_full_unit_offset(mantissa)));
  return std::ldexp(unit_reciprocal, -exponent);
}

}  // namespace nvfp4::detail
