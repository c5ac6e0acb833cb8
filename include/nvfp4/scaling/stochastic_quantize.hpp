// nvfp4/scaling/stochastic_quantize.hpp: the fast path of block-scaled quantization with
// stochastic rounding (NUMERICS.md §5): the RN fast path's panels, block amax and vectorized block
// scales (scaling/fast_quantize.hpp), random bytes 16 Philox blocks at a time, and the rounding
// rule on 16 lanes. Bit-identical to reference::quantize_with_amax for any thread count.
#pragma once

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "nvfp4/formats/simd/stochastic_rounding_avx512.hpp"
#include "nvfp4/formats/stochastic_rounding.hpp"
#include "nvfp4/random/random_bytes.hpp"
#include "nvfp4/scaling/fast_quantize.hpp"
#include "nvfp4/scaling/reference.hpp"

namespace nvfp4::detail {

/// Stochastically rounds x[0..n) * factors[block] to E2M1 (NUMERICS.md §5) with random[0..n), and
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

/// Same contract as nvfp4::quantize_with_amax with options.rounding == stochastic: the random
/// byte of element (r, c) is random_byte(options.seed, r * x.cols() + c), whatever the threads.
/// The panel walk, block amax and block scales are the RN fast path's (fast::quantize_with_amax);
/// only the element encode differs.
template <block_scaled_format Format, quantizer_input T>
quantized_tensor<Format> quantize_stochastic_with_amax(matrix_view<const T> x, float global_amax,
                                                       const quantize_options& options) {
  detail::require(Format::is_fp4, errc::unsupported, "stochastic rounding is defined for E2M1 elements only");
  if constexpr (!Format::is_fp4) {
    return {};
  } else {
    namespace panels = fast::detail;
    static_assert(panels::panel_rows % Format::block_rows == 0 && panels::panel_cols % Format::block_cols == 0);
    static_assert(sizeof(typename Format::storage_type) == 1 && sizeof(typename Format::scale_type) == 1);
    constexpr int block_cols = Format::block_cols;
    quantized_tensor<Format> q(x.rows(), x.cols(), options.axis);
    tensor_scale ts{1.0f, 1.0f};
    if constexpr (Format::has_tensor_scale) ts = nvfp4_tensor_scale(global_amax);
    q.set_tensor_scale(global_amax, ts.encode, ts.decode);
    if (x.empty()) return q;

    std::uint8_t* const data = panels::bytes_of(q.data());
    std::uint8_t* const scales = panels::bytes_of(q.scales());
    const index_t data_stride = q.data_row_stride();
    const index_t scale_stride = q.scale_cols();
    const index_t panel_count = (x.rows() + panels::panel_rows - 1) / panels::panel_rows;
    const bool parallel = x.size() >= simd::parallel_threshold_elements;
    const bool in_place = std::is_same_v<T, float> && x.rows_contiguous();
    const index_t chunk_cols = in_place ? x.cols() : panels::panel_cols;
    const index_t blocks_per_chunk = (chunk_cols + block_cols - 1) / block_cols;

    simd::parallel_ranges(panel_count, parallel, [&](index_t first_panel, index_t last_panel) {
      std::vector<float> buffer(in_place ? 0 : static_cast<std::size_t>(panels::panel_rows * panels::panel_cols));
      std::vector<std::uint32_t> amax_bits(static_cast<std::size_t>(blocks_per_chunk));
      std::vector<std::uint8_t> codes(static_cast<std::size_t>(blocks_per_chunk));
      std::vector<float> factors(static_cast<std::size_t>(blocks_per_chunk));
      std::vector<std::uint8_t> random(static_cast<std::size_t>(chunk_cols));

      for (index_t panel = first_panel; panel < last_panel; ++panel) {
        const index_t r0 = panel * panels::panel_rows;
        const index_t rows = std::min(panels::panel_rows, x.rows() - r0);
        for (index_t c0 = 0; c0 < x.cols(); c0 += chunk_cols) {
          const index_t cols = std::min(chunk_cols, x.cols() - c0);
          const index_t blocks = (cols + block_cols - 1) / block_cols;
          index_t stride = 0;
          const float* tile = panels::load_panel(x, r0, rows, c0, cols, buffer.data(), stride);
          for (index_t t0 = 0; t0 < rows; t0 += Format::block_rows) {
            const index_t tile_rows = std::min<index_t>(Format::block_rows, rows - t0);
            std::fill_n(amax_bits.data(), blocks, 0u);
            for (index_t i = t0; i < t0 + tile_rows; ++i)
              simd::kernels::template block_abs_max_bits<block_cols>(tile + i * stride, cols, amax_bits.data());
            panels::block_scales<Format>(amax_bits.data(), blocks, ts, options.mx_rule, codes.data(), factors.data());
            for (index_t i = t0; i < t0 + tile_rows; ++i) {
              const index_t row = r0 + i;
              std::memcpy(scales + row * scale_stride + c0 / block_cols, codes.data(), static_cast<std::size_t>(blocks));
              fill_random_bytes(options.seed, static_cast<std::uint64_t>(row * x.cols() + c0), static_cast<std::size_t>(cols),
                                random.data());
              encode_stochastic_scaled<block_cols>(tile + i * stride, cols, factors.data(), random.data(),
                                                   data + row * data_stride + c0 / 2);
            }
          }
        }
      }
    });
    return q;
  }
}

}  // namespace nvfp4::detail
