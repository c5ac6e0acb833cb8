// nvfp4/transforms/detail/hadamard_walks.hpp: the walks of the Hadamard fast paths over a whole
// matrix, written once over an ISA's lane operations and run in parallel through
// simd/parallel.hpp: the columnwise 16-point walks on the float32 tile kernel (transform, amax
// pass, fused quantization) and the float64 panels for every other case. Each redoes the lanes
// its kernel's guard rejects (hadamard_blocks.hpp), so every result is the reference's.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "nvfp4/detail/column_bands.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/scale_rules.hpp"
#include "nvfp4/simd/parallel.hpp"
#include "nvfp4/transforms/detail/hadamard_blocks.hpp"
#include "nvfp4/transforms/detail/hadamard_kernels.hpp"
#include "nvfp4/transforms/hadamard_transform.hpp"

namespace nvfp4::detail {

/// Bit i set when t's sign s_i is -1 (the negate masks of the 16-point kernels).
inline unsigned hadamard16_negative_signs(const hadamard_transform& t) {
  unsigned negative = 0;
  for (int i = 0; i < 16; ++i) negative |= (t.sign(i) < 0 ? 1u : 0u) << i;
  return negative;
}

/// What a parallel walk gathers: the largest |output| (as bits) and whether NaN/Inf was seen.
struct hadamard_walk_result {
  std::uint32_t largest = 0;
  bool non_finite = false;
  static hadamard_walk_result combine(hadamard_walk_result a, const hadamard_walk_result& b) {
    a.largest = std::max(a.largest, b.largest);
    a.non_finite = a.non_finite || b.non_finite;
    return a;
  }
};

template <class Ops>
struct hadamard_walks {
  using kernels = hadamard16_kernels<Ops>;
  using tile = typename kernels::tile;
  using vi = typename Ops::vi;
  static constexpr int lanes = Ops::width;
  static constexpr int tiles_per_step = kernels::tiles_per_step;

  /// Redoes the lanes of `t` its guard rejected with hadamard16_block_fallback. Lanes holding
  /// NaN/Inf set `non_finite` and come out as zeros. Rare: kept out of line.
  [[gnu::noinline, gnu::cold]] static void redo_lanes(tile& t, matrix_view<const bf16> x, index_t r0, index_t c0,
                                                      const hadamard_transform& transform, hadamard_direction direction, bool& non_finite) {
    alignas(64) std::uint32_t pairs[8][lanes];  // pairs[k][lane]: outputs 2k (low half) and 2k + 1 of the lane
    for (int k = 0; k < 8; ++k) Ops::store_bits(pairs[k], t.rounded_pairs[k]);
    for (unsigned redo = ~t.exact & kernels::all_lanes; redo != 0; redo &= redo - 1) {
      const int lane = std::countr_zero(redo);
      std::uint16_t bits[16] = {};
      if (!hadamard16_block_fallback(x, r0 + lane, c0, transform, direction, bits, 1)) {
        non_finite = true;
        std::fill_n(bits, 16, std::uint16_t{0});
      }
      for (int k = 0; k < 8; ++k) pairs[k][lane] = bits[2 * k] | static_cast<std::uint32_t>(bits[2 * k + 1]) << 16;
    }
    for (int k = 0; k < 8; ++k) t.rounded_pairs[k] = Ops::load_bits(pairs[k]);
  }

  /// A tile of transform_tile (block `lane` at source[i * stride + lane]: rows r0.., columns c0..
  /// of x) with the lanes its guard rejected redone from x, so every lane is exact.
  static NVFP4_ALWAYS_INLINE tile exact_tile(matrix_view<const bf16> x, index_t r0, index_t c0, const bf16* source, index_t stride,
                                             const hadamard_transform& transform, hadamard_direction direction, unsigned negate_input,
                                             unsigned negate_output, bool& non_finite) {
    tile t = kernels::transform_tile(source, stride, negate_input, negate_output);
    if (t.exact != kernels::all_lanes) [[unlikely]]
      redo_lanes(t, x, r0, c0, transform, direction, non_finite);
    return t;
  }

  /// Runs the steps of a columnwise walk over x's rows [0, lanes * (rows / lanes)) (x's columns
  /// contiguous in memory: x = source.transposed() of a row-major source) in parallel:
  /// visit(r0, c0, count, tiles, stride, running, result) for the `count` (1 .. tiles_per_step)
  /// tiles at rows r0.., columns c0, c0 + 16, ..., element (r0 + lane, c0 + 16 * k + i) of x
  /// being tiles[(16 * k + i) * stride + lane]: column_band_walk's items, shared among the
  /// threads (detail/column_bands.hpp). `running` is a register each thread carries over
  /// its steps (zero at first), finish(running, result) folds it into the thread's result at the
  /// end.
  template <class Visit, class Finish>
  static hadamard_walk_result columnwise_steps(matrix_view<const bf16> x, Visit&& visit, Finish&& finish) {
    const column_band_walk<bf16> walk(x, lanes, 16, tiles_per_step);
    return simd::parallel_reduce(
        walk.items(), simd::worth_parallel(x.size()), hadamard_walk_result{},
        [&](index_t begin, index_t end) {
          hadamard_walk_result result;
          vi running = Ops::set_int(0);
          walk.run(begin, end, [&](index_t r0, index_t c0, int count, const bf16* tiles, index_t stride) {
            visit(r0, c0, count, tiles, stride, running, result);
          });
          finish(running, result);
          return result;
        },
        hadamard_walk_result::combine);
  }

  /// Transforms x's rows [0, lanes * (rows / lanes)) (as for columnwise_steps) step by step,
  /// calling step(r0, c0, tiles, count) on each. Returns max |output| as bf16 bits when TrackMax,
  /// and whether NaN/Inf was seen.
  template <bool TrackMax, class Step>
  static hadamard_walk_result columnwise_walk(matrix_view<const bf16> x, const hadamard_transform& transform, hadamard_direction direction,
                                              Step&& step) {
    const unsigned negative_signs = hadamard16_negative_signs(transform);
    const unsigned negate_input = direction == hadamard_direction::forward ? negative_signs : 0u;
    const unsigned negate_output = direction == hadamard_direction::inverse ? negative_signs : 0u;
    return columnwise_steps(
        x,
        [&](index_t r0, index_t c0, int count, const bf16* source, index_t stride, vi& running, hadamard_walk_result& result) {
          tile tiles[tiles_per_step];
          for (int k = 0; k < count; ++k) {
            tiles[k] = exact_tile(x, r0, c0 + 16 * k, source + 16 * k * stride, stride, transform, direction, negate_input, negate_output,
                                  result.non_finite);
            if constexpr (TrackMax) running = kernels::abs_max(running, tiles[k]);
          }
          step(r0, c0, tiles, count);
        },
        [](vi running, hadamard_walk_result& result) {
          if constexpr (TrackMax) result.largest = Ops::reduce_max(kernels::lane_abs_max_float_bits(running)) >> 16;
        });
  }

  /// max |output| bf16 bits of the forward transform of x's rows [0, lanes * (rows / lanes)) (as
  /// for columnwise_walk), without the outputs: the amax pass of the fused quantizer. Lanes the
  /// float32 guard rejects are redone exactly only when their bound sum |x| / 4 could reach the
  /// running max; skipping the others never changes the max, whatever the threads. Sets
  /// `non_finite` on NaN/Inf.
  static std::uint16_t columnwise_abs_max(matrix_view<const bf16> x, const hadamard_transform& transform, bool& non_finite) {
    const unsigned negate_input = hadamard16_negative_signs(transform);
    const hadamard_walk_result found = columnwise_steps(
        x,
        [&](index_t r0, index_t c0, int count, const bf16* tiles, index_t stride, vi& running, hadamard_walk_result& result) {
          // result.largest: float bits before rounding to bf16 (the fallback's are bf16 already).
          for (int k = 0; k < count; ++k) {
            const index_t c = c0 + 16 * k;
            const bf16* const source = tiles + 16 * k * stride;
            vi tile_max;
            const auto exact = kernels::lane_abs_max(source, stride, negate_input, tile_max);
            running = Ops::select(exact, Ops::max_unsigned(running, tile_max), running);
            const unsigned exact_lanes = Ops::mask_bits(exact);
            if (exact_lanes == kernels::all_lanes) continue;
            const auto running_value = Ops::set(std::bit_cast<float>(std::max(Ops::reduce_max(running), result.largest)));
            const unsigned possible =
                ~exact_lanes & ~Ops::mask_bits(Ops::less(kernels::lane_output_bound(source, stride), running_value)) & kernels::all_lanes;
            for (unsigned redo = possible; redo != 0; redo &= redo - 1) {
              std::uint16_t bits[16];
              if (!hadamard16_block_fallback(x, r0 + std::countr_zero(redo), c, transform, hadamard_direction::forward, bits, 1)) {
                result.non_finite = true;
                continue;
              }
              for (std::uint16_t b : bits) result.largest = std::max(result.largest, static_cast<std::uint32_t>(b & 0x7FFF) << 16);
            }
          }
        },
        [](vi running, hadamard_walk_result& result) { result.largest = std::max(result.largest, Ops::reduce_max(running)); });
    non_finite = found.non_finite;
    // Rounding the float max to bf16 rounds the largest output.
    return bf16::from_float(std::bit_cast<float>(found.largest)).bits();
  }

  /// The columnwise fast path of the transform alone: columnwise_walk's rows into out
  /// (col_stride 1), one row piece per lane and step.
  static std::uint16_t columnwise_transform(matrix_view<const bf16> x, const hadamard_transform& transform, hadamard_direction direction,
                                            matrix_view<bf16> out, bool& non_finite) {
    static_assert(sizeof(bf16) == sizeof(std::uint16_t));
    auto* const out_bits = reinterpret_cast<std::uint16_t*>(out.data());
    const hadamard_walk_result found =
        columnwise_walk<true>(x, transform, direction, [&](index_t r0, index_t c0, const tile* tiles, int count) {
          kernels::store_rows(tiles, count, out_bits + r0 * out.row_stride() + c0, out.row_stride());
        });
    non_finite = found.non_finite;
    return static_cast<std::uint16_t>(found.largest);
  }

  /// Pass 2 of the fused quantizer (forward, any 16-point t): x's rows [0, lanes * (rows / lanes))
  /// transformed again and each tile quantized in registers, its lanes being blocks of the copy:
  /// packed E2M1 codes to data (row stride data_stride bytes), UE4M3 codes to scales.
  static void columnwise_quantize(matrix_view<const bf16> x, const hadamard_transform& transform, tensor_scale scale, std::uint8_t* data,
                                  index_t data_stride, std::uint8_t* scales, index_t scale_stride) {
    const typename simd::nvfp4_lanes<Ops>::nvfp4_scale_constants constants(scale);
    columnwise_walk<false>(x, transform, hadamard_direction::forward, [&](index_t r0, index_t c0, const tile* tiles, int count) {
      vi packed[tiles_per_step][2] = {};
      vi codes[tiles_per_step] = {};
      for (int k = 0; k < count; ++k) kernels::quantize_tile(tiles[k], constants, codes[k], packed[k]);
      simd::nvfp4_lanes<Ops>::store_across(packed, codes, count, data + r0 * data_stride + c0 / 2, data_stride,
                                           scales + r0 * scale_stride + c0 / 16, scale_stride);
    });
  }

  /// The general fast path (any n, float or bf16, any layout): the float64 FWHT of x's rows in
  /// panels of Ops::double_width blocks, the exact reference for rows past the last full panel
  /// and for the lanes the guard rejects. Writes out and returns max |out| as bf16 bits; sets
  /// `non_finite` when x holds NaN/Inf (out is then partly garbage).
  template <class T>
  static std::uint16_t rows_transform(matrix_view<const T> x, const hadamard_transform& transform, hadamard_direction direction,
                                      matrix_view<bf16> out, bool& non_finite) {
    using panel_kernels = hadamard_panel_kernels<Ops>;
    constexpr index_t panel_lanes = panel_kernels::lanes;
    const int n = transform.size();
    const index_t rows = x.rows(), blocks_per_row = x.cols() / n;
    const index_t full_panels = rows / panel_lanes;
    const index_t panel_tasks = full_panels * blocks_per_row;
    const index_t tasks = panel_tasks + (rows - full_panels * panel_lanes) * blocks_per_row;
    const std::vector<double> sign_values(transform.signs().begin(), transform.signs().end());
    // The double sums are exact when n * max|x| <= 2^53 * (smallest input ulp), and that ulp is
    // above |x| * 2^-precision (8 bits for bf16, 24 for float).
    constexpr int input_precision = std::is_same_v<T, float> ? 24 : 8;
    const double guard_ratio = std::ldexp(1.0, 53 - std::countr_zero(static_cast<unsigned>(n)) - input_precision);
    const double scale = transform.exact_scale() ? std::ldexp(1.0, -transform.half_log2_size()) : transform.scale();
    const hadamard_kernel_params params{sign_values.data(), direction == hadamard_direction::inverse, scale, guard_ratio};

    const hadamard_walk_result found = simd::parallel_reduce(
        tasks, simd::worth_parallel(x.size()), hadamard_walk_result{},
        [&](index_t begin, index_t end) {
          hadamard_walk_result result;
          std::vector<std::uint16_t> bits(static_cast<std::size_t>(n * panel_lanes));
          std::vector<T> gathered(static_cast<std::size_t>(n * panel_lanes));
          auto record = [&](index_t r, index_t c0, const std::uint16_t* values, index_t stride) {
            for (int j = 0; j < n; ++j) {
              const std::uint16_t b = values[j * stride];
              result.largest = std::max<std::uint32_t>(result.largest, b & 0x7FFF);
              out(r, c0 + j) = bf16::from_bits(b);
            }
          };
          for (index_t task = begin; task < end; ++task) {
            if (task >= panel_tasks) {  // rows past the last full panel: the exact reference
              const index_t rest = task - panel_tasks;
              const index_t r = full_panels * panel_lanes + rest / blocks_per_row, c0 = rest % blocks_per_row * n;
              if (!hadamard_block_exact(x, r, c0, transform, direction, bits.data(), 1)) {
                result.non_finite = true;
                continue;
              }
              record(r, c0, bits.data(), 1);
              continue;
            }
            // Consecutive tasks walk along the rows of the source's memory (a transposed view's
            // columns), so each loaded cache line is used whole.
            const index_t r0 = task % full_panels * panel_lanes, c0 = task / full_panels * n;
            const T* source;
            index_t i_stride;
            if (x.row_stride() == 1) {  // the blocks' elements i sit side by side (a transposed view)
              source = &x(r0, c0);
              i_stride = x.col_stride();
            } else {
              for (int i = 0; i < n; ++i)
                for (index_t lane = 0; lane < panel_lanes; ++lane)
                  gathered[static_cast<std::size_t>(i * panel_lanes + lane)] = x(r0 + lane, c0 + i);
              source = gathered.data();
              i_stride = panel_lanes;
            }
            unsigned lane_non_finite = 0, redo = 0;
            switch (n) {
              case 16:
                redo = panel_kernels::template panel<16>(source, i_stride, params, bits.data(), lane_non_finite);
                break;
              case 32:
                redo = panel_kernels::template panel<32>(source, i_stride, params, bits.data(), lane_non_finite);
                break;
              case 64:
                redo = panel_kernels::template panel<64>(source, i_stride, params, bits.data(), lane_non_finite);
                break;
              case 128:
                redo = panel_kernels::template panel<128>(source, i_stride, params, bits.data(), lane_non_finite);
                break;
              default:
                redo = panel_kernels::template panel<256>(source, i_stride, params, bits.data(), lane_non_finite);
                break;
            }
            if (lane_non_finite) result.non_finite = true;
            for (index_t lane = 0; lane < panel_lanes; ++lane)
              if ((redo >> lane) & 1) hadamard_block_exact(x, r0 + lane, c0, transform, direction, bits.data() + lane, panel_lanes);
            for (index_t lane = 0; lane < panel_lanes; ++lane) record(r0 + lane, c0, bits.data() + lane, panel_lanes);
          }
          return result;
        },
        hadamard_walk_result::combine);
    non_finite = found.non_finite;
    return static_cast<std::uint16_t>(found.largest);
  }
};

}  // namespace nvfp4::detail
