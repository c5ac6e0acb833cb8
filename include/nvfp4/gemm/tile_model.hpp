// nvfp4/gemm/tile_model.hpp: what Intel AMX's BF16 tile multiply (TDPBF16PS) computes for one
// output, in scalar code, as Intel documents it; the reference of the relaxed GEMMs that run on
// BF16 tiles (docs/gemm.md, "Relaxed mode").
//
// Intel SDM vol. 2 (and the ISA Extensions Programming Reference), "TDPBF16PS — Dot Product of
// BF16 Tiles Accumulated into Packed Single Precision Tile", Operation: for each row m of the
// destination and column n, two fp32 partial sums start at zero; for k = 0 .. pairs-1, the even
// one takes a[2k]·b[2k] and the odd one a[2k+1]·b[2k+1], each an fp32 FMA with round to nearest
// even, denormal inputs read as zero (DAZ) and denormal results flushed to zero (FTZ), MXCSR not
// consulted; then the two partial sums are added (same rounding) and that sum is added to the
// destination element (same rounding). A product of two bf16 values is exact in fp32 (at most
// 16 significant bits), so each FMA is one rounding of the partial sum.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "nvfp4/config.hpp"

namespace nvfp4::tile_model {

/// K elements one instruction consumes per output with 64-byte tile rows: 16 bf16 pairs.
inline constexpr int step_k = 32;
inline constexpr int pairs = step_k / 2;

/// FTZ / DAZ: a denormal fp32 value becomes a zero of its sign.
inline float flush_denormal(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }

/// One output of one TDPBF16PS: c + (even sum + odd sum) over the 32 values a[0..31], b[0..31]
/// (each a bf16 value held in a float).
inline float instruction(const float* a, const float* b, float c) {
  float even = 0.0f, odd = 0.0f;
  for (int k = 0; k < pairs; ++k) {
    even = flush_denormal(std::fma(flush_denormal(a[2 * k]), flush_denormal(b[2 * k]), even));
    odd = flush_denormal(std::fma(flush_denormal(a[2 * k + 1]), flush_denormal(b[2 * k + 1]), odd));
  }
  const float sum = flush_denormal(even + odd);
  return flush_denormal(flush_denormal(c) + sum);
}

/// A destination tile element carried through one instruction per 32 elements of K: from c, for
/// each step s (K zero-padded to a multiple of 32), c = instruction(a + 32s, b + 32s, c). What a
/// tile accumulator that stays in the tile unit (or is stored and reloaded as fp32) holds after
/// the steps. a_at(k) and b_at(k) give the k-th values of the two vectors (k < len).
template <class AAt, class BAt>
float chain(index_t len, float c, AAt&& a_at, BAt&& b_at) {
  float a[step_k], b[step_k];
  for (index_t k0 = 0; k0 < len; k0 += step_k) {
    for (int k = 0; k < step_k; ++k) {
      const bool inside = k0 + k < len;
      a[k] = inside ? a_at(k0 + k) : 0.0f;
      b[k] = inside ? b_at(k0 + k) : 0.0f;
    }
    c = instruction(a, b, c);
  }
  return c;
}

}  // namespace nvfp4::tile_model
