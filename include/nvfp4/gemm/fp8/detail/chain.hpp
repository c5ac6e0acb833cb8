// nvfp4/gemm/fp8/detail/chain.hpp: what one output of the FP8 / MXFP8 GEMMs is, in scalar code,
// shared by the references (gemm/fp8/reference.hpp) and the fast paths' epilogues: the checks of
// the inputs, the split-accumulated chain of tensor-core steps (docs/numerics_spec.md §9 steps
// 7-8), the per-tensor, per-row and per-block epilogues (their orders of roundings measured on an
// H100: docs/numerics.md, "Verified against hardware"), and the rounding to the output type.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/gemm/fp8/mma_model.hpp"
#include "nvfp4/gemm/fp8/options.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/mxfp8_quantize.hpp"
#include "nvfp4/simd/fp32_rounding.hpp"

namespace nvfp4::detail {

inline void check_fp8_gemm(index_t a_rows, index_t a_cols, index_t b_rows, index_t b_cols, const fp8_gemm_options& options,
                           const char* what) {
  require(a_cols == b_cols, errc::shape_mismatch,
          std::string(what) + ": A is " + std::to_string(a_rows) + "x" + std::to_string(a_cols) + " and B is " + std::to_string(b_rows) +
              "x" + std::to_string(b_cols) + ": both must be [rows, K] with the same K (B is [N, K])");
  require(
      options.promotion_interval >= 0 && options.promotion_interval % fp8::mma::step_k == 0, errc::invalid_argument,
      std::string(what) + ": promotion_interval must be 0 or a positive multiple of 32, got " + std::to_string(options.promotion_interval));
  require(options.bias.empty() || static_cast<index_t>(options.bias.size()) == b_rows, errc::shape_mismatch,
          std::string(what) + ": bias has " + std::to_string(options.bias.size()) + " values, expected N = " + std::to_string(b_rows));
}

/// Throws unless `out` is a usable [rows, cols] view.
template <class T>
void check_fp8_output(matrix_view<T> out, index_t rows, index_t cols, const char* what) {
  out.validate(what);
  require(out.rows() == rows && out.cols() == cols, errc::shape_mismatch,
          std::string("fp8 gemm: ") + what + " is " + std::to_string(out.rows()) + "x" + std::to_string(out.cols()) + ", expected " +
              std::to_string(rows) + "x" + std::to_string(cols));
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
    case block_update::a_first:
      return std::fma(p * sa, sb, y);
    case block_update::b_first:
      return std::fma(p * sb, sa, y);
    default:
      return std::fma(p, sa * sb, y);
  }
}

/// Output (i, j) of the raw chain over the codes of a and b (see reference::fp8_mma).
inline float fp8_chain_output(const fp8_tensor& a, const fp8_tensor& b, index_t i, index_t j, float c, const fp8_gemm_options& options) {
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
    const float partial =
        promoted_chain(s0, std::min(steps, s0 + steps_per_block), 0.0f, options.promotion_interval / fp8::mma::step_k, step);
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
                   (a.block_rows() == 1 || a.block_rows() == fp8_block_size) && (b.block_rows() == 1 || b.block_rows() == fp8_block_size));
  require(ok, errc::invalid_argument,
          "fp8_gemm: A and B must both be per-tensor scaled, both scaled per row (blocks of 1 x K, K != 128), or both "
          "block-scaled with 1x128 / 128x128 blocks");
}

}  // namespace nvfp4::detail
