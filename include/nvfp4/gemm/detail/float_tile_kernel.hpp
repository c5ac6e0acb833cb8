// nvfp4/gemm/detail/float_tile_kernel.hpp: the register-blocked microkernel of the fp32 GEMM
// (gemm/float_gemm.hpp), written once over the lane operations of any ISA (simd/<isa>/ops.hpp).
// A tile of MR output rows by NR = NV·width output columns lives in MR·NV vector registers; each
// K step broadcasts one packed A value per row and loads NV vectors of packed B, then one FMA per
// register. Every accumulator lane is one output and sees its products in K order, one rounding
// per step: exactly the chain of reference::float_gemm, for any MR, NV or ISA.
#pragma once

#include "nvfp4/config.hpp"
#include "nvfp4/scaling/matrix_view.hpp"

namespace nvfp4::detail {

/// The tile shape per lane width: AVX-512 12 x 32 (24 of 32 zmm registers hold accumulators, the
/// rest B and the broadcast), AVX2 6 x 16 (12 of 16 ymm), scalar 4 x 4 (plain std::fma lanes).
template <int Width>
struct float_tile_shape {
  static constexpr int rows = Width >= 16 ? 12 : (Width >= 8 ? 6 : 4);
  static constexpr int vectors = Width >= 8 ? 2 : 4;
};

template <class Ops>
struct float_tile_kernel {
  using vf = typename Ops::vf;
  static constexpr int mr = float_tile_shape<Ops::width>::rows;
  static constexpr int nv = float_tile_shape<Ops::width>::vectors;
  static constexpr int nr = nv * Ops::width;

  /// dst[r][c] = the chain over kc steps of a[kk·mr + r] · b[kk·b_stride + c] (r < R, c < nr),
  /// started from src[r][c] (src null: from +0). src may equal dst (all of it is read first).
  /// a: the tile's rows packed K-major (mr values per step, of which the first R are used); b: NR
  /// columns per step. R < mr serves a last tile of few rows (decode shapes: 16 = 12 + 4).
  template <int R = mr, class Stride>
  static NVFP4_ALWAYS_INLINE void run(index_t kc, const float* a, const float* b, Stride b_stride, const float* src, index_t src_ld,
                                      float* dst, index_t dst_ld) {
    static_assert(R >= 1 && R <= mr);
    vf acc[R][nv];
    if (src) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < nv; ++v) acc[r][v] = Ops::load(src + r * src_ld + v * Ops::width);
    } else {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < nv; ++v) acc[r][v] = Ops::set(0.0f);
    }
    for (index_t kk = 0; kk < kc; ++kk) {
      vf bv[nv];
#pragma GCC unroll 4
      for (int v = 0; v < nv; ++v) bv[v] = Ops::load(b + v * Ops::width);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const vf av = Ops::set(a[r]);
#pragma GCC unroll 4
        for (int v = 0; v < nv; ++v) acc[r][v] = Ops::fmadd(av, bv[v], acc[r][v]);
      }
      a += mr;
      b += b_stride;
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < nv; ++v) Ops::store(dst + r * dst_ld + v * Ops::width, acc[r][v]);
  }
};

}  // namespace nvfp4::detail
