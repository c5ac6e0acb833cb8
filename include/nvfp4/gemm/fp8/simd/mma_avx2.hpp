// nvfp4/gemm/fp8/simd/mma_avx2.hpp: the FP8 / MXFP8 step kernels on AVX2: the kernels of
// gemm/fp8/detail/step_kernels.hpp over the AVX2 Ops (two ymm per 16-column tile; the powers of
// two the AVX-512 Ops scale by are built from exponent bits and doubles there), with the register
// blocks 16 ymm hold: one tile a call, exact 2 rows, relaxed 4 rows.
#pragma once

#include "nvfp4/config.hpp"
#include "nvfp4/gemm/fp8/detail/step_kernels.hpp"
#include "nvfp4/simd/avx2/ops.hpp"

#if NVFP4_HAS_AVX2

namespace nvfp4::fp8_gemm_detail {

template <isa Isa>
struct fp8_step_kernels;

/// The AVX2 step kernels (simd/dispatch.hpp's fp8_gemm_isa picks them where AVX-512 is absent).
template <>
struct fp8_step_kernels<isa::avx2>
    : lane_step_kernels<simd::avx2::ops,
                        step_shapes{
                            .exact_rows = 2, .exact_tiles_outer = true, .relaxed_tiles = 1, .relaxed_rows_wide = 4, .relaxed_rows = 4}> {};

}  // namespace nvfp4::fp8_gemm_detail

#endif  // NVFP4_HAS_AVX2
