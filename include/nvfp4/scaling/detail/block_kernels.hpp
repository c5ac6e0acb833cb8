// nvfp4/scaling/detail/block_kernels.hpp: the block-scaling kernels (amax, panel copies, block
// amax, NVFP4 block scales, scaled encode, the NVFP4 1x16 row quantizer, dequantize) and the
// bulk codecs, written once over an ISA's lane operations (simd/<isa>/ops.hpp). With the scalar
// Ops they are the portable kernels; tails shorter than a vector go through that instantiation.
// Bit-identical to the reference codecs and scale rules for every input.
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
#include "nvfp4/simd/scalar/ops.hpp"

namespace nvfp4::detail {

/// Bits of |x| (sign cleared): for non-negative floats the integer order is the float order, and
/// anything at or above float_inf_bits is Inf or NaN.
inline constexpr std::uint32_t abs_bits_mask = 0x7FFFFFFFu;
inline constexpr std::uint32_t float_inf_bits = 0x7F800000u;

/// True when format T's codes are 4 bits wide (stored two per byte).
template <minifloat_traits T>
inline constexpr bool is_packed_format = T.exponent_bits + T.mantissa_bits + 1 == 4;

template <class Ops>
struct block_kernels {
  static constexpr const char* name = Ops::name;
  static constexpr int width = Ops::width;
  using vf = typename Ops::vf;
  using vi = typename Ops::vi;
  /// What the last (width - 1) or fewer elements of a run go through.
  using tail = block_kernels<simd::scalar::ops>;

  /// Round-to-nearest-even encode of `width` floats (given as bits) to format T, bit-identical to
  /// detail::encode_minifloat<T> for every input, NaN, Inf and subnormals included.
  template <minifloat_traits T, overflow_policy Policy>
  static NVFP4_ALWAYS_INLINE vi encode_bits(vi bits) {
    constexpr int magnitude_bits = T.exponent_bits + T.mantissa_bits;
    constexpr int shift = 23 - T.mantissa_bits;
    constexpr int min_exponent = 1 - T.bias;
    constexpr std::uint32_t min_normal_bits = float_bits(exp2i(min_exponent));
    constexpr float subnormal_magic = exp2i(min_exponent - T.mantissa_bits + 23);
    constexpr std::uint32_t normal_offset = static_cast<std::uint32_t>(127 - T.bias) << T.mantissa_bits;
    constexpr std::uint32_t overflow_code =
        Policy == overflow_policy::saturate
            ? T.max_code
            : (T.has_inf ? (((1u << T.exponent_bits) - 1) << T.mantissa_bits) : T.nan_code);

    const vi magnitude_in = Ops::bit_and(bits, Ops::set_int(abs_bits_mask));
    // T's normal range: round the float's significand to T's mantissa width in place (add just
    // under half a quantum, plus the kept LSB for ties to even); a carry bumps the exponent.
    const vi kept_lsb = Ops::bit_and(Ops::template shift_right<shift>(magnitude_in), Ops::set_int(1));
    const vi biased = Ops::add(Ops::add(magnitude_in, Ops::set_int((1u << (shift - 1)) - 1)), kept_lsb);
    const vi normal = Ops::sub(Ops::template shift_right<shift>(biased), Ops::set_int(normal_offset));
    // Below T's smallest normal the quantum is fixed, 2^(emin - m). Adding 2^(emin - m + 23)
    // makes that quantum the float's last place, so the FPU's own RNE rounds; what is left above
    // the magic constant's bits is the code.
    const vi subnormal = Ops::sub(Ops::as_int(Ops::add(Ops::as_float(magnitude_in), Ops::set(subnormal_magic))),
                                  Ops::set_int(float_bits(subnormal_magic)));
    vi magnitude = Ops::select(Ops::greater(Ops::set_int(min_normal_bits), magnitude_in), subnormal, normal);
    if constexpr (overflow_code == T.max_code) {
      magnitude = Ops::min(magnitude, Ops::set_int(T.max_code));
    } else {
      magnitude = Ops::select(Ops::greater(magnitude, Ops::set_int(T.max_code)), Ops::set_int(overflow_code), magnitude);
    }
    const vi sign = T.has_sign ? Ops::template shift_left<magnitude_bits>(Ops::template shift_right<31>(bits))
                               : Ops::set_int(0);
    vi code = Ops::bit_or(sign, magnitude);
    if constexpr (T.has_nan) {
      // The satfinite conversion writes the positive NaN code; the propagating one keeps the sign.
      const vi nan = Policy == overflow_policy::saturate ? Ops::set_int(T.nan_code)
                                                         : Ops::bit_or(sign, Ops::set_int(T.nan_code));
      code = Ops::select(Ops::greater(magnitude_in, Ops::set_int(float_inf_bits)), nan, code);
    }
    return code;
  }

  /// max of the |x| bits over x[0..n): the amax when below float_inf_bits, else a NaN/Inf is there.
  static std::uint32_t abs_max_bits(const float* x, index_t n) {
    const vi mask = Ops::set_int(abs_bits_mask);
    vi m0 = Ops::set_int(0), m1 = m0, m2 = m0, m3 = m0;
    index_t i = 0;
    for (; i + 4 * width <= n; i += 4 * width) {
      m0 = Ops::max(m0, Ops::bit_and(Ops::as_int(Ops::load(x + i)), mask));
      m1 = Ops::max(m1, Ops::bit_and(Ops::as_int(Ops::load(x + i + width)), mask));
      m2 = Ops::max(m2, Ops::bit_and(Ops::as_int(Ops::load(x + i + 2 * width)), mask));
      m3 = Ops::max(m3, Ops::bit_and(Ops::as_int(Ops::load(x + i + 3 * width)), mask));
    }
    for (; i + width <= n; i += width) m0 = Ops::max(m0, Ops::bit_and(Ops::as_int(Ops::load(x + i)), mask));
    const std::uint32_t head = Ops::reduce_max(Ops::max(Ops::max(m0, m1), Ops::max(m2, m3)));
    if constexpr (width == 1) return head;
    else return std::max(head, tail::abs_max_bits(x + i, n - i));
  }

  static std::uint32_t abs_max_bits(const bf16* x, index_t n) {
    const vi mask = Ops::set_int(abs_bits_mask);
    vi m0 = Ops::set_int(0), m1 = m0;
    index_t i = 0;
    for (; i + 2 * width <= n; i += 2 * width) {
      m0 = Ops::max(m0, Ops::bit_and(Ops::load_bf16_bits(x + i), mask));
      m1 = Ops::max(m1, Ops::bit_and(Ops::load_bf16_bits(x + i + width), mask));
    }
    for (; i + width <= n; i += width) m0 = Ops::max(m0, Ops::bit_and(Ops::load_bf16_bits(x + i), mask));
    const std::uint32_t head = Ops::reduce_max(Ops::max(m0, m1));
    if constexpr (width == 1) return head;
    else return std::max(head, tail::abs_max_bits(x + i, n - i));
  }

  /// `width` consecutive floats, or bf16 values widened to float (exact), as bits.
  static NVFP4_ALWAYS_INLINE vi load_bits_of(const float* p) { return Ops::as_int(Ops::load(p)); }
  static NVFP4_ALWAYS_INLINE vi load_bits_of(const bf16* p) { return Ops::load_bf16_bits(p); }

  /// bf16 -> float (exact).
  static void widen(const bf16* x, index_t n, float* out) {
    index_t i = 0;
    for (; i + width <= n; i += width) Ops::store(out + i, Ops::as_float(Ops::load_bf16_bits(x + i)));
    if constexpr (width > 1) tail::widen(x + i, n - i, out + i);
  }

  /// dst[i * dst_stride + c] = src[c * src_stride + i] (widened to float) for i < rows, c < cols:
  /// a panel of a view whose columns are contiguous, float or bf16, copied into contiguous float
  /// rows, width x width words at a time.
  template <class T>
  static void transpose_panel(const T* src, index_t src_stride, index_t rows, index_t cols, float* dst, index_t dst_stride) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>);
    index_t i0 = 0;
    if constexpr (width > 1) {
      for (; i0 + width <= rows; i0 += width) {
        index_t c = 0;
        for (; c + width <= cols; c += width) {
          vi block[width];
          for (int k = 0; k < width; ++k) block[k] = load_bits_of(src + (c + k) * src_stride + i0);
          Ops::transpose(block);
          for (int k = 0; k < width; ++k) Ops::store(dst + (i0 + k) * dst_stride + c, Ops::as_float(block[k]));
        }
        tail::transpose_panel(src + c * src_stride + i0, src_stride, width, cols - c, dst + i0 * dst_stride + c, dst_stride);
      }
    }
    for (index_t c = 0; c < cols; ++c)
      for (index_t i = i0; i < rows; ++i) dst[i * dst_stride + c] = to_float32(src[c * src_stride + i]);
  }

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

  /// The constants of nvfp4_scale_lanes for one tensor scale, made once per loop.
  struct nvfp4_scale_constants {
    vf multiplier;  // S_enc / 6, the block amax's factor
    vf decode;      // S_dec
    explicit nvfp4_scale_constants(tensor_scale scale) : multiplier(Ops::set(scale.encode * one_sixth)), decode(Ops::set(scale.decode)) {}
  };

  /// NVFP4 block scales (docs/numerics_spec.md §2 steps 3-4) of `width` block amaxes (as bits):
  /// the UE4M3 code of each and the factor its elements are multiplied by. The same fp32
  /// operations as nvfp4_block_scale / nvfp4_block_encode_factor, lane-wise.
  static NVFP4_ALWAYS_INLINE void nvfp4_scale_lanes(vi amax_bits, const nvfp4_scale_constants& k, vi& code, vf& factor) {
    const vf flt_max = Ops::set(FLT_MAX);
    const vf d = Ops::min(Ops::mul(Ops::as_float(amax_bits), k.multiplier), flt_max);
    code = encode_bits<ue4m3_traits, overflow_policy::saturate>(Ops::as_int(d));
    // Exact UE4M3 decode of a finite code: normal (e + 120) << 23 | m << 20, subnormal m * 2^-9.
    const vi exponent = Ops::template shift_right<3>(code);
    const vi mantissa = Ops::bit_and(code, Ops::set_int(7));
    const vi normal = Ops::bit_or(Ops::template shift_left<23>(Ops::add(exponent, Ops::set_int(120))),
                                  Ops::template shift_left<20>(mantissa));
    const vi subnormal = Ops::as_int(Ops::mul(Ops::to_float(mantissa), Ops::set(exp2i(-9))));
    const vf value = Ops::as_float(Ops::select(Ops::greater(Ops::set_int(8), code), subnormal, normal));
    factor = Ops::min(Ops::div(Ops::set(1.0f), Ops::mul(value, k.decode)), flt_max);
  }

  /// NVFP4 block scales for `count` block amaxes (as bits): nvfp4_scale_lanes over arrays.
  static void nvfp4_block_scales(const std::uint32_t* block_amax_bits, index_t count, tensor_scale scale,
                                 std::uint8_t* codes, float* factors) {
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

  /// E2M1 codes (round to nearest even, saturating) of a's and b's lanes in Ops::narrow_to_words
  /// order: the ISA's own word encoder where it has one, else encode_bits per vector.
  static NVFP4_ALWAYS_INLINE vi e2m1_codes_as_words(vf a, vf b) {
    if constexpr (requires { Ops::e2m1_codes_as_words(a, b); }) {
      return Ops::e2m1_codes_as_words(a, b);
    } else {
      return Ops::narrow_to_words(encode_bits<e2m1_traits, overflow_policy::saturate>(Ops::as_int(a)),
                                  encode_bits<e2m1_traits, overflow_policy::saturate>(Ops::as_int(b)));
    }
  }

  /// E2M1 codes (round to nearest even, saturating) of a's and b's lanes, each in its lane:
  /// through the ISA's word encoder where it has one.
  static NVFP4_ALWAYS_INLINE void e2m1_codes(vf a, vf b, vi& code_a, vi& code_b) {
    if constexpr (requires { Ops::e2m1_codes_as_words(a, b); }) {
      Ops::widen_words(Ops::e2m1_codes_as_words(a, b), code_a, code_b);
    } else {
      code_a = encode_bits<e2m1_traits, overflow_policy::saturate>(Ops::as_int(a));
      code_b = encode_bits<e2m1_traits, overflow_policy::saturate>(Ops::as_int(b));
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

  /// Blocks per lane that one step of a columnwise walk quantizes side by side: enough for each
  /// lane's packed codes to fill one 16-byte store where the ISA has 16 lanes.
  static constexpr int blocks_across_per_step = width >= 16 ? 2 : 1;

  /// NVFP4 1x16 quantization of `width` blocks held across the lanes of 16 registers: block
  /// `lane` is v[i][lane], i < 16 (a columnwise copy's blocks, loaded along the source's rows, so
  /// nothing is transposed but the codes). Per lane: the block's UE4M3 scale code (scale_code) and
  /// its E2M1 codes packed two per byte along the block, bytes 0-3 in packed[0] and 4-7 in
  /// packed[1] (element 2k in byte k's low nibble). The fp32 operations of quantize_nvfp4_1x16,
  /// lane for lane, so the bytes are the same.
  static NVFP4_ALWAYS_INLINE void quantize_nvfp4_1x16_across(const vf (&v)[16], const nvfp4_scale_constants& constants, vi& scale_code,
                                                             vi (&packed)[2]) {
    vf factor;
    nvfp4_scale_lanes(lane_abs_max_bits(v), constants, scale_code, factor);
    vi bytes[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      vi even, odd;
      e2m1_codes(Ops::mul(v[2 * k], factor), Ops::mul(v[2 * k + 1], factor), even, odd);
      bytes[k] = Ops::bit_or(even, Ops::template shift_left<4>(odd));
    }
    for (int h = 0; h < 2; ++h) packed[h] = bytes_to_word(bytes[4 * h], bytes[4 * h + 1], bytes[4 * h + 2], bytes[4 * h + 3]);
  }

  /// Per lane, the max |v[i]| over N registers, as float bits (the block amax of blocks held
  /// across lanes).
  template <int N>
  static NVFP4_ALWAYS_INLINE vi lane_abs_max_bits(const vf (&v)[N]) {
    const vi abs_mask = Ops::set_int(abs_bits_mask);
    vi amax = Ops::bit_and(Ops::as_int(v[0]), abs_mask);
#pragma GCC unroll 31
    for (int i = 1; i < N; ++i) amax = Ops::max(amax, Ops::bit_and(Ops::as_int(v[i]), abs_mask));
    return amax;
  }

  /// Four byte values per lane (each below 256) in one 32-bit lane, b0 in the low byte.
  static NVFP4_ALWAYS_INLINE vi bytes_to_word(vi b0, vi b1, vi b2, vi b3) {
    return Ops::bit_or(Ops::bit_or(b0, Ops::template shift_left<8>(b1)), Ops::bit_or(Ops::template shift_left<16>(b2), Ops::template shift_left<24>(b3)));
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
    const auto code = [&](int i) { return encode_bits<T, overflow_policy::saturate>(Ops::as_int(Ops::mul(v[i], factor))); };
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

  /// Writes `count` (1 .. blocks_across_per_step) results of quantize_nvfp4_1x16_across, blocks
  /// side by side along each lane's row: lane l's packed codes (8 bytes a block) at data + l *
  /// data_stride, its scale codes at scales + l * scale_stride.
  static NVFP4_ALWAYS_INLINE void store_across(const vi (&packed)[blocks_across_per_step][2], const vi (&scale_codes)[blocks_across_per_step],
                                               int count, std::uint8_t* data, index_t data_stride, std::uint8_t* scales,
                                               index_t scale_stride) {
    if constexpr (blocks_across_per_step == 2) {
      if (count == 2) Ops::store_lanes4(data, data_stride, packed[0][0], packed[0][1], packed[1][0], packed[1][1]);
      else Ops::store_lanes2(data, data_stride, packed[0][0], packed[0][1]);
    } else {
      Ops::store_lanes2(data, data_stride, packed[0][0], packed[0][1]);
    }
    alignas(64) std::uint8_t codes[blocks_across_per_step][width];
    for (int k = 0; k < blocks_across_per_step; ++k) Ops::store_bytes(codes[k], scale_codes[k]);
    for (int lane = 0; lane < width; ++lane)
      for (int k = 0; k < count; ++k) scales[lane * scale_stride + k] = codes[k][lane];
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
        const vi code = encode_bits<T, overflow_policy::saturate>(Ops::as_int(Ops::mul(Ops::load(x + i + k), factor)));
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

  /// One code per byte for each x[i] in format T with the given overflow policy.
  template <minifloat_traits T, overflow_policy Policy>
  static void encode(const float* x, index_t n, std::uint8_t* out) {
    index_t i = 0;
    for (; i + width <= n; i += width) Ops::store_bytes(out + i, encode_bits<T, Policy>(Ops::as_int(Ops::load(x + i))));
    if constexpr (width > 1) tail::encode<T, Policy>(x + i, n - i, out + i);
  }

  /// out[i] = value of code codes[i] in format T (one code per byte).
  template <minifloat_traits T>
  static void decode(const std::uint8_t* codes, index_t n, float* out) {
    constexpr bool packed = is_packed_format<T>;
    static constexpr decode_table<T, packed ? 16 : 256> table{};
    index_t i = 0;
    for (; i + width <= n; i += width) {
      const vi code = Ops::load_bytes(codes + i);
      Ops::store(out + i, packed ? Ops::lookup16(code, table.values) : Ops::gather(code, table.values));
    }
    if constexpr (width > 1) tail::decode<T>(codes + i, n - i, out + i);
  }

  /// Dequantizes n elements: (element * scale_values[i / Block]), times decode_scale when
  /// TensorScale (docs/numerics_spec.md §2 step 6). Elements are packed E2M1 (4-bit T) or one byte each.
  template <minifloat_traits T, int Block, bool TensorScale>
  static void dequantize(const std::uint8_t* elements, index_t n, const float* scale_values, float decode_scale,
                         float* out) {
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
