// nvfp4/gemm/gemm.hpp: the public block-scaled FP4 GEMM. block_scaled_mma is what the tensor core
// computes (D = C + A·Bᵀ in the scaled domain); gemm adds TransformerEngine's epilogue (alpha from
// the two tensor amaxes, optional beta·C, fp32 or bf16 output). Both run the fast path of this
// build, bit-identical to nvfp4::reference::block_scaled_mma for any thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/gemm/detail/fast_gemm.hpp"
#include "nvfp4/gemm/operands.hpp"
#include "nvfp4/gemm/reference.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4 {

namespace detail {
inline std::string shape_text(index_t rows, index_t cols) { return std::to_string(rows) + "x" + std::to_string(cols); }

/// Throws errc::overflow / invalid_argument unless alpha (from the operands' amaxes) is usable.
template <class FormatA, class FormatB>
void check_alpha(float alpha, const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b) {
  if (std::isfinite(alpha)) return;
  const auto text = [](float v) { return number_text(v); };
  const bool amaxes_ok = std::isfinite(a.amax()) && a.amax() >= 0 && std::isfinite(b.amax()) && b.amax() >= 0;
  throw error(amaxes_ok ? errc::overflow : errc::invalid_argument,
              "gemm: alpha = amax_A (" + text(a.amax()) + ") * amax_B (" + text(b.amax()) + ") * 1/(6*6*448*448) is " +
                  text(alpha) + (amaxes_ok ? ": the amaxes' product (computed first, as TE does) overflows float; scale A or B down"
                                           : ": an operand's amax is not a finite number >= 0"));
}

template <class T>
void check_output(matrix_view<T> out, index_t rows, index_t cols, const char* what) {
  out.validate(what);
  require(out.rows() == rows && out.cols() == cols, errc::shape_mismatch,
          std::string("gemm: ") + what + " is " + shape_text(out.rows(), out.cols()) + ", expected " +
              shape_text(rows, cols));
}
}  // namespace detail

/// D = C + A·Bᵀ exactly as a Blackwell tensor core computes it (mode exact, §6) or with plain
/// fp32 accumulation (mode relaxed). A is [M, K], B is [N, K], both blocked along K; K is
/// zero-padded to a multiple of 64. `c` is the initial accumulator ([M, N]) or an empty view for
/// zero; it may alias `d`. No tensor scale is applied (see gemm()).
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
  requires fp4_gemm_pair<FormatA, FormatB>
void block_scaled_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b,
                      matrix_view<const float> c, matrix_view<float> d, gemm_mode mode = gemm_mode::exact) {
  detail::check_gemm_operands(a, b);
  detail::check_output(d, a.rows(), b.rows(), "D");
  if (!c.empty() || c.data() != nullptr) detail::check_output(c, a.rows(), b.rows(), "C");
  detail::block_scaled_mma_fast(a, b, nullptr, c, detail::store_to_matrix{d}, mode);
}

/// TransformerEngine's alpha for NVFP4 operands: amax_A * amax_B * (1 / (6*6*448*448)) in fp32
/// (§6.9), the product of both tensors' decode scales up to rounding; 1 for MXFP4.
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
float gemm_alpha(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b) {
  if constexpr (FormatA::has_tensor_scale) {
    constexpr float inverse_range = 1.0f / (6.0f * 6.0f * 448.0f * 448.0f);
    return a.amax() * b.amax() * inverse_range;
  } else {
    return 1.0f;
  }
}

/// Options of gemm().
struct gemm_options {
  gemm_mode mode = gemm_mode::exact;
  /// Multiply the MMA result by gemm_alpha(a, b). Off: the scaled-domain result.
  bool apply_alpha = true;
  /// Weight of the epilogue's C (used only when a C is given).
  float beta = 1.0f;
};

namespace detail {
/// gemm()'s work once the operands and outputs are checked (`packed`: B packed by detail::pack_b,
/// or null). With alpha <= 1, |alpha·d| <= |d| cannot overflow, so each output goes through the
/// epilogue as it is finished (no [M, N] intermediate); otherwise D is computed first, so that an
/// overflow is reported before anything is written.
template <class FormatA, class FormatB, class Out>
void gemm_checked(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, const packed_b* packed,
                  matrix_view<Out> out, const gemm_options& options, matrix_view<const float> c) {
  const bool has_c = !c.empty() || c.data() != nullptr;
  const float alpha = options.apply_alpha ? gemm_alpha(a, b) : 1.0f;
  detail::check_alpha(alpha, a, b);
  if (a.rows() == 0 || b.rows() == 0) return;  // nothing to write; the other dimension may be huge
  const auto epilogue = [&](index_t i, index_t j, float d) {
    float value = alpha * d;
    if (has_c) value = std::fma(options.beta, c(i, j), value);
    if constexpr (std::is_same_v<Out, float>) {
      out(i, j) = value;
    } else {
      out(i, j) = bf16::from_float(value);
    }
  };
  if (alpha <= 1.0f) {
    block_scaled_mma_fast(a, b, packed, matrix_view<const float>{}, epilogue, options.mode);
    return;
  }
  std::vector<float> d(static_cast<std::size_t>(a.rows() * b.rows()));
  const auto d_view = matrix_view<float>::row_major(d.data(), a.rows(), b.rows());
  block_scaled_mma_fast(a, b, packed, matrix_view<const float>{}, store_to_matrix{d_view}, options.mode);
  // alpha * d can overflow only when alpha > 1; the first such element (row-major) is named.
  const bool parallel = simd::worth_parallel(a.rows() * b.rows());
  const index_t first = simd::parallel_reduce(
      a.rows(), parallel, a.rows() * b.rows(),
      [&](index_t begin, index_t end) {
        for (index_t i = begin; i < end; ++i)
          for (index_t j = 0; j < b.rows(); ++j)
            if (std::isfinite(d_view(i, j)) && !std::isfinite(alpha * d_view(i, j))) return i * b.rows() + j;
        return a.rows() * b.rows();
      },
      [](index_t x, index_t y) { return std::min(x, y); });
  if (first < a.rows() * b.rows())
    throw error(errc::overflow, "gemm: alpha (" + detail::number_text(alpha) + ") times the scaled-domain result at (" +
                                    std::to_string(first / b.rows()) + ", " + std::to_string(first % b.rows()) +
                                    ") overflows float: the product of A and B does not fit; scale A or B down");
  simd::parallel_ranges(a.rows(), parallel, [&](index_t begin, index_t end) {
    for (index_t i = begin; i < end; ++i)
      for (index_t j = 0; j < b.rows(); ++j) epilogue(i, j, d_view(i, j));
  });
}
}  // namespace detail

/// out = alpha * (A·Bᵀ) + beta * C, the GEMM of TE's NVFP4 recipe: the MMA chain from a zero
/// accumulator, then per element `alpha * d`, then `fma(beta, c, that)` when C is given, then
/// rounding to Out (float, or bf16 with round-to-nearest-even). Throws errc::overflow, before
/// writing `out`, when alpha is not finite (the amaxes' product overflows) or alpha * d overflows
/// for some element (named); invalid_argument for an amax that is NaN, Inf or negative. `out` is
/// the caller's; with alpha <= 1 (NVFP4 data within its range, MXFP4) nothing of size [M, N] is
/// allocated. `c` may alias a float `out` element for element.
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB, class Out>
  requires fp4_gemm_pair<FormatA, FormatB> && (std::is_same_v<Out, float> || std::is_same_v<Out, bf16>)
void gemm(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<Out> out,
          const gemm_options& options = {}, matrix_view<const float> c = {}) {
  detail::check_gemm_operands(a, b);
  detail::check_output(out, a.rows(), b.rows(), "output");
  if (!c.empty() || c.data() != nullptr) detail::check_output(c, a.rows(), b.rows(), "C");
  detail::gemm_checked(a, b, nullptr, out, options, c);
}

/// gemm() into a new row-major [M, N] float buffer.
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
  requires fp4_gemm_pair<FormatA, FormatB>
std::vector<float> gemm(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b,
                        const gemm_options& options = {}) {
  detail::checked_element_count(a.rows(), b.rows(), errc::invalid_argument, "gemm output [M, N]");
  std::vector<float> out(static_cast<std::size_t>(a.rows() * b.rows()));
  gemm(a, b, matrix_view<float>::row_major(out.data(), a.rows(), b.rows()), options);
  return out;
}

}  // namespace nvfp4
