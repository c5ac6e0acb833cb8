// nvfp4/scaling/stochastic_quantize.hpp: the fast path of block-scaled quantization with
// stochastic rounding (NUMERICS.md §5): OpenMP over panels of rows, random bytes 16 Philox blocks
// at a time, and the rounding rule on 16 lanes. Bit-identical to reference::quantize_with_amax.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "nvfp4/formats/simd/stochastic_rounding_avx512.hpp"
#include "nvfp4/random/random_bytes.hpp"
#include "nvfp4/scaling/reference.hpp"

#if NVFP4_HAS_OPENMP
#include <omp.h>
#endif

namespace nvfp4::detail {

/// Copies rows [first_row, first_row + row_count) of x into `panel` (row-major, x.cols() wide, as
/// float32, exact), reading memory in its own order: a transposed view is read along its columns.
template <class T>
void gather_rows(matrix_view<const T> x, index_t first_row, index_t row_count, float* panel) {
  const index_t cols = x.cols();
  if (x.col_stride() == 1 || x.row_stride() != 1) {
    for (index_t r = 0; r < row_count; ++r)
      for (index_t c = 0; c < cols; ++c) panel[r * cols + c] = to_float32(x(first_row + r, c));
  } else {
    for (index_t c = 0; c < cols; ++c) {
      const T* source = &x(first_row, c);  // row_count contiguous elements
      for (index_t r = 0; r < row_count; ++r) panel[r * cols + c] = to_float32(source[r]);
    }
  }
}

/// Same contract as nvfp4::quantize_with_amax with options.rounding == stochastic: the random
/// byte of element (r, c) is random_byte(options.seed, r * x.cols() + c), whatever the threads.
template <block_scaled_format Format, quantizer_input T>
quantized_tensor<Format> quantize_stochastic_with_amax(matrix_view<const T> x, float global_amax,
                                                       const quantize_options& options) {
  detail::require(Format::is_fp4, errc::unsupported, "stochastic rounding is defined for E2M1 elements only");
  if constexpr (!Format::is_fp4) {
    return {};
  } else {
    quantized_tensor<Format> q(x.rows(), x.cols(), options.axis);
    tensor_scale ts{1.0f, 1.0f};
    if constexpr (Format::has_tensor_scale) ts = nvfp4_tensor_scale(global_amax);
    q.set_tensor_scale(global_amax, ts.encode, ts.decode);
    if (x.empty()) return q;

    constexpr int block_rows = Format::block_rows;
    constexpr int block_cols = Format::block_cols;
    // Row panels of at least 16 rows, so a transposed view is gathered with long contiguous reads.
    constexpr index_t panel_rows = block_rows >= 16 ? block_rows : 16 / block_rows * block_rows;
    const index_t rows = x.rows(), cols = x.cols();
    const index_t panels = (rows + panel_rows - 1) / panel_rows;
    const index_t scale_cols = q.scale_cols();
    const index_t row_stride = q.data_row_stride();
    std::uint8_t* data = reinterpret_cast<std::uint8_t*>(q.data().data());
    auto* scales = q.scales().data();
    static_assert(sizeof(typename Format::storage_type) == 1 && sizeof(typename Format::scale_type) == 1);

#if NVFP4_HAS_OPENMP
#pragma omp parallel
#endif
    {
      std::vector<float> panel(static_cast<std::size_t>(panel_rows * cols));
      std::vector<float> factors(static_cast<std::size_t>(scale_cols));
      std::vector<std::uint8_t> random(static_cast<std::size_t>(cols));
#if NVFP4_HAS_OPENMP
#pragma omp for schedule(static)
#endif
      for (index_t p = 0; p < panels; ++p) {
        const index_t first_row = p * panel_rows;
        const index_t panel_height = std::min(panel_rows, rows - first_row);
        gather_rows(x, first_row, panel_height, panel.data());
        for (index_t g0 = 0; g0 < panel_height; g0 += block_rows) {
          const index_t g1 = std::min<index_t>(g0 + block_rows, panel_height);
          for (index_t block = 0; block < scale_cols; ++block) {
            const index_t c0 = block * block_cols, c1 = std::min<index_t>(c0 + block_cols, cols);
            float block_amax = 0.0f;
            for (index_t r = g0; r < g1; ++r) {
              const float* values = panel.data() + r * cols;
              index_t c = c0;
#if NVFP4_HAS_AVX512
              for (; c + 16 <= c1; c += 16) block_amax = std::max(block_amax, simd::avx512::abs_max16(values + c));
#endif
              for (; c < c1; ++c) block_amax = std::max(block_amax, std::fabs(values[c]));
            }
            typename Format::scale_type scale;
            if constexpr (Format::has_tensor_scale) {
              scale = nvfp4_block_scale(block_amax, ts.encode);
              factors[static_cast<std::size_t>(block)] = nvfp4_block_encode_factor(scale, ts.decode);
            } else {
              scale = mx_block_scale<e2m1>(block_amax, options.mx_rule);
              factors[static_cast<std::size_t>(block)] = mx_block_encode_factor(scale);
            }
            for (index_t r = g0; r < g1; ++r) scales[(first_row + r) * scale_cols + block] = scale;
          }
          for (index_t r = g0; r < g1; ++r) {
            const index_t row = first_row + r;
            const float* values = panel.data() + r * cols;
            std::uint8_t* out = data + row * row_stride;
            fill_random_bytes(options.seed, static_cast<std::uint64_t>(row * cols), static_cast<std::size_t>(cols), random.data());
            index_t c = 0;
#if NVFP4_HAS_AVX512
            if constexpr (block_cols % 16 == 0) {
              for (; c + 16 <= cols; c += 16) {
                const __m512 scaled = _mm512_mul_ps(_mm512_loadu_ps(values + c),
                                                    _mm512_set1_ps(factors[static_cast<std::size_t>(c / block_cols)]));
                const __m128i random16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(random.data() + c));
                simd::avx512::store_packed_codes(simd::avx512::e2m1_stochastic_codes(scaled, random16), out + c / 2);
              }
            }
#endif
            for (; c < cols; ++c) {
              const float scaled = values[c] * factors[static_cast<std::size_t>(c / block_cols)];
              const std::uint8_t code = e2m1_from_float_stochastic(scaled, random[static_cast<std::size_t>(c)]).bits();
              out[c / 2] = static_cast<std::uint8_t>((c & 1) ? ((out[c / 2] & 0x0F) | (code << 4)) : ((out[c / 2] & 0xF0) | code));
            }
          }
        }
      }
    }
    return q;
  }
}

}  // namespace nvfp4::detail
