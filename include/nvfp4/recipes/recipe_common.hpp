// nvfp4/recipes/recipe_common.hpp: what TransformerEngine's recipes share (TE
// common/recipe/__init__.py): the FP8 `Format` of a recipe, the GEMM parameters (`MMParams`), the
// quantization parameters (`QParams`), the three tensor roles of a Linear layer, and the high
// precision (FP32 / BF16) a layer computes in outside its quantized GEMMs.
#pragma once

#include <string>

#include "nvfp4/detail/enum_names.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/scaling/fp8_tensor.hpp"

namespace nvfp4 {

/// TE's recipe `Format` for the FP8 recipes: which FP8 format the forward tensors (activations,
/// weights) and the backward tensors (gradients) use.
enum class recipe_format {
  e4m3,   ///< E4M3 everywhere
  e5m2,   ///< E5M2 everywhere: TE rejects it ("Pure E5M2 training is not supported")
  hybrid  ///< E4M3 forward, E5M2 backward
};

/// Its names as the Python recipes' fields take them (one table: nvfp4/detail/enum_names.hpp);
/// recipe_format_name below is TE's spelling of the Format enum, which the fields print.
namespace detail {
template <>
struct enum_table<recipe_format> {
  static constexpr enum_entry<recipe_format> entries[] = {
      {"e4m3", recipe_format::e4m3}, {"e5m2", recipe_format::e5m2}, {"hybrid", recipe_format::hybrid}};
};
}  // namespace detail

constexpr const char* recipe_format_name(recipe_format f) {
  return f == recipe_format::e4m3 ? "E4M3" : (f == recipe_format::e5m2 ? "E5M2" : "HYBRID");
}
constexpr fp8_format forward_format(recipe_format f) { return f == recipe_format::e5m2 ? fp8_format::e5m2 : fp8_format::e4m3; }
constexpr fp8_format backward_format(recipe_format f) { return f == recipe_format::e4m3 ? fp8_format::e4m3 : fp8_format::e5m2; }

/// The precision of a layer's high-precision tensors (TE's params / activation dtype): its inputs
/// X, W, dY are rounded to it before anything else, its outputs Y and dX are written in it.
enum class high_precision { fp32, bf16 };

/// Its names in checkpoints, the CLI and Python (one table: nvfp4/detail/enum_names.hpp).
namespace detail {
template <>
struct enum_table<high_precision> {
  static constexpr enum_entry<high_precision> entries[] = {{"fp32", high_precision::fp32}, {"bf16", high_precision::bf16}};
};
}  // namespace detail

constexpr const char* high_precision_name(high_precision p) { return detail::name_of(p); }

/// TE's MMParams: use_split_accumulator = true promotes the tensor core's partial sums into fp32
/// (cuBLAS fast accumulation off); false keeps the whole K chain in the tensor core.
struct mm_params {
  bool use_split_accumulator = true;
};

/// The three tensors a Linear layer quantizes (TE's quantizer roles "input", "weight",
/// "grad_output"): X [M, K], W [N, K] and dY [M, N] of Y = X Wᵀ.
enum class tensor_role { input, weight, grad_output };
/// Its names (TE's quantizer roles; one table: nvfp4/detail/enum_names.hpp).
namespace detail {
template <>
struct enum_table<tensor_role> {
  static constexpr enum_entry<tensor_role> entries[] = {
      {"input", tensor_role::input}, {"weight", tensor_role::weight}, {"grad_output", tensor_role::grad_output}};
};
}  // namespace detail

constexpr const char* tensor_role_name(tensor_role r) { return detail::name_of(r); }
/// Forward tensors use the recipe's forward format, grad_output the backward one.
constexpr fp8_format role_format(recipe_format f, tensor_role r) {
  return r == tensor_role::grad_output ? backward_format(f) : forward_format(f);
}

namespace detail {
inline void reject_pure_e5m2(recipe_format f, const char* recipe) {
  require(f != recipe_format::e5m2, errc::invalid_argument,
          std::string(recipe) + ": fp8_format E5M2 is not supported (TE: \"Pure E5M2 training is not supported\"); use E4M3 or HYBRID");
}
}  // namespace detail

}  // namespace nvfp4
