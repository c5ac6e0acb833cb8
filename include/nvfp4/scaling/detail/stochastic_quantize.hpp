// nvfp4/scaling/detail/stochastic_quantize.hpp: the stochastic-rounding element encoder of the block
// scaling walk (scaling/detail/fast_quantize.hpp): random bytes keyed by each element's index in the
// source (random/random_bytes.hpp), then docs/numerics_spec.md §5's rule written once over an ISA's lane
// operations. Bit-identical to reference::quantize_with_amax with rounding_mode::stochastic.
#pragma once

#include <cstdint>
#include <vector>

#include "nvfp4/random/random_bytes.hpp"
#include "nvfp4/scaling/block_format.hpp"
#include "nvfp4/scaling/quantize_options.hpp"
#include "nvfp4/simd/dispatch.hpp"
#include "nvfp4/simd/scalar/ops.hpp"

namespace nvfp4::detail {

/// The stochastic E2M1 rounding of formats/stochastic_rounding.hpp on `Ops::width` lanes, with
/// the same fp32 operations in the same order.
template <class Ops>
struct stochastic_rounding_kernels {
  static constexpr int width = Ops::width;
  using vf = typename Ops::vf;
  using vi = typename Ops::vi;

  /// Spacing of the E2M1 grid at each magnitude: 2 from 4 up, 1 from 2 up, else 0.5.
  static NVFP4_ALWAYS_INLINE vf e2m1_step(vf magnitude) {
    const vf step = Ops::select(Ops::greater_equal(magnitude, Ops::set(2.0f)), Ops::set(1.0f), Ops::set(0.5f));
    return Ops::select(Ops::greater_equal(magnitude, Ops::set(4.0f)), Ops::set(2.0f), step);
  }

  /// E2M1 codes (sign << 3 | magnitude index, one per lane) of `width` values stochastically
  /// rounded with the random bytes in `random` (one per lane, 0..255): t = fma(r / 256,
  /// step(|x|), |x|); q = min(floor(t / step(t)) * step(t), 6). Values finite or ±Inf (never NaN).
  static NVFP4_ALWAYS_INLINE vi e2m1_codes(vf x, vi random) {
    static constexpr std::uint32_t index_of_twice[16] = {0, 1, 2, 3, 4, 0, 5, 0, 6, 0, 0, 0, 7, 0, 0, 0};
    const vf magnitude = Ops::abs(x);
    const vf u = Ops::mul(Ops::to_float(random), Ops::set(1.0f / 256.0f));
    const vf t = Ops::fmadd(u, e2m1_step(magnitude), magnitude);
    // t / step == t * (1 / step) exactly: 1 / step is 2 (t < 2: doubling never rounds), 1, or 1/2
    // (t >= 4: halving a normal never rounds), so the product replaces the slow divide.
    vf inverse_step = Ops::select(Ops::greater_equal(t, Ops::set(2.0f)), Ops::set(1.0f), Ops::set(2.0f));
    inverse_step = Ops::select(Ops::greater_equal(t, Ops::set(4.0f)), Ops::set(0.5f), inverse_step);
    const vf floored = Ops::floor(Ops::mul(t, inverse_step));
    const vf q = Ops::min(Ops::mul(floored, e2m1_step(t)), Ops::set(6.0f));
    // q is a grid point; 2 q is one of 0 1 2 3 4 6 8 12, which indexes the code table.
    const vi index = Ops::lookup16(Ops::truncate(Ops::add(q, q)), index_of_twice);
    const vi sign_bit = Ops::template shift_right<31>(Ops::as_int(x));
    return Ops::bit_or(index, Ops::template shift_left<3>(sign_bit));
  }

  /// Stochastically rounds x[c] * factors[c / BlockCols] to E2M1 with random[c] and packs the
  /// codes two per byte into out (element 2i in the low nibble of byte i). The nibbles of other
  /// elements (an odd n's last byte) are kept.
  template <int BlockCols>
  static void encode_scaled(const float* x, index_t n, const float* factors, const std::uint8_t* random, std::uint8_t* out) {
    static_assert(BlockCols % width == 0, "the lanes of a vector share one block's factor");
    index_t c = 0;
    for (; c + width <= n; c += width) {
      const vf scaled = Ops::mul(Ops::load(x + c), Ops::set(factors[c / BlockCols]));
      Ops::store_nibbles(out, c, e2m1_codes(scaled, Ops::load_bytes(random + c)));
    }
    if constexpr (width > 1)
      for (; c < n; ++c) {
        using one = stochastic_rounding_kernels<simd::scalar::ops>;
        simd::scalar::ops::store_nibbles(out, c, one::e2m1_codes(x[c] * factors[c / BlockCols], random[c]));
      }
  }
};

/// The stochastic element encoder of quantize_panels: the random byte of element (r, c) is
/// random_byte(options.seed, r * source_cols + c), whatever the threads.
template <block_scaled_format Format>
struct stochastic_encoder {
  static_assert(Format::is_fp4, "stochastic rounding is defined for E2M1 elements only");

  stochastic_encoder(const quantize_options& options, index_t source_cols, index_t chunk_cols)
      : seed_(options.seed), source_cols_(source_cols), random_(static_cast<std::size_t>(chunk_cols)) {}

  void encode(const float* x, index_t n, const float* factors, std::uint8_t* out, index_t row, index_t first_col) {
    fill_random_bytes(seed_, static_cast<std::uint64_t>(row * source_cols_ + first_col), static_cast<std::size_t>(n), random_.data());
    stochastic_rounding_kernels<simd::ops>::template encode_scaled<Format::block_cols>(x, n, factors, random_.data(), out);
  }
  /// No one-pass row kernel: the walk's block amax, scales and encode passes run.
  static constexpr bool quantizes_rows = false;

 private:
  std::uint64_t seed_;
  index_t source_cols_;
  std::vector<std::uint8_t> random_;
};

}  // namespace nvfp4::detail
