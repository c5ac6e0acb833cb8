// nvfp4/scaling/block_format.hpp: block_format<Element, Scale, BlockRows, BlockCols>, the
// descriptor of a block-scaled format, and the four the GPU stack uses (docs/numerics_spec.md §2, §7).
#pragma once

#include <type_traits>

#include "nvfp4/formats/e2m1.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e8m0.hpp"
#include "nvfp4/formats/packed_fp4.hpp"

namespace nvfp4 {

/// A block-scaled format: elements of type Element, one Scale per BlockRows x BlockCols block.
/// A UE4M3 scale implies NVFP4's two-level scheme (an FP32 tensor scale above the block scales);
/// an E8M0 scale is the OCP MX scheme (powers of two, no tensor scale).
template <class Element, class Scale, int BlockRows, int BlockCols>
struct block_format {
  using element_type = Element;
  using scale_type = Scale;
  static constexpr int block_rows = BlockRows;
  static constexpr int block_cols = BlockCols;
  static constexpr bool has_tensor_scale = std::is_same_v<Scale, ue4m3>;
  static constexpr bool is_fp4 = std::is_same_v<Element, e2m1>;
  /// Packed storage: two E2M1 per byte, or one 8-bit element per byte.
  using storage_type = std::conditional_t<is_fp4, e2m1x2, Element>;
  static constexpr int elements_per_storage = is_fp4 ? 2 : 1;
  static constexpr float element_max = Element::max().to_float();

  static_assert(std::is_same_v<Scale, ue4m3> || std::is_same_v<Scale, e8m0>, "block scales are UE4M3 (NVFP4) or E8M0 (MX)");
  static_assert(BlockCols > 0 && BlockRows > 0 && BlockCols % 2 == 0, "block shape must be positive and even");
};

/// NVFP4 with one scale per 16 consecutive elements of a row (activations, gradients).
using nvfp4_1x16 = block_format<e2m1, ue4m3, 1, 16>;
/// NVFP4 with one scale per 16x16 tile (weights); the same scale serves both directions.
using nvfp4_16x16 = block_format<e2m1, ue4m3, 16, 16>;
/// OCP MXFP4: E2M1 elements, one E8M0 scale per 32.
using mxfp4 = block_format<e2m1, e8m0, 1, 32>;
/// OCP MXFP8 (E4M3 elements), one E8M0 scale per 32.
using mxfp8 = block_format<e4m3, e8m0, 1, 32>;

template <class T>
inline constexpr bool is_block_format_v = false;
template <class E, class S, int R, int C>
inline constexpr bool is_block_format_v<block_format<E, S, R, C>> = true;

template <class T>
concept block_scaled_format = is_block_format_v<T>;

}  // namespace nvfp4
