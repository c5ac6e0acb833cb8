// nvfp4/gemm/fp4/simd/mma_avx512.hpp: the AVX-512 VNNI kernels of the block-scaled MMA, register
// blocked over R rows of A and C tiles of 16 columns of B. vpdpbusd gives each 16-element group's
// exact sum for 16 outputs at once. The relaxed kernel fused-multiply-adds it into fp32; the exact
// kernel adds the step's four group terms in fp32 where that is exact (else in double) and rounds
// c + T toward zero, which is the §6 fused sum bit for bit whenever truncation removes nothing
// (checked per lane from the scale exponents and the accumulator's, see exact_block); lanes where
// it might remove something go through the scalar §6 step.
#pragma once

#include "nvfp4/config.hpp"

#if NVFP4_HAS_AVX512_VNNI

#include <cstdint>
#include <cstring>
#include <limits>

#include "nvfp4/gemm/fp4/detail/mma_kernels.hpp"
#include "nvfp4/gemm/fp4/detail/mma_layout.hpp"
#include "nvfp4/gemm/fp4/detail/packing.hpp"
#include "nvfp4/gemm/fp4/mma_model.hpp"
#include "nvfp4/simd/avx512/ops.hpp"
#include "nvfp4/simd/x86_intrinsics.hpp"

NVFP4_BEGIN_INTRINSIC_CODE
namespace nvfp4::detail {

template <>
struct mma_kernels<isa::avx512_vnni> {
  using packers = operand_packers<simd::avx512::ops>;

  /// 4 doubled values of a row at `at`, as the broadcast word of vpdpbusd.
  static __m512i broadcast_quad(const std::int8_t* at) {
    std::int32_t word;
    std::memcpy(&word, at, 4);
    return _mm512_set1_epi32(word);
  }

  /// Register blocks: R rows of A by C tiles of 16 columns of B (8 accumulators and 8 group sums
  /// of the 32 registers).
  static constexpr int block_rows = 4, block_tiles = 2;

  /// Accumulators of an R x C block from/to rows of `out` (out_stride floats apart).
  template <int R, int C>
  static void load_block(const float* out, index_t out_stride, __m512 (&acc)[R][C]) {
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_loadu_ps(out + r * out_stride + c * tile_lanes);
  }
  template <int R, int C>
  static void store_block(const __m512 (&acc)[R][C], float* out, index_t out_stride) {
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) _mm512_storeu_ps(out + r * out_stride + c * tile_lanes, acc[r][c]);
  }

  /// The exact group sums 4·P_g (Σ a2·b2) of group g for R rows against C tiles.
  template <int R, int C>
  static void group_sums(const row_step* const (&ra)[R], const tile_step* const (&tb)[C], int g, __m512i (&p)[R][C]) {
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) p[r][c] = _mm512_set1_epi32(ra[r]->correction[g]);
    for (int q = 0; q < 4; ++q)
      for (int c = 0; c < C; ++c) {
        const __m512i b = _mm512_load_si512(tb[c]->bytes[g * 4 + q]);
        for (int r = 0; r < R; ++r) p[r][c] = _mm512_dpbusd_epi32(p[r][c], b, broadcast_quad(ra[r]->values + g * 16 + q * 4));
      }
  }

  /// Relaxed mode: acc = fma(P_g, s_a·s_b, acc) per group in order, as fp4::mma::relaxed_step. With
  /// `Prescaled`, P_g·(s_a·s_b) is formed as 4P_g·(s_a/4·s_b): the same real product, and the same
  /// fp32 scale product scaled by 1/4, when every s_a·s_b lies in [2^-124, 2^128) (always for
  /// UE4M3; the driver checks E8M0's range).
  template <class ScaleType, int R, int C, bool Prescaled>
  static void relaxed_block(const row_step* const* rows, const tile_step* const* tiles, index_t steps, float* out, index_t out_stride) {
    __m512 acc[R][C];
    load_block(out, out_stride, acc);
    for (index_t s = 0; s < steps; ++s) {
      const row_step* ra[R];
      const tile_step* tb[C];
      for (int r = 0; r < R; ++r) ra[r] = rows[r] + s;
      for (int c = 0; c < C; ++c) tb[c] = tiles[c] + s;
      for (int g = 0; g < 4; ++g) {
        __m512i p[R][C];
        group_sums<R, C>(ra, tb, g, p);
        for (int c = 0; c < C; ++c) {
          const __m512 scale_b = _mm512_load_ps(tb[c]->value[g]);
          for (int r = 0; r < R; ++r) {
            if constexpr (Prescaled) {
              const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(ra[r]->quarter[g]), scale_b);
              acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[r][c]), scale, acc[r][c]);
            } else {
              const __m512 group_sum = _mm512_mul_ps(_mm512_cvtepi32_ps(p[r][c]), _mm512_set1_ps(0.25f));
              const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(row_scale_value<ScaleType>(*ra[r], g)), scale_b);
              acc[r][c] = _mm512_fmadd_ps(group_sum, scale, acc[r][c]);
            }
          }
        }
      }
    }
    store_block(acc, out, out_stride);
  }

  /// The lanes of `redo` through the scalar §6 step.
  template <class ScaleType>
  [[gnu::noinline, gnu::cold]] static __m512 exact_fallback(__m512 fast, __mmask16 redo, const row_step& ra, const tile_step& tb,
                                                            __m512 accumulator) {
    alignas(64) float result[tile_lanes], c[tile_lanes];
    _mm512_store_ps(result, fast);
    _mm512_store_ps(c, accumulator);
    for (int l = 0; l < tile_lanes; ++l)
      if ((redo >> l) & 1) result[l] = step_of_lane<ScaleType, gemm_mode::exact>(ra, tb, l, c[l]);
    return _mm512_load_ps(result);
  }

  /// One step of one row against one tile with the terms added in double (see exact_block); out
  /// of line, so that the fp32 sums, the usual case, keep their registers.
  [[gnu::noinline]] static __m512 exact_step_in_double(const row_step& a, const tile_step& b, __m512 accumulator) {
    constexpr int truncate = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
    const row_step* const ra[1] = {&a};
    const tile_step* const tb[1] = {&b};
    __m512d sum[2] = {_mm512_cvtps_pd(_mm512_castps512_ps256(accumulator)),
                      _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(accumulator), 1)))};
    for (int g = 0; g < 4; ++g) {
      __m512i p[1][1];
      group_sums<1, 1>(ra, tb, g, p);
      const __m512d quarter_a = _mm512_set1_pd(static_cast<double>(a.quarter[g]));
      const __m512d scale_b0 = _mm512_cvtps_pd(_mm256_load_ps(b.value[g])), scale_b1 = _mm512_cvtps_pd(_mm256_load_ps(b.value[g] + 8));
      sum[0] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(p[0][0])), _mm512_mul_pd(quarter_a, scale_b0), sum[0]);
      sum[1] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(p[0][0], 1)), _mm512_mul_pd(quarter_a, scale_b1), sum[1]);
    }
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvt_roundpd_ps(sum[0], truncate)), _mm512_cvt_roundpd_ps(sum[1], truncate), 1);
  }

  /// terms_add_exactly_in_float and scales_allow_fast_step of rows 0..R-1 against each tile at once:
  /// bits 4r..4r+3 of in_float[c] / scales_ok[c] are all set where row r passes against tile c.
  /// Each row's fast_step_key fills four lanes, the tile's four bound fields are added to every
  /// row's, and the sums are compared with the two rules' limits (lane 1 a lower bound, the others
  /// upper ones). Tested per row and tile in scalar code, the two rules took a large share of the
  /// exact kernel's time (docs/benchmarks.md, "Figures behind code choices").
  template <int R, int C>
  static void fast_step_tests(const row_step* const (&ra)[R], const tile_step* const (&tb)[C], __mmask16 (&in_float)[C],
                              __mmask16 (&scales_ok)[C]) {
    static_assert(R >= 1 && R <= 4);
    constexpr float infinity = std::numeric_limits<float>::infinity();
    constexpr __mmask16 upper_bounds = 0xDDDD, lower_bounds = 0x2222;
    __m512 rows = _mm512_zextps128_ps512(_mm_loadu_ps(ra[0]->fast_step_key));
    if constexpr (R > 1) rows = _mm512_insertf32x4(rows, _mm_loadu_ps(ra[1]->fast_step_key), 1);
    if constexpr (R > 2) rows = _mm512_insertf32x4(rows, _mm_loadu_ps(ra[2]->fast_step_key), 2);
    if constexpr (R > 3) rows = _mm512_insertf32x4(rows, _mm_loadu_ps(ra[3]->fast_step_key), 3);
    const __m512 float_limits = _mm512_setr4_ps(max_float_sum_span, min_float_sum_exponent, infinity, infinity);
    const __m512 scale_limits = _mm512_setr4_ps(max_term_span, -126 - max_term_span, 125 - max_term_span, 113);
    for (int c = 0; c < C; ++c) {
      const __m512 sum = _mm512_add_ps(rows, _mm512_broadcast_f32x4(_mm_loadu_ps(&tb[c]->span)));
      in_float[c] = static_cast<__mmask16>((_mm512_cmp_ps_mask(sum, float_limits, _CMP_LE_OQ) & upper_bounds) |
                                           (_mm512_cmp_ps_mask(sum, float_limits, _CMP_GE_OQ) & lower_bounds));
      scales_ok[c] = tb[c]->has_nan ? __mmask16{0}
                                    : static_cast<__mmask16>((_mm512_cmp_ps_mask(sum, scale_limits, _CMP_LE_OQ) & upper_bounds) |
                                                             (_mm512_cmp_ps_mask(sum, scale_limits, _CMP_GE_OQ) & lower_bounds));
    }
  }
  static bool row_passes(__mmask16 tests, int r) { return ((tests >> (4 * r)) & 0xF) == 0xF; }

  /// Exact mode. Where truncation to 2^(E_max - 35) removes nothing, the fused sum is the plain
  /// sum c + Σ 4P_g·(s_a/4)·s_b, rounded toward zero to fp32 (§6 step 6). That holds when the
  /// non-zero terms lie within max_term_span binades of each other and of the accumulator, and the
  /// accumulator (unless zero) no more than max_accumulator_drop below the largest term;
  /// scales_allow_fast_step checks the scale part for the whole tile (fast_step_tests, for the
  /// block's rows at once), the vector test below the accumulator per lane. Exponents of groups
  /// whose products happen to be all zero still count here, which can only make the test
  /// stricter. The four terms are added in fp32 (one fma each, then c + T with one add rounding
  /// toward zero) for the whole block; a row and tile where that is not exact
  /// (terms_add_exactly_in_float; rare) is then redone in double, where every product and partial
  /// sum is exact (each term is a whole multiple of the unit and below 2^(E_max + 15)).
  template <class ScaleType, int R, int C>
  static void exact_block(const row_step* const* rows, const tile_step* const* tiles, index_t steps, float* out, index_t out_stride) {
    __m512 acc[R][C];
    load_block(out, out_stride, acc);
    constexpr int truncate = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
    for (index_t s = 0; s < steps; ++s) {
      const row_step* ra[R];
      const tile_step* tb[C];
      for (int r = 0; r < R; ++r) ra[r] = rows[r] + s;
      for (int c = 0; c < C; ++c) tb[c] = tiles[c] + s;
      __mmask16 in_float[C], scales_ok[C];
      fast_step_tests<R, C>(ra, tb, in_float, scales_ok);
      constexpr __mmask16 block_rows_mask = static_cast<__mmask16>((1u << (4 * R)) - 1);
      __mmask16 every_in_float = block_rows_mask;
      for (int c = 0; c < C; ++c) every_in_float &= in_float[c];
      __m512 fast[R][C];
      {
        __m512 sum[R][C];
        for (int r = 0; r < R; ++r)
          for (int c = 0; c < C; ++c) sum[r][c] = _mm512_setzero_ps();  // +0: an all-zero T stays +0
        for (int g = 0; g < 4; ++g) {
          __m512i p[R][C];
          group_sums<R, C>(ra, tb, g, p);
          for (int c = 0; c < C; ++c) {
            const __m512 scale_b = _mm512_load_ps(tb[c]->value[g]);
            for (int r = 0; r < R; ++r)
              sum[r][c] =
                  _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[r][c]), _mm512_mul_ps(_mm512_set1_ps(ra[r]->quarter[g]), scale_b), sum[r][c]);
          }
        }
        for (int r = 0; r < R; ++r)
          for (int c = 0; c < C; ++c) fast[r][c] = _mm512_add_round_ps(acc[r][c], sum[r][c], truncate);
      }
      if (every_in_float != block_rows_mask) [[unlikely]]
        for (int r = 0; r < R; ++r)
          for (int c = 0; c < C; ++c)
            if (!row_passes(in_float[c], r)) fast[r][c] = exact_step_in_double(*ra[r], *tb[c], acc[r][c]);
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
          __mmask16 ok = 0;
          if (row_passes(scales_ok[c], r)) {
            const __m512 exponent = _mm512_getexp_ps(acc[r][c]);  // -inf for 0, NaN for NaN, +inf for Inf
            const __m512 floor = _mm512_add_ps(_mm512_set1_ps(ra[r]->exponent_max), _mm512_load_ps(tb[c]->accumulator_floor));
            const __m512 ceiling = _mm512_add_ps(_mm512_set1_ps(ra[r]->exponent_min), _mm512_load_ps(tb[c]->accumulator_ceiling));
            ok = static_cast<__mmask16>(
                (_mm512_cmp_ps_mask(exponent, floor, _CMP_GE_OQ) & _mm512_cmp_ps_mask(exponent, ceiling, _CMP_LE_OQ)) |
                _mm512_cmp_ps_mask(acc[r][c], _mm512_setzero_ps(), _CMP_EQ_OQ));
          }
          acc[r][c] =
              ok == 0xFFFF ? fast[r][c] : exact_fallback<ScaleType>(fast[r][c], static_cast<__mmask16>(~ok), *ra[r], *tb[c], acc[r][c]);
        }
    }
    store_block(acc, out, out_stride);
  }
};

}  // namespace nvfp4::detail
NVFP4_END_INTRINSIC_CODE

#endif  // NVFP4_HAS_AVX512_VNNI
