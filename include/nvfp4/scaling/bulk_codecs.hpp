// nvfp4/scaling/bulk_codecs.hpp: whole arrays of floats to codes of a small format and back, one
// code per byte, with the vector kernels of this build (scaling/detail/block_kernels.hpp);
// bit-identical to minifloat<T>::from_float / to_float for every input.
#pragma once

#include <cstdint>

#include "nvfp4/config.hpp"
#include "nvfp4/formats/traits.hpp"
#include "nvfp4/scaling/detail/block_kernels.hpp"

namespace nvfp4 {

/// Encodes x[0..n) to format T, one code per byte: round to nearest even, the given overflow
/// policy (docs/numerics_spec.md §1); NaN, Inf and subnormals as minifloat<T>::from_float does.
template <minifloat_traits T, overflow_policy Policy = overflow_policy::saturate>
void encode_codes(const float* x, index_t n, std::uint8_t* codes) {
  detail::fast_block_kernels::template encode<T, Policy>(x, n, codes);
}

/// Decodes n codes of format T (one per byte) to floats (exact).
template <minifloat_traits T>
void decode_codes(const std::uint8_t* codes, index_t n, float* out) {
  detail::fast_block_kernels::template decode<T>(codes, n, out);
}

}  // namespace nvfp4
