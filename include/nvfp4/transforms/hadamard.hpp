// nvfp4/transforms/hadamard.hpp: the public random Hadamard transform (NUMERICS.md §4): the fast
// paths (16-point bf16 blocks of a columnwise copy: float32 FWHT on 16 blocks per register; other
// cases: float64 FWHT on 8 blocks per register; OpenMP over panels), bit-identical to
// reference::hadamard_rows for every input and thread count, and the columnwise-copy helpers.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/transforms/hadamard_reference.hpp"
#include "nvfp4/transforms/simd/hadamard16_avx512.hpp"
#include "nvfp4/transforms/simd/hadamard16_quantize_avx512.hpp"
#include "nvfp4/transforms/simd/hadamard_avx512.hpp"

#if NVFP4_HAS_OPENMP
#include <omp.h>
#endif

namespace nvfp4 {

namespace detail {

/// True when x holds NaN or Inf, reading memory in its own order (fast for transposed views).
template <class T>
bool has_non_finite(matrix_view<const T> x) {
  auto exponent_all_ones = [](T v) {
    if constexpr (std::is_same_v<T, float>) return (std::bit_cast<std::uint32_t>(v) & 0x7F800000u) == 0x7F800000u;
    else return (v.bits() & 0x7F80u) == 0x7F80u;
  };
  const bool transposed = x.row_stride() == 1 && x.col_stride() != 1;
  const index_t outer = transposed ? x.cols() : x.rows(), inner = transposed ? x.rows() : x.cols();
  bool found = false;
#if NVFP4_HAS_OPENMP
#pragma omp parallel for reduction(|| : found) schedule(static)
#endif
  for (index_t a = 0; a < outer; ++a) {
    bool line = false;
    for (index_t b = 0; b < inner; ++b) line |= exponent_all_ones(transposed ? x(b, a) : x(a, b));
    found = found || line;
  }
  return found;
}

/// The transform of one block (row r, columns c0 .. c0 + n) by the exact reference. Returns false,
/// writing nothing, when the block holds NaN/Inf.
template <class T>
bool hadamard_block_exact(matrix_view<const T> x, index_t r, index_t c0, const hadamard_transform& t,
                          hadamard_direction direction, std::uint16_t* out_bits, index_t out_stride) {
  float block[hadamard_transform::max_size];
  for (int i = 0; i < t.size(); ++i) {
    block[i] = to_float32(x(r, c0 + i));
    if (!std::isfinite(block[i])) return false;
  }
  for (int j = 0; j < t.size(); ++j) out_bits[j * out_stride] = hadamard_output_bits(block, t, direction, j);
  return true;
}

/// One 16-point block (row r, columns c0 .. c0 + 16) the float32 kernel could not do exactly: by a
/// float64 FWHT when its exponent span allows (all partial sums are then multiples of the smallest
/// input's last place below 2^53 of it: max|x| <= 2^(53 - 4 - 8) min|x| for bf16), else by the
/// exact reference. Returns false, writing nothing, when the block holds NaN/Inf.
template <class T>
bool hadamard16_block_fallback(matrix_view<const T> x, index_t r, index_t c0, const hadamard_transform& t,
                               hadamard_direction direction, std::uint16_t* out_bits, index_t out_stride) {
  constexpr int input_precision = std::is_same_v<T, float> ? 24 : 8;
  double v[16];
  double largest = 0.0, smallest = INFINITY;
  for (int i = 0; i < 16; ++i) {
    const float value = to_float32(x(r, c0 + i));
    if (!std::isfinite(value)) return false;
    const double magnitude = std::fabs(static_cast<double>(value));
    largest = std::max(largest, magnitude);
    if (magnitude != 0.0) smallest = std::min(smallest, magnitude);
    v[i] = direction == hadamard_direction::forward ? value * static_cast<double>(t.sign(i)) : value;
  }
  if (!(largest <= smallest * std::ldexp(1.0, 53 - 4 - input_precision)))
    return hadamard_block_exact(x, r, c0, t, direction, out_bits, out_stride);
  for (int span = 1; span < 16; span *= 2)
    for (int k = 0; k < 16; ++k)
      if ((k & span) == 0) {
        const double a = v[k], b = v[k + span];
        v[k] = a + b;
        v[k + span] = a - b;
      }
  for (int j = 0; j < 16; ++j) {
    const double sum = direction == hadamard_direction::inverse ? v[j] * t.sign(j) : v[j];
    out_bits[j * out_stride] = bf16_bits_from_double_rne(sum * 0.25 + 0.0);  // + 0.0: an exact zero is +0
  }
  return true;
}

#if NVFP4_HAS_AVX512
NVFP4_BEGIN_INTRINSIC_CODE
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

/// Walks rows [0, 16 * (rows / 16)) of the bf16 view x, whose rows are contiguous in memory (x =
/// source.transposed() of a row-major source), transforming 16 rows (one per lane) by 32 columns
/// (two tiles; one at an odd end) per step and calling step(r0, c0, tiles, two) on each, OpenMP
/// over square groups of steps. Returns max |output| bits; sets `non_finite` on NaN/Inf.
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
  return static_cast<std::uint16_t>(_mm512_cvtsi512_si32(simd::avx512::round_float_bits_to_bf16_high(_mm512_set1_epi32(static_cast<int>(largest)))) >> 16);
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
NVFP4_END_INTRINSIC_CODE
#endif

/// The general fast path (any size, float or bf16, any layout): float64 FWHT on 8 blocks per
/// register, exact reference for rows past the last panel of 8 and for guard failures. Same
/// contract as hadamard_rows_fast.
NVFP4_BEGIN_INTRINSIC_CODE
template <class T>
std::uint16_t hadamard_rows_fast_generic(matrix_view<const T> x, const hadamard_transform& t, hadamard_direction direction,
                                 matrix_view<bf16> out, bool& non_finite) {
  const int n = t.size();
  const index_t rows = x.rows(), blocks_per_row = x.cols() / n;
  constexpr index_t lanes = 8;
  const index_t full_panels = NVFP4_HAS_AVX512 ? rows / lanes : 0;
  std::uint16_t largest = 0;
  bool bad = false;
  std::vector<double> sign_values(t.signs().begin(), t.signs().end());
  // The double sums are exact when n * max|x| <= 2^53 * (smallest input ulp), and that ulp is
  // above |x| * 2^-precision (8 bits for bf16, 24 for float).
  constexpr int input_precision = std::is_same_v<T, float> ? 24 : 8;
  [[maybe_unused]] const double guard_ratio = std::ldexp(1.0, 53 - std::countr_zero(static_cast<unsigned>(n)) - input_precision);
  [[maybe_unused]] const double scale = t.exact_scale() ? std::ldexp(1.0, -t.half_log2_size()) : t.scale();

#if NVFP4_HAS_OPENMP
#pragma omp parallel reduction(max : largest) reduction(|| : bad)
#endif
  {
    std::vector<std::uint16_t> bits(static_cast<std::size_t>(n * lanes));
    std::vector<T> gathered(static_cast<std::size_t>(n * lanes));
    auto record = [&](index_t r, index_t c0, const std::uint16_t* values, index_t stride) {
      for (int j = 0; j < n; ++j) {
        const std::uint16_t b = values[j * stride];
        largest = std::max<std::uint16_t>(largest, b & 0x7FFF);
        out(r, c0 + j) = bf16::from_bits(b);
      }
    };
#if NVFP4_HAS_AVX512
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
          for (index_t lane = 0; lane < lanes; ++lane) gathered[static_cast<std::size_t>(i * lanes + lane)] = x(r0 + lane, c0 + i);
        source = gathered.data();
        i_stride = lanes;
      }
      __mmask8 lane_non_finite = 0, redo = 0;
      switch (n) {
        case 16: redo = simd::avx512::hadamard_panel8<16>(source, i_stride, params, bits.data(), lane_non_finite); break;
        case 32: redo = simd::avx512::hadamard_panel8<32>(source, i_stride, params, bits.data(), lane_non_finite); break;
        case 64: redo = simd::avx512::hadamard_panel8<64>(source, i_stride, params, bits.data(), lane_non_finite); break;
        case 128: redo = simd::avx512::hadamard_panel8<128>(source, i_stride, params, bits.data(), lane_non_finite); break;
        default: redo = simd::avx512::hadamard_panel8<256>(source, i_stride, params, bits.data(), lane_non_finite); break;
      }
      if (lane_non_finite) bad = true;
      for (index_t lane = 0; lane < lanes; ++lane)
        if ((redo >> lane) & 1) hadamard_block_exact(x, r0 + lane, c0, t, direction, bits.data() + lane, lanes);
      for (index_t lane = 0; lane < lanes; ++lane) record(r0 + lane, c0, bits.data() + lane, lanes);
    }
#endif
    // Rows past the last full panel of 8 (all rows without AVX-512): the exact reference.
#if NVFP4_HAS_OPENMP
#pragma omp for schedule(static)
#endif
    for (index_t task = 0; task < (rows - full_panels * lanes) * blocks_per_row; ++task) {
      const index_t r = full_panels * lanes + task / blocks_per_row, c0 = task % blocks_per_row * n;
      if (!hadamard_block_exact(x, r, c0, t, direction, bits.data(), 1)) {
        bad = true;
        continue;
      }
      record(r, c0, bits.data(), 1);
    }
  }
  non_finite = bad;
  return largest;
}
NVFP4_END_INTRINSIC_CODE

/// The fast transform of x's rows into out; returns max |out| as bf16 bits (0x7F80 on overflow)
/// and sets `non_finite` when x holds NaN/Inf (out is then partly garbage). No checks here.
template <class T>
std::uint16_t hadamard_rows_fast(matrix_view<const T> x, const hadamard_transform& t, hadamard_direction direction,
                                 matrix_view<bf16> out, bool& non_finite) {
#if NVFP4_HAS_AVX512
  // bf16 blocks of 16 along rows that are columns in memory (the columnwise copy): float32 FWHT
  // on 16 blocks per register for the rows in full panels of 16, the general path for the rest.
  if constexpr (std::is_same_v<T, bf16>) {
    if (t.size() == 16 && x.row_stride() == 1 && x.col_stride() != 1 && out.col_stride() == 1 && x.rows() >= 16) {
      const index_t done = x.rows() / 16 * 16;
      std::uint16_t largest = hadamard16_columnwise_fast(x, t, direction, out, non_finite);
      if (done < x.rows()) {
        bool tail_non_finite = false;
        const matrix_view<const T> x_rest(&x(done, 0), x.rows() - done, x.cols(), x.row_stride(), x.col_stride());
        const matrix_view<bf16> out_rest(&out(done, 0), out.rows() - done, out.cols(), out.row_stride(), out.col_stride());
        largest = std::max(largest, hadamard_rows_fast_generic(x_rest, t, direction, out_rest, tail_non_finite));
        non_finite = non_finite || tail_non_finite;
      }
      return largest;
    }
  }
#endif
  return hadamard_rows_fast_generic(x, t, direction, out, non_finite);
}

/// Throws unless x (source [M, N]) can have its columnwise copy transformed by t.
template <class T>
void check_rht_columnwise(matrix_view<const T> x, const hadamard_transform& t) {
  x.validate("rht input");
  detail::require(x.rows() % t.size() == 0, errc::shape_mismatch,
                  "rht_columnwise: the token dimension M = " + std::to_string(x.rows()) +
                      " is not a multiple of the transform size " + std::to_string(t.size()));
}

}  // namespace detail

/// Applies t to every block of n consecutive elements of each row of x (out(r, c) in bf16),
/// forward (y = x * T) or inverse (x = y * Tᵀ). For the columnwise copy of a tensor (along the
/// token dimension M, NUMERICS.md §4) pass x.transposed(). Bit-identical to
/// reference::hadamard_rows. Throws shape_mismatch unless x.cols() is a multiple of n,
/// non_finite_error on NaN/Inf; nothing is written before the checks pass.
template <quantizer_input T>
void hadamard_rows(matrix_view<const T> x, const hadamard_transform& t, matrix_view<bf16> out,
                   hadamard_direction direction = hadamard_direction::forward) {
  detail::check_hadamard_shapes(x, t, out);
  if (detail::has_non_finite(x)) detail::throw_first_non_finite(x, "hadamard input");
  bool non_finite = false;
  detail::hadamard_rows_fast(x, t, direction, out, non_finite);
}

/// The input of a columnwise copy with RHT: RHT(xᵀ) as a row-major [N, M] bf16 matrix (for x of
/// shape [M, N]), and its amax (taken after the transform, NUMERICS.md §4).
struct columnwise_rht {
  std::vector<bf16> values;
  index_t rows = 0;  ///< N, the source's columns
  index_t cols = 0;  ///< M, the source's rows (the transformed dimension)
  float amax = 0.0f;
  matrix_view<const bf16> view() const { return matrix_view<const bf16>::row_major(values.data(), rows, cols); }
};

/// RHT(xᵀ): t applied along x's rows dimension M in blocks of n, for every column of x.
/// Throws shape_mismatch unless M is a multiple of n; non_finite_error on NaN/Inf in x, or when
/// the transform overflows bf16.
template <quantizer_input T>
columnwise_rht rht_columnwise(matrix_view<const T> x, const hadamard_transform& t = hadamard_transform::te_default()) {
  const matrix_view<const T> source = x.transposed();
  columnwise_rht result;
  result.rows = source.rows();
  result.cols = source.cols();
  detail::check_rht_columnwise(x, t);
  result.values.resize(static_cast<std::size_t>(result.rows * result.cols));
  bool non_finite = false;
  const auto out = matrix_view<bf16>::row_major(result.values.data(), result.rows, result.cols);
  const std::uint16_t largest = detail::hadamard_rows_fast(source, t, hadamard_direction::forward, out, non_finite);
  if (non_finite) detail::throw_first_non_finite(x, "rht input");
  detail::require(largest < 0x7F80u, errc::non_finite_input, "rht_columnwise: the transform overflows bf16");
  result.amax = bf16::from_bits(largest).to_float();
  return result;
}

namespace detail {

#if NVFP4_HAS_AVX512
/// quantize_columnwise_rht for NVFP4 1x16, bf16 input with at least 16 columns, round to nearest
/// even, t of size 16: no bf16 intermediate. Pass 1 transforms for the amax only; pass 2
/// transforms again and quantizes each tile in registers (its lanes are the copy's blocks).
/// Source columns past the last full 16 go through the general transform and fast quantizer.
inline nvfp4_tensor quantize_columnwise_rht_fused(matrix_view<const bf16> x, const hadamard_transform& t) {
  check_rht_columnwise(x, t);
  const matrix_view<const bf16> source = x.transposed();  // [N, M], blocks along M
  const index_t rows = source.rows(), cols = source.cols(), done = rows / 16 * 16;
  bool non_finite = false;
  std::uint16_t largest = hadamard16_columnwise_abs_max(source, t, non_finite);
  std::vector<bf16> tail(static_cast<std::size_t>((rows - done) * cols));
  const auto tail_view = matrix_view<bf16>::row_major(tail.data(), rows - done, cols);
  if (done < rows) {
    bool tail_non_finite = false;
    const matrix_view<const bf16> rest(&source(done, 0), rows - done, cols, source.row_stride(), source.col_stride());
    largest = std::max(largest, hadamard_rows_fast_generic(rest, t, hadamard_direction::forward, tail_view, tail_non_finite));
    non_finite = non_finite || tail_non_finite;
  }
  if (non_finite) detail::throw_first_non_finite(x, "rht input");
  detail::require(largest < 0x7F80u, errc::non_finite_input, "rht_columnwise: the transform overflows bf16");
  const float amax = bf16::from_bits(largest).to_float();

  nvfp4_tensor q(rows, cols, quantized_axis::columnwise);
  const tensor_scale scale = nvfp4_tensor_scale(amax);
  q.set_tensor_scale(amax, scale.encode, scale.decode);
  std::uint8_t* const data = fast::detail::bytes_of(q.data());
  std::uint8_t* const scales = fast::detail::bytes_of(q.scales());
  const index_t data_stride = q.data_row_stride(), scale_stride = q.scale_cols();
  bool unused = false;
  hadamard16_columnwise_walk(source, t, hadamard_direction::forward, unused,
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
  if (done < rows) {
    const auto tail_q = fast::quantize_with_amax<nvfp4_1x16>(matrix_view<const bf16>(tail_view), amax);
    const std::uint8_t* tail_data = fast::detail::bytes_of(tail_q.data());
    const std::uint8_t* tail_scales = fast::detail::bytes_of(tail_q.scales());
    std::copy_n(tail_data, (rows - done) * data_stride, data + done * data_stride);
    std::copy_n(tail_scales, (rows - done) * scale_stride, scales + done * scale_stride);
  }
  return q;
}
#endif

}  // namespace detail

/// The columnwise copy of x with RHT, as TransformerEngine's NVFP4 recipe makes it for the Wgrad
/// GEMM: RHT(xᵀ) in bf16, quantized with blocks along M and the tensor scale from its own amax.
/// Same result as rht_columnwise then quantize_with_amax (for NVFP4 1x16 from bf16 with round to
/// nearest, computed without the bf16 intermediate).
template <block_scaled_format Format = nvfp4_1x16, quantizer_input T>
quantized_tensor<Format> quantize_columnwise_rht(matrix_view<const T> x, const hadamard_transform& t = hadamard_transform::te_default(),
                                                 quantize_options options = {}) {
#if NVFP4_HAS_AVX512
  if constexpr (std::is_same_v<Format, nvfp4_1x16> && std::is_same_v<T, bf16>) {
    if (options.rounding == rounding_mode::nearest_even && t.size() == 16 && x.cols() >= 16) return detail::quantize_columnwise_rht_fused(x, t);
  }
#endif
  const columnwise_rht transformed = rht_columnwise(x, t);
  options.axis = quantized_axis::columnwise;
  return quantize_with_amax<Format>(transformed.view(), transformed.amax, options);
}

}  // namespace nvfp4
