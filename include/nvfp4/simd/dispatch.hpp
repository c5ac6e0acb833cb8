// nvfp4/simd/dispatch.hpp: the one dispatch point of the block-scaling kernels. `kernels` is the
// kernel set of the best ISA this translation unit is compiled for (config.hpp's macros).
#pragma once

#include "nvfp4/config.hpp"
#include "nvfp4/simd/scalar.hpp"

#if NVFP4_HAS_AVX512
#include "nvfp4/simd/avx512/ops.hpp"
#include "nvfp4/simd/vector_kernels.hpp"
#elif NVFP4_HAS_AVX2
#include "nvfp4/simd/avx2/ops.hpp"
#include "nvfp4/simd/vector_kernels.hpp"
#endif

namespace nvfp4::simd {

#if NVFP4_HAS_AVX512
using kernels = vector_kernels<avx512::ops>;
#elif NVFP4_HAS_AVX2
using kernels = vector_kernels<avx2::ops>;
#else
using kernels = scalar_kernels;
#endif

/// Encodes x[0..n) to format T, one code per byte (RNE, the given overflow policy), with the
/// fastest kernel of this build; bit-identical to minifloat<T>::from_float for every input.
template <minifloat_traits T, overflow_policy Policy = overflow_policy::saturate>
void encode(const float* x, index_t n, std::uint8_t* codes) {
  kernels::template encode<T, Policy>(x, n, codes);
}

/// Decodes n codes of format T (one per byte) to floats.
template <minifloat_traits T>
void decode(const std::uint8_t* codes, index_t n, float* out) {
  kernels::template decode<T>(codes, n, out);
}

}  // namespace nvfp4::simd
