// nvfp4/gemm/fp8/detail/step_kernels.hpp: the vector kernels of the FP8 / MXFP8 tensor-core
// steps, written once over an ISA's lane operations (simd/<isa>/ops.hpp), bit-identical to
// fp8::mma::step and fp8::mma::relaxed_step. A 16-column tile is 16 / width vectors (one on
// AVX-512, two on AVX2); gemm/fp8/simd/ binds each ISA's Ops and register blocks
// (fp8_step_kernels<isa>).
//
// Exact step (docs/numerics_spec.md §9): per lane E_max = max(E_c, max_k(e_a + e_b) + s_a + s_b)
// (the pair maximum is skipped when the row and column maxima cannot reach E_c); each product
// a_k * b_k is exact in fp32, multiplied by 2^(F - E_max + s_a + s_b) (a normal float, so exact)
// and truncated to an integer: that is the term truncated to a multiple of 2^(E_max - F), counted
// in those units. Where that power of two is not a normal float every term is 0, and the factor 0
// gives it: above 2^127 means E_max - s_a - s_b < F - 127, so no product is nonzero (a nonzero FP8
// product is at least 2^-32 and E_max bounds every product's exponent plus s_a + s_b); below
// 2^-126 every |product| (under 2^32) times it is below 1. The integer sums are exact: below 2^20
// on Hopper (F = 13), two halves of 16 terms below 2^31 on Blackwell (F = 25), added in double.
// The result is the sum times 2^(E_max - F), cut to 13 fraction bits (Hopper: rounded to fp32
// exactly, then the low 10 bits cleared) or converted to fp32 toward zero (Blackwell), an overflow
// giving Inf. Lanes whose step has a NaN / Inf code, a NaN scale or a non-finite c go through the
// scalar step.
//
// Relaxed step: the pair dot product of fp8::mma::relaxed_step, by the Ops' dot_bf16_pairs where
// the ISA has it (VDPBF16PS: one rounding per pair product, odd element first), else by two FMAs
// per pair in the same order; then c + partial where the block is plain (unscaled, no NaN / Inf),
// fma(partial, 2^s_a * 2^s_b, c) where it is finite (the product of two exact powers of two rounds
// as the model's float(2^(s_a + s_b))), else fma(partial, 2^(s_a + s_b), c) with the lanes whose
// scale is not a normal float, or whose step has a NaN / Inf, redone by the scalar step.
#pragma once

#include <algorithm>
#include <cstdint>

#include "nvfp4/config.hpp"
#include "nvfp4/gemm/fp8/detail/layout.hpp"

namespace nvfp4::fp8_gemm_detail {

/// The register blocks of a kernel set (what its ISA's register file holds).
struct step_shapes {
  int exact_rows;          ///< rows of one exact call (one tile a call)
  bool exact_tiles_outer;  ///< exact calls tile by tile (each tile's K chunk reused by every row
                           ///< group while in L1: a smaller L1 or more row groups), else row group by row group
  int relaxed_tiles;       ///< tiles of one relaxed call: 1, or all of the block's (up to 4)
  int relaxed_rows_wide;   ///< rows of a relaxed call of 1 or 2 tiles
  int relaxed_rows;        ///< rows of a relaxed call of 3 or 4 tiles
};

/// The step kernels over Ops with register blocks Shapes: staging(mode) and run_steps (as
/// fp8_step_kernels<isa> offer them).
template <class Ops, step_shapes Shapes>
struct lane_step_kernels {
  using vf = typename Ops::vf;
  using vi = typename Ops::vi;
  using vd = typename Ops::vd;
  static constexpr int width = Ops::width;
  static constexpr int vectors = lanes / width;  ///< vectors per 16-column tile
  static constexpr unsigned lane_mask = (1u << width) - 1;
  static_assert(lanes % width == 0 && width <= 16);
  /// Whether the ISA has the bf16 pair dot product (simd/scalar/ops.hpp: optional primitives).
  static constexpr bool bf16_pairs = requires(vf a, vi b) { Ops::dot_bf16_pairs(a, b, b); };

  /// The staged parts the kernels read: values and exponents for the exact step; bf16 pairs for
  /// the relaxed one where dot_bf16_pairs runs it, else values.
  static constexpr staged_parts staging(gemm_mode mode) {
    if (mode == gemm_mode::exact) return {.value = true, .exponent = true};
    if constexpr (bf16_pairs) {
      return {.pair = true};
    } else {
      return {.value = true};
    }
  }

  /// Runs steps [s0, s1) of the block (acc as in fp8_gemm_detail::run_steps).
  static void run_steps(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
    if (blk.mode == gemm_mode::relaxed) {
      if constexpr (Shapes.relaxed_tiles == 1) {
        for (int t = 0; t < blk.tile_count; ++t) relaxed_call<1>(one_tile(blk, t), s0, s1, acc + t * lanes, stride);
      } else {
        switch (blk.tile_count) {
          case 4:
            relaxed_call<4>(blk, s0, s1, acc, stride);
            break;
          case 3:
            relaxed_call<3>(blk, s0, s1, acc, stride);
            break;
          case 2:
            relaxed_call<2>(blk, s0, s1, acc, stride);
            break;
          default:
            relaxed_call<1>(blk, s0, s1, acc, stride);
            break;
        }
      }
      return;
    }
    // The exact kernel keeps more per output than the relaxed one: one tile a call.
    const auto call = [&](int r0, int t) {
      const step_block one = one_tile(some_rows(blk, r0, std::min(Shapes.exact_rows, blk.rows - r0)), t);
      float* const out = acc + r0 * stride + t * lanes;
      with_rows<Shapes.exact_rows>(one.rows, [&]<int R>() {
        if (blk.core == fp8::mma::tensor_core::hopper) {
          exact_steps<R, true>(one, s0, s1, out, stride);
        } else {
          exact_steps<R, false>(one, s0, s1, out, stride);
        }
      });
    };
    if constexpr (Shapes.exact_tiles_outer) {
      for (int t = 0; t < blk.tile_count; ++t)
        for (int r0 = 0; r0 < blk.rows; r0 += Shapes.exact_rows) call(r0, t);
    } else {
      for (int r0 = 0; r0 < blk.rows; r0 += Shapes.exact_rows)
        for (int t = 0; t < blk.tile_count; ++t) call(r0, t);
    }
  }

 private:
  static NVFP4_ALWAYS_INLINE vi splat(int v) { return Ops::set_int(static_cast<std::uint32_t>(v)); }
  /// Words of an int32 array (the tiles' per-column statistics) as a vector.
  static NVFP4_ALWAYS_INLINE vi load_ints(const std::int32_t* p) { return Ops::load_bits(reinterpret_cast<const std::uint32_t*>(p)); }
  /// Lanes [first, first + width) of a 16-bit column mask, as lane bits.
  static NVFP4_ALWAYS_INLINE unsigned lane_bits(unsigned columns, int v) { return columns >> (v * width) & lane_mask; }

  static step_block one_tile(const step_block& blk, int t) {
    step_block one = blk;
    one.tiles[0] = blk.tiles[t];
    one.j0[0] = blk.j0[t];
    one.tile_count = 1;
    return one;
  }
  static step_block some_rows(const step_block& blk, int r0, int rows) {
    step_block part = blk;
    part.row_offset = blk.row_offset + r0;
    part.rows = rows;
    return part;
  }
  /// f.template operator()<R>() with R = rows (1 <= rows <= Max) as a compile-time constant.
  template <int Max, class F>
  static NVFP4_ALWAYS_INLINE void with_rows(int rows, F&& f) {
    if constexpr (Max > 1) {
      if (rows < Max) return with_rows<Max - 1>(rows, f);
    }
    f.template operator()<Max>();
  }
  /// relaxed_steps<R, C> over the block's rows, as many a call as the shapes allow for C tiles.
  template <int C>
  static void relaxed_call(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
    constexpr int rows_per_call = C <= 2 ? Shapes.relaxed_rows_wide : Shapes.relaxed_rows;
    for (int r0 = 0; r0 < blk.rows; r0 += rows_per_call) {
      const step_block part = some_rows(blk, r0, std::min(rows_per_call, blk.rows - r0));
      with_rows<rows_per_call>(part.rows, [&]<int R>() { relaxed_steps<R, C>(part, s0, s1, acc + r0 * stride, stride); });
    }
  }

  /// 2^e as a float where -126 <= e <= 127, else 0; `in_range`: the lanes where it is.
  static NVFP4_ALWAYS_INLINE vf power_of_two_or_zero(vi e, unsigned& in_range) {
    const auto above = Ops::greater(e, splat(-127)), below = Ops::greater(splat(128), e);
    in_range = Ops::mask_bits(above) & Ops::mask_bits(below);
    const vf zero = Ops::set(0.0f);
    return Ops::select(above, Ops::select(below, Ops::as_float(Ops::template shift_left<23>(Ops::add(e, splat(127)))), zero), zero);
  }

  /// Lanes whose step the vector path does not handle (NaN / Inf codes, NaN scales, non-finite c,
  /// scales out of range), redone by the scalar step from the lane's c before the step.
  template <int R, int C>
  static void scalar_lanes(const step_block& blk, index_t s, const vf (&c_before)[R][C][vectors], const unsigned (&mask)[R][C][vectors],
                           float* acc, index_t stride) {
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < C; ++t)
        for (int v = 0; v < vectors; ++v) {
          if (!mask[r][t][v]) continue;
          alignas(64) float before[width];
          Ops::store(before, c_before[r][t][v]);
          for (int lane = 0; lane < width; ++lane) {
            const int column = v * width + lane;
            if ((mask[r][t][v] >> lane & 1) && column < blk.tiles[t]->columns)
              acc[r * stride + t * lanes + column] = scalar_step(blk, r, t, column, s, before[lane]);
          }
        }
  }

  /// The step's result from the exact integer sums (units of 2^(E_max - F)).
  template <bool Hopper>
  static NVFP4_ALWAYS_INLINE vf finish(vi sum_low, vi sum_high, vi c_units, vi unit) {
    if constexpr (Hopper) {
      const vi total = Ops::add(Ops::add(sum_low, sum_high), c_units);  // below 2^21
      const vf nearest = Ops::to_float_scaled(total, unit);
      return Ops::as_float(Ops::bit_and(Ops::as_int(nearest), Ops::set_int(~0x3FFu)));
    } else {
      vd low[3], high[3], power_low, power_high;
      Ops::widen_to_double(sum_low, low[0], high[0]);
      Ops::widen_to_double(sum_high, low[1], high[1]);
      Ops::widen_to_double(c_units, low[2], high[2]);
      Ops::powers_of_two_double(unit, power_low, power_high);
      const vd exact_low = Ops::mul(Ops::add(Ops::add(low[0], low[1]), low[2]), power_low);
      const vd exact_high = Ops::mul(Ops::add(Ops::add(high[0], high[1]), high[2]), power_high);
      return Ops::narrow_toward_zero(exact_low, exact_high);
    }
  }

  template <int R, bool Hopper>
  static void exact_steps(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
    constexpr int fraction = Hopper ? 13 : 25;
    constexpr int step_k = fp8::mma::step_k;
    const column_tile& tile = *blk.tiles[0];
    for (index_t s = s0; s < s1; ++s) {
      staged_row_step rs[R];
      for (int r = 0; r < R; ++r) rs[r] = staged_row_at(blk, r, s);
      const float* const b_value = tile.value.data() + s * step_k * lanes;
      const std::int8_t* const b_exponent = tile.exponent.data() + s * step_k * lanes;
      const unsigned special_columns = tile.special[static_cast<std::size_t>(s)];
      vf c_before[R][1][vectors];
      vi e_max[R][vectors], scale_sum[R][vectors];
      unsigned fallback[R][1][vectors];
      bool pair_max_needed = false;
      for (int v = 0; v < vectors; ++v) {
        const vi col_max = load_ints(tile.max_exponent.data() + s * lanes + v * width);
        const vi col_scale = load_ints(tile.scale_exponent.data() + s * lanes + v * width);
        for (int r = 0; r < R; ++r) {
          c_before[r][0][v] = Ops::load(acc + r * stride + v * width);
          // E_c = max(floor(log2 |c|), -126) from the bits (0 gives -126); exponent 255: non-finite.
          const vi biased = Ops::bit_and(Ops::template shift_right<23>(Ops::as_int(c_before[r][0][v])), splat(0xFF));
          const unsigned non_finite = Ops::mask_bits(Ops::greater(biased, splat(254)));
          e_max[r][v] = Ops::sub(Ops::max(biased, splat(1)), splat(127));
          scale_sum[r][v] = Ops::add(col_scale, splat(rs[r].scale_exponent));
          fallback[r][0][v] = non_finite | lane_bits(special_columns, v) | (rs[r].special ? lane_mask : 0u);
          const vi bound = Ops::add(Ops::add(col_max, splat(rs[r].max_exponent)), scale_sum[r][v]);
          pair_max_needed = pair_max_needed || Ops::mask_bits(Ops::greater(bound, e_max[r][v])) != 0;
        }
      }
      // E_max is c's exponent unless a product can reach above it: then the pair maximum decides.
      if (pair_max_needed) {
        vi pair_max[R][vectors];
        for (int r = 0; r < R; ++r)
          for (int v = 0; v < vectors; ++v) pair_max[r][v] = splat(-1024);
        for (int k = 0; k < step_k; ++k)
          for (int v = 0; v < vectors; ++v) {
            const vi eb = Ops::load_signed_bytes(b_exponent + k * lanes + v * width);
            for (int r = 0; r < R; ++r) pair_max[r][v] = Ops::max(pair_max[r][v], Ops::add(eb, splat(rs[r].exponent[k])));
          }
        for (int r = 0; r < R; ++r)
          for (int v = 0; v < vectors; ++v) e_max[r][v] = Ops::max(e_max[r][v], Ops::add(pair_max[r][v], scale_sum[r][v]));
      }
      // Products scale by 2^(F - E_max + s_a + s_b), c by 2^(F - E_max); both truncate to integers.
      // The products' factor is a float multiplier, 0 where it is not a normal float: every term
      // is 0 there (header comment).
      vf factor[R][vectors];
      vi sum_low[R][vectors], sum_high[R][vectors];
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < vectors; ++v) {
          unsigned in_range;  // out of range: factor 0, every term 0
          factor[r][v] = power_of_two_or_zero(Ops::add(Ops::sub(splat(fraction), e_max[r][v]), scale_sum[r][v]), in_range);
          sum_low[r][v] = splat(0);
          sum_high[r][v] = splat(0);
        }
      // Two halves of 16 terms: each half's integer sum stays below 2^31 even with F = 25.
      for (int k = 0; k < step_k / 2; ++k)
        for (int v = 0; v < vectors; ++v) {
          const vf b = Ops::load(b_value + k * lanes + v * width);
          for (int r = 0; r < R; ++r) {
            const vf q = Ops::mul(Ops::mul(Ops::set(rs[r].value[k]), b), factor[r][v]);
            sum_low[r][v] = Ops::add(sum_low[r][v], Ops::truncate(q));
          }
        }
      for (int k = step_k / 2; k < step_k; ++k)
        for (int v = 0; v < vectors; ++v) {
          const vf b = Ops::load(b_value + k * lanes + v * width);
          for (int r = 0; r < R; ++r) {
            const vf q = Ops::mul(Ops::mul(Ops::set(rs[r].value[k]), b), factor[r][v]);
            sum_high[r][v] = Ops::add(sum_high[r][v], Ops::truncate(q));
          }
        }
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < vectors; ++v) {
          // c in units of 2^(E_max - F), truncated: c * 2^(F - E_max) is below 2^26.
          const vi c_units = Ops::truncate_scaled(c_before[r][0][v], Ops::sub(splat(fraction), e_max[r][v]));
          const vi unit = Ops::sub(e_max[r][v], splat(fraction));
          Ops::store(acc + r * stride + v * width, finish<Hopper>(sum_low[r][v], sum_high[r][v], c_units, unit));
        }
      scalar_lanes<R, 1>(blk, s, c_before, fallback, acc, stride);
    }
  }

  /// The step's pair dot products of R rows against C tiles into partial (fp8::mma::relaxed_step's
  /// partial sum: the odd element of each pair first).
  template <int R, int C>
  static NVFP4_ALWAYS_INLINE void relaxed_partials(const step_block& blk, const staged_row_step (&rs)[R], index_t s,
                                                   vf (&partial)[R][C][vectors]) {
    constexpr int step_k = fp8::mma::step_k;
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < C; ++t)
        for (int v = 0; v < vectors; ++v) partial[r][t][v] = Ops::set(0.0f);
    if constexpr (bf16_pairs) {
      const std::uint32_t* b_pair[C];
      for (int t = 0; t < C; ++t) b_pair[t] = blk.tiles[t]->pair.data() + s * (step_k / 2) * lanes;
      for (int q = 0; q < step_k / 2; ++q) {
        vi b[C][vectors];
        for (int t = 0; t < C; ++t)
          for (int v = 0; v < vectors; ++v) b[t][v] = Ops::load_bits(b_pair[t] + q * lanes + v * width);
        for (int r = 0; r < R; ++r) {
          const vi a = Ops::set_int(rs[r].pair[q]);
          for (int t = 0; t < C; ++t)
            for (int v = 0; v < vectors; ++v) partial[r][t][v] = Ops::dot_bf16_pairs(partial[r][t][v], a, b[t][v]);
        }
      }
    } else {
      const float* b_value[C];
      for (int t = 0; t < C; ++t) b_value[t] = blk.tiles[t]->value.data() + s * step_k * lanes;
      for (int k = 0; k < step_k; k += 2) {
        vf odd[C][vectors], even[C][vectors];
        for (int t = 0; t < C; ++t)
          for (int v = 0; v < vectors; ++v) {
            odd[t][v] = Ops::load(b_value[t] + (k + 1) * lanes + v * width);
            even[t][v] = Ops::load(b_value[t] + k * lanes + v * width);
          }
        for (int r = 0; r < R; ++r) {
          const vf a_odd = Ops::set(rs[r].value[k + 1]), a_even = Ops::set(rs[r].value[k]);
          for (int t = 0; t < C; ++t)
            for (int v = 0; v < vectors; ++v) {
              partial[r][t][v] = Ops::fmadd(a_odd, odd[t][v], partial[r][t][v]);
              partial[r][t][v] = Ops::fmadd(a_even, even[t][v], partial[r][t][v]);
            }
        }
      }
    }
  }

  template <int R, int C>
  static void relaxed_steps(const step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
    if (plain_block(blk)) {
      // Every per-tensor FP8 block without NaN / Inf: c + partial per step, nothing else to test.
      for (index_t s = s0; s < s1; ++s) {
        staged_row_step rs[R];
        for (int r = 0; r < R; ++r) rs[r] = staged_row_at(blk, r, s);
        vf partial[R][C][vectors];
        relaxed_partials<R, C>(blk, rs, s, partial);
        for (int r = 0; r < R; ++r)
          for (int t = 0; t < C; ++t)
            for (int v = 0; v < vectors; ++v) {
              float* const out = acc + r * stride + t * lanes + v * width;
              Ops::store(out, Ops::add(partial[r][t][v], Ops::load(out)));
            }
      }
      return;
    }
    // The plain and finite loops stay two loops: one template over both (if constexpr on the
    // scale) compiled to slower code (docs/benchmarks.md, "Figures behind code choices").
    if (finite_block(blk)) {
      // MXFP8 without NaN / Inf: fma(partial, 2^s_a * 2^s_b, c), nothing to redo.
      for (index_t s = s0; s < s1; ++s) {
        staged_row_step rs[R];
        for (int r = 0; r < R; ++r) rs[r] = staged_row_at(blk, r, s);
        vf partial[R][C][vectors];
        relaxed_partials<R, C>(blk, rs, s, partial);
        // Row r's scale at row_scale[r * steps], read where it is used (held across the partial
        // sums, the row scales took the registers of B's pairs).
        const float* const row_scale = blk.a->scale_value.data() + blk.a->at(blk.i0(), s);
        for (int t = 0; t < C; ++t)
          for (int v = 0; v < vectors; ++v) {
            const vf col_scale = Ops::load(blk.tiles[t]->scale_value.data() + s * lanes + v * width);
            for (int r = 0; r < R; ++r) {
              float* const out = acc + r * stride + t * lanes + v * width;
              const vf scale = Ops::mul(Ops::set(row_scale[r * blk.a->steps]), col_scale);
              Ops::store(out, Ops::fmadd(partial[r][t][v], scale, Ops::load(out)));
            }
          }
      }
      return;
    }
    for (index_t s = s0; s < s1; ++s) {
      staged_row_step rs[R];
      for (int r = 0; r < R; ++r) rs[r] = staged_row_at(blk, r, s);
      vf partial[R][C][vectors];
      relaxed_partials<R, C>(blk, rs, s, partial);
      vf c_before[R][C][vectors];
      unsigned fallback[R][C][vectors];
      for (int t = 0; t < C; ++t) {
        const unsigned special_columns = blk.tiles[t]->special[static_cast<std::size_t>(s)];
        for (int v = 0; v < vectors; ++v) {
          const vi col_scale = load_ints(blk.tiles[t]->scale_exponent.data() + s * lanes + v * width);
          for (int r = 0; r < R; ++r) {
            float* const out = acc + r * stride + t * lanes + v * width;
            c_before[r][t][v] = Ops::load(out);
            unsigned in_range;
            const vf scale = power_of_two_or_zero(Ops::add(col_scale, splat(rs[r].scale_exponent)), in_range);
            fallback[r][t][v] = (~in_range & lane_mask) | lane_bits(special_columns, v) | (rs[r].special ? lane_mask : 0u);
            Ops::store(out, Ops::fmadd(partial[r][t][v], scale, c_before[r][t][v]));
          }
        }
      }
      scalar_lanes<R, C>(blk, s, c_before, fallback, acc, stride);
    }
  }
};

}  // namespace nvfp4::fp8_gemm_detail
