// nvfp4/scaling/quantize_options.hpp: the vocabulary of the quantizers: which inputs they take
// (quantizer_input, to_float32), how elements are rounded (rounding_mode), how MX scales are
// chosen (mx_scale_rule), and the options struct that carries them (quantize_options).
#pragma once

#include <cstdint>
#include <type_traits>

#include "nvfp4/detail/enum_names.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"

namespace nvfp4 {

/// Input element types the quantizers accept.
template <class T>
concept quantizer_input = std::is_same_v<T, float> || std::is_same_v<T, bf16>;

/// Widening of an input element to float32 (exact for both input types).
constexpr float to_float32(float x) { return x; }
constexpr float to_float32(bf16 x) { return x.to_float(); }

/// How the E8M0 scale of an MX block is chosen (docs/numerics_spec.md §7).
enum class mx_scale_rule {
  ocp_floor,  ///< OCP v1.0: 2^(floor(log2 amax) - emax_elem); may clip the block's largest values
  te_ceil     ///< TransformerEngine's reference: 2^ceil(log2(amax / max_elem)); never clips
};
/// Its names in checkpoints, the CLI and Python (one table: nvfp4/detail/enum_names.hpp).
namespace detail {
template <>
struct enum_table<mx_scale_rule> {
  static constexpr enum_entry<mx_scale_rule> entries[] = {{"ocp_floor", mx_scale_rule::ocp_floor}, {"te_ceil", mx_scale_rule::te_ceil}};
};
}  // namespace detail

/// How elements are rounded to the element format.
enum class rounding_mode {
  nearest_even,  ///< RNE with saturation (the hardware's cvt.rn.satfinite)
  stochastic     ///< stochastic rounding (docs/numerics_spec.md §5); E2M1 elements only
};
/// Its names in checkpoints, the CLI and Python (one table: nvfp4/detail/enum_names.hpp).
namespace detail {
template <>
struct enum_table<rounding_mode> {
  static constexpr enum_entry<rounding_mode> entries[] = {{"nearest_even", rounding_mode::nearest_even},
                                                          {"stochastic", rounding_mode::stochastic}};
};
}  // namespace detail

/// What a quantizer does beyond the format's defaults.
struct quantize_options {
  rounding_mode rounding = rounding_mode::nearest_even;
  /// Seed of the stochastic-rounding stream (ignored for round-to-nearest).
  std::uint64_t seed = 0;
  /// E8M0 scale selection for MX formats (ignored for NVFP4).
  mx_scale_rule mx_rule = mx_scale_rule::ocp_floor;
  /// Which copy the result is recorded as; the data is always that of the view passed in.
  quantized_axis axis = quantized_axis::rowwise;
};

namespace detail {
/// Throws unless stochastic rounding, when asked for, has E2M1 elements to round to (every
/// quantizer's entry point checks this first, the RHT ones in transforms/ too).
template <block_scaled_format Format>
void check_rounding(const quantize_options& options) {
  require(options.rounding != rounding_mode::stochastic || Format::is_fp4, errc::unsupported,
          "stochastic rounding is defined for E2M1 elements only");
}
}  // namespace detail

}  // namespace nvfp4
