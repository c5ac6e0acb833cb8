// nvfp4/gemm/fp4/simd/mma_amx.hpp: the AMX kernels of the block-scaled MMA (exact and relaxed), for
// CPUs with AMX-BF16 (simd/amx/tiles.hpp says when), with AVX-512 for the rest of the work.
//
// Why BF16 tiles and not INT8 ones: every 16-element group needs its own sum, so a tile multiply
// covers one group (K = 16) whatever its type, and BF16 lets B's scale ride along: B's tile holds
// b2·s_b (twice the E2M1 value times its group's scale: at most 6 significant bits, exact in
// bf16), A's holds a2. The tile unit's fp32 result for a group is then U_g = Σ a2·b2·s_b = 4·P_g·s_b,
// exactly: each product is an integer multiple of s_b's last bit, and the 16 of a group add up to
// less than 2^16 of them, so no order of the sum and no fp32 rounding can change it. What is left
// for the vector units is one fma per group and output:
//   relaxed: acc = fma(U_g, s_a/4, acc), which is fp4::mma::relaxed_step's fma(P_g, s_a·s_b, acc) as
//            long as s_a·s_b is exact in fp32 (always for UE4M3; checked for E8M0);
//   exact:   T = Σ_g U_g·(s_a/4) in fp32, then D = RZ(c + T) with one add rounding toward zero,
//            which is §6's fused sum whenever (1) truncation removes nothing (the per-lane test of
//            the AVX-512 kernel, gemm/fp4/simd/mma_avx512.hpp) and (2) T is exact in fp32: each term is
//            a multiple of 2^(E_g - 8) below 2^(E_g + 11), so four of them need E_max - E_min + 21
//            bits: at most 24 when the group exponents of the lane span at most 3 binades
//            (terms_add_exactly_in_float, gemm/fp4/detail/mma_layout.hpp).
//            Rows whose spans are wider take the same sum in double (exact under (1) alone);
//            lanes failing (1) take the scalar §6 step (the reference's own code).
// Operands with NaN scales, E8M0 scales beyond what bf16 and the tile unit's flush-to-zero keep
// exact, or (relaxed) E8M0 scale products outside fp32's normal range are left to the AVX-512
// kernels (eligible()).
#pragma once

#include "nvfp4/config.hpp"
#include "nvfp4/simd/amx/tiles.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "nvfp4/detail/scratch.hpp"
#include "nvfp4/gemm/fp4/detail/mma_kernels.hpp"
#include "nvfp4/gemm/fp4/detail/mma_layout.hpp"
#include "nvfp4/gemm/fp4/detail/packing.hpp"
#include "nvfp4/gemm/fp4/reference.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/simd/parallel.hpp"

// The AMX layouts are plain data, there in every build (gemm/fp4/detail/fast_gemm.hpp's packed_b holds them).
namespace nvfp4::detail::amx {

/// Rows of A in one tile, and the work item of the driver: 8 row blocks against 8 tiles of B.
inline constexpr int block_rows = 16;
inline constexpr index_t rows_per_item = 128, steps_per_chunk = 16;
inline constexpr int panel_tiles = 8;

/// What the kernels read of one row of A at one step.
struct row_bounds {
  float quarter[4];                  ///< s_g / 4
  float exponent_min, exponent_max;  ///< over groups with a non-zero scale (or the stand-in)
  std::uint8_t has_nan;
};

/// 16 rows of A at one K step: the tile-unit operand (row i: the 64 values, 16 per group) and
/// each row's scales.
struct alignas(64) row_block_step {
  std::uint16_t values[block_rows][fp4::mma::step_k];  ///< bf16 bits of a2; zero in rows past M and past K
  row_bounds rows[block_rows];
};

/// A [rows, K] operand as blocks of 16 rows, each a run of steps.
struct row_blocks {
  index_t rows = 0, blocks = 0, steps = 0;
  scratch<row_block_step> data;  ///< borrowed per call (detail/scratch.hpp)
  const row_block_step* block(index_t b) const { return data.data() + b * steps; }
};

/// 16 columns of B at one K step: per group, 8 rows of the tile operand (row k holds the pair of
/// elements 2k, 2k+1 of every column: the layout the tile multiply reads), then the bounds of the
/// exact test (as tile_step's).
struct alignas(64) tile_block_step {
  std::uint16_t values[4][8][2 * tile_lanes];  ///< bf16 bits of b2·s_b; zero past K and past N
  float accumulator_floor[tile_lanes];
  float accumulator_ceiling[tile_lanes];
  float span, exponent_min_low, exponent_min_high, exponent_max_high;
  std::uint8_t has_nan;
};

/// The 64-byte tile configuration: tiles 0-1 hold A (16 rows of one group: 32 bytes), 2-3 hold B
/// (8 pair rows of 16 columns: 64 bytes), 4-7 the products of the 2 x 2 block (16 x 16 fp32).
constexpr simd::amx::tile_config tile_setup() {
  simd::amx::tile_config config;
  for (int t = 0; t < 2; ++t) config.set(t, block_rows, fp4::mma::group_k * 2);
  for (int t = 2; t < 4; ++t) config.set(t, fp4::mma::group_k / 2, tile_lanes * 4);
  for (int t = 4; t < 8; ++t) config.set(t, block_rows, tile_lanes * 4);
  return config;
}

}  // namespace nvfp4::detail::amx

#if NVFP4_HAS_AVX512_VNNI

#include "nvfp4/simd/avx512/ops.hpp"
#include "nvfp4/simd/x86_intrinsics.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::detail::amx {

// ---- operands -----------------------------------------------------------------------------

/// The 64 doubled values of step s of a row of `row_bytes` packed bytes, one per byte (the
/// packers' decode, one AVX-512 vector per step).
inline __m512i decode_step(const std::uint8_t* row, index_t row_bytes, index_t s) {
  __m512i values[1];
  operand_packers<simd::avx512::ops>::decode_step(row, row_bytes, s, doubled_values<0>.values, values);
  return values[0];
}

/// bf16 bits of the doubled E2M1 values -12..12, indexed by value + 12 (32 entries for vpermw).
inline __m512i doubled_bf16_table() {
  alignas(64) std::uint16_t table[32] = {};
  for (int v = -12; v <= 12; ++v) table[v + 12] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(static_cast<float>(v)) >> 16);
  return _mm512_load_si512(table);
}

/// Scale exponent range, NaN presence, of a whole operand.
struct scale_summary {
  float exponent_min = std::numeric_limits<float>::infinity();
  float exponent_max = -std::numeric_limits<float>::infinity();
  bool has_nan = false;
};
template <class Format>
scale_summary summarize_scales(const quantized_tensor<Format>& q) {
  const auto& table = scale_table<typename Format::scale_type>;
  const auto* scales = reinterpret_cast<const std::uint8_t*>(q.scales().data());
  scale_summary out;
  for (index_t i = 0; i < q.rows() * q.scale_cols(); ++i) {
    const scale_forms& f = table[scales[i]];
    out.has_nan |= f.is_nan;
    if (f.nonzero) {
      out.exponent_min = std::min(out.exponent_min, f.exponent);
      out.exponent_max = std::max(out.exponent_max, f.exponent);
    }
  }
  return out;
}

/// Whether the AMX kernels compute this product exactly as the reference (see the file comment):
/// no NaN scale; B's scale exponents in [-120, 120] (b2·s_b a normal bf16, every product a normal
/// fp32, whatever the tile unit flushes); in relaxed mode, every scale product in [2^-124, 2^128).
template <class FormatA, class FormatB>
bool eligible(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, gemm_mode mode) {
  const scale_summary sa = summarize_scales(a), sb = summarize_scales(b);
  if (sa.has_nan || sb.has_nan) return false;
  const bool a_empty = !(sa.exponent_min <= sa.exponent_max), b_empty = !(sb.exponent_min <= sb.exponent_max);
  if (!b_empty && (sb.exponent_min < -120 || sb.exponent_max > 120)) return false;
  if (mode == gemm_mode::relaxed && !a_empty && !b_empty)
    return sa.exponent_min + sb.exponent_min >= -124 && sa.exponent_max + sb.exponent_max <= 127;
  return true;
}

/// A as blocks of 16 rows (rows past M: zero values, no scale).
template <class Format>
row_blocks make_row_blocks(const quantized_tensor<Format>& q) {
  row_blocks out;
  out.rows = q.rows();
  out.blocks = (q.rows() + block_rows - 1) / block_rows;
  out.steps = (q.cols() + fp4::mma::step_k - 1) / fp4::mma::step_k;
  out.data = scratch<row_block_step>(static_cast<std::size_t>(out.blocks * out.steps));
  const index_t stride = q.data_row_stride();
  const auto* data = reinterpret_cast<const std::uint8_t*>(q.data().data());
  simd::parallel_ranges(
      out.blocks * out.steps, simd::worth_parallel(out.rows * out.steps * fp4::mma::step_k), [&](index_t begin, index_t end) {
        const __m512i bf16_table = doubled_bf16_table();
        const __m512i offset = _mm512_set1_epi16(12);
        row_step scales;  // set_row_step_scales fills the scale part of a row_step
        for (index_t index = begin; index < end; ++index) {
          const index_t b = index / out.steps, s = index % out.steps;
          row_block_step& rs = out.data[static_cast<std::size_t>(index)];
          for (int i = 0; i < block_rows; ++i) {
            const index_t r = b * block_rows + i;
            row_bounds& bounds = rs.rows[i];
            if (r >= q.rows()) {
              std::memset(rs.values[i], 0, sizeof rs.values[i]);
              bounds = {{0, 0, 0, 0}, no_scale_exponent, no_scale_exponent, 0};
              continue;
            }
            const __m512i values = decode_step(data + r * stride, stride, s);
            for (int half = 0; half < 2; ++half) {
              const __m512i words = _mm512_cvtepi8_epi16(half ? _mm512_extracti64x4_epi64(values, 1) : _mm512_castsi512_si256(values));
              _mm512_store_si512(rs.values[i] + 32 * half, _mm512_permutexvar_epi16(_mm512_add_epi16(words, offset), bf16_table));
            }
            float e_min, e_max;
            set_row_step_scales(q, r, s, scales, e_min, e_max);
            for (int g = 0; g < 4; ++g) bounds.quarter[g] = scales.quarter[g];
            bounds.exponent_min = scales.exponent_min;
            bounds.exponent_max = scales.exponent_max;
            bounds.has_nan = scales.has_nan;
          }
        }
      });
  return out;
}

/// Columns [j0, j0 + 16) of B (past N: zero, no scale) into out[steps].
template <class Format>
void pack_tile(const quantized_tensor<Format>& q, index_t j0, tile_block_step* out) {
  const index_t steps = (q.cols() + fp4::mma::step_k - 1) / fp4::mma::step_k;
  const index_t stride = q.data_row_stride();
  const index_t valid = std::min<index_t>(tile_lanes, q.rows() - j0);
  const auto* data = reinterpret_cast<const std::uint8_t*>(q.data().data());
  tile_step scales;  // set_tile_step_scales fills the scale part of a tile_step
  for (index_t s = 0; s < steps; ++s) {
    set_tile_step_scales(q, j0, valid, s, scales);
    // lanes[l] = the 32 pairs of column l, as dwords: groups 0-1 in lanes_01, 2-3 in lanes_23.
    __m512i lanes_01[16], lanes_23[16];
    for (int l = 0; l < tile_lanes; ++l) {
      const __m512i values = l < valid ? decode_step(data + (j0 + l) * stride, stride, s) : _mm512_setzero_si512();
      __m256i group_words[4];
      // Immediates, not the loop counter: without full unrolling (-O1/-O2, the sanitizer build)
      // GCC refuses a variable as extracti32x4's 2-bit immediate.
      const __m128i groups[4] = {_mm512_extracti32x4_epi32(values, 0), _mm512_extracti32x4_epi32(values, 1),
                                 _mm512_extracti32x4_epi32(values, 2), _mm512_extracti32x4_epi32(values, 3)};
      for (int g = 0; g < 4; ++g) {
        const __m512 b2 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(groups[g]));
        const __m512 scaled = _mm512_mul_ps(b2, _mm512_set1_ps(scales.value[g][l]));  // exact: see the file comment
        group_words[g] = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(scaled), 16));
      }
      lanes_01[l] = _mm512_inserti64x4(_mm512_castsi256_si512(group_words[0]), group_words[1], 1);
      lanes_23[l] = _mm512_inserti64x4(_mm512_castsi256_si512(group_words[2]), group_words[3], 1);
    }
    simd::avx512::ops::transpose(lanes_01);
    simd::avx512::ops::transpose(lanes_23);
    tile_block_step& ts = out[s];
    for (int k = 0; k < 8; ++k) {
      _mm512_store_si512(ts.values[0][k], lanes_01[k]);
      _mm512_store_si512(ts.values[1][k], lanes_01[8 + k]);
      _mm512_store_si512(ts.values[2][k], lanes_23[k]);
      _mm512_store_si512(ts.values[3][k], lanes_23[8 + k]);
    }
    std::memcpy(ts.accumulator_floor, scales.accumulator_floor, sizeof ts.accumulator_floor);
    std::memcpy(ts.accumulator_ceiling, scales.accumulator_ceiling, sizeof ts.accumulator_ceiling);
    ts.span = scales.span;
    ts.exponent_min_low = scales.exponent_min_low;
    ts.exponent_min_high = scales.exponent_min_high;
    ts.exponent_max_high = scales.exponent_max_high;
    ts.has_nan = scales.has_nan;
  }
}

/// The scalar §6 step of output (i, j) at step s from the operands themselves (the reference's
/// code): the exact kernel's fallback. Rows or columns past the operands keep c.
template <class FormatA, class FormatB>
[[gnu::noinline]] float exact_step_of_element(const quantized_tensor<FormatA>& a, index_t i, const quantized_tensor<FormatB>& b, index_t j,
                                              index_t s, float c) {
  if (i >= a.rows() || j >= b.rows()) return c;
  int a2[fp4::mma::step_k], b2[fp4::mma::step_k];
  fp4::mma::scale_parts scale_a[fp4::mma::groups_per_step], scale_b[fp4::mma::groups_per_step];
  load_mma_step(a, i, s, a2, scale_a);
  load_mma_step(b, j, s, b2, scale_b);
  return fp4::mma::step(a2, b2, scale_a, scale_b, c);
}

// ---- kernels ------------------------------------------------------------------------------

template <int N, class F>
NVFP4_ALWAYS_INLINE void static_for(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f.template operator()<I>(), ...); }
  (std::make_integer_sequence<int, N>{});
}

/// Tile-unit results of one step for a block of up to 2 x 2: [r][c][g] 16 x 16 fp32 U_g.
struct alignas(64) step_products {
  float u[2][2][4][block_rows * tile_lanes];
};

/// Group g of one step: U_g for R row blocks against C tiles.
template <class Tiles, int R, int C>
NVFP4_ALWAYS_INLINE void multiply_group(const row_block_step* const (&a)[R], const tile_block_step* const (&b)[C], index_t s, int g,
                                        step_products& out) {
  static_for<R>([&]<int r>() { Tiles::template load<r>(a[r][s].values[0] + g * fp4::mma::group_k, sizeof a[r][s].values[0]); });
  static_for<C>([&]<int c>() { Tiles::template load<2 + c>(b[c][s].values[g], sizeof b[c][s].values[g][0]); });
  static_for<R>([&]<int r>() {
    static_for<C>([&]<int c>() {
      constexpr int product = 4 + 2 * r + c;
      Tiles::template zero<product>();
      Tiles::template dot_bf16<product, r, 2 + c>();
      Tiles::template store<product>(out.u[r][c][g], tile_lanes * sizeof(float));
    });
  });
}

/// Relaxed mode: 16 rows of one tile at one step, acc = fma(U_g, s_a/4, acc) per group in order.
/// A zero U_g is +0 (the tile unit adds the products to a +0 tile), so a -0 accumulator turns +0
/// as in the reference.
NVFP4_ALWAYS_INLINE void relaxed_rows(const row_block_step& a, const float (&u)[4][block_rows * tile_lanes], float* out,
                                      index_t out_stride) {
  for (int i = 0; i < block_rows; ++i) {
    __m512 acc = _mm512_loadu_ps(out + i * out_stride);
    for (int g = 0; g < 4; ++g) acc = _mm512_fmadd_ps(_mm512_load_ps(u[g] + i * tile_lanes), _mm512_set1_ps(a.rows[i].quarter[g]), acc);
    _mm512_storeu_ps(out + i * out_stride, acc);
  }
}

/// Exact mode: 16 rows of one tile at one step (see the file comment). `redo(i, lanes, fast, c)`
/// returns the lanes of `lanes` through the scalar step.
template <class Redo>
NVFP4_ALWAYS_INLINE void exact_rows(const row_block_step& a, const tile_block_step& b, const float (&u)[4][block_rows * tile_lanes],
                                    float* out, index_t out_stride, Redo&& redo) {
  constexpr int truncate = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
  const __m512 floor = _mm512_load_ps(b.accumulator_floor), ceiling = _mm512_load_ps(b.accumulator_ceiling);
  for (int i = 0; i < block_rows; ++i) {
    const row_bounds& ra = a.rows[i];
    float* o = out + i * out_stride;
    const __m512 acc = _mm512_loadu_ps(o);
    if (!scales_allow_fast_step(ra, b)) [[unlikely]] {
      _mm512_storeu_ps(o, redo(i, __mmask16{0xFFFF}, acc, acc));
      continue;
    }
    __m512 fast;
    if (terms_add_exactly_in_float(ra, b)) [[likely]] {
      __m512 sum = _mm512_setzero_ps();  // +0, so that an all-zero T is +0 (§6 step 6)
      for (int g = 0; g < 4; ++g) sum = _mm512_fmadd_ps(_mm512_load_ps(u[g] + i * tile_lanes), _mm512_set1_ps(ra.quarter[g]), sum);
      fast = _mm512_add_round_ps(acc, sum, truncate);
    } else {
      __m512d sum0 = _mm512_cvtps_pd(_mm512_castps512_ps256(acc));
      __m512d sum1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)));
      for (int g = 0; g < 4; ++g) {
        const __m512 ug = _mm512_load_ps(u[g] + i * tile_lanes);
        const __m512d quarter = _mm512_set1_pd(static_cast<double>(ra.quarter[g]));
        sum0 = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(ug)), quarter, sum0);
        sum1 = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(ug), 1))), quarter, sum1);
      }
      fast = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvt_roundpd_ps(sum0, truncate)), _mm512_cvt_roundpd_ps(sum1, truncate), 1);
    }
    const __m512 exponent = _mm512_getexp_ps(acc);  // -inf for 0, NaN for NaN, +inf for Inf
    const __mmask16 ok =
        static_cast<__mmask16>((_mm512_cmp_ps_mask(exponent, _mm512_add_ps(_mm512_set1_ps(ra.exponent_max), floor), _CMP_GE_OQ) &
                                _mm512_cmp_ps_mask(exponent, _mm512_add_ps(_mm512_set1_ps(ra.exponent_min), ceiling), _CMP_LE_OQ)) |
                               _mm512_cmp_ps_mask(acc, _mm512_setzero_ps(), _CMP_EQ_OQ));
    _mm512_storeu_ps(o, ok == 0xFFFF ? fast : redo(i, static_cast<__mmask16>(~ok), fast, acc));
  }
}

/// The lanes of `lanes` of row i through exact_step_of_element, the others from `fast`.
template <class FormatA, class FormatB>
[[gnu::noinline, gnu::cold]] __m512 redo_lanes(const quantized_tensor<FormatA>& a, index_t i, const quantized_tensor<FormatB>& b,
                                               index_t j0, index_t s, __mmask16 lanes, __m512 fast, __m512 accumulator) {
  alignas(64) float result[tile_lanes], c[tile_lanes];
  _mm512_store_ps(result, fast);
  _mm512_store_ps(c, accumulator);
  for (int l = 0; l < tile_lanes; ++l)
    if ((lanes >> l) & 1) result[l] = exact_step_of_element(a, i, b, j0 + l, s, c[l]);
  return _mm512_load_ps(result);
}

/// When the tile products of a step are issued: `interleaved`, those of step s + 1 between the
/// vector work of step s (both units busy, the products read a step after they are stored);
/// `phased`, all of step s, then its vector work (each product read right after its store).
enum class schedule { interleaved, phased };

/// An R x C block (R row blocks of A at rows i0.., C tiles of B at columns j0..) over `steps`
/// steps from step s0, into out (rows out_stride floats apart); products[0..1] is scratch.
template <class Tiles, schedule Schedule, bool Exact, int R, int C, class FormatA, class FormatB>
void block(const quantized_tensor<FormatA>& qa, const quantized_tensor<FormatB>& qb, const row_block_step* const (&a)[R],
           const tile_block_step* const (&b)[C], index_t i0, index_t j0, index_t s0, index_t steps, float* out, index_t out_stride,
           step_products* products) {
  constexpr bool ahead = Schedule == schedule::interleaved;
  const auto issue = [&](index_t s, int g) { multiply_group<Tiles, R, C>(a, b, s, g, products[ahead ? s & 1 : 0]); };
  if constexpr (ahead)
    for (int g = 0; g < 4; ++g) issue(0, g);
  for (index_t s = 0; s < steps; ++s) {
    if constexpr (!ahead)
      for (int g = 0; g < 4; ++g) issue(s, g);
    const step_products& u = products[ahead ? s & 1 : 0];
    int issued = 0;
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        float* o = out + r * block_rows * out_stride + c * tile_lanes;
        if constexpr (Exact) {
          exact_rows(a[r][s], b[c][s], u.u[r][c], o, out_stride, [&](int i, __mmask16 lanes, __m512 fast, __m512 acc) {
            return redo_lanes(qa, i0 + r * block_rows + i, qb, j0 + c * tile_lanes, s0 + s, lanes, fast, acc);
          });
        } else {
          relaxed_rows(a[r][s], u.u[r][c], o, out_stride);
        }
        if (ahead && s + 1 < steps) issue(s + 1, issued);
        ++issued;
      }
    for (; issued < 4; ++issued)
      if (ahead && s + 1 < steps) issue(s + 1, issued);
  }
}

/// D = C + A·Bᵀ with the tile unit `Tiles` (simd::amx::hardware_tiles, or an emulation in tests),
/// each output handed to store(i, j, value). `packed` is B packed by pack_tile for all its tiles
/// ([tile][step], whole panels of 8), or null to pack each panel as it is needed. Call only where
/// eligible(a, b, mode).
template <class Tiles, schedule Schedule = schedule::interleaved, class FormatA, class FormatB, class Store>
void block_scaled_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, const tile_block_step* packed,
                      matrix_view<const float> c, const Store& store, gemm_mode mode) {
  const index_t m = a.rows(), n = b.rows();
  const row_blocks rows = make_row_blocks(a);
  const index_t steps = rows.steps;
  const index_t tiles = (n + tile_lanes - 1) / tile_lanes;
  const index_t panels = (tiles + panel_tiles - 1) / panel_tiles;
  const index_t items_per_panel = (m + rows_per_item - 1) / rows_per_item;
  const index_t items = panels * items_per_panel;
  constexpr index_t panel_cols = panel_tiles * tile_lanes;
  // Items go out in contiguous runs, panel after panel, so a thread packs each panel it meets once.
  simd::parallel_ranges(items, simd::worth_parallel(m * n * steps), [&](index_t begin, index_t end) {
    constexpr simd::amx::tile_config config = tile_setup();
    Tiles::configure(config);
    scratch<tile_block_step> own_panel(packed ? 0 : static_cast<std::size_t>(panel_tiles * steps));
    scratch<float> staged(static_cast<std::size_t>(rows_per_item * panel_cols));
    scratch<step_products> products_storage(2);
    step_products* const products = products_storage.data();  // two: one being filled, one being read
    index_t packed_panel = -1;
    for (index_t item = begin; item < end; ++item) {
      const index_t p = item / items_per_panel, i_begin = (item % items_per_panel) * rows_per_item;
      const index_t i_count = std::min(rows_per_item, m - i_begin);
      const int tiles_here = static_cast<int>(std::min<index_t>(panel_tiles, tiles - p * panel_tiles));
      const index_t j0 = p * panel_cols, cols = std::min<index_t>(tiles_here * tile_lanes, n - j0);
      const tile_block_step* panel = packed ? packed + p * panel_tiles * steps : own_panel.data();
      if (!packed && packed_panel != p) {
        for (int t = 0; t < tiles_here; ++t) pack_tile(b, j0 + t * tile_lanes, own_panel.data() + t * steps);
        packed_panel = p;
      }
      for (index_t i = 0; i < rows_per_item; ++i)
        for (index_t j = 0; j < panel_cols; ++j)
          staged[static_cast<std::size_t>(i * panel_cols + j)] = (i < i_count && j < cols && !c.empty()) ? c(i_begin + i, j0 + j) : 0.0f;
      const int blocks_here = static_cast<int>((i_count + block_rows - 1) / block_rows);
      for (index_t s0 = 0; s0 < steps; s0 += steps_per_chunk) {
        const index_t chunk = std::min(steps_per_chunk, steps - s0);
        for (int t0 = 0; t0 < tiles_here; t0 += 2)
          for (int b0 = 0; b0 < blocks_here; b0 += 2) {
            for_block_shape<2, 2>(blocks_here - b0, tiles_here - t0,
                                  [&]<int R, int C>(std::integral_constant<int, R>, std::integral_constant<int, C>) {
                                    const row_block_step* ra[R];
                                    const tile_block_step* tb[C];
                                    for (int r = 0; r < R; ++r) ra[r] = rows.block(i_begin / block_rows + b0 + r) + s0;
                                    for (int t = 0; t < C; ++t) tb[t] = panel + (t0 + t) * steps + s0;
                                    float* out = staged.data() + b0 * block_rows * panel_cols + t0 * tile_lanes;
                                    const index_t i0 = i_begin + b0 * block_rows, jt = j0 + t0 * tile_lanes;
                                    if (mode == gemm_mode::exact)
                                      block<Tiles, Schedule, true, R, C>(a, b, ra, tb, i0, jt, s0, chunk, out, panel_cols, products);
                                    else
                                      block<Tiles, Schedule, false, R, C>(a, b, ra, tb, i0, jt, s0, chunk, out, panel_cols, products);
                                  });
          }
      }
      for (index_t i = 0; i < i_count; ++i)
        for (index_t j = 0; j < cols; ++j) store(i_begin + i, j0 + j, staged[static_cast<std::size_t>(i * panel_cols + j)]);
    }
    Tiles::release();
  });
}

}  // namespace nvfp4::detail::amx

#if NVFP4_AMX_COMPILED
namespace nvfp4::detail {

/// The AMX kernel set, chosen at run time (simd::gemm_isa_for_call): its own layouts and driver,
/// used by gemm/fp4/detail/fast_gemm.hpp where eligible() accepts the operands.
template <>
struct mma_kernels<isa::amx_bf16> {
  static constexpr int block_rows = amx::block_rows, block_tiles = 2;
  template <class FormatA, class FormatB>
  static bool eligible(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, gemm_mode mode) {
    return amx::eligible(a, b, mode);
  }
  template <class Format>
  static void pack_tile(const quantized_tensor<Format>& q, index_t j0, amx::tile_block_step* out) {
    amx::pack_tile(q, j0, out);
  }
  template <class FormatA, class FormatB, class Store>
  static void run(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, const amx::tile_block_step* packed,
                  matrix_view<const float> c, const Store& store, gemm_mode mode) {
    amx::block_scaled_mma<simd::amx::hardware_tiles>(a, b, packed, c, store, mode);
  }
};

}  // namespace nvfp4::detail
#endif  // NVFP4_AMX_COMPILED
NVFP4_END_INTRINSIC_CODE

#endif  // NVFP4_HAS_AVX512_VNNI
