// nvfp4/scaling/detail/block_kernels.hpp: the quantizers' block kernels written once over an ISA's
// lane operations (simd/<isa>/ops.hpp): block amax, NVFP4 block scales over arrays, scaled encode,
// the one-pass NVFP4 1x16 row quantizer, TE's MXFP8 quantizer across lanes, dequantize. They build
// on the kernels several layers share, which sit in simd/: the codecs (minifloat_lanes.hpp), the
// NVFP4 lane scales (nvfp4_lanes.hpp) and the panel copies (panels.hpp); block_kernels<Ops> names
// those too, so the quantizers see one set. With the scalar Ops they are the portable kernels;
// tails shorter than a vector go through that instantiation. Bit-identical to the reference codecs
// and scale rules for every input.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "nvfp4/config.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/formats/e2m1.hpp"
#include "nvfp4/formats/traits.hpp"
#include "nvfp4/scaling/quantize_options.hpp"
#include "nvfp4/scaling/scale_rules.hpp"
#include "nvfp4/simd/dispatch.hpp"
#include "nvfp4/simd/nvfp4_lanes.hpp"
#include "nvfp4/simd/panels.hpp"
#include "nvfp4/simd/scalar/ops.hpp"

namespace nvfp4::detail {

using simd::abs_bits_mask;
using simd::float_inf_bits;
using simd::is_packed_format;

template <class Ops>
struct block_kernels : simd::nvfp4_lanes<Ops>, simd::panels<Ops> {
  using lanes = simd::nvfp4_lanes<Ops>;
  using panels = simd::panels<Ops>;
  static_assert(lanes::one_sixth == one_sixth, "simd/nvfp4_lanes.hpp's 1/6 is scale_rules.hpp's");
  static constexpr const char* name = Ops::name;
  static constexpr int width = Ops::width;
  using vf = typename Ops::vf;
  using vi = typename Ops::vi;
  /// What the last (width - 1) or fewer elements of a run go through.
  using tail = block_kernels<simd::scalar::ops>;
  using lanes::abs_max_bits;
  using lanes::blocks_across_per_step;
  using lanes::bytes_to_word;
  using lanes::decode;
  using lanes::e2m1_codes_as_words;
  using lanes::encode;
  using lanes::encode_bits;
  using lanes::lane_abs_max_bits;
  using lanes::nvfp4_scale_lanes;
  using panels::load_bits_of;
  using panels::transpose_panel;
  using panels::widen;
  using typename lanes::nvfp4_scale_constants;

  /// inout[b] = max(inout[b], max |x| bits over block b = x[b*Block, min((b+1)*Block, n))).
  template <int Block>
  static void block_abs_max_bits(const float* x, index_t n, std::uint32_t* inout) {
    static_assert(Block % width == 0);
    const vi mask = Ops::set_int(abs_bits_mask);
    index_t i = 0;
    index_t block = 0;
    for (; i + Block <= n; i += Block, ++block) {
      vi m = Ops::bit_and(Ops::as_int(Ops::load(x + i)), mask);
      for (int k = width; k < Block; k += width) m = Ops::max(m, Ops::bit_and(Ops::as_int(Ops::load(x + i + k)), mask));
      inout[block] = std::max(inout[block], Ops::reduce_max(m));
    }
    for (; i < n; ++i) inout[block] = std::max(inout[block], float_bits(x[i]) & abs_bits_mask);  // the last, partial block
  }

  /// NVFP4 block scales for `count` block amaxes (as bits): nvfp4_scale_lanes over arrays.
  static void nvfp4_block_scales(const std::uint32_t* block_amax_bits, index_t count, tensor_scale scale, std::uint8_t* codes,
                                 float* factors) {
    const nvfp4_scale_constants constants(scale);
    index_t b = 0;
    for (; b + width <= count; b += width) {
      vi code;
      vf factor;
      nvfp4_scale_lanes(Ops::load_bits(block_amax_bits + b), constants, code, factor);
      Ops::store_bytes(codes + b, code);
      Ops::store(factors + b, factor);
    }
    if constexpr (width > 1) {
      // Fewer than `width` blocks are left; saying so keeps GCC 12 from vectorizing the scalar
      // tail for long counts and then warning that such stores overflow a short buffer.
      NVFP4_ASSUME(count - b < width);
      tail::nvfp4_block_scales(block_amax_bits + b, count - b, scale, codes + b, factors + b);
    }
  }

  /// E2M1 codes of x[i] * factors[i / Block] packed two per byte, for the first n / (16 * width)
  /// groups of 16 vectors (float, or bf16 widened exactly): e2m1_codes_as_words two vectors at a
  /// time, store_nibble_words_x4 eight at a time. Returns the elements done.
  template <int Block, class T>
  static index_t encode_e2m1_scaled_groups(const T* x, index_t n, const float* factors, std::uint8_t* out) {
    constexpr index_t group = 16 * width;
    static_assert(group % Block == 0, "a group ends inside a block");
    index_t i = 0;
    for (; i + group <= n; i += group) {
      const auto scaled = [&](int vector) {
        return Ops::mul(Ops::as_float(load_bits_of(x + i + vector * width)), Ops::set(factors[(i + vector * width) / Block]));
      };
      for (int half = 0; half < 2; ++half) {
        vi words[4];
        for (int p = 0; p < 4; ++p) words[p] = e2m1_codes_as_words(scaled(8 * half + 2 * p), scaled(8 * half + 2 * p + 1));
        Ops::store_nibble_words_x4(out + (i + 8 * half * width) / 2, words);
      }
    }
    return i;
  }

  /// E2M1 codes of x[i] * factors[i / Block] packed two per byte: encode_scaled<e2m1, Block>'s
  /// bytes (an odd n leaves the last byte's high nibble), whole groups through
  /// encode_e2m1_scaled_groups.
  template <int Block>
  static void encode_e2m1_scaled(const float* x, index_t n, const float* factors, std::uint8_t* out) {
    index_t i = 0;
    if constexpr (16 * width % Block == 0) i = encode_e2m1_scaled_groups<Block>(x, n, factors, out);
    encode_scaled<e2m1_traits, Block>(x + i, n - i, factors + i / Block, out + i / 2);
  }

  /// NVFP4 1x16 quantization of x[0..n) (float, or bf16 read as its exact float value), a row or
  /// a piece of one that starts at a block, in one walk (chunks of 64 blocks, each read twice from
  /// L1): each 16-element block's amax, its UE4M3 scale code (scale_codes[b]) and its elements'
  /// E2M1 codes, packed two per byte into out (an odd n leaves the last byte's high nibble as
  /// encode_scaled does). The same bytes as block_abs_max_bits, nvfp4_block_scales and
  /// encode_scaled<e2m1, 16> in turn on the float values; `width` blocks go at a time, so their
  /// amaxes come out of one max tree and their scales out of one nvfp4_scale_lanes, and the codes
  /// are encoded two vectors and packed eight at a time.
  template <class T>
  static void quantize_nvfp4_1x16(const T* x, index_t n, tensor_scale scale, std::uint8_t* scale_codes, std::uint8_t* out) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>);
    constexpr int block = 16;
    constexpr int vectors_per_block = block / width;
    constexpr index_t group = block * width;  // elements per step: `width` blocks, `block` vectors
    constexpr index_t chunk_blocks = 64;      // 4 KiB of x, read again from L1 by the second pass
    static_assert(block % width == 0 && chunk_blocks % width == 0);
    const vi abs_mask = Ops::set_int(abs_bits_mask);
    const nvfp4_scale_constants constants(scale);
    alignas(64) float factors[chunk_blocks];
    index_t i = 0;
    while (i + group <= n) {
      // Two passes over a chunk: all its scales, then all its codes. Each block's codes wait on
      // a long chain (amax tree, scale, reciprocal); a pass of scales alone, then one of codes
      // alone, gives the core independent work in both.
      const index_t end = i + std::min(chunk_blocks * block, (n - i) / group * group);
      for (index_t g = i; g < end; g += group) {
        vi block_max[width];
        for (int b = 0; b < width; ++b) {
          const T* const p = x + g + b * block;
          vi m = Ops::bit_and(load_bits_of(p), abs_mask);
          for (int k = 1; k < vectors_per_block; ++k) m = Ops::max(m, Ops::bit_and(load_bits_of(p + k * width), abs_mask));
          block_max[b] = m;
        }
        vi code;
        vf factor;
        nvfp4_scale_lanes(Ops::reduce_max_each(block_max), constants, code, factor);
        Ops::store_bytes(scale_codes + g / block, code);
        Ops::store(factors + (g - i) / block, factor);
      }
      encode_e2m1_scaled_groups<block>(x + i, end - i, factors, out + i / 2);
      i = end;
    }
    if constexpr (std::is_same_v<T, bf16>) {  // fewer than a group left: as float
      alignas(64) float rest[group];
      widen(x + i, n - i, rest);
      quantize_nvfp4_1x16(rest, n - i, scale, scale_codes + i / block, out + i / 2);
    } else if constexpr (width > 1) {
      tail::quantize_nvfp4_1x16(x + i, n - i, scale, scale_codes + i / block, out + i / 2);
    } else if (i < n) {  // the last, partial block
      std::uint32_t amax_bits = 0;
      block_abs_max_bits<block>(x + i, n - i, &amax_bits);
      float block_factor;
      nvfp4_block_scales(&amax_bits, 1, scale, scale_codes + i / block, &block_factor);
      encode_scaled<e2m1_traits, block>(x + i, n - i, &block_factor, out + i / 2);
    }
  }

  /// The N registers of a kernel that quantizes `width` N-element blocks of a columnwise copy held
  /// across lanes: v[i] = source[i * stride + lane], float or bf16 (widened exactly).
  template <int N, class T>
  static NVFP4_ALWAYS_INLINE void load_across(const T* source, index_t stride, vf (&v)[N]) {
#pragma GCC unroll 32
    for (int i = 0; i < N; ++i) v[i] = Ops::as_float(load_bits_of(source + i * stride));
  }

  /// TransformerEngine's MXFP8 block scale (scaling/mxfp8_quantize.hpp: e8m0_round_up of amax *
  /// fp32(1 / fp8_max)) and the factor 2^(127 - b) its elements are multiplied by, for `width`
  /// block amaxes (as bits), lane-wise: the same fp32 product, the same integer rule. Finite amaxes.
  static NVFP4_ALWAYS_INLINE void mxfp8_te_scale_lanes(vi amax_bits, float reciprocal, vi& code, vf& factor) {
    const vi zero = Ops::set_int(0);
    const vi bits = Ops::as_int(Ops::mul(Ops::as_float(amax_bits), Ops::set(reciprocal)));
    const vi exponent = Ops::template shift_right<23>(bits);
    // Up by one when a mantissa bit is set, but not at 0xFE (it saturates) nor for values up to
    // 2^-127 (bits <= 0x400000: those give 0x00).
    vi up = Ops::select(Ops::greater(Ops::bit_and(bits, Ops::set_int(0x7FFFFFu)), zero), Ops::set_int(1), zero);
    up = Ops::select(Ops::greater(exponent, Ops::set_int(0xFD)), zero, up);
    up = Ops::select(Ops::greater(bits, Ops::set_int(0x400000u)), up, zero);
    code = Ops::add(exponent, up);
    // 2^(127 - code): the exponent field 254 - code, or for code 254 the subnormal 2^-127.
    factor = Ops::as_float(Ops::select(Ops::greater(code, Ops::set_int(253)), Ops::set_int(0x00400000u),
                                       Ops::template shift_left<23>(Ops::sub(Ops::set_int(254), code))));
  }

  /// MXFP8 quantization by TransformerEngine's rule of `width` 32-element blocks held across the
  /// lanes of 32 registers (block `lane` is v[i][lane]): per lane the block's E8M0 scale code
  /// (mxfp8_te_scale_lanes) and its elements times the factor, rounded to T with saturation, four
  /// codes to a 32-bit lane (elements 4j .. 4j + 3 in packed[j], the first in the low byte). The
  /// fp32 operations of quantize_mxfp8_te, lane for lane.
  template <minifloat_traits T>
  static NVFP4_ALWAYS_INLINE void quantize_mxfp8_te_across(const vf (&v)[32], float reciprocal, vi& scale_code, vi (&packed)[8]) {
    vf factor;
    mxfp8_te_scale_lanes(lane_abs_max_bits(v), reciprocal, scale_code, factor);
    const auto code = [&](int i) { return lanes::template encode_bits<T, overflow_policy::saturate>(Ops::as_int(Ops::mul(v[i], factor))); };
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) packed[j] = bytes_to_word(code(4 * j), code(4 * j + 1), code(4 * j + 2), code(4 * j + 3));
  }

  /// Writes a result of quantize_mxfp8_te_across: lane l's 32 codes at data + l * data_stride, its
  /// scale code at scales[l * scale_stride].
  static NVFP4_ALWAYS_INLINE void store_mxfp8_across(const vi (&packed)[8], vi scale_code, std::uint8_t* data, index_t data_stride,
                                                     std::uint8_t* scales, index_t scale_stride) {
    Ops::store_lanes4(data, data_stride, packed[0], packed[1], packed[2], packed[3]);
    Ops::store_lanes4(data + 16, data_stride, packed[4], packed[5], packed[6], packed[7]);
    alignas(64) std::uint8_t codes[width];
    Ops::store_bytes(codes, scale_code);
    for (int lane = 0; lane < width; ++lane) scales[lane * scale_stride] = codes[lane];
  }

  /// Codes of x[i] * factors[i / Block] in format T (RNE, saturating). FP4 (4-bit T) is packed
  /// two per byte, element 2i in the low nibble; an odd tail leaves the other nibble of its byte.
  template <minifloat_traits T, int Block>
  static void encode_scaled(const float* x, index_t n, const float* factors, std::uint8_t* out) {
    static_assert(Block % width == 0 && Block % 2 == 0);
    constexpr bool packed = is_packed_format<T>;
    index_t i = 0;
    for (; i + Block <= n; i += Block) {
      const vf factor = Ops::set(factors[i / Block]);
      for (int k = 0; k < Block; k += width) {
        const vi code = lanes::template encode_bits<T, overflow_policy::saturate>(Ops::as_int(Ops::mul(Ops::load(x + i + k), factor)));
        if constexpr (packed) {
          Ops::store_nibbles(out, i + k, code);
        } else {
          Ops::store_bytes(out + i + k, code);
        }
      }
    }
    // The last, partial block.
    const simd::scalar::ops::vf factor = i < n ? factors[i / Block] : 0.0f;
    for (; i < n; ++i) {
      const auto code = tail::encode_bits<T, overflow_policy::saturate>(float_bits(x[i] * factor));
      if constexpr (packed) {
        simd::scalar::ops::store_nibbles(out, i, code);
      } else {
        out[i] = static_cast<std::uint8_t>(code);
      }
    }
  }

  /// Dequantizes n elements: (element * scale_values[i / Block]), times decode_scale when
  /// TensorScale (docs/numerics_spec.md §2 step 6). Elements are packed E2M1 (4-bit T) or one byte each.
  template <minifloat_traits T, int Block, bool TensorScale>
  static void dequantize(const std::uint8_t* elements, index_t n, const float* scale_values, float decode_scale, float* out) {
    static_assert(Block % width == 0 && Block % 2 == 0);
    constexpr bool packed = is_packed_format<T>;
    static constexpr decode_table<T, packed ? 16 : 256> table{};
    const vf decode = Ops::set(decode_scale);
    index_t i = 0;
    for (; i + Block <= n; i += Block) {
      const vf scale = Ops::set(scale_values[i / Block]);
      for (int k = 0; k < Block; k += width) {
        const vf element = packed ? Ops::lookup16(Ops::load_nibbles(elements, i + k), table.values)
                                  : Ops::gather(Ops::load_bytes(elements + i + k), table.values);
        const vf block_value = Ops::mul(element, scale);
        Ops::store(out + i + k, TensorScale ? Ops::mul(block_value, decode) : block_value);
      }
    }
    for (; i < n; ++i) {  // the last, partial block
      const std::uint32_t code = packed ? simd::scalar::ops::load_nibbles(elements, i) : elements[i];
      const float block_value = table.values[code] * scale_values[i / Block];
      out[i] = TensorScale ? block_value * decode_scale : block_value;
    }
  }
};

/// The block kernels of this build's ISA (simd/dispatch.hpp).
using fast_block_kernels = block_kernels<simd::ops>;

}  // namespace nvfp4::detail
