// nvfp4/interop/eigen_gemm.hpp: the GEMM a user would write without this library's MMA model:
// dequantize both operands to fp32 and multiply with Eigen. Fast and close, but not what the
// tensor core computes (a baseline, named as such).
#pragma once

#include "nvfp4/gemm/operands.hpp"
#include "nvfp4/interop/eigen.hpp"

namespace nvfp4::eigen {

/// dequantize(A) · dequantize(B)ᵀ in fp32 with Eigen's GEMM: approximately gemm(a, b) (alpha
/// applied through the dequantization's tensor scales), with Eigen's summation order.
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
  requires fp4_gemm_pair<FormatA, FormatB>
matrix_f32 dequantize_then_gemm(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b) {
  nvfp4::detail::check_gemm_operands(a, b);
  const matrix_f32 a_values = eigen::dequantize(a);
  const matrix_f32 b_values = eigen::dequantize(b);
  matrix_f32 out(a.rows(), b.rows());
  out.noalias() = a_values * b_values.transpose();
  return out;
}

}  // namespace nvfp4::eigen
