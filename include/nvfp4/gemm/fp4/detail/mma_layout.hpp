// nvfp4/gemm/fp4/detail/mma_layout.hpp: the operand layouts of the GEMM kernel sets (gemm/fp4/detail/mma_kernels.hpp)
// and the parts of the exact kernels that do not depend on the ISA.
// The kernels multiply bytes as vpdpbusd and vpmaddubsw do: 4 unsigned bytes of one 32-bit lane by
// 4 signed bytes of the other. One operand ("rows", A) is read as broadcast 4-byte words of
// doubled E2M1 values; the other ("tiles", B) is rearranged so that lane l of each 64-byte row
// holds 4 consecutive K elements of output column l. Every 64-element K step carries its group
// scales in the forms the kernels read, and the exponent bounds of the exact kernels' test for
// "truncation removes nothing". gemm/fp4/detail/packing.hpp builds the layouts, over an ISA's lane operations.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "nvfp4/detail/scratch.hpp"
#include "nvfp4/gemm/fp4/mma_model.hpp"
#include "nvfp4/gemm/operands.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4::detail {

inline constexpr int tile_lanes = 16;      // output columns per tile
inline constexpr int element_offset = 12;  // tile bytes hold b2 + 12 >= 0 (the unsigned operand)
/// Exponent stand-in for a row (or lane) whose step has no non-zero scale: it enters the bounds
/// as if it were a real exponent, which can only make the test stricter.
inline constexpr float no_scale_exponent = 0.0f;
/// The largest exponent distance the exact fast path allows between two non-zero group terms (a
/// term is a whole multiple of 2^(E_g - 8); the fused sum keeps multiples of 2^(E_max - 35)).
inline constexpr float max_term_span = fp4::mma::fraction_bits - 8;
/// How far the accumulator's exponent may sit below E_max (its lowest bit is 2^(E_c - 23)).
inline constexpr float max_accumulator_drop = fp4::mma::fraction_bits - 23;

/// What the kernels read of one scale code, looked up once per code.
struct scale_forms {
  float value = 0;       ///< s as a float (NaN for a NaN code)
  float quarter = 0;     ///< s / 4 (exact except for E8M0 codes below 2^-147)
  float exponent = 0;    ///< e of s = m·2^e (§6 step 1)
  bool nonzero = false;  ///< m != 0 and not NaN: the scale takes part in the exponent bounds
  bool is_nan = false;
};

template <class ScaleType>
constexpr std::array<scale_forms, 256> make_scale_table() {
  std::array<scale_forms, 256> table{};
  for (int code = 0; code < 256; ++code) {
    const fp4::mma::scale_parts parts = fp4::mma::decompose(ScaleType::from_bits(static_cast<std::uint8_t>(code)));
    scale_forms& f = table[static_cast<std::size_t>(code)];
    f.is_nan = parts.is_nan;
    f.value = fp4::mma::scale_value(parts);
    f.quarter = parts.is_nan ? f.value : f.value * 0.25f;  // (NaN arithmetic is not a constant expression)
    f.exponent = static_cast<float>(parts.exponent);
    f.nonzero = !parts.is_nan && parts.m_eighths != 0;
  }
  return table;
}
template <class ScaleType>
inline constexpr std::array<scale_forms, 256> scale_table = make_scale_table<ScaleType>();

/// Group g of step s uses scale block (s*64 + g*16) / block_cols, or none past the last block.
template <class Format>
index_t scale_block_of(index_t step, int group) {
  return (step * fp4::mma::step_k + group * fp4::mma::group_k) / Format::block_cols;
}

/// One step (64 K elements) of one row of the broadcast operand.
struct alignas(64) row_step {
  std::int8_t values[fp4::mma::step_k];  ///< doubled E2M1 values, zero past K
  std::int32_t correction[4];            ///< -12 Σ a2 per group: undoes the tiles' +12 offset
  float quarter[4];                      ///< s_g / 4 (s_g itself: row_scale_value)
  float exponent_min, exponent_max;      ///< over groups with a non-zero scale (or the stand-in)
  /// {e_max - e_min, e_min, e_min, e_max} of the fields above, e_max as +inf when a scale is NaN:
  /// added lane by lane to a tile step's {span, exponent_min_low, exponent_min_high,
  /// exponent_max_high}, the four sums that scales_allow_fast_step and
  /// terms_add_exactly_in_float compare, so that a vector kernel tests a block's rows at once.
  float fast_step_key[4];
  std::uint8_t codes[4];         ///< the scale codes, for the exact fallback
  std::uint8_t zero_scale_mask;  ///< groups past K (a zero scale, which no E8M0 code is)
  std::uint8_t has_nan;
};

static_assert(sizeof(row_step) == 128, "two cache lines per row step");

/// A [rows, K] operand as rows of steps.
struct broadcast_rows {
  index_t rows = 0, steps = 0;
  float exponent_min = std::numeric_limits<float>::infinity();  ///< over every non-zero scale
  float exponent_max = -std::numeric_limits<float>::infinity();
  scratch<row_step> data;  ///< borrowed per call: no zero-fill, no fresh pages (detail/scratch.hpp)
  const row_step* row(index_t r) const { return data.data() + r * steps; }
};

/// One step of a 16-column tile of the other operand.
struct alignas(64) tile_step {
  std::uint8_t bytes[16][64];             ///< [g*4 + q][lane*4 + e] = b2 + 12 of element g*16 + q*4 + e
  float value[4][tile_lanes];             ///< s_g per lane
  float accumulator_floor[tile_lanes];    ///< max_g e_g - 12: the accumulator's exponent must reach it
  float accumulator_ceiling[tile_lanes];  ///< min_g e_g + 27: ... and stay at or below it
  std::uint8_t codes[4][tile_lanes];      ///< scale codes, for the exact fallback
  float span;                             ///< max over lanes of max_g e_g - min_g e_g
  /// min/max over lanes of the bounds; with span, in this order, the tile's half of the sums of
  /// row_step::fast_step_key
  float exponent_min_low, exponent_min_high, exponent_max_high;
  std::uint16_t zero_scale_lanes[4];  ///< per group: lanes past K or past the operand's rows
  std::uint8_t has_nan;
};

static_assert(offsetof(tile_step, exponent_max_high) == offsetof(tile_step, span) + 3 * sizeof(float),
              "the four bound fields are read as one vector");

/// The scale part of a row step (everything but `values` and `correction`), and the exponent
/// range of its non-zero scales in e_min, e_max (e_min > e_max when there are none).
template <class Format>
void set_row_step_scales(const quantized_tensor<Format>& q, index_t r, index_t s, row_step& rs, float& e_min, float& e_max) {
  const auto& table = scale_table<typename Format::scale_type>;
  const auto* scales = reinterpret_cast<const std::uint8_t*>(q.scales().data());
  e_min = std::numeric_limits<float>::infinity();
  e_max = -e_min;
  rs.zero_scale_mask = 0;
  rs.has_nan = 0;
  for (int g = 0; g < 4; ++g) {
    const index_t block = scale_block_of<Format>(s, g);
    const bool present = block < q.scale_cols();
    const std::uint8_t code = present ? scales[r * q.scale_cols() + block] : 0;
    const scale_forms f = present ? table[code] : scale_forms{};
    rs.codes[g] = code;
    rs.zero_scale_mask |= static_cast<std::uint8_t>(present ? 0 : 1 << g);
    rs.quarter[g] = f.quarter;
    rs.has_nan |= static_cast<std::uint8_t>(f.is_nan);
    if (f.nonzero) {
      e_min = std::min(e_min, f.exponent);
      e_max = std::max(e_max, f.exponent);
    }
  }
  rs.exponent_min = e_min <= e_max ? e_min : no_scale_exponent;
  rs.exponent_max = e_min <= e_max ? e_max : no_scale_exponent;
  rs.fast_step_key[0] = rs.exponent_max - rs.exponent_min;
  rs.fast_step_key[1] = rs.exponent_min;
  rs.fast_step_key[2] = rs.exponent_min;
  rs.fast_step_key[3] = rs.has_nan ? std::numeric_limits<float>::infinity() : rs.exponent_max;
}

/// s_g of a row step as a float (0 for a group past K), as the row's scale code gives it.
template <class ScaleType>
float row_scale_value(const row_step& rs, int g) {
  return (rs.zero_scale_mask >> g) & 1 ? 0.0f : scale_table<ScaleType>[rs.codes[g]].value;
}

/// The scale part of a tile step for rows [j0, j0 + valid) of q (lanes past them: no scale).
template <class Format>
void set_tile_step_scales(const quantized_tensor<Format>& q, index_t j0, index_t valid, index_t s, tile_step& ts) {
  const auto& table = scale_table<typename Format::scale_type>;
  const auto* scales = reinterpret_cast<const std::uint8_t*>(q.scales().data());
  constexpr float infinity = std::numeric_limits<float>::infinity();
  float span = 0, min_low = infinity, min_high = -infinity, max_high = -infinity;
  ts.has_nan = 0;
  for (int g = 0; g < 4; ++g) ts.zero_scale_lanes[g] = 0;
  for (int l = 0; l < tile_lanes; ++l) {
    float e_min = infinity, e_max = -infinity;
    for (int g = 0; g < 4; ++g) {
      const index_t block = scale_block_of<Format>(s, g);
      const bool present = l < valid && block < q.scale_cols();
      const std::uint8_t code = present ? scales[(j0 + l) * q.scale_cols() + block] : 0;
      const scale_forms f = present ? table[code] : scale_forms{};
      ts.codes[g][l] = code;
      if (!present) ts.zero_scale_lanes[g] |= static_cast<std::uint16_t>(1u << l);
      ts.value[g][l] = f.value;
      ts.has_nan |= static_cast<std::uint8_t>(f.is_nan);
      if (f.nonzero) {
        e_min = std::min(e_min, f.exponent);
        e_max = std::max(e_max, f.exponent);
      }
    }
    if (e_min > e_max) e_min = e_max = no_scale_exponent;
    ts.accumulator_floor[l] = e_max - max_accumulator_drop;
    ts.accumulator_ceiling[l] = e_min + max_term_span;
    span = std::max(span, e_max - e_min);
    min_low = std::min(min_low, e_min);
    min_high = std::max(min_high, e_min);
    max_high = std::max(max_high, e_max);
  }
  ts.span = span;
  ts.exponent_min_low = min_low;
  ts.exponent_min_high = min_high;
  ts.exponent_max_high = max_high;
}

/// The broadcast operand, built step by step: fill_values(q, r, s, step) writes the step's
/// `values` and `correction`; the scales are filled here.
template <class Format, class FillValues>
broadcast_rows build_broadcast_rows(const quantized_tensor<Format>& q, FillValues&& fill_values) {
  broadcast_rows out;
  out.rows = q.rows();
  out.steps = (q.cols() + fp4::mma::step_k - 1) / fp4::mma::step_k;
  out.data = scratch<row_step>(static_cast<std::size_t>(out.rows * out.steps));
  struct exponent_range {
    float min, max;
  };
  const exponent_range range = simd::parallel_reduce(
      out.rows, simd::worth_parallel(out.rows * out.steps * fp4::mma::step_k), exponent_range{out.exponent_min, out.exponent_max},
      [&](index_t begin, index_t end) {
        exponent_range local{out.exponent_min, out.exponent_max};
        for (index_t r = begin; r < end; ++r)
          for (index_t s = 0; s < out.steps; ++s) {
            row_step& rs = out.data[static_cast<std::size_t>(r * out.steps + s)];
            fill_values(q, r, s, rs);
            float e_min, e_max;
            set_row_step_scales(q, r, s, rs, e_min, e_max);
            local.min = std::min(local.min, e_min);
            local.max = std::max(local.max, e_max);
          }
        return local;
      },
      [](exponent_range a, exponent_range b) {
        return exponent_range{std::min(a.min, b.min), std::max(a.max, b.max)};
      });
  out.exponent_min = range.min;
  out.exponent_max = range.max;
  return out;
}

/// The whole operand's exponent range (every non-zero scale), for the relaxed kernels' choice.
template <class Format>
void scale_exponent_range(const quantized_tensor<Format>& q, float& exponent_min, float& exponent_max) {
  const auto& table = scale_table<typename Format::scale_type>;
  const auto* scales = reinterpret_cast<const std::uint8_t*>(q.scales().data());
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (index_t i = 0; i < q.rows() * q.scale_cols(); ++i) {
    const scale_forms& f = table[scales[i]];
    if (f.nonzero) {
      lo = std::min(lo, f.exponent);
      hi = std::max(hi, f.exponent);
    }
  }
  exponent_min = lo;
  exponent_max = hi;
}

/// The scale-only conditions of the exact fast path for one row against a whole tile: no NaN
/// scale; every pair of non-zero group terms within max_term_span binades; no term so small that a
/// subnormal accumulator's alignment (exponent -126) would cut it; and sums that cannot reach
/// 2^128 (terms below 2^(E+12), accumulator below 2^126). Row and Tile are row_step and tile_step
/// or any layout with the same bound fields (the AMX kernels').
template <class Row, class Tile>
bool scales_allow_fast_step(const Row& ra, const Tile& tb) {
  return (ra.has_nan | tb.has_nan) == 0 && (ra.exponent_max - ra.exponent_min) + tb.span <= max_term_span &&
         ra.exponent_min + tb.exponent_min_low >= -126 - max_term_span && ra.exponent_min + tb.exponent_min_high <= 125 - max_term_span &&
         ra.exponent_max + tb.exponent_max_high <= 113;
}

/// The exact kernels can also add a step's four group terms t_g = 4P_g·(s_a/4)·s_b in fp32 (one
/// fma each, from +0) and round c + T toward zero with one add: T is then exact, and RZ(c + T)
/// is §6's result wherever the double sum is. Each t_g is a multiple of 2^(E_g - 8) below
/// 2^(E_g + 11) (|4P_g·m_a·m_b| < 2^19), so T needs E_max - E_min + 21 bits: at most 24 when the
/// lane's group exponents span at most max_float_sum_span binades, and its last bit must not be
/// below fp32's (E_min - 8 >= -149: min_float_sum_exponent, only E8M0 goes that low). For the
/// scale products s_a/4·s_b themselves (8 significant bits at most) the same bounds keep them
/// exact. The check is per row and tile (the tile's widest lane), so it is a little stricter.
inline constexpr float max_float_sum_span = 3;
inline constexpr float min_float_sum_exponent = -141;
template <class Row, class Tile>
bool terms_add_exactly_in_float(const Row& ra, const Tile& tb) {
  return (ra.exponent_max - ra.exponent_min) + tb.span <= max_float_sum_span &&
         ra.exponent_min + tb.exponent_min_low >= min_float_sum_exponent;
}

/// The scale parts of group g of a row step and of lane `lane` of a tile step (the padding scale
/// past K), as the reference reads them.
template <class ScaleType>
void step_scale_parts(const row_step& ra, const tile_step& tb, int lane, fp4::mma::scale_parts (&scale_a)[4],
                      fp4::mma::scale_parts (&scale_b)[4]) {
  for (int g = 0; g < 4; ++g) {
    scale_a[g] =
        (ra.zero_scale_mask >> g) & 1 ? fp4::mma::padding_scale<ScaleType>() : fp4::mma::decompose(ScaleType::from_bits(ra.codes[g]));
    scale_b[g] = (tb.zero_scale_lanes[g] >> lane) & 1 ? fp4::mma::padding_scale<ScaleType>()
                                                      : fp4::mma::decompose(ScaleType::from_bits(tb.codes[g][lane]));
  }
}

/// The §6 step (exact) or the relaxed step of one output lane by the reference's own code
/// (fp4::mma::step, fp4::mma::relaxed_step), so exact by definition: the exact kernels' fallback where their
/// fast test does not pass, and the portable kernel set.
template <class ScaleType, gemm_mode Mode>
float step_of_lane(const row_step& ra, const tile_step& tb, int lane, float c) {
  fp4::mma::scale_parts scale_a[4], scale_b[4];
  step_scale_parts<ScaleType>(ra, tb, lane, scale_a, scale_b);
  std::int8_t b2[fp4::mma::step_k];
  for (int k = 0; k < fp4::mma::step_k; ++k) b2[k] = static_cast<std::int8_t>(tb.bytes[k / 4][lane * 4 + k % 4] - element_offset);
  if constexpr (Mode == gemm_mode::exact)
    return fp4::mma::step(ra.values, b2, scale_a, scale_b, c);
  else
    return fp4::mma::relaxed_step(ra.values, b2, scale_a, scale_b, c);
}

}  // namespace nvfp4::detail
