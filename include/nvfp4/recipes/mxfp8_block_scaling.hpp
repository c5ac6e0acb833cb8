// nvfp4/recipes/mxfp8_block_scaling.hpp: TransformerEngine's MXFP8BlockScaling recipe (TE
// common/recipe/__init__.py): blocks of 32 with an E8M0 scale by TE's round-up rule
// (scaling/mxfp8_quantize.hpp), both copies of every tensor quantized from the high-precision tensor,
// the GEMMs as Blackwell's kind::mxf8f6f4 computes them.
#pragma once

#include "nvfp4/recipes/recipe_common.hpp"

namespace nvfp4 {

/// MXFP8BlockScaling with TE's field names and defaults.
struct mxfp8_block_scaling {
  int margin = 0;  ///< present in TE's recipe, not used by its MXFP8 quantizers
  recipe_format fp8_format = recipe_format::e4m3;
  bool enable_2d_quantization = false;  ///< 2-D weight blocks: not emulated by this version

  /// TE's check (no pure E5M2) and ours (2-D weight blocks are not emulated).
  void validate() const {
    detail::reject_pure_e5m2(fp8_format, "mxfp8_block_scaling");
    detail::require(!enable_2d_quantization, errc::unsupported,
                    "mxfp8_block_scaling: enable_2d_quantization (2-D MXFP8 weight blocks) is not emulated by this version");
  }
};

}  // namespace nvfp4
