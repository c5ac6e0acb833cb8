// nvfp4/interop/eigen_gemm.hpp: block-scaled FP4 GEMMs with Eigen matrices in and out: the tensor
// core's exact product (or the relaxed one) of quantized tensors or of Eigen matrices quantized
// here, and the dequantize-then-Eigen baseline a user would write without this library's MMA model.
#pragma once

#include "nvfp4/gemm/fp4/gemm.hpp"
#include "nvfp4/interop/eigen.hpp"

namespace nvfp4::eigen {

/// D = alpha * A·Bᵀ of two quantized tensors in the library's convention (A [M, K], B [N, K], both
/// blocked along K), exactly as nvfp4::gemm computes it (options.mode: exact, the tensor core's
/// bits, §6; or relaxed), as a new row-major [M, N] matrix. options.beta is unused (no C).
/// Throws nvfp4::error(shape_mismatch) when A and B have different K.
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
requires fp4_gemm_pair<FormatA, FormatB> row_major_matrix_f32 gemm(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b,
                                                                   const gemm_options& options = {}) {
  nvfp4::detail::check_gemm_operands(a, b);
  row_major_matrix_f32 out(a.rows(), b.rows());
  nvfp4::gemm(a, b, matrix_view<float>::row_major(out.data(), a.rows(), b.rows()), options);
  return out;
}

/// The quantized product of two Eigen matrices in Eigen's convention, D ≈ A·B with A [M, K] and
/// B [K, N] (float or Eigen::bfloat16, any storage order; pass w.transpose() for a weight stored
/// [N, K]). The recipe: A is quantized to FormatA blocked along its rows and B to FormatB blocked
/// along its columns (i.e. Bᵀ rowwise), each with its own tensor amax and round-to-nearest-even,
/// as TransformerEngine's forward GEMM quantizes its operands (FormatA = nvfp4_1x16 for
/// activations, FormatB = nvfp4_16x16 for weights, or mxfp4 for both); then gemm(qa, qb, options).
/// Returns a row-major [M, N] matrix. Throws nvfp4::error: shape_mismatch when A's columns are
/// not B's rows, non_finite when an input holds NaN/Inf.
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB = FormatA, class DerivedA, class DerivedB>
requires fp4_gemm_pair<FormatA, FormatB> row_major_matrix_f32 gemm(const Eigen::DenseBase<DerivedA>& a, const Eigen::DenseBase<DerivedB>& b,
                                                                   const gemm_options& options = {}) {
  nvfp4::detail::require(a.cols() == b.rows(), errc::shape_mismatch,
                         "eigen::gemm: A is " + std::to_string(a.rows()) + "x" + std::to_string(a.cols()) + " and B is " +
                             std::to_string(b.rows()) + "x" + std::to_string(b.cols()) +
                             ": A·B needs A's columns == B's rows (B is [K, N] here)");
  const auto qa = eigen::quantize<FormatA>(a);
  const auto qb = eigen::quantize<FormatB>(b.transpose());
  return eigen::gemm(qa, qb, options);
}

/// dequantize(A) · dequantize(B)ᵀ in fp32 with Eigen's GEMM (A [M, K], B [N, K]): approximately
/// gemm(a, b) (alpha applied through the dequantization's tensor scales), with Eigen's summation
/// order. A baseline, not what the tensor core computes. Row-major [M, N].
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
requires fp4_gemm_pair<FormatA, FormatB> row_major_matrix_f32 dequantize_then_gemm(const quantized_tensor<FormatA>& a,
                                                                                   const quantized_tensor<FormatB>& b) {
  nvfp4::detail::check_gemm_operands(a, b);
  const row_major_matrix_f32 a_values = eigen::dequantize(a);
  const row_major_matrix_f32 b_values = eigen::dequantize(b);
  row_major_matrix_f32 out(a.rows(), b.rows());
  out.noalias() = a_values * b_values.transpose();
  return out;
}

}  // namespace nvfp4::eigen
