// nvfp4/simd/scalar.hpp: the portable kernel set of the block-scaling fast path, one element at a
// time through the library's own codecs and scale rules (what builds without AVX2 run). The
// vector kernel sets (vector_kernels.hpp) offer the same functions with the same results.
#pragma once

#include <algorithm>
#include <cstdint>

#include "nvfp4/config.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/formats/traits.hpp"
#include "nvfp4/scaling/scale_rules.hpp"

namespace nvfp4::simd {

/// Bits of |x| (sign cleared): for non-negative floats the integer order is the float order, and
/// anything at or above float_inf_bits is Inf or NaN.
inline constexpr std::uint32_t abs_bits_mask = 0x7FFFFFFFu;
inline constexpr std::uint32_t float_inf_bits = 0x7F800000u;

struct scalar_kernels {
  static constexpr const char* name = "scalar";

  /// max of the |x| bits over x[0..n): the amax when below float_inf_bits, else a NaN/Inf is there.
  static std::uint32_t abs_max_bits(const float* x, index_t n) {
    std::uint32_t result = 0;
    for (index_t i = 0; i < n; ++i) result = std::max(result, detail::float_bits(x[i]) & abs_bits_mask);
    return result;
  }
  static std::uint32_t abs_max_bits(const bf16* x, index_t n) {
    std::uint32_t result = 0;
    for (index_t i = 0; i < n; ++i)
      result = std::max(result, (static_cast<std::uint32_t>(x[i].bits()) << 16) & abs_bits_mask);
    return result;
  }

  /// bf16 -> float (exact).
  static void widen(const bf16* x, index_t n, float* out) {
    for (index_t i = 0; i < n; ++i) out[i] = x[i].to_float();
  }

  /// dst[i * dst_stride + c] = src[c * src_stride + i] for i < rows, c < cols: a panel of a view
  /// whose columns are contiguous, copied into contiguous rows.
  static void transpose_panel(const float* src, index_t src_stride, index_t rows, index_t cols, float* dst,
                              index_t dst_stride) {
    for (index_t c = 0; c < cols; ++c)
      for (index_t i = 0; i < rows; ++i) dst[i * dst_stride + c] = src[c * src_stride + i];
  }

  /// inout[b] = max(inout[b], max |x| bits over block b = x[b*Block, min((b+1)*Block, n))).
  template <int Block>
  static void block_abs_max_bits(const float* x, index_t n, std::uint32_t* inout) {
    for (index_t i = 0; i < n; ++i) {
      std::uint32_t& block = inout[i / Block];
      block = std::max(block, detail::float_bits(x[i]) & abs_bits_mask);
    }
  }

  /// NVFP4 block scales (docs/numerics_spec.md §2 steps 3-4) for `count` block amaxes (as bits): the UE4M3
  /// code of each and the factor its elements are multiplied by.
  static void nvfp4_block_scales(const std::uint32_t* block_amax_bits, index_t count, tensor_scale scale,
                                 std::uint8_t* codes, float* factors) {
    for (index_t b = 0; b < count; ++b) {
      const ue4m3 block_scale = nvfp4_block_scale(detail::bits_float(block_amax_bits[b]), scale.encode);
      codes[b] = block_scale.bits();
      factors[b] = nvfp4_block_encode_factor(block_scale, scale.decode);
    }
  }

  /// Codes of x[i] * factors[i / Block] in format T (RNE, saturating). FP4 (4-bit T) is packed
  /// two per byte, element 2i in the low nibble; an odd tail leaves a zero high nibble.
  template <minifloat_traits T, int Block>
  static void encode_scaled(const float* x, index_t n, const float* factors, std::uint8_t* out) {
    constexpr bool packed = T.exponent_bits + T.mantissa_bits + 1 == 4;
    for (index_t i = 0; i < n; ++i) {
      const std::uint8_t code = detail::encode_minifloat<T>(x[i] * factors[i / Block], overflow_policy::saturate);
      if constexpr (packed) {
        if (i & 1) {
          out[i / 2] = static_cast<std::uint8_t>(out[i / 2] | (code << 4));
        } else {
          out[i / 2] = code;
        }
      } else {
        out[i] = code;
      }
    }
  }

  /// One code per byte for each x[i] in format T with the given overflow policy.
  template <minifloat_traits T, overflow_policy Policy>
  static void encode(const float* x, index_t n, std::uint8_t* out) {
    for (index_t i = 0; i < n; ++i) out[i] = detail::encode_minifloat<T>(x[i], Policy);
  }

  /// out[i] = value of code codes[i] in format T.
  template <minifloat_traits T>
  static void decode(const std::uint8_t* codes, index_t n, float* out) {
    for (index_t i = 0; i < n; ++i) out[i] = detail::decode_minifloat<T>(codes[i]);
  }

  /// Dequantizes n elements: (element * scale_values[i / Block]), times decode_scale when
  /// TensorScale (docs/numerics_spec.md §2 step 6). Elements are packed E2M1 (4-bit T) or one byte each.
  template <minifloat_traits T, int Block, bool TensorScale>
  static void dequantize(const std::uint8_t* elements, index_t n, const float* scale_values, float decode_scale,
                         float* out) {
    constexpr bool packed = T.exponent_bits + T.mantissa_bits + 1 == 4;
    for (index_t i = 0; i < n; ++i) {
      const std::uint8_t code = packed ? static_cast<std::uint8_t>((elements[i / 2] >> ((i & 1) * 4)) & 0xF) : elements[i];
      const float block_value = detail::decode_minifloat<T>(code) * scale_values[i / Block];
      out[i] = TensorScale ? block_value * decode_scale : block_value;
    }
  }
};

}  // namespace nvfp4::simd
