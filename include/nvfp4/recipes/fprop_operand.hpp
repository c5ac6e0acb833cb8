// nvfp4/recipes/fprop_operand.hpp: W's rowwise copy as fprop's B, packed once when the
// layer keeps W (weight_cache::refresh) or as quantized otherwise; both give the same bits.
#pragma once

#include <utility>

namespace nvfp4 {

/// W's rowwise copy in one of two forms: `plain`, or `packed` (plain moved in) for a kept W.
template <class Plain, class Packed>
struct fprop_operand {
  Plain plain;
  Packed packed;

  void pack() { packed = Packed(std::move(plain)); }
  /// gemm(B) on whichever form holds W.
  template <class Gemm>
  void run(Gemm&& gemm) const {
    if (packed) {
      gemm(packed);
    } else {
      gemm(plain);
    }
  }
};

}  // namespace nvfp4
