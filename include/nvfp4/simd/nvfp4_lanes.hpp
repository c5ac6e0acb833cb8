// nvfp4/simd/nvfp4_lanes.hpp: NVFP4 block scales of `width` amaxes at once (§2 steps 3-4, the fp32
// operations of scaling/scale_rules.hpp) and the 1x16 quantizer of blocks held across lanes with its
// store; shared by scaling/detail/block_kernels.hpp and the fused RHT quantizer (transforms/detail/).
#pragma once

#include <cfloat>
#include <cstdint>

#include "nvfp4/config.hpp"
#include "nvfp4/formats/e2m1.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/simd/minifloat_lanes.hpp"

namespace nvfp4::simd {

template <class Ops>
struct nvfp4_lanes : minifloat_lanes<Ops> {
  using codec = minifloat_lanes<Ops>;
  static constexpr int width = Ops::width;
  using vf = typename Ops::vf;
  using vi = typename Ops::vi;
  using codec::bytes_to_word;
  using codec::e2m1_codes;
  using codec::lane_abs_max_bits;

  /// fp32 RN of 1/6, the constant TE multiplies the tensor scale by (scaling/scale_rules.hpp's
  /// one_sixth; scaling/detail/block_kernels.hpp checks that the two agree).
  static constexpr float one_sixth = 1.0f / 6.0f;

  /// The constants of nvfp4_scale_lanes for one tensor scale, made once per loop.
  struct nvfp4_scale_constants {
    vf multiplier;  // S_enc / 6, the block amax's factor
    vf decode;      // S_dec
    template <class TensorScale>
    explicit nvfp4_scale_constants(const TensorScale& scale)
        : multiplier(Ops::set(scale.encode * one_sixth)), decode(Ops::set(scale.decode)) {}
  };

  /// NVFP4 block scales (docs/numerics_spec.md §2 steps 3-4) of `width` block amaxes (as bits):
  /// the UE4M3 code of each and the factor its elements are multiplied by. The same fp32
  /// operations as nvfp4_block_scale / nvfp4_block_encode_factor (scaling/scale_rules.hpp), lane-wise.
  static NVFP4_ALWAYS_INLINE void nvfp4_scale_lanes(vi amax_bits, const nvfp4_scale_constants& k, vi& code, vf& factor) {
    const vf flt_max = Ops::set(FLT_MAX);
    const vf d = Ops::min(Ops::mul(Ops::as_float(amax_bits), k.multiplier), flt_max);
    code = codec::template encode_bits<ue4m3_traits, overflow_policy::saturate>(Ops::as_int(d));
    // Exact UE4M3 decode of a finite code: normal (e + 120) << 23 | m << 20, subnormal m * 2^-9.
    const vi exponent = Ops::template shift_right<3>(code);
    const vi mantissa = Ops::bit_and(code, Ops::set_int(7));
    const vi normal =
        Ops::bit_or(Ops::template shift_left<23>(Ops::add(exponent, Ops::set_int(120))), Ops::template shift_left<20>(mantissa));
    const vi subnormal = Ops::as_int(Ops::mul(Ops::to_float(mantissa), Ops::set(nvfp4::detail::exp2i(-9))));
    const vf value = Ops::as_float(Ops::select(Ops::greater(Ops::set_int(8), code), subnormal, normal));
    factor = Ops::min(Ops::div(Ops::set(1.0f), Ops::mul(value, k.decode)), flt_max);
  }

  /// Blocks per lane that one step of a columnwise walk quantizes side by side: enough for each
  /// lane's packed codes to fill one 16-byte store where the ISA has 16 lanes.
  static constexpr int blocks_across_per_step = width >= 16 ? 2 : 1;

  /// NVFP4 1x16 quantization of `width` blocks held across the lanes of 16 registers: block
  /// `lane` is v[i][lane], i < 16 (a columnwise copy's blocks, loaded along the source's rows, so
  /// nothing is transposed but the codes). Per lane: the block's UE4M3 scale code (scale_code) and
  /// its E2M1 codes packed two per byte along the block, bytes 0-3 in packed[0] and 4-7 in
  /// packed[1] (element 2k in byte k's low nibble). The fp32 operations of block_kernels::quantize_nvfp4_1x16,
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

  /// Writes `count` (1 .. blocks_across_per_step) results of quantize_nvfp4_1x16_across, blocks
  /// side by side along each lane's row: lane l's packed codes (8 bytes a block) at data + l *
  /// data_stride, its scale codes at scales + l * scale_stride.
  static NVFP4_ALWAYS_INLINE void store_across(const vi (&packed)[blocks_across_per_step][2],
                                               const vi (&scale_codes)[blocks_across_per_step], int count, std::uint8_t* data,
                                               index_t data_stride, std::uint8_t* scales, index_t scale_stride) {
    if constexpr (blocks_across_per_step == 2) {
      if (count == 2)
        Ops::store_lanes4(data, data_stride, packed[0][0], packed[0][1], packed[1][0], packed[1][1]);
      else
        Ops::store_lanes2(data, data_stride, packed[0][0], packed[0][1]);
    } else {
      Ops::store_lanes2(data, data_stride, packed[0][0], packed[0][1]);
    }
    alignas(64) std::uint8_t codes[blocks_across_per_step][width];
    for (int k = 0; k < blocks_across_per_step; ++k) Ops::store_bytes(codes[k], scale_codes[k]);
    for (int lane = 0; lane < width; ++lane)
      for (int k = 0; k < count; ++k) scales[lane * scale_stride + k] = codes[k][lane];
  }
};

}  // namespace nvfp4::simd
