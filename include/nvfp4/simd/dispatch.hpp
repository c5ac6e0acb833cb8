// nvfp4/simd/dispatch.hpp: the one dispatch point: which instruction set each kernel family of
// the library runs on. Nothing else in the library tests an ISA macro (the ISA folders excepted,
// which only make their code vanish when their ISA is not compiled in). The choice is made at
// compile time from config.hpp's macros (the compiler's -m flags), as Eigen does; the FP4 GEMM's
// also passes through gemm_isa_for_call(), the run-time choice of the AMX kernels.
#pragma once

#include "nvfp4/config.hpp"
#include "nvfp4/simd/amx/tiles.hpp"
#include "nvfp4/simd/avx2/ops.hpp"
#include "nvfp4/simd/avx512/ops.hpp"
#include "nvfp4/simd/scalar/ops.hpp"

namespace nvfp4::simd {

/// The lane operations of the widest ISA of this build. Every kernel family written over Ops runs
/// on them: block scaling and the bulk codecs (scaling/detail/block_kernels.hpp), stochastic
/// rounding (scaling/detail/stochastic_quantize.hpp), Philox (random/random_bytes.hpp), the Hadamard
/// transform (transforms/detail/hadamard_kernels.hpp). The FP4 GEMM operand packers
/// (gemm/fp4/detail/packing.hpp) and the FP8 GEMM step kernels (gemm/fp8/detail/step_kernels.hpp)
/// run on the Ops of their kernel set (below).
#if NVFP4_HAS_AVX512
using ops = avx512::ops;
#elif NVFP4_HAS_AVX2
using ops = avx2::ops;
#else
using ops = scalar::ops;
#endif

/// The block-scaled FP4 GEMM's kernel set (gemm/fp4/simd/): AVX-512 VNNI (vpdpbusd) where the build
/// has it, else AVX2 (vpmaddubsw), else the portable §6 step.
inline constexpr isa gemm_isa = NVFP4_HAS_AVX512_VNNI ? isa::avx512_vnni : (NVFP4_HAS_AVX2 ? isa::avx2 : isa::scalar);

/// Whether this build carries the AMX kernels of the FP4 GEMM (gemm/fp4/simd/mma_amx.hpp: inline
/// assembly for the tile instructions, AVX-512 VNNI for the rest), which run where the CPU and the
/// OS allow them.
inline constexpr bool gemm_amx_compiled = NVFP4_HAS_AVX512_VNNI && NVFP4_AMX_COMPILED;

/// The FP4 GEMM kernels one call runs: the run-time choice. AMX-BF16 where compiled in and
/// usable (CPUID AMX-TILE/AMX-BF16, XCR0, Linux's XTILEDATA permission) and turned on (off by
/// default; NVFP4_AMX=1 or amx::set_allowed(true): simd/amx/tiles.hpp), else the compile-time
/// gemm_isa. gemm/fp4/detail/fast_gemm.hpp still
/// leaves operands the AMX kernels do not take (amx::eligible) to gemm_isa's set.
inline isa gemm_isa_for_call() { return gemm_amx_compiled && amx::usable() ? isa::amx_bf16 : gemm_isa; }

/// The FP8 / MXFP8 GEMM's step kernels: every ISA of the build has a set (AVX-512 and AVX2: the
/// kernels over Ops of gemm/fp8/detail/step_kernels.hpp, bound in gemm/fp8/simd/; scalar: the
/// scalar step of gemm/fp8/detail/fast_gemm.hpp), so the build's own ISA.
inline constexpr isa fp8_gemm_isa = compiled_isa;

/// 4over6 quantization's group kernel (scaling/detail/four_over_six_kernel.hpp, over `ops`) on
/// AVX-512 and AVX2 builds; scalar builds run the per-block reference (scaling/four_over_six.hpp).
inline constexpr isa four_over_six_isa = compiled_isa;

}  // namespace nvfp4::simd
