// nvfp4/scaling/stochastic_quantize.hpp: the stochastic-rounding element encoder of the block
// scaling walk (scaling/fast_quantize.hpp): random bytes keyed by each element's index in the
// source (random/random_bytes.hpp), then docs/numerics_spec.md §5's rule a vector at a time.
// Bit-identical to reference::quantize_with_amax with rounding_mode::stochastic.
#pragma once

#include <cstdint>
#include <vector>

#include "nvfp4/formats/stochastic_rounding.hpp"
#include "nvfp4/formats/simd/stochastic_rounding_avx512.hpp"
#include "nvfp4/random/random_bytes.hpp"
#include "nvfp4/scaling/block_format.hpp"
#include "nvfp4/scaling/quantize_options.hpp"

namespace nvfp4::detail {

/// Stochastically rounds x[0..n) * factors[block] to E2M1 (docs/numerics_spec.md §5) with random[0..n), and
/// packs the codes two per byte into out (element 2i in the low nibble of byte i). n may be odd:
/// the last byte's high nibble is then left as it was.
template <int BlockCols>
void encode_stochastic_scaled(const float* x, index_t n, const float* factors, const std::uint8_t* random, std::uint8_t* out) {
  index_t c = 0;
#if NVFP4_HAS_AVX512
  if constexpr (BlockCols % 16 == 0) c = simd::avx512::encode_e2m1_stochastic_scaled<BlockCols>(x, n, factors, random, out);
#endif
  for (; c < n; ++c) {
    const std::uint8_t code = e2m1_from_float_stochastic(x[c] * factors[c / BlockCols], random[c]).bits();
    out[c / 2] = static_cast<std::uint8_t>((c & 1) ? ((out[c / 2] & 0x0F) | (code << 4)) : ((out[c / 2] & 0xF0) | code));
  }
}

/// The stochastic element encoder of quantize_panels: the random byte of element (r, c) is
/// random_byte(options.seed, r * source_cols + c), whatever the threads.
template <block_scaled_format Format>
struct stochastic_encoder {
  static_assert(Format::is_fp4, "stochastic rounding is defined for E2M1 elements only");

  stochastic_encoder(const quantize_options& options, index_t source_cols, index_t chunk_cols)
      : seed_(options.seed), source_cols_(source_cols), random_(static_cast<std::size_t>(chunk_cols)) {}

  void encode(const float* x, index_t n, const float* factors, std::uint8_t* out, index_t row, index_t first_col) {
    fill_random_bytes(seed_, static_cast<std::uint64_t>(row * source_cols_ + first_col), static_cast<std::size_t>(n), random_.data());
    encode_stochastic_scaled<Format::block_cols>(x, n, factors, random_.data(), out);
  }

 private:
  std::uint64_t seed_;
  index_t source_cols_;
  std::vector<std::uint8_t> random_;
};

}  // namespace nvfp4::detail
