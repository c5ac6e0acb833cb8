// nvfp4/gemm/fp8/gemm.hpp: the FP8 and MXFP8 GEMMs of TransformerEngine's FP8 recipes, built on the
// tensor-core step of gemm/fp8/mma_model.hpp (docs/numerics_spec.md §9): the raw MMA chain (D = C +
// A·Bᵀ over FP8 codes, what MMA-Sim computes), the split accumulator (the tensor core's partial sums
// promoted into an fp32 accumulator every `promotion_interval` elements of K, TE's
// use_split_accumulator), and the epilogues: per-tensor scales (alpha = scale_inv_A * scale_inv_B),
// per-row scales (torch's rowwise _scaled_mm), FP8 block scaling (each 128-element K block's
// partial scaled and fused-multiply-added into fp32 as an H100's cuBLASLt does, or on request as
// TE's Python reference does) and MXFP8 (the E8M0 scales inside the MMA). Each function is
// bit-identical to its reference (gemm/fp8/reference.hpp) for any thread count; the options are in
// gemm/fp8/options.hpp, one output's definition in gemm/fp8/detail/chain.hpp. Relaxed mode runs on
// BF16 tiles where the machine has them (gemm/fp8/detail/tile_path.hpp).
#pragma once

#include <algorithm>
#include <span>
#include <type_traits>

#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/gemm/fp8/detail/chain.hpp"
#include "nvfp4/gemm/fp8/detail/fast_gemm.hpp"
#include "nvfp4/gemm/fp8/detail/tile_path.hpp"
#include "nvfp4/gemm/fp8/options.hpp"
#include "nvfp4/gemm/fp8/reference.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/mxfp8_quantize.hpp"

namespace nvfp4 {

namespace detail {

/// Whether a call tries the BF16 tile path first (gemm/fp8/detail/tile_path.hpp): relaxed mode on a
/// machine that runs the relaxed GEMMs on tiles for this shape. The path itself still checks the
/// operands' values.
inline bool relaxed_tiles_first(const fp8_gemm_options& options, index_t m, index_t n) {
  return options.mode == gemm_mode::relaxed && tiles::relaxed_on_tiles(m, n);
}

inline const fp8_gemm_detail::code_tables& tables_of(fp8_format format) {
  static const fp8_gemm_detail::code_tables e4m3(fp8_format::e4m3), e5m2(fp8_format::e5m2);
  return format == fp8_format::e4m3 ? e4m3 : e5m2;
}
/// t's operand statistics written into `o` (its storage reused; see fp8_gemm_detail::fill_operand).
inline const fp8_gemm_detail::operand_rows& unpack_operand_into(const fp8_tensor& t, fp8_gemm_detail::operand_rows& o) {
  fp8_gemm_detail::fill_operand(o, t.codes().data(), t.cols(), t.rows(), t.cols(), t.format(), tables_of(t.format()),
                                [](index_t, index_t) { return std::uint8_t{127}; });
  return o;
}
template <class Format>
const fp8_gemm_detail::operand_rows& unpack_operand_into(const quantized_tensor<Format>& q, fp8_gemm_detail::operand_rows& o) {
  constexpr fp8_format format = mx_element_format<Format>();
  fp8_gemm_detail::fill_operand(o, mx_codes(q, 0), q.data_row_stride(), q.rows(), q.cols(), format, tables_of(format),
                                [&](index_t r, index_t s) { return s < q.scale_cols() ? q.scale(r, s).bits() : std::uint8_t{127}; });
  return o;
}
/// A fresh operand (for one kept on its own: fp8_packed_weight, the kernel benchmarks).
template <class Tensor>
fp8_gemm_detail::operand_rows unpack_operand(const Tensor& t) {
  fp8_gemm_detail::operand_rows o;
  unpack_operand_into(t, o);
  return o;
}

/// The calling thread's operand storage for the GEMM entry points (A's and B's statistics, about
/// 10 bytes per 32 elements of each), kept from call to call and only grown: a training loop's
/// repeated GEMMs then allocate nothing and touch no fresh memory (at 4096^3 an FP8 step took
/// thousands of page faults here, which serialize when many threads take them at once). One per
/// thread, so concurrent calls from different threads do not share it; an entry point uses it
/// only until it returns, and nothing it calls re-enters an entry point.
struct fp8_operand_workspace {
  fp8_gemm_detail::operand_rows a, b;
};
inline fp8_operand_workspace& operand_workspace() {
  static thread_local fp8_operand_workspace workspace;
  return workspace;
}

/// The fast path of the chained GEMMs: acc from init(i, j0, acc, count), then the
/// split-accumulated chain over all of K, then store(i, j0, acc, count) (row segments, as
/// fp8_gemm_detail::for_each_chunk).
template <class Init, class Store>
void fp8_fast_chain(const fp8_gemm_detail::operand_rows& a, const fp8_gemm_detail::operand_rows& b, fp8::mma::tensor_core core,
                    gemm_mode mode, index_t promotion_interval, Init&& init, Store&& store) {
  const index_t per_promotion = promotion_interval / fp8::mma::step_k;
  fp8_gemm_detail::for_each_chunk(
      a, b, core, mode, per_promotion, init,
      [&](const fp8_gemm_detail::step_block& blk, index_t s0, index_t s1, float* acc, index_t stride) {
        fp8_gemm_detail::promoted_block(blk, s0, s1, per_promotion, acc, stride);
      },
      store);
}

/// The MMAs' fast path: D = C (or 0 without one) + the chain of A·Bᵀ on the `core`.
inline void fp8_mma_chain(const fp8_gemm_detail::operand_rows& a, const fp8_gemm_detail::operand_rows& b, fp8::mma::tensor_core core,
                          const fp8_gemm_options& options, bool has_c, matrix_view<const float> c, matrix_view<float> d) {
  fp8_fast_chain(
      a, b, core, options.mode, options.promotion_interval,
      [&](index_t i, index_t j0, float* acc, index_t count) {
        for (index_t k = 0; k < count; ++k) acc[k] = has_c ? c(i, j0 + k) : 0.0f;
      },
      [&](index_t i, index_t j0, const float* acc, index_t count) {
        for (index_t k = 0; k < count; ++k) d(i, j0 + k) = acc[k];
      });
}

}  // namespace detail

/// D = C + A·Bᵀ over the codes of two FP8 tensors (their scales not applied), bit-identical to
/// reference::fp8_mma for any thread count. `c` may be empty or [M, N] and may alias `d`.
/// Throws shape_mismatch / invalid_argument before writing anything.
inline void fp8_mma(const fp8_tensor& a, const fp8_tensor& b, matrix_view<const float> c, matrix_view<float> d,
                    const fp8_gemm_options& options = {}) {
  detail::check_fp8_gemm(a.rows(), a.cols(), b.rows(), b.cols(), options, "fp8_mma");
  detail::check_fp8_output(d, a.rows(), b.rows(), "D");
  const bool has_c = !c.empty() || c.data() != nullptr;
  if (has_c) detail::check_fp8_output(c, a.rows(), b.rows(), "C");
  if (detail::relaxed_tiles_first(options, a.rows(), b.rows()) && detail::mma_on_tiles<simd::amx::hardware_tiles>(a, b, c, d)) return;
  detail::fp8_operand_workspace& ws = detail::operand_workspace();
  detail::fp8_mma_chain(detail::unpack_operand_into(a, ws.a), detail::unpack_operand_into(b, ws.b), options.core, options, has_c, c, d);
}

/// D = C + A·Bᵀ for MXFP8 operands, bit-identical to reference::mxfp8_mma.
template <mxfp8_format FormatA, mxfp8_format FormatB>
void mxfp8_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<const float> c, matrix_view<float> d,
               const fp8_gemm_options& options = {}) {
  detail::check_fp8_gemm(a.rows(), a.cols(), b.rows(), b.cols(), options, "mxfp8_mma");
  detail::check_fp8_output(d, a.rows(), b.rows(), "D");
  const bool has_c = !c.empty() || c.data() != nullptr;
  if (has_c) detail::check_fp8_output(c, a.rows(), b.rows(), "C");
  if (detail::relaxed_tiles_first(options, a.rows(), b.rows()) && detail::mma_on_tiles<simd::amx::hardware_tiles>(a, b, c, d)) return;
  detail::fp8_operand_workspace& ws = detail::operand_workspace();
  detail::fp8_mma_chain(detail::unpack_operand_into(a, ws.a), detail::unpack_operand_into(b, ws.b), fp8::mma::tensor_core::blackwell,
                        options, has_c, c, d);
}

namespace detail {
/// fp8_gemm once its inputs are checked, on the operands as the kernels read them (ub: b's, or
/// its packed form).
template <class Out>
void fp8_gemm_checked(const fp8_tensor& a, const fp8_gemm_detail::operand_rows& ua, const fp8_tensor& b,
                      const fp8_gemm_detail::operand_rows& ub, matrix_view<Out> out, const fp8_gemm_options& options) {
  const auto store = [&](index_t i, index_t j0, const float* acc, index_t count) {
    store_output_row<false>(out, i, j0, acc, count, 1.0f, options.bias);
  };
  if (a.per_tensor() && b.per_tensor()) {
    const float alpha = a.scale_inv()[0] * b.scale_inv()[0];
    fp8_fast_chain(ua, ub, options.core, options.mode, options.promotion_interval, zero_row,
                   [&](index_t i, index_t j0, const float* acc, index_t count) {
                     store_output_row<true>(out, i, j0, acc, count, alpha, options.bias);
                   });
    return;
  }
  if (row_scaled(a) && row_scaled(b)) {
    const std::span<const float> sa = a.scale_inv(), sb = b.scale_inv();
    fp8_fast_chain(ua, ub, options.core, options.mode, options.promotion_interval, zero_row,
                   [&](index_t i, index_t j0, const float* acc, index_t count) {
                     for (index_t c = 0; c < count; ++c)
                       store_output(out, i, j0 + c,
                                    row_epilogue(acc[c], sa[static_cast<std::size_t>(i)], sb[static_cast<std::size_t>(j0 + c)]),
                                    options.bias);
                   });
    return;
  }
  // Block scaling: each K block's partial enters y through options.block_epilogue's fma.
  using fp8_gemm_detail::lanes;
  const index_t per_promotion = options.promotion_interval / fp8::mma::step_k;
  const index_t steps_per_block = fp8_block_size / fp8::mma::step_k;
  const block_update update = block_update_for(a.block_rows() == 1, b.block_rows() == 1, options.block_epilogue, a.scale_cols());
  fp8_gemm_detail::for_each_chunk(
      ua, ub, options.core, options.mode, steps_per_block, zero_row,
      [&](const fp8_gemm_detail::step_block& blk, index_t s0, index_t s1, float* y, index_t stride) {
        constexpr index_t partial_stride = fp8_gemm_detail::block_tiles * lanes;
        for (index_t k0 = s0; k0 < s1; k0 += steps_per_block) {
          float partial[fp8_gemm_detail::block_rows * partial_stride] = {};
          fp8_gemm_detail::promoted_block(blk, k0, std::min(s1, k0 + steps_per_block), per_promotion, partial, partial_stride);
          const index_t kb = k0 / steps_per_block;
          // K block kb's decode scales: one per row of the block (A), one per lane of each tile
          // (B; 1 for lanes past B's rows, whose outputs are padding and never stored). Looked up
          // once per block, so that the loops below are plain 16-lane loops the compiler vectorizes.
          float sa[fp8_gemm_detail::block_rows], sb[fp8_gemm_detail::block_tiles][lanes];
          for (int r = 0; r < blk.rows; ++r) sa[r] = a.block_scale_inv((blk.i0() + r) / a.block_rows(), kb);
          for (int t = 0; t < blk.tile_count; ++t)
            for (int lane = 0; lane < lanes; ++lane)
              sb[t][lane] = lane < blk.tiles[t]->columns ? b.block_scale_inv((blk.j0[t] + lane) / b.block_rows(), kb) : 1.0f;
          for (int r = 0; r < blk.rows; ++r)
            for (int t = 0; t < blk.tile_count; ++t) {
              const float* const p = partial + r * partial_stride + t * lanes;
              const float* const b_scale = sb[t];
              float* const out = y + r * stride + t * lanes;
              // One loop per order, so that each is a plain 16-lane loop the compiler vectorizes.
              if (update == block_update::a_first) {
                for (int lane = 0; lane < lanes; ++lane) out[lane] = std::fma(p[lane] * sa[r], b_scale[lane], out[lane]);
              } else if (update == block_update::b_first) {
                for (int lane = 0; lane < lanes; ++lane) out[lane] = std::fma(p[lane] * b_scale[lane], sa[r], out[lane]);
              } else {
                for (int lane = 0; lane < lanes; ++lane) out[lane] = std::fma(p[lane], sa[r] * b_scale[lane], out[lane]);
              }
            }
        }
      },
      store);
}

/// mxfp8_gemm once its inputs are checked (ub: B's operand, or its packed form).
template <class Out>
void mxfp8_gemm_checked(const fp8_gemm_detail::operand_rows& ua, const fp8_gemm_detail::operand_rows& ub, matrix_view<Out> out,
                        const fp8_gemm_options& options) {
  fp8_fast_chain(
      ua, ub, fp8::mma::tensor_core::blackwell, options.mode, options.promotion_interval, zero_row,
      [&](index_t i, index_t j0, const float* acc, index_t count) { store_output_row<false>(out, i, j0, acc, count, 1.0f, options.bias); });
}

}  // namespace detail

/// The FP8 GEMM of TE's per-tensor and block-scaled FP8 recipes (see reference::fp8_gemm),
/// bit-identical to the reference for any thread count. Throws shape_mismatch / invalid_argument.
template <class Out>
requires(std::is_same_v<Out, float> || std::is_same_v<Out, bf16>) void fp8_gemm(const fp8_tensor& a, const fp8_tensor& b,
                                                                                matrix_view<Out> out,
                                                                                const fp8_gemm_options& options = {}) {
  detail::check_fp8_gemm(a.rows(), a.cols(), b.rows(), b.cols(), options, "fp8_gemm");
  detail::check_fp8_scaling_pair(a, b);
  detail::check_fp8_output(out, a.rows(), b.rows(), "output");
  if (detail::relaxed_tiles_first(options, a.rows(), b.rows()) && detail::fp8_gemm_on_tiles<simd::amx::hardware_tiles>(a, b, out, options))
    return;
  detail::fp8_operand_workspace& ws = detail::operand_workspace();
  detail::fp8_gemm_checked(a, detail::unpack_operand_into(a, ws.a), b, detail::unpack_operand_into(b, ws.b), out, options);
}

/// The MXFP8 GEMM of TE's MXFP8BlockScaling recipe (see reference::mxfp8_gemm), bit-identical to
/// the reference for any thread count.
template <mxfp8_format FormatA, mxfp8_format FormatB, class Out>
requires(std::is_same_v<Out, float> || std::is_same_v<Out, bf16>) void mxfp8_gemm(const quantized_tensor<FormatA>& a,
                                                                                  const quantized_tensor<FormatB>& b, matrix_view<Out> out,
                                                                                  const fp8_gemm_options& options = {}) {
  detail::check_fp8_gemm(a.rows(), a.cols(), b.rows(), b.cols(), options, "mxfp8_gemm");
  detail::check_fp8_output(out, a.rows(), b.rows(), "output");
  if (detail::relaxed_tiles_first(options, a.rows(), b.rows()) &&
      detail::mxfp8_gemm_on_tiles<simd::amx::hardware_tiles>(a, b, out, options))
    return;
  detail::fp8_operand_workspace& ws = detail::operand_workspace();
  detail::mxfp8_gemm_checked(detail::unpack_operand_into(a, ws.a), detail::unpack_operand_into(b, ws.b), out, options);
}

}  // namespace nvfp4
