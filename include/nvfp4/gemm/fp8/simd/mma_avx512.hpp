// nvfp4/gemm/fp8/simd/mma_avx512.hpp: the FP8 / MXFP8 step kernels on AVX-512: the kernels of
// gemm/fp8/detail/step_kernels.hpp over the AVX-512 Ops (one zmm per 16-column tile; VDPBF16PS
// for the relaxed step where the build has AVX512_BF16), with the register blocks 32 zmm hold:
// exact 4 rows x 1 tile, relaxed up to 8 rows x 2 tiles or 4 rows x 4 tiles (16 accumulators
// either way; the wide block loads one row pair per 4 VDPBF16PS instead of per 2, faster:
// docs/benchmarks.md, "Figures behind code choices").
#pragma once

#include "nvfp4/config.hpp"
#include "nvfp4/gemm/fp8/detail/step_kernels.hpp"
#include "nvfp4/simd/avx512/ops.hpp"

#if NVFP4_HAS_AVX512

namespace nvfp4::fp8_gemm_detail {

template <isa Isa>
struct fp8_step_kernels;

/// The AVX-512 step kernels (simd/dispatch.hpp's fp8_gemm_isa picks them).
template <>
struct fp8_step_kernels<isa::avx512>
    : lane_step_kernels<simd::avx512::ops,
                        step_shapes{
                            .exact_rows = 4, .exact_tiles_outer = false, .relaxed_tiles = 4, .relaxed_rows_wide = 8, .relaxed_rows = 4}> {};

}  // namespace nvfp4::fp8_gemm_detail

#endif  // NVFP4_HAS_AVX512
