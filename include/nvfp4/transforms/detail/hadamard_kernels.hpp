// nvfp4/transforms/detail/hadamard_kernels.hpp: the Hadamard transform's vector kernels, written
// once over an ISA's lane operations (simd/<isa>/ops.hpp): the 16-point float32 FWHT of one block
// per lane (the columnwise copy's tile, with its fused NVFP4 1x16 quantization), and the float64
// FWHT of any size, one block per double lane. Each kernel reports the lanes its exactness guard
// rejects; the walks (hadamard_walks.hpp) redo those, so every result is docs/numerics_spec.md §4's.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "nvfp4/config.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/simd/nvfp4_lanes.hpp"

namespace nvfp4::detail {

/// The largest exponent span (in binades, between the biased exponent fields of the largest and
/// the smallest nonzero |x|) for which the float32 FWHT of 16 bf16 inputs is exact. Why: let u be
/// the last-place value of the smallest nonzero input, 2^(e_min - 7) (bf16 has 8 significant
/// bits; a subnormal's is 2^-133, which e_min = -126 also gives). Every input is a multiple of u,
/// so every partial sum of up to 16 of them is too, and it is below 16 * 2^(e_max + 1) =
/// 2^(e_max - e_min + 12) u. With e_max - e_min <= 12 that is below 2^24 u: the sum is an integer
/// below 2^24 times u >= 2^-133, which float32 holds exactly. The final * 1/4 is exact as well
/// (u / 4 >= 2^-135 is above float32's 2^-149).
inline constexpr int hadamard16_float_exact_span = 12;
/// The largest biased exponent field of the largest input for which no partial sum overflows:
/// 16 |x| < 2^128 needs |x| < 2^124, field <= 250. Inf/NaN (field 255) always fail the guard.
inline constexpr int hadamard16_float_max_exponent_field = 250;

/// The 16-point transform on `Ops::width` blocks at once in float32: block `lane` of a tile is
/// source[i * i_stride + lane], i < 16 (consecutive bf16 in memory per i, as in a columnwise copy),
/// the butterflies run between whole registers.
template <class Ops>
struct hadamard16_kernels {
  static constexpr int lanes = Ops::width;
  static constexpr unsigned all_lanes = (1u << lanes) - 1;
  using vf = typename Ops::vf;
  using vi = typename Ops::vi;
  using vm = typename Ops::vm;

  /// One tile: `lanes` blocks of 16 outputs.
  struct tile {
    vi rounded_pairs[8];  ///< outputs 2k (low half) and 2k + 1 (high half) of each lane, as bf16 bits
    unsigned exact;       ///< lanes that passed the exactness guard (the others are to be redone)
  };

  /// The float32 FWHT of a tile: bit i of `negate_input` set when element i is multiplied by the
  /// sign s_i = -1. v[j] gets the unscaled sum for output j of every lane, exact in the lanes of
  /// the returned mask (those within the span and overflow guards above); other lanes hold garbage.
  static NVFP4_ALWAYS_INLINE vm fwht(const bf16* source, index_t i_stride, unsigned negate_input, vf (&v)[16]) {
    const vi sign_bit = Ops::set_int(0x80000000u);
    const vi magnitude_mask = Ops::set_int(0x7FFF0000u);
    const vi one = Ops::set_int(1);
    vi largest = Ops::set_int(0);
    vi smallest_minus_one = Ops::set_int(0xFFFFFFFFu);  // min over nonzero |x| bits, less one (0 wraps to the top)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      vi bits = Ops::load_bf16_bits(source + i * i_stride);
      const vi magnitude = Ops::bit_and(bits, magnitude_mask);
      largest = Ops::max_unsigned(largest, magnitude);
      smallest_minus_one = Ops::min_unsigned(smallest_minus_one, Ops::sub(magnitude, one));
      if ((negate_input >> i) & 1) bits = Ops::bit_xor(bits, sign_bit);
      v[i] = Ops::as_float(bits);
    }
#pragma GCC unroll 4
    for (int span = 1; span < 16; span *= 2) {
#pragma GCC unroll 8
      for (int p = 0; p < 8; ++p) {
        const int k = p / span * 2 * span + p % span;
        const vf a = v[k], b = v[k + span];
        v[k] = Ops::add(a, b);
        v[k + span] = Ops::sub(a, b);
      }
    }
    const vi largest_field = Ops::template shift_right<23>(largest);
    const vi smallest_field = Ops::max(Ops::template shift_right<23>(Ops::add(smallest_minus_one, one)), one);
    // Exact where both span - 12 and largest_field - 250 are <= 0 (small signed values).
    const vi excess = Ops::max(Ops::sub(Ops::sub(largest_field, smallest_field), Ops::set_int(hadamard16_float_exact_span)),
                               Ops::sub(largest_field, Ops::set_int(hadamard16_float_max_exponent_field)));
    return Ops::greater(one, excess);
  }

  /// Float32 bits rounded to nearest even at bit 16, as bf16 bits in the top half: adds 0x7FFF
  /// plus the kept lsb (subnormals and a carry into the exponent come out right, as bf16 shares
  /// float's range; a finite value past bf16's largest becomes Inf). Finite inputs only.
  static NVFP4_ALWAYS_INLINE vi round_float_bits_to_bf16_high(vi y) {
    return Ops::add(Ops::add(y, Ops::set_int(0x7FFF)), Ops::bit_and(Ops::template shift_right<16>(y), Ops::set_int(1)));
  }

  /// Transforms a tile. `negate_output`: bit j set when output j is multiplied by s_j = -1
  /// (forward: inputs, y = x T; inverse: outputs, x = y Tᵀ). Each output is the exact sum times
  /// 1/4 rounded once to bf16 (RNE), an exact zero as +0 — the reference's result — in every lane
  /// of `exact`; other lanes hold garbage.
  static NVFP4_ALWAYS_INLINE tile transform_tile(const bf16* source, index_t i_stride, unsigned negate_input, unsigned negate_output) {
    const vi sign_bit = Ops::set_int(0x80000000u);
    const vi high_half = Ops::set_int(0xFFFF0000u);
    vf v[16];
    tile result;
    result.exact = Ops::mask_bits(fwht(source, i_stride, negate_input, v));
    const vf quarter = Ops::set(0.25f), zero = Ops::set(0.0f);
#pragma GCC unroll 8
    for (int j = 0; j < 16; j += 2) {
      vi rounded[2];
      for (int h = 0; h < 2; ++h) {
        vf sum = v[j + h];
        if ((negate_output >> (j + h)) & 1) sum = Ops::as_float(Ops::bit_xor(Ops::as_int(sum), sign_bit));
        // sum * 1/4 + (+0): exact, and turns an exact zero's -0 into the reference's +0.
        rounded[h] = round_float_bits_to_bf16_high(Ops::as_int(Ops::fmadd(sum, quarter, zero)));
      }
      result.rounded_pairs[j / 2] = Ops::bit_or(Ops::template shift_right<16>(rounded[0]), Ops::bit_and(rounded[1], high_half));
    }
    return result;
  }

  /// Per lane of a tile (forward), max |output| as float32 bits before the rounding to bf16, exact
  /// in the lanes of the returned mask (garbage elsewhere). Rounding is monotonic, so rounding the
  /// max gives the max of the rounded outputs: the amax pass needs no rounding per element.
  static NVFP4_ALWAYS_INLINE vm lane_abs_max(const bf16* source, index_t i_stride, unsigned negate_input, vi& abs_max_bits) {
    vf v[16];
    const vm exact = fwht(source, i_stride, negate_input, v);
    vf largest = Ops::abs(v[0]);
#pragma GCC unroll 15
    for (int j = 1; j < 16; ++j) largest = Ops::max(largest, Ops::abs(v[j]));
    abs_max_bits = Ops::as_int(Ops::mul(largest, Ops::set(0.25f)));  // exact, as the outputs
    return exact;
  }

  /// An upper bound on every |output| of each lane of a tile: sum |x_i| / 4, in float32 rounded
  /// up. NaN or Inf where an input is.
  static NVFP4_ALWAYS_INLINE vf lane_output_bound(const bf16* source, index_t i_stride) {
    vf total = Ops::set(0.0f);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) total = Ops::add(total, Ops::abs(Ops::as_float(Ops::load_bf16_bits(source + i * i_stride))));
    // 15 additions and the multiply each lose at most 2^-24 relatively: 1 + 2^-18 covers them.
    return Ops::mul(total, Ops::set(0.25f * (1.0f + 0x1p-18f)));
  }

  /// Running max of |output| bf16 bits over a tile (two per 32-bit lane: the even and odd outputs).
  static NVFP4_ALWAYS_INLINE vi abs_max(vi running, const tile& t) {
    const vi magnitude_mask = Ops::set_int(0x7FFF7FFFu);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) running = Ops::max_u16(running, Ops::bit_and(t.rounded_pairs[k], magnitude_mask));
    return running;
  }

  /// Per-lane max of the two halves of abs_max's result, as float bits (bf16 << 16).
  static NVFP4_ALWAYS_INLINE vi lane_abs_max_float_bits(vi pair_max) {
    return Ops::max_unsigned(Ops::template shift_left<16>(pair_max), Ops::bit_and(pair_max, Ops::set_int(0xFFFF0000u)));
  }

  /// Tiles one step of a walk transforms side by side (along the transformed dimension): enough
  /// for their output words to fill the registers of one transpose, and the blocks per step of
  /// the block kernels' store_across, which writes their quantized codes.
  static constexpr int tiles_per_step = simd::nvfp4_lanes<Ops>::blocks_across_per_step;

  /// Writes the outputs of `count` tiles (1 .. tiles_per_step) as rows: row `lane` gets outputs
  /// 0..15 of tile 0, then of tile 1, at out + lane * out_stride (bf16 elements), by the transpose
  /// of the output words in registers (one 16 * count-element row piece per lane).
  static NVFP4_ALWAYS_INLINE void store_rows(const tile* tiles, int count, std::uint16_t* out, index_t out_stride) {
    if constexpr (lanes >= 8) {
      const int words = 8 * count;
      vi r[lanes];
      for (int k = 0; k < lanes; ++k) r[k] = k < words ? tiles[k / 8].rounded_pairs[k % 8] : Ops::set_int(0);
      Ops::transpose(r);
      for (int l = 0; l < lanes; ++l) {
        auto* row = reinterpret_cast<std::uint32_t*>(out + l * out_stride);
        if (words == lanes)
          Ops::store_bits(row, r[l]);
        else
          Ops::store_bits_partial(row, r[l], words);
      }
    } else {
      // One lane: its 8 words per tile are the 8 registers.
      static_assert(lanes == 1);
      for (int t = 0; t < count; ++t) {
        std::uint32_t words[8];
        for (int k = 0; k < 8; ++k) Ops::store_bits(words + k, tiles[t].rounded_pairs[k]);
        std::memcpy(out + 16 * t, words, sizeof words);
      }
    }
  }

  /// NVFP4 1x16 quantization of a tile in registers: each lane's 16 outputs are one block of the
  /// columnwise copy (docs/numerics_spec.md §2 with the tile's bf16 outputs as input), so the
  /// block kernel that quantizes blocks across lanes takes them as they are
  /// (simd::nvfp4_lanes::quantize_nvfp4_1x16_across: its scale codes and packed E2M1 codes per lane).
  static NVFP4_ALWAYS_INLINE void quantize_tile(const tile& t, const typename simd::nvfp4_lanes<Ops>::nvfp4_scale_constants& constants,
                                                vi& scale_code, vi (&packed)[2]) {
    const vi high_half = Ops::set_int(0xFFFF0000u);
    vf v[16];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      v[2 * k] = Ops::as_float(Ops::template shift_left<16>(t.rounded_pairs[k]));
      v[2 * k + 1] = Ops::as_float(Ops::bit_and(t.rounded_pairs[k], high_half));
    }
    simd::nvfp4_lanes<Ops>::quantize_nvfp4_1x16_across(v, constants, scale_code, packed);
  }
};

/// What the float64 kernel needs to know about the transform.
struct hadamard_kernel_params {
  const double* signs;  ///< s_i as +-1.0, n entries
  bool inverse;         ///< x = y * Tᵀ instead of y = x * T
  double scale;         ///< 2^-k, or RN(1/sqrt(n))
  double guard_ratio;   ///< the lane is exact when max|x| <= guard_ratio * min nonzero |x|
};

/// The transform of any size n on `Ops::double_width` blocks at once by the fast Walsh-Hadamard
/// transform in float64, and the once-only rounding of its results to bf16.
template <class Ops>
struct hadamard_panel_kernels {
  static constexpr int lanes = Ops::double_width;
  static constexpr unsigned all_lanes = (1u << lanes) - 1;
  using vd = typename Ops::vd;

  /// bf16 bits of `lanes` doubles, each rounded once to nearest even (bf16 subnormals included;
  /// beyond the largest finite value, Inf; the sign of a zero result follows y's), as
  /// bf16_bits_from_double_rne does. y finite, zero or of magnitude above 2^-1000.
  static NVFP4_ALWAYS_INLINE void store_bf16_rne(std::uint16_t* out, vd y) {
    // |y| rounded to a multiple of 2^lsb, lsb = max(e - 7, -133) with 2^e <= |y| < 2^(e+1): adding
    // c = 1.5 * 2^(lsb + 52) puts 2^lsb at the sum's last place (|y| < 2^(lsb + 8) << c / 3), so the
    // FPU's RNE rounds there, ties to even (c / 2^lsb is even); subtracting c is exact.
    const vd power = Ops::bit_and(y, Ops::set_double(INFINITY));  // 2^e: y's exponent bits
    const vd c = Ops::max(Ops::mul(power, Ops::set_double(0x1.8p45)), Ops::set_double(0x1.8p-81));
    const vd magnitude = Ops::sub(Ops::add(Ops::abs(y), c), c);
    // Back to y's sign (times -1, so that a negative y rounding to zero gives -0).
    const vd rounded = Ops::select(Ops::less(y, Ops::set_double(0.0)), Ops::mul(magnitude, Ops::set_double(-1.0)), magnitude);
    Ops::store_bf16_of_exact(out, rounded);
  }

  /// The butterflies of the unnormalized Walsh-Hadamard transform from span H up: afterwards
  /// v[j] = Σ_i (-1)^popcount(i & j) v_in[i], with only additions and subtractions.
  template <int N, int H>
  static NVFP4_ALWAYS_INLINE void fwht_stages(vd* v) {
    if constexpr (H < N) {
#pragma GCC unroll 16
      for (int p = 0; p < N / 2; ++p) {
        const int k = p / H * 2 * H + p % H;  // the lower index of the p-th butterfly pair
        const vd a = v[k], b = v[k + H];
        v[k] = Ops::add(a, b);
        v[k + H] = Ops::sub(a, b);
      }
      fwht_stages<N, 2 * H>(v);
    }
  }

  /// Transforms `lanes` blocks of N elements: block `lane` is source[i * i_stride + lane], i < N.
  /// Writes the bf16 bits of output j of block `lane` to out_bits[j * lanes + lane]. Returns the
  /// lanes whose result may be inexact (exponent spread beyond the guard) or whose input holds
  /// NaN/Inf; `non_finite` gets the latter. The double sums are exact for every other lane: all
  /// partial sums are multiples of the smallest input ulp and below 2^53 of it.
  template <int N, class T>
  static unsigned panel(const T* source, index_t i_stride, const hadamard_kernel_params& params, std::uint16_t* out_bits,
                        unsigned& non_finite) {
    vd v[N];
    const vd infinity = Ops::set_double(INFINITY), zero = Ops::set_double(0.0);
    vd largest = zero, smallest = infinity;
    unsigned finite = all_lanes;
#pragma GCC unroll 16
    for (int i = 0; i < N; ++i) {
      const vd x = Ops::load_double(source + i * i_stride);
      const vd magnitude = Ops::abs(x);
      finite &= Ops::mask_bits(Ops::less(magnitude, infinity));  // false for NaN and Inf
      largest = Ops::max(largest, magnitude);
      smallest = Ops::min(smallest, Ops::select(Ops::equal(magnitude, zero), infinity, magnitude));
      v[i] = params.inverse ? x : Ops::mul(x, Ops::set_double(params.signs[i]));
    }
    fwht_stages<N, 1>(v);
    const vd scale = Ops::set_double(params.scale);
#pragma GCC unroll 16
    for (int j = 0; j < N; ++j) {
      vd y = params.inverse ? Ops::mul(v[j], Ops::set_double(params.signs[j])) : v[j];
      // + 0.0: an exact zero sum is +0 in the reference, where the butterflies can leave -0.
      y = Ops::add(Ops::mul(y, scale), zero);
      store_bf16_rne(out_bits + lanes * j, y);
    }
    non_finite = ~finite & all_lanes;
    const unsigned exact = Ops::mask_bits(Ops::less_equal(largest, Ops::mul(smallest, Ops::set_double(params.guard_ratio))));
    return (~exact | non_finite) & all_lanes;
  }
};

}  // namespace nvfp4::detail
