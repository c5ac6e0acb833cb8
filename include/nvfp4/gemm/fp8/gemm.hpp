// nvfp4/gemm/fp8/gemm.hpp: the FP8 and MXFP8 GEMMs of TransformerEngine's FP8 recipes, built on the
// tensor-core step of fp8_mma_model.hpp (docs/numerics_spec.md §9): the raw MMA chain (D = C + A·Bᵀ over FP8
// codes, what MMA-Sim computes), the split accumulator (the tensor core's partial sums promoted
// into an fp32 accumulator every `promotion_interval` elements of K, TE's use_split_accumulator),
// and the epilogues: per-tensor scales (alpha = scale_inv_A * scale_inv_B), per-row scales (one
// per row of A and of B, torch's rowwise _scaled_mm), FP8 block scaling (each 128-element K
// block's partial scaled and fused-multiply-added into fp32 as an H100's cuBLASLt does, or on
// request as TE's Python reference does) and MXFP8 (the E8M0 scales inside the MMA). Each
// epilogue's order of roundings was measured on an H100 (docs/numerics.md, "Verified against
// hardware").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/gemm/fp8/detail/fast_gemm.hpp"
#include "nvfp4/gemm/fp8/mma_model.hpp"
#include "nvfp4/gemm/operands.hpp"
#include "nvfp4/simd/fp32_rounding.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/mxfp8_quantize.hpp"

namespace nvfp4 {

/// How a block-scaled FP8 GEMM adds each 128-element K block's partial P into the fp32 output y
/// (docs/numerics.md, "FP8 block scaling: the GPU and TE's reference").
enum class fp8_block_epilogue {
  /// What an H100 computes (cuBLASLt's blockwise scaling, measured bit for bit): y = fma(P,
  /// fl(s_A * s_B), y) when either operand has 128x128 blocks, y = fma(fl(P * s_A), s_B, y) when
  /// both have 1x128 blocks, except for K = 128 (one block): fl(fl(P * s_B) * s_A). The default.
  hardware,
  /// TE's Python reference GEMM (the one TE's block-scaling tests compare against): y = fma(fl(P *
  /// s_1D), s_other, y) with s_1D the scale of the 1x128 operand (A's when both are). Differs from
  /// the GPU for 1x128 x 128x128 and 128x128 x 1x128 unless the scales are powers of two.
  te_reference
};

/// How an FP8 GEMM accumulates (docs/numerics_spec.md §9 steps 7-8).
struct fp8_gemm_options {
  /// Which tensor core's step (Hopper wgmma: 13 bits; Blackwell f8f6f4: 25 bits). Read by the
  /// FP8 GEMMs only: MXFP8 exists on Blackwell alone, so mxfp8_gemm / mxfp8_mma always run
  /// kind::mxf8f6f4's step and ignore it.
  fp8::mma::tensor_core core = fp8::mma::tensor_core::hopper;
  /// exact: the tensor core's step, bit for bit; relaxed: fp32 FMA per element (not bit-exact).
  gemm_mode mode = gemm_mode::exact;
  /// Elements of K after which the tensor core's partial sum is added (one fp32 addition, round to
  /// nearest) into an fp32 accumulator and restarted from zero: TE's split accumulator
  /// (use_split_accumulator = True). 0 keeps the whole K chain inside the tensor core (fast
  /// accumulation, use_split_accumulator = False). A multiple of 32. Which interval cuBLAS uses is
  /// not public; 128 (four K=32 instructions) is DeepSeek-V3's and our default, a documented choice.
  index_t promotion_interval = 128;
  /// Added to every output row (per column, length N) before the output is rounded, as cuBLAS's
  /// bias epilogue does; empty for none.
  std::span<const float> bias = {};
  /// Block-scaled operands only: the GPU's order of roundings or TE's reference's.
  fp8_block_epilogue block_epilogue = fp8_block_epilogue::hardware;
};

namespace detail {

inline void check_fp8_gemm(index_t a_rows, index_t a_cols, index_t b_rows, index_t b_cols, const fp8_gemm_options& options,
                           const char* what) {
  require(a_cols == b_cols, errc::shape_mismatch,
          std::string(what) + ": A is " + std::to_string(a_rows) + "x" + std::to_string(a_cols) + " and B is " +
              std::to_string(b_rows) + "x" + std::to_string(b_cols) + ": both must be [rows, K] with the same K (B is [N, K])");
  require(options.promotion_interval >= 0 && options.promotion_interval % fp8::mma::step_k == 0, errc::invalid_argument,
          std::string(what) + ": promotion_interval must be 0 or a positive multiple of 32, got " +
              std::to_string(options.promotion_interval));
  require(options.bias.empty() || static_cast<index_t>(options.bias.size()) == b_rows, errc::shape_mismatch,
          std::string(what) + ": bias has " + std::to_string(options.bias.size()) + " values, expected N = " + std::to_string(b_rows));
}

/// Throws unless `out` is a usable [rows, cols] view.
template <class T>
void check_fp8_output(matrix_view<T> out, index_t rows, index_t cols, const char* what) {
  out.validate(what);
  require(out.rows() == rows && out.cols() == cols, errc::shape_mismatch,
          std::string("fp8 gemm: ") + what + " is " + std::to_string(out.rows()) + "x" + std::to_string(out.cols()) +
              ", expected " + std::to_string(rows) + "x" + std::to_string(cols));
}

/// The 32 codes of row r, step s of a [rows, K] row-major code matrix, zero past K.
inline const std::uint8_t* step_codes(const std::uint8_t* row, index_t k, index_t s, std::uint8_t* pad) {
  const index_t k0 = s * fp8::mma::step_k;
  if (k0 + fp8::mma::step_k <= k) return row + k0;
  std::memset(pad, 0, fp8::mma::step_k);
  if (k0 < k) std::memcpy(pad, row + k0, static_cast<std::size_t>(k - k0));
  return pad;
}

/// The tensor-core chain over steps [s0, s1) with split accumulation: acc = c; every
/// `steps_per_promotion` steps (0: never) the chain restarts from 0 and its result is added to
/// acc in fp32. `step(s, c)` computes one step.
template <class Step>
float promoted_chain(index_t s0, index_t s1, float c, index_t steps_per_promotion, Step&& step) {
  if (steps_per_promotion == 0) {
    float acc = c;
    for (index_t s = s0; s < s1; ++s) acc = step(s, acc);
    return acc;
  }
  float acc = c;
  for (index_t p0 = s0; p0 < s1; p0 += steps_per_promotion) {
    float partial = 0.0f;
    for (index_t s = p0; s < std::min(s1, p0 + steps_per_promotion); ++s) partial = step(s, partial);
    acc += partial;
  }
  return acc;
}

/// out(i, j) from the fp32 value: + bias, then rounded to Out.
template <class Out>
void store_output(matrix_view<Out> out, index_t i, index_t j, float value, std::span<const float> bias) {
  // The epilogue's product (alpha * acc) is rounded before the bias is added, as cuBLAS's is.
  if (!bias.empty()) value = simd::materialize(value) + bias[static_cast<std::size_t>(j)];
  if constexpr (std::is_same_v<Out, float>) {
    out(i, j) = value;
  } else {
    out(i, j) = bf16::from_float(value);
  }
}

/// store_output for out(i, j0 + c), c < count, of values[c] (times alpha where Scaled, the
/// product rounded on its own before the bias, as store_output does).
template <bool Scaled, class Out>
void store_output_row(matrix_view<Out> out, index_t i, index_t j0, const float* values, index_t count, float alpha,
                      std::span<const float> bias) {
  for (index_t c = 0; c < count; ++c) store_output(out, i, j0 + c, Scaled ? alpha * values[c] : values[c], bias);
}
/// The fast chain's init for no C: zeros.
inline void zero_row(index_t, index_t, float* acc, index_t count) { std::fill(acc, acc + count, 0.0f); }

/// The E8M0 scale of row r for step s (MX tensors have one per 32 = one per step).
template <class Format>
e8m0 step_scale(const quantized_tensor<Format>& q, index_t r, index_t s) {
  return s < q.scale_cols() ? q.scale(r, s) : e8m0::from_bits(127);
}

template <class Format>
const std::uint8_t* mx_codes(const quantized_tensor<Format>& q, index_t r) {
  return reinterpret_cast<const std::uint8_t*>(q.data().data() + r * q.data_row_stride());
}

template <class Format>
constexpr fp8_format mx_element_format() {
  return std::is_same_v<typename Format::element_type, e4m3> ? fp8_format::e4m3 : fp8_format::e5m2;
}

/// Whether t has one decode scale per row (a block of 1 x K, K != 128: a 1 x 128 block is FP8
/// block scaling's, whatever K is), as torch's rowwise _scaled_mm takes them ([M, 1] and [1, N]).
inline bool row_scaled(const fp8_tensor& t) {
  return !t.per_tensor() && t.block_rows() == 1 && t.block_cols() != fp8_block_size && t.block_cols() >= t.cols();
}

/// The per-row epilogue as an H100 computes it (measured): the column's scale (B's row) first,
/// then the row's, each product rounded: fl(fl(S * s_B[j]) * s_A[i]).
inline float row_epilogue(float s, float scale_a, float scale_b) {
  const float column_scaled = simd::materialize(s * scale_b);
  return column_scaled * scale_a;
}

/// How a K block's partial enters y (see fp8_block_epilogue): fma(P, fl(s_A * s_B), y), fma(fl(P
/// * s_A), s_B, y) or fma(fl(P * s_B), s_A, y).
enum class block_update { combined, a_first, b_first };

/// `k_blocks`: how many K blocks of 128 the GEMM has. The H100 applies B's scale first in a
/// 1x128 x 1x128 GEMM of a single K block (measured on 14 shapes: K = 128 always B's first, K >=
/// 256 always A's).
inline block_update block_update_for(bool a_1x128, bool b_1x128, fp8_block_epilogue epilogue, index_t k_blocks) {
  if (epilogue == fp8_block_epilogue::hardware) {
    if (!(a_1x128 && b_1x128)) return block_update::combined;
    return k_blocks <= 1 ? block_update::b_first : block_update::a_first;
  }
  if (a_1x128) return block_update::a_first;  // TE's reference: the 1x128 operand's scale first
  return b_1x128 ? block_update::b_first : block_update::combined;
}

NVFP4_ALWAYS_INLINE float apply_block(block_update update, float p, float sa, float sb, float y) {
  switch (update) {
    case block_update::a_first: return std::fma(p * sa, sb, y);
    case block_update::b_first: return std::fma(p * sb, sa, y);
    default: return std::fma(p, sa * sb, y);
  }
}

/// Output (i, j) of the raw chain over the codes of a and b (see reference::fp8_mma).
inline float fp8_chain_output(const fp8_tensor& a, const fp8_tensor& b, index_t i, index_t j, float c,
                              const fp8_gemm_options& options) {
  const index_t k = a.cols(), steps = (k + fp8::mma::step_k - 1) / fp8::mma::step_k;
  std::uint8_t pad_a[fp8::mma::step_k], pad_b[fp8::mma::step_k];
  const std::uint8_t* a_row = a.codes().data() + i * k;
  const std::uint8_t* b_row = b.codes().data() + j * k;
  return promoted_chain(0, steps, c, options.promotion_interval / fp8::mma::step_k, [&](index_t s, float acc) {
    const std::uint8_t* as = step_codes(a_row, k, s, pad_a);
    const std::uint8_t* bs = step_codes(b_row, k, s, pad_b);
    return options.mode == gemm_mode::exact ? fp8::mma::step(as, a.format(), bs, b.format(), acc, options.core)
                                            : fp8::mma::relaxed_step(as, a.format(), bs, b.format(), acc);
  });
}

/// Output (i, j) of the MXFP8 chain (see reference::mxfp8_mma).
template <class FormatA, class FormatB>
float mxfp8_chain_output(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, index_t i, index_t j, float c,
                         const fp8_gemm_options& options) {
  const index_t k = a.cols(), steps = (k + fp8::mma::step_k - 1) / fp8::mma::step_k;
  constexpr fp8_format fa = mx_element_format<FormatA>(), fb = mx_element_format<FormatB>();
  std::uint8_t pad_a[fp8::mma::step_k], pad_b[fp8::mma::step_k];
  const std::uint8_t* a_row = mx_codes(a, i);
  const std::uint8_t* b_row = mx_codes(b, j);
  return promoted_chain(0, steps, c, options.promotion_interval / fp8::mma::step_k, [&](index_t s, float acc) {
    const std::uint8_t* as = step_codes(a_row, k, s, pad_a);
    const std::uint8_t* bs = step_codes(b_row, k, s, pad_b);
    const e8m0 sa = step_scale(a, i, s), sb = step_scale(b, j, s);
    return options.mode == gemm_mode::exact ? fp8::mma::step(as, fa, bs, fb, acc, fp8::mma::tensor_core::blackwell, sa, sb)
                                            : fp8::mma::relaxed_step(as, fa, bs, fb, acc, sa, sb);
  });
}

/// Output (i, j) of fp8_gemm before bias and rounding (see reference::fp8_gemm).
inline float fp8_gemm_output(const fp8_tensor& a, const fp8_tensor& b, index_t i, index_t j, const fp8_gemm_options& options) {
  if (a.per_tensor() && b.per_tensor()) {
    const float alpha = a.scale_inv()[0] * b.scale_inv()[0];
    return alpha * fp8_chain_output(a, b, i, j, 0.0f, options);
  }
  if (row_scaled(a) && row_scaled(b)) return row_epilogue(fp8_chain_output(a, b, i, j, 0.0f, options), a.scale_inv()[i], b.scale_inv()[j]);
  const index_t k = a.cols(), steps = (k + fp8::mma::step_k - 1) / fp8::mma::step_k;
  const index_t steps_per_block = fp8_block_size / fp8::mma::step_k;
  const block_update update = block_update_for(a.block_rows() == 1, b.block_rows() == 1, options.block_epilogue, a.scale_cols());
  std::uint8_t pad_a[fp8::mma::step_k], pad_b[fp8::mma::step_k];
  const std::uint8_t* a_row = a.codes().data() + i * k;
  const std::uint8_t* b_row = b.codes().data() + j * k;
  const auto step = [&](index_t s, float acc) {
    const std::uint8_t* as = step_codes(a_row, k, s, pad_a);
    const std::uint8_t* bs = step_codes(b_row, k, s, pad_b);
    return options.mode == gemm_mode::exact ? fp8::mma::step(as, a.format(), bs, b.format(), acc, options.core)
                                            : fp8::mma::relaxed_step(as, a.format(), bs, b.format(), acc);
  };
  float y = 0.0f;
  for (index_t s0 = 0; s0 < steps; s0 += steps_per_block) {
    const float partial = promoted_chain(s0, std::min(steps, s0 + steps_per_block), 0.0f,
                                         options.promotion_interval / fp8::mma::step_k, step);
    const index_t kb = s0 / steps_per_block;
    y = apply_block(update, partial, a.block_scale_inv(i / a.block_rows(), kb), b.block_scale_inv(j / b.block_rows(), kb), y);
  }
  return y;
}

/// Throws unless a and b are FP8 tensors whose scales the epilogue can apply: both per-tensor, or
/// both block-scaled with 128 columns per block (K blocks aligned).
inline void check_fp8_scaling_pair(const fp8_tensor& a, const fp8_tensor& b) {
  const bool ok = (a.per_tensor() && b.per_tensor()) || (row_scaled(a) && row_scaled(b)) ||
                  (!a.per_tensor() && !b.per_tensor() && a.block_cols() == fp8_block_size && b.block_cols() == fp8_block_size &&
                   (a.block_rows() == 1 || a.block_rows() == fp8_block_size) &&
                   (b.block_rows() == 1 || b.block_rows() == fp8_block_size));
  require(ok, errc::invalid_argument,
          "fp8_gemm: A and B must both be per-tensor scaled, both scaled per row (blocks of 1 x K, K != 128), or both "
          "block-scaled with 1x128 / 128x128 blocks");
}

}  // namespace detail

namespace reference {

/// D = C + A·Bᵀ over the FP8 codes of a [M, K] and b [N, K] (their scales are not applied), K
/// stepped by 32 in order and zero-padded, with the split accumulator of `options` (0: the plain
/// chain MMA-Sim models, D fed back as the next step's c). `c` may be empty (zero) or [M, N].
inline void fp8_mma(const fp8_tensor& a, const fp8_tensor& b, matrix_view<const float> c, matrix_view<float> d,
                    const fp8_gemm_options& options = {}) {
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < b.rows(); ++j) d(i, j) = nvfp4::detail::fp8_chain_output(a, b, i, j, c.empty() ? 0.0f : c(i, j), options);
}

/// D = C + A·Bᵀ for MXFP8 operands (kind::mxf8f6f4, one E8M0 scale per 32 inside each step, the
/// Blackwell step whatever options.core says), K in steps of 32, with the split accumulator of
/// `options` (0: MMA-Sim's plain chain).
template <mxfp8_format FormatA, mxfp8_format FormatB>
void mxfp8_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<const float> c,
               matrix_view<float> d, const fp8_gemm_options& options = {}) {
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < b.rows(); ++j) d(i, j) = nvfp4::detail::mxfp8_chain_output(a, b, i, j, c.empty() ? 0.0f : c(i, j), options);
}

/// out = epilogue(A·Bᵀ) for FP8 tensors of TE's FP8 recipes:
/// - both per-tensor (current / delayed scaling): acc = the split-accumulated chain from zero, then
///   out = (scale_inv_A * scale_inv_B) * acc (one fp32 product each: a documented choice, cuBLAS's
///   epilogue order is not public);
/// - per-row (one scale per row of A and of B, blocks of 1 x K with K != 128): out = fl(fl(acc *
///   s_B[j]) * s_A[i]), as an H100's cuBLASLt computes torch's rowwise scaling;
/// - block-scaled (Float8BlockScaling, blocks of 128 along K): for each K block, its partial P (the
///   chain over its 128 elements, promoted as options say) enters an fp32 accumulator y from 0 by
///   options.block_epilogue: on the GPU (default) y = fma(P, fl(s_A * s_B), y) when either
///   operand has 128x128 blocks and y = fma(fl(P * s_A), s_B, y) for 1x128 x 1x128 (B's scale
///   first when K is a single block); TE's reference
///   puts the 1x128 operand's scale first in every pair.
/// Then + bias, rounded to Out (float, or bf16 nearest-even).
template <class Out>
void fp8_gemm(const fp8_tensor& a, const fp8_tensor& b, matrix_view<Out> out, const fp8_gemm_options& options = {}) {
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < b.rows(); ++j)
      nvfp4::detail::store_output(out, i, j, nvfp4::detail::fp8_gemm_output(a, b, i, j, options), options.bias);
}

/// out = A·Bᵀ for MXFP8 operands (the kind::mxf8f6f4 chain from zero, scales inside the MMA,
/// split accumulation as options say), then + bias, rounded to Out.
template <mxfp8_format FormatA, mxfp8_format FormatB, class Out>
void mxfp8_gemm(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<Out> out,
                const fp8_gemm_options& options = {}) {
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < b.rows(); ++j)
      nvfp4::detail::store_output(out, i, j, nvfp4::detail::mxfp8_chain_output(a, b, i, j, 0.0f, options), options.bias);
}

}  // namespace reference

namespace detail {

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
  detail::fp8_operand_workspace& ws = detail::operand_workspace();
  detail::fp8_mma_chain(detail::unpack_operand_into(a, ws.a), detail::unpack_operand_into(b, ws.b), options.core, options, has_c, c, d);
}

/// D = C + A·Bᵀ for MXFP8 operands, bit-identical to reference::mxfp8_mma.
template <mxfp8_format FormatA, mxfp8_format FormatB>
void mxfp8_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<const float> c,
               matrix_view<float> d, const fp8_gemm_options& options = {}) {
  detail::check_fp8_gemm(a.rows(), a.cols(), b.rows(), b.cols(), options, "mxfp8_mma");
  detail::check_fp8_output(d, a.rows(), b.rows(), "D");
  const bool has_c = !c.empty() || c.data() != nullptr;
  if (has_c) detail::check_fp8_output(c, a.rows(), b.rows(), "C");
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
                       store_output(out, i, j0 + c, row_epilogue(acc[c], sa[static_cast<std::size_t>(i)], sb[static_cast<std::size_t>(j0 + c)]),
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
  fp8_fast_chain(ua, ub, fp8::mma::tensor_core::blackwell, options.mode, options.promotion_interval, zero_row,
                 [&](index_t i, index_t j0, const float* acc, index_t count) {
                   store_output_row<false>(out, i, j0, acc, count, 1.0f, options.bias);
                 });
}

}  // namespace detail

/// The FP8 GEMM of TE's per-tensor and block-scaled FP8 recipes (see reference::fp8_gemm),
/// bit-identical to the reference for any thread count. Throws shape_mismatch / invalid_argument.
template <class Out>
  requires(std::is_same_v<Out, float> || std::is_same_v<Out, bf16>)
void fp8_gemm(const fp8_tensor& a, const fp8_tensor& b, matrix_view<Out> out, const fp8_gemm_options& options = {}) {
  detail::check_fp8_gemm(a.rows(), a.cols(), b.rows(), b.cols(), options, "fp8_gemm");
  detail::check_fp8_scaling_pair(a, b);
  detail::check_fp8_output(out, a.rows(), b.rows(), "output");
  detail::fp8_operand_workspace& ws = detail::operand_workspace();
  detail::fp8_gemm_checked(a, detail::unpack_operand_into(a, ws.a), b, detail::unpack_operand_into(b, ws.b), out, options);
}

/// The MXFP8 GEMM of TE's MXFP8BlockScaling recipe (see reference::mxfp8_gemm), bit-identical to
/// the reference for any thread count.
template <mxfp8_format FormatA, mxfp8_format FormatB, class Out>
  requires(std::is_same_v<Out, float> || std::is_same_v<Out, bf16>)
void mxfp8_gemm(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<Out> out,
                const fp8_gemm_options& options = {}) {
  detail::check_fp8_gemm(a.rows(), a.cols(), b.rows(), b.cols(), options, "mxfp8_gemm");
  detail::check_fp8_output(out, a.rows(), b.rows(), "output");
  detail::fp8_operand_workspace& ws = detail::operand_workspace();
  detail::mxfp8_gemm_checked(detail::unpack_operand_into(a, ws.a), detail::unpack_operand_into(b, ws.b), out, options);
}

}  // namespace nvfp4
