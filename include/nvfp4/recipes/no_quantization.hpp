// nvfp4/recipes/no_quantization.hpp: the "no quantization" recipe, a Linear layer in its own
// high precision (FP32 or BF16) with the same interface as the quantized recipes (what TE runs
// outside an FP8/FP4 autocast region), and that precision's type.
#pragma once

#include "nvfp4/detail/enum_names.hpp"

namespace nvfp4 {

/// The precision of a layer's high-precision tensors (TE's params / activation dtype): its inputs
/// X, W, dY are rounded to it before anything else, its outputs Y and dX are written in it.
enum class high_precision { fp32, bf16 };

/// Its names in checkpoints, the CLI and Python (one table: nvfp4/detail/enum_names.hpp).
namespace detail {
template <>
struct enum_table<high_precision> {
  static constexpr enum_entry<high_precision> entries[] = {
      {"fp32", high_precision::fp32},
      {"bf16", high_precision::bf16}};
};
}  // namespace detail

constexpr const char* high_precision_name(high_precision p) { return detail::name_of(p); }

/// No quantization: the three GEMMs take the layer's tensors in its precision (BF16: rounded to
/// bf16) with exact products and an fp32 accumulation in K order (nvfp4::float_gemm). cuBLAS's
/// GEMMs accumulate in their own order, so this is emulated, not bit-exact with a GPU.
struct no_quantization {
  void validate() const {}
};

}  // namespace nvfp4
