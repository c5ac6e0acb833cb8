// nvfp4/transforms/simd/hadamard_walks_avx512.hpp: the AVX-512 walks of the Hadamard fast paths
// over a whole matrix, OpenMP over steps: the columnwise 16-point walks on the float32 tile kernel
// (transform, amax pass, fused quantization) and the float64 panels of 8 blocks for every other
// case. Each redoes the lanes its kernel's guard rejects, so every result is the reference's.
#pragma once

#include "nvfp4/config.hpp"

#if NVFP4_HAS_AVX512

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "nvfp4/scaling/block_format.hpp"
#include "nvfp4/simd/x86_intrinsics.hpp"
#include "nvfp4/transforms/detail/hadamard_blocks.hpp"
#include "nvfp4/transforms/simd/hadamard16_avx512.hpp"
#include "nvfp4/transforms/simd/hadamard16_quantize_avx512.hpp"
#include "nvfp4/transforms/simd/hadamard_avx512.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::detail {

/// Redoes the lanes of `tile` its guard rejected with hadamard16_block_fallback. Lanes holding
/// NaN/Inf set `non_finite` and come out as zeros. Rare: kept out of line.
[[gnu::noinline, gnu::cold]] inline void hadamard16_redo_lanes(simd::avx512::hadamard16_tile& tile, matrix_view<const bf16> x, index_t r0,
                                                            index_t c0, const hadamard_transform& t, hadamard_direction direction,
                                                            bool& non_finite) {
  alignas(64) std::uint16_t pairs[8][32];  // pairs[k][2 l + h]: output 2 k + h of lane l
  for (int k = 0; k < 8; ++k) _mm512_store_si512(pairs[k], tile.rounded_pairs[k]);
  for (unsigned redo = static_cast<std::uint16_t>(~tile.exact); redo != 0; redo &= redo - 1) {
    const int lane = std::countr_zero(redo);
    std::uint16_t bits[16] = {};
    if (!hadamard16_block_fallback(x, r0 + lane, c0, t, direction, bits, 1)) {
      non_finite = true;
      std::fill_n(bits, 16, std::uint16_t{0});
    }
    for (int j = 0; j < 16; ++j) pairs[j / 2][2 * lane + j % 2] = bits[j];
  }
  for (int k = 0; k < 8; ++k) tile.rounded_pairs[k] = _mm512_load_si512(pairs[k]);
}

/// A tile of hadamard16_transform_tile with the lanes its guard rejected redone, so every lane is
/// exact. Lanes holding NaN/Inf set `non_finite` and come out as zeros.
NVFP4_ALWAYS_INLINE simd::avx512::hadamard16_tile hadamard16_exact_tile(matrix_view<const bf16> x, index_t r0, index_t c0,
                                                                        const hadamard_transform& t, hadamard_direction direction,
                                                                        unsigned negate_input, unsigned negate_output, bool& non_finite) {
  auto tile = simd::avx512::hadamard16_transform_tile(&x(r0, c0), x.col_stride(), negate_input, negate_output);
  if (tile.exact != 0xFFFF) [[unlikely]] hadamard16_redo_lanes(tile, x, r0, c0, t, direction, non_finite);
  return tile;
}

/// Bit i set when t's sign s_i is -1 (the negate masks of the 16-point kernels).
inline unsigned hadamard16_negative_signs(const hadamard_transform& t) {
  unsigned negative = 0;
  for (int i = 0; i < 16; ++i) negative |= (t.sign(i) < 0 ? 1u : 0u) << i;
  return negative;
}

/// The steps of the columnwise walks over x's rows [0, 16 * (rows / 16)): visit(r0, c0, two) for
/// the tile at rows r0.., columns c0.. and, when `two`, the one at columns c0 + 16... Each step
/// reads 32 source rows (x's rows in memory) 32 bytes further along: whole rows are walked, each
/// loaded line used whole, threads own bands of 32 memory rows. Called inside a parallel region.
template <class Visit>
void hadamard16_columnwise_steps(matrix_view<const bf16> x, Visit&& visit) {
  const index_t panels = x.rows() / 16, tile_pairs = (x.cols() / 16 + 1) / 2;
#if NVFP4_HAS_OPENMP
#pragma omp for schedule(static) nowait
#endif
  for (index_t pair = 0; pair < tile_pairs; ++pair)
    for (index_t panel = 0; panel < panels; ++panel) visit(panel * 16, pair * 32, pair * 32 + 16 < x.cols());
}

/// Walks rows [0, 16 * (rows / 16)) of the bf16 view x, whose rows are contiguous in memory (x =
/// source.transposed() of a row-major source), transforming 16 rows (one per lane) by 32 columns
/// (two tiles; one at an odd end) per step and calling step(r0, c0, tiles, two) on each, OpenMP
/// over square groups of steps. Returns max |output| bits; sets `non_finite` on NaN/Inf.
template <class Step>
std::uint16_t hadamard16_columnwise_walk(matrix_view<const bf16> x, const hadamard_transform& t, hadamard_direction direction,
                                         bool& non_finite, Step&& step) {
  const unsigned negative_signs = hadamard16_negative_signs(t);
  const unsigned negate_input = direction == hadamard_direction::forward ? negative_signs : 0u;
  const unsigned negate_output = direction == hadamard_direction::inverse ? negative_signs : 0u;
  std::uint32_t largest = 0;
  bool bad = false;
#if NVFP4_HAS_OPENMP
#pragma omp parallel reduction(max : largest) reduction(|| : bad)
#endif
  {
    __m512i running = _mm512_setzero_si512();
    hadamard16_columnwise_steps(x, [&](index_t r0, index_t c0, bool two) {
      simd::avx512::hadamard16_tile tile[2];
      tile[0] = hadamard16_exact_tile(x, r0, c0, t, direction, negate_input, negate_output, bad);
      running = simd::avx512::hadamard16_abs_max(running, tile[0]);
      if (two) {
        tile[1] = hadamard16_exact_tile(x, r0, c0 + 16, t, direction, negate_input, negate_output, bad);
        running = simd::avx512::hadamard16_abs_max(running, tile[1]);
      }
      step(r0, c0, tile, two);
    });
    largest = std::max(largest, static_cast<std::uint32_t>(
                                    _mm512_reduce_max_epu32(simd::avx512::hadamard16_lane_abs_max_float_bits(running)) >> 16));
  }
  non_finite = bad;
  return static_cast<std::uint16_t>(largest);
}

/// max |output| bf16 bits of the forward transform of x's rows [0, 16 * (rows / 16)) (x's rows
/// contiguous in memory, as for hadamard16_columnwise_walk), without the outputs: the amax pass of
/// the fused quantizer. Lanes the float32 guard rejects are redone exactly only when their bound
/// sum |x| / 4 could reach the running max; skipping the others never changes the max, whatever
/// the threads. Sets `non_finite` on NaN/Inf.
inline std::uint16_t hadamard16_columnwise_abs_max(matrix_view<const bf16> x, const hadamard_transform& t, bool& non_finite) {
  const unsigned negate_input = hadamard16_negative_signs(t);
  std::uint32_t largest = 0;  // float bits, before rounding to bf16
  bool bad = false;
#if NVFP4_HAS_OPENMP
#pragma omp parallel reduction(max : largest) reduction(|| : bad)
#endif
  {
    __m512i running = _mm512_setzero_si512();
    hadamard16_columnwise_steps(x, [&](index_t r0, index_t first_c0, bool two) {
      for (index_t c0 = first_c0; c0 < first_c0 + (two ? 32 : 16); c0 += 16) {
        const bf16* source = &x(r0, c0);
        __m512i tile_max;
        const __mmask16 exact = simd::avx512::hadamard16_lane_abs_max(source, x.col_stride(), negate_input, tile_max);
        running = _mm512_mask_max_epu32(running, exact, running, tile_max);
        if (exact == 0xFFFF) continue;
        const __m512 running_value = _mm512_set1_ps(std::bit_cast<float>(std::max(_mm512_reduce_max_epu32(running), largest)));
        const __mmask16 possible = static_cast<__mmask16>(
            ~exact & ~_mm512_cmp_ps_mask(simd::avx512::hadamard16_lane_output_bound(source, x.col_stride()), running_value, _CMP_LT_OQ));
        for (unsigned redo = possible; redo != 0; redo &= redo - 1) {
          std::uint16_t bits[16];
          if (!hadamard16_block_fallback(x, r0 + std::countr_zero(redo), c0, t, hadamard_direction::forward, bits, 1)) {
            bad = true;
            continue;
          }
          for (std::uint16_t b : bits) largest = std::max(largest, static_cast<std::uint32_t>(b & 0x7FFF) << 16);
        }
      }
    });
    largest = std::max(largest, _mm512_reduce_max_epu32(running));
  }
  non_finite = bad;
  // Rounding the float max to bf16 rounds the largest output (the fallback's are bf16 already).
  return bf16::from_float(std::bit_cast<float>(largest)).bits();
}

/// The columnwise fast path of the transform alone: hadamard16_columnwise_walk's rows into out
/// (col_stride 1), one 64-byte row piece per lane and step.
inline std::uint16_t hadamard16_columnwise_fast(matrix_view<const bf16> x, const hadamard_transform& t,
                                                hadamard_direction direction, matrix_view<bf16> out, bool& non_finite) {
  static_assert(sizeof(bf16) == sizeof(std::uint16_t));
  auto* const out_bits = reinterpret_cast<std::uint16_t*>(out.data());
  return hadamard16_columnwise_walk(x, t, direction, non_finite,
                                    [&](index_t r0, index_t c0, const simd::avx512::hadamard16_tile* tile, bool two) {
                                      simd::avx512::hadamard16_store_rows(tile[0], two ? &tile[1] : nullptr,
                                                                          out_bits + r0 * out.row_stride() + c0, out.row_stride());
                                    });
}

/// Pass 2 of the fused quantizer (forward, TE's or any 16-point t): x's rows [0, 16 * (rows / 16))
/// transformed again and each tile quantized in registers, its lanes being blocks of the copy:
/// packed E2M1 codes to data (row stride data_stride bytes), UE4M3 codes to scales.
inline void hadamard16_columnwise_quantize(matrix_view<const bf16> x, const hadamard_transform& t, tensor_scale scale,
                                           std::uint8_t* data, index_t data_stride, std::uint8_t* scales, index_t scale_stride) {
  bool unused = false;
  hadamard16_columnwise_walk(x, t, hadamard_direction::forward, unused,
                             [&](index_t r0, index_t c0, const simd::avx512::hadamard16_tile* tile, bool two) {
                               __m512i packed[2][2];
                               std::uint8_t codes[2][16];
                               simd::avx512::hadamard16_quantize_tile(tile[0], scale, packed[0], codes[0]);
                               if (two) simd::avx512::hadamard16_quantize_tile(tile[1], scale, packed[1], codes[1]);
                               simd::avx512::hadamard16_store_packed_rows(packed[0], two ? packed[1] : nullptr,
                                                                          data + r0 * data_stride + c0 / 2, data_stride);
                               for (int lane = 0; lane < 16; ++lane) {
                                 std::uint8_t* row_scales = scales + (r0 + lane) * scale_stride + c0 / 16;
                                 row_scales[0] = codes[0][lane];
                                 if (two) row_scales[1] = codes[1][lane];
                               }
                             });
}

/// The float64 FWHT of x's rows [0, 8 * full_panels) (any n, float or bf16, any layout), 8 blocks
/// per register, OpenMP over the tasks of the enclosing parallel region; lanes the guard rejects
/// are redone by the exact reference. Each block's n output bits go to record(r, c0, bits, 8);
/// NaN/Inf sets `bad`. bits and gathered: per-thread scratch of 8 n elements.
template <class T, class Record>
void hadamard_rows_panels8(matrix_view<const T> x, const hadamard_transform& t, hadamard_direction direction, index_t full_panels,
                           std::uint16_t* bits, T* gathered, Record&& record, bool& bad) {
  const int n = t.size();
  const index_t blocks_per_row = x.cols() / n;
  constexpr index_t lanes = 8;
  const std::vector<double> sign_values(t.signs().begin(), t.signs().end());
  // The double sums are exact when n * max|x| <= 2^53 * (smallest input ulp), and that ulp is
  // above |x| * 2^-precision (8 bits for bf16, 24 for float).
  constexpr int input_precision = std::is_same_v<T, float> ? 24 : 8;
  const double guard_ratio = std::ldexp(1.0, 53 - std::countr_zero(static_cast<unsigned>(n)) - input_precision);
  const double scale = t.exact_scale() ? std::ldexp(1.0, -t.half_log2_size()) : t.scale();
  const simd::avx512::hadamard_kernel_params params{sign_values.data(), direction == hadamard_direction::inverse,
                                                    t.exact_scale(), scale, guard_ratio};
#if NVFP4_HAS_OPENMP
#pragma omp for schedule(static) nowait
#endif
  for (index_t task = 0; task < full_panels * blocks_per_row; ++task) {
    // Consecutive tasks walk along the rows of the source's memory (a transposed view's
    // columns), so each loaded cache line is used whole.
    const index_t r0 = task % full_panels * lanes, c0 = task / full_panels * n;
    const T* source;
    std::ptrdiff_t i_stride;
    if (x.row_stride() == 1) {  // the 8 blocks' elements i sit side by side (a transposed view)
      source = &x(r0, c0);
      i_stride = x.col_stride();
    } else {
      for (int i = 0; i < n; ++i)
        for (index_t lane = 0; lane < lanes; ++lane) gathered[i * lanes + lane] = x(r0 + lane, c0 + i);
      source = gathered;
      i_stride = lanes;
    }
    __mmask8 lane_non_finite = 0, redo = 0;
    switch (n) {
      case 16: redo = simd::avx512::hadamard_panel8<16>(source, i_stride, params, bits, lane_non_finite); break;
      case 32: redo = simd::avx512::hadamard_panel8<32>(source, i_stride, params, bits, lane_non_finite); break;
      case 64: redo = simd::avx512::hadamard_panel8<64>(source, i_stride, params, bits, lane_non_finite); break;
      case 128: redo = simd::avx512::hadamard_panel8<128>(source, i_stride, params, bits, lane_non_finite); break;
      default: redo = simd::avx512::hadamard_panel8<256>(source, i_stride, params, bits, lane_non_finite); break;
    }
    if (lane_non_finite) bad = true;
    for (index_t lane = 0; lane < lanes; ++lane)
      if ((redo >> lane) & 1) hadamard_block_exact(x, r0 + lane, c0, t, direction, bits + lane, lanes);
    for (index_t lane = 0; lane < lanes; ++lane) record(r0 + lane, c0, bits + lane, lanes);
  }
}

}  // namespace nvfp4::detail
NVFP4_END_INTRINSIC_CODE

#endif  // NVFP4_HAS_AVX512
