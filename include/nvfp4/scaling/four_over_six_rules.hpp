// nvfp4/scaling/four_over_six_rules.hpp: the rules of TransformerEngine's 4over6 NVFP4
// quantization (TE common/cast/nvfp4/quantize_4over6_nvfp4.cuh), one function each: the tensor
// scale with its E4M3 bound, a block's two candidate scales, one element's error, the tree sum of
// a tile's row errors. Shared by the scalar reference and the vector kernel.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "nvfp4/detail/enum_names.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/formats/e2m1.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/scaling/scale_rules.hpp"
#include "nvfp4/simd/fp32_rounding.hpp"

namespace nvfp4 {

/// The error a 4over6 block choice minimises.
enum class four_over_six_error {
  mae,  ///< sum of |x̂ - x|
  mse   ///< sum of (x̂ - x)^2
};
/// Its names (TE's nvfp4_4over6_err_mode values; one table: nvfp4/detail/enum_names.hpp).
namespace detail {
template <>
struct enum_table<four_over_six_error> {
  static constexpr enum_entry<four_over_six_error> entries[] = {{"mae", four_over_six_error::mae}, {"mse", four_over_six_error::mse}};
};
}  // namespace detail

struct four_over_six_options {
  four_over_six_error error = four_over_six_error::mae;
  /// The E4M3 bound of the tensor scale: 256 (TE's default for 4over6 tensors) or 448.
  int e4m3_max = 256;
};

namespace detail {

inline void check_four_over_six(const four_over_six_options& options) {
  require(options.e4m3_max == 256 || options.e4m3_max == 448, errc::invalid_argument,
          "4over6: e4m3_max must be 256 or 448, got " + std::to_string(options.e4m3_max));
}

/// TE's compute_global_encode_scaling_factor_FP4<E4M3_MAX>: (E4M3_MAX * 6) / amax clamped to
/// FLT_MAX, 1 when amax or the result is 0 (docs/numerics_spec.md §2 step 2 with the bound E4M3_MAX).
inline tensor_scale four_over_six_tensor_scale(float amax, int e4m3_max) {
  if (amax == 0.0f) return {1.0f, 1.0f};  // zero test first, as in nvfp4_tensor_scale (GCC 13.3)
  float encode = static_cast<float>(e4m3_max) * 6.0f / amax;
  if (!(encode <= FLT_MAX)) encode = FLT_MAX;
  if (encode == 0.0f) encode = 1.0f;
  return {encode, 1.0f / encode};
}

/// The two candidate scales of a block (TE's compute_scale_pair): base = block_amax / 6 * S_enc
/// (a division, then a product), map4 = E4M3(min(1.5 * base, 448)), map6 = E4M3(min(base, 448)),
/// and each one's element factor min(1 / (scale * S_dec), FLT_MAX).
struct four_over_six_scales {
  ue4m3 map4, map6;
  float factor4, factor6;
};
inline four_over_six_scales four_over_six_block_scales(float block_amax, tensor_scale ts) {
  const float base = block_amax / 6.0f * ts.encode;
  four_over_six_scales s;
  s.map4 = ue4m3::from_float(std::min(base * 1.5f, 448.0f));
  s.map6 = ue4m3::from_float(std::min(base, 448.0f));
  s.factor4 = std::min(1.0f / (s.map4.to_float() * ts.decode), FLT_MAX);
  s.factor6 = std::min(1.0f / (s.map6.to_float() * ts.decode), FLT_MAX);
  return s;
}

/// One element's contribution to a candidate's error (TE's accumulate_dequant_error): x̂ =
/// ((e2m1 * scale) * amax) / (6 * E4M3_MAX), diff = x̂ - x, then |diff| or diff^2, each step one
/// fp32 rounding.
inline float four_over_six_element_error(e2m1 q, ue4m3 scale, float global_amax, float denominator, float x, four_over_six_error mode) {
  const float dequantized = simd::materialize(simd::materialize(q.to_float() * scale.to_float()) * global_amax) / denominator;
  const float diff = dequantized - x;
  return mode == four_over_six_error::mse ? simd::materialize(diff * diff) : std::fabs(diff);
}

/// Sums 16 row errors in the order of TE's warp reduction (shfl_down by 8, 4, 2, 1): a tree.
inline float four_over_six_tree_sum(float (&e)[16]) {
  for (int width = 8; width >= 1; width /= 2)
    for (int i = 0; i < width; ++i) e[i] = e[i] + e[i + width];
  return e[0];
}

}  // namespace detail

}  // namespace nvfp4
