// nvfp4/simd/panels.hpp: panel copies over an ISA's lane operations (bf16 -> float widening, the
// transposing copy of a view with contiguous columns into float rows), shared by scaling/, gemm/
// and nn/. Bit-exact: bf16 widens to float exactly.
#pragma once

#include <type_traits>

#include "nvfp4/config.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/simd/dispatch.hpp"
#include "nvfp4/simd/scalar/ops.hpp"

namespace nvfp4::simd {

template <class Ops>
struct panels {
  static constexpr int width = Ops::width;
  using vi = typename Ops::vi;
  /// What the last (width - 1) or fewer elements of a run go through.
  using tail = panels<scalar::ops>;

  /// `width` consecutive floats, or bf16 values widened to float (exact), as bits.
  static NVFP4_ALWAYS_INLINE vi load_bits_of(const float* p) { return Ops::as_int(Ops::load(p)); }
  static NVFP4_ALWAYS_INLINE vi load_bits_of(const bf16* p) { return Ops::load_bf16_bits(p); }

  /// bf16 -> float (exact).
  static void widen(const bf16* x, index_t n, float* out) {
    index_t i = 0;
    for (; i + width <= n; i += width) Ops::store(out + i, Ops::as_float(Ops::load_bf16_bits(x + i)));
    if constexpr (width > 1) tail::widen(x + i, n - i, out + i);
  }

  /// dst[i * dst_stride + c] = src[c * src_stride + i] (widened to float) for i < rows, c < cols:
  /// a panel of a view whose columns are contiguous, float or bf16, copied into contiguous float
  /// rows, width x width words at a time.
  template <class T>
  static void transpose_panel(const T* src, index_t src_stride, index_t rows, index_t cols, float* dst, index_t dst_stride) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>);
    index_t i0 = 0;
    if constexpr (width > 1) {
      for (; i0 + width <= rows; i0 += width) {
        index_t c = 0;
        for (; c + width <= cols; c += width) {
          vi block[width];
          for (int k = 0; k < width; ++k) block[k] = load_bits_of(src + (c + k) * src_stride + i0);
          Ops::transpose(block);
          for (int k = 0; k < width; ++k) Ops::store(dst + (i0 + k) * dst_stride + c, Ops::as_float(block[k]));
        }
        tail::transpose_panel(src + c * src_stride + i0, src_stride, width, cols - c, dst + i0 * dst_stride + c, dst_stride);
      }
    }
    for (index_t c = 0; c < cols; ++c)
      for (index_t i = i0; i < rows; ++i) dst[i * dst_stride + c] = as_float(src[c * src_stride + i]);
  }

 private:
  static constexpr float as_float(float x) { return x; }
  static constexpr float as_float(bf16 x) { return x.to_float(); }
};

/// The panel copies of this build's ISA (simd/dispatch.hpp).
using fast_panels = panels<ops>;

}  // namespace nvfp4::simd
