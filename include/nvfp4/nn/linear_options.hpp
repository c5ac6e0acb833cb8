// nvfp4/nn/linear_options.hpp: how an nn::linear layer (nn/linear.hpp) is configured and called,
// beside its recipe: its options (bias, dtype, GEMM mode, seed, where its parameters live, when
// delayed scaling updates), the tensors a call reads and writes (fp32, or bf16 as stored), the
// parameter and gradient views a call is given, and TE's is_first_microbatch as a weight cache.
#pragma once

#include <cstdint>
#include <span>
#include <variant>

#include "nvfp4/detail/enum_names.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/gemm/fp8/mma_model.hpp"
#include "nvfp4/gemm/operands.hpp"
#include "nvfp4/recipes/nvfp4_amax_rule.hpp"
#include "nvfp4/recipes/recipe_common.hpp"
#include "nvfp4/scaling/matrix_view.hpp"

namespace nvfp4::nn {

/// Where a layer's W, b and their gradients live.
enum class parameter_storage {
  owned,    ///< in the layer (weight(), bias(), weight_grad(), bias_grad())
  external  ///< the caller's (a framework's parameters): passed to each call as views, never copied
};

/// When delayed-scaling states update (take a new scale from their amax history).
enum class scaling_update {
  per_call,   ///< input and weight after each forward, grad_output after each backward
  per_region  ///< only where the caller ends a region: end_forward_region / end_backward_region
              ///< (TE: the outermost autocast's exit, the end of the backward pass)
};

/// What an evaluation forward (infer) does with delayed-scaling amaxes.
enum class eval_amaxes {
  record_nothing,  ///< neither record nor update (the library's inference forward)
  record_as_te     ///< record X's and W's amaxes into the step in progress, as TE's quantizers do
                   ///< under torch.no_grad(); they are max-merged into the next update
};

/// How a linear layer computes, beside its recipe.
struct linear_options {
  bool bias = false;                                                      ///< a bias b [out_features], fp32
  high_precision dtype = high_precision::fp32;                            ///< X, W, dY rounded to it; Y, dX written in it
  gemm_mode mode = gemm_mode::exact;                                      ///< quantized GEMMs: tensor-core exact, or relaxed
  fp8::mma::tensor_core fp8_tensor_core = fp8::mma::tensor_core::hopper;  ///< per-tensor and block FP8 GEMMs
  index_t promotion_interval = 128;                                       ///< FP8 split accumulator: elements of K per promotion
  std::uint64_t seed = 0;                                                 ///< the only source of randomness (NVFP4 SR)
  /// NVFP4 recipes: chooses each tensor's global amax in place of TE's maximum |value| (a research
  /// control, e.g. nn/amax_percentile.hpp's quantile; empty: TE). It sees X, W and dY in the
  /// layer's dtype and the RHT'd wgrad copies; FP8 and MXFP8 recipes refuse a layer that has one.
  nvfp4_amax_rule nvfp4_amax{};
  parameter_storage parameters = parameter_storage::owned;
  scaling_update delayed_update = scaling_update::per_call;
};

/// A matrix a call reads (X, W, dY): fp32 values, or bf16 values as they are stored, which a bf16
/// layer reads without an fp32 copy (a bf16 model's tensors).
using input_matrix = std::variant<matrix_view<const float>, matrix_view<const bf16>>;
/// A vector a call reads (the bias): fp32 or bf16.
using input_vector = std::variant<std::span<const float>, std::span<const bf16>>;
/// A matrix a call writes (Y, dX): fp32, or bf16 (rounded once from the fp32 epilogue).
using output_matrix = std::variant<matrix_view<float>, matrix_view<bf16>>;

/// The parameters a call reads, in place: W [out_features, in_features] and b [out_features]
/// (empty for a layer without a bias).
struct linear_parameters {
  input_matrix weight;
  input_vector bias{};
};

/// Where a backward writes dW [out_features, in_features] and db [out_features] (fp32).
struct linear_gradients {
  matrix_view<float> weight;
  std::span<float> bias{};
};

/// How a forward treats the quantized weight: TE's `is_first_microbatch` (None, True, False).
enum class weight_cache {
  off,      ///< quantize W on every call, keep nothing (TE: None)
  refresh,  ///< quantize W and keep it for later calls (TE: True)
  reuse     ///< run on the W kept by the last refresh, as W was then (TE: False; W's delayed-scaling
            ///< amax is not recorded). Without one kept since the last set_recipe, W is quantized
            ///< and kept, as refresh does (TE's linear.py quantizes and caches on a miss).
};
}  // namespace nvfp4::nn

/// Its names (the Python layer's weight_cache values; one table: nvfp4/detail/enum_names.hpp).
namespace nvfp4::detail {
template <>
struct enum_table<nn::weight_cache> {
  static constexpr enum_entry<nn::weight_cache> entries[] = {
      {"off", nn::weight_cache::off}, {"refresh", nn::weight_cache::refresh}, {"reuse", nn::weight_cache::reuse}};
};
}  // namespace nvfp4::detail
