// nvfp4/gemm/fp4/gemm.hpp: the public block-scaled FP4 GEMM. block_scaled_mma is what the tensor core
// computes (D = C + A·Bᵀ in the scaled domain); gemm adds TransformerEngine's epilogue (alpha from
// the two tensor amaxes, optional beta·C, fp32 or bf16 output). Both run the fast path of this
// build, bit-identical to nvfp4::reference::block_scaled_mma for any thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/gemm/fp4/detail/fast_gemm.hpp"
#include "nvfp4/gemm/fp4/reference.hpp"
#include "nvfp4/gemm/operands.hpp"
#include "nvfp4/simd/fp32_rounding.hpp"
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
              "gemm: alpha = amax_A (" + text(a.amax()) + ") * amax_B (" + text(b.amax()) + ") * 1/(6*6*448*448) is " + text(alpha) +
                  (amaxes_ok ? ": the amaxes' product (computed first, as TE does) overflows float; scale A or B down"
                             : ": an operand's amax is not a finite number >= 0"));
}

template <class T>
void check_output(matrix_view<T> out, index_t rows, index_t cols, const char* what) {
  out.validate(what);
  require(out.rows() == rows && out.cols() == cols, errc::shape_mismatch,
          std::string("gemm: ") + what + " is " + shape_text(out.rows(), out.cols()) + ", expected " + shape_text(rows, cols));
}
}  // namespace detail

/// D = C + A·Bᵀ exactly as a Blackwell tensor core computes it (mode exact, §6) or with plain
/// fp32 accumulation (mode relaxed). A is [M, K], B is [N, K], both blocked along K; K is
/// zero-padded to a multiple of 64. `c` is the initial accumulator ([M, N]) or an empty view for
/// zero; it may alias `d`. No tensor scale is applied (see gemm()).
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
requires fp4_gemm_pair<FormatA, FormatB>
void block_scaled_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, matrix_view<const float> c,
                      matrix_view<float> d, gemm_mode mode = gemm_mode::exact) {
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
/// The FP4 GEMM's epilogue, one output at a time, as TransformerEngine computes it after the MMA:
/// alpha * d rounded; with a row-scaled operand (TE's gemm.py) times r_i * c_j (one side row
/// scaled, the product of the two factors rounded first) or times r_i then c_j (both); then
/// fma(beta, C, ·) when a C is given, then + bias[j]. gemm() and nvfp4_gemm() both end this way;
/// the caller rounds the result to its output type (store_epilogue_output).
struct fp4_epilogue {
  float alpha = 1.0f;
  /// TE's row-scaled NVFP4: the factors of output row i (A's row amaxes, else a_factor) and column
  /// j (B's row amaxes, else b_factor). Off: per-tensor operands.
  bool row_scaled = false;
  std::span<const float> a_rows, b_rows;
  float a_factor = 1.0f, b_factor = 1.0f;
  /// C, when given (data() not null), weighted by beta. May alias the output element for element.
  matrix_view<const float> c;
  float beta = 1.0f;
  /// One value per output column, or empty.
  std::span<const float> bias;

  bool has_c() const { return !c.empty() || c.data() != nullptr; }
  float operator()(index_t i, index_t j, float d) const {
    float value = simd::materialize(alpha * d);
    if (row_scaled) {
      const bool a_per_row = !a_rows.empty(), b_per_row = !b_rows.empty();
      const float r = a_per_row ? a_rows[static_cast<std::size_t>(i)] : a_factor;
      const float col = b_per_row ? b_rows[static_cast<std::size_t>(j)] : b_factor;
      value = (a_per_row && b_per_row) ? simd::materialize(simd::materialize(value * r) * col)
                                       : simd::materialize(value * simd::materialize(r * col));
    }
    if (has_c()) value = std::fma(beta, c(i, j), value);
    if (!bias.empty()) value = simd::materialize(value + bias[static_cast<std::size_t>(j)]);
    return value;
  }
};

/// An epilogue's value into out(i, j): float as it is, bf16 rounded to nearest even.
template <class Out>
NVFP4_ALWAYS_INLINE void store_epilogue_output(matrix_view<Out> out, index_t i, index_t j, float value) {
  if constexpr (std::is_same_v<Out, float>) {
    out(i, j) = value;
  } else {
    out(i, j) = bf16::from_float(value);
  }
}

/// The FP4 GEMM once its operands and outputs are checked: out = epilogue(A·Bᵀ) (`packed`: B
/// packed by detail::pack_b, or null). Each output goes through the epilogue as it is finished
/// (no [M, N] intermediate), except where `refuse_overflow` asks gemm()'s guarantee and alpha > 1
/// (then |alpha·d| may overflow where |d| does not): D is computed first and the first alpha·d that
/// overflows (row-major) is reported before anything is written.
template <class FormatA, class FormatB, class Out>
void fp4_gemm_checked(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, const packed_b* packed, matrix_view<Out> out,
                      const fp4_epilogue& epilogue, gemm_mode mode, bool refuse_overflow) {
  if (a.rows() == 0 || b.rows() == 0) return;  // nothing to write; the other dimension may be huge
  const float alpha = epilogue.alpha;
  if (!refuse_overflow || alpha <= 1.0f) {
    block_scaled_mma_fast(
        a, b, packed, matrix_view<const float>{},
        [&](index_t i, index_t j, float d) { store_epilogue_output(out, i, j, epilogue(i, j, d)); }, mode);
    return;
  }
  std::vector<float> d(static_cast<std::size_t>(a.rows() * b.rows()));
  const auto d_view = matrix_view<float>::row_major(d.data(), a.rows(), b.rows());
  block_scaled_mma_fast(a, b, packed, matrix_view<const float>{}, store_to_matrix{d_view}, mode);
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
      for (index_t j = 0; j < b.rows(); ++j) store_epilogue_output(out, i, j, epilogue(i, j, d_view(i, j)));
  });
}

/// gemm()'s work once the operands and outputs are checked (`packed`: B packed by detail::pack_b,
/// or null): TE's alpha from the amaxes, checked, then the shared epilogue with gemm()'s
/// overflow guarantee.
template <class FormatA, class FormatB, class Out>
void gemm_checked(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b, const packed_b* packed, matrix_view<Out> out,
                  const gemm_options& options, matrix_view<const float> c) {
  fp4_epilogue epilogue;
  epilogue.alpha = options.apply_alpha ? gemm_alpha(a, b) : 1.0f;
  detail::check_alpha(epilogue.alpha, a, b);
  epilogue.c = c;
  epilogue.beta = options.beta;
  fp4_gemm_checked(a, b, packed, out, epilogue, options.mode, true);
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
requires fp4_gemm_pair<FormatA, FormatB> &&
    (std::is_same_v<Out, float> || std::is_same_v<Out, bf16>)void gemm(const quantized_tensor<FormatA>& a,
                                                                       const quantized_tensor<FormatB>& b, matrix_view<Out> out,
                                                                       const gemm_options& options = {}, matrix_view<const float> c = {}) {
  detail::check_gemm_operands(a, b);
  detail::check_output(out, a.rows(), b.rows(), "output");
  if (!c.empty() || c.data() != nullptr) detail::check_output(c, a.rows(), b.rows(), "C");
  detail::gemm_checked(a, b, nullptr, out, options, c);
}

/// gemm() into a new row-major [M, N] float buffer.
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
requires fp4_gemm_pair<FormatA, FormatB> std::vector<float> gemm(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b,
                                                                 const gemm_options& options = {}) {
  detail::checked_element_count(a.rows(), b.rows(), errc::invalid_argument, "gemm output [M, N]");
  std::vector<float> out(static_cast<std::size_t>(a.rows() * b.rows()));
  gemm(a, b, matrix_view<float>::row_major(out.data(), a.rows(), b.rows()), options);
  return out;
}

}  // namespace nvfp4
