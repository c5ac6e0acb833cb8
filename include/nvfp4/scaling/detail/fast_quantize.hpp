// nvfp4/scaling/detail/fast_quantize.hpp: the fast paths behind nvfp4::amax / quantize_with_amax /
// dequantize: one walk over 16-row panels (OpenMP over panels, the block kernels of the build's
// ISA inside, scaling/detail/block_kernels.hpp) whose element encoder is a policy: round to
// nearest even here, stochastic rounding in scaling/detail/stochastic_quantize.hpp. NVFP4 1x16 round to
// nearest of a columnwise copy (a view with contiguous columns) goes across lanes instead
// (quantize_columns_nvfp4_1x16). Bit-identical to nvfp4::reference for every finite input and any
// thread count. Nothing here checks its input: the entry points of quantize.hpp do.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "nvfp4/detail/column_bands.hpp"
#include "nvfp4/scaling/detail/block_kernels.hpp"
#include "nvfp4/scaling/detail/input_checks.hpp"
#include "nvfp4/scaling/detail/stochastic_quantize.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/quantize_options.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"
#include "nvfp4/scaling/scale_rules.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4::detail {

/// Rows per panel: the parallel unit, a 16x16 tile's height, and the height of the copy made of
/// a view whose rows are not contiguous (four panels at once where its columns are: see
/// quantize_panels).
inline constexpr index_t panel_rows = 16;
/// Columns per chunk of a copied panel: 16 rows of it (32 KiB of float) stay in L1/L2 between the
/// block-amax pass and the encode pass. A multiple of every block width.
inline constexpr index_t panel_cols = 512;
/// The largest panel (in floats: 1 MiB) that contiguous non-float rows are widened into whole.
inline constexpr index_t max_widened_panel_floats = index_t{1} << 18;
/// Columns per piece of a row's encode pass: between pieces, the walk may prefetch the same
/// columns of the next row (a multiple of every block width).
inline constexpr index_t encode_piece_cols = 512;
/// Columns per work item of amax on contiguous rows, so a few long rows still split over threads.
inline constexpr index_t amax_chunk_cols = index_t{1} << 14;

template <class T>
std::uint8_t* bytes_of(std::span<T> s) {
  static_assert(sizeof(T) == 1 && std::is_trivially_copyable_v<T>);
  return reinterpret_cast<std::uint8_t*>(s.data());
}
template <class T>
const std::uint8_t* bytes_of(std::span<const T> s) {
  static_assert(sizeof(T) == 1 && std::is_trivially_copyable_v<T>);
  return reinterpret_cast<const std::uint8_t*>(s.data());
}

/// Copies rows [r0, r0+rows) x cols [c0, c0+cols) of x into buffer (row stride buffer_stride >=
/// cols) as float, or points straight into x when its rows are contiguous float. Returns the
/// tile's first row and sets `stride` to its row stride.
template <class T>
const float* load_panel(matrix_view<const T> x, index_t r0, index_t rows, index_t c0, index_t cols, float* buffer, index_t buffer_stride,
                        index_t& stride) {
  if constexpr (std::is_same_v<T, float>) {
    if (x.rows_contiguous()) {
      stride = x.row_stride();
      return x.row(r0) + c0;
    }
  } else {
    if (x.rows_contiguous()) {
      for (index_t i = 0; i < rows; ++i) fast_block_kernels::widen(x.row(r0 + i) + c0, cols, buffer + i * buffer_stride);
      stride = buffer_stride;
      return buffer;
    }
  }
  if (x.row_stride() == 1) {  // columns contiguous (a transposed or column-major view)
    fast_block_kernels::transpose_panel(&x(r0, c0), x.col_stride(), rows, cols, buffer, buffer_stride);
    stride = buffer_stride;
    return buffer;
  }
  for (index_t c = 0; c < cols; ++c)
    for (index_t i = 0; i < rows; ++i) buffer[i * buffer_stride + c] = to_float32(x(r0 + i, c0 + c));
  stride = buffer_stride;
  return buffer;
}

/// Block scales (codes and element factors) of `count` blocks from their amax bits.
template <block_scaled_format Format>
void block_scales(const std::uint32_t* amax_bits, index_t count, tensor_scale scale, mx_scale_rule rule, std::uint8_t* codes,
                  float* factors) {
  if constexpr (Format::has_tensor_scale) {
    fast_block_kernels::nvfp4_block_scales(amax_bits, count, scale, codes, factors);
  } else {
    // One E8M0 scale per 32 elements: the shared scalar rule costs little here.
    for (index_t b = 0; b < count; ++b) {
      const e8m0 block_scale = mx_block_scale<typename Format::element_type>(bits_float(amax_bits[b]), rule);
      codes[b] = block_scale.bits();
      factors[b] = mx_block_encode_factor(block_scale);
    }
  }
}

/// The round-to-nearest-even element encoder of quantize_panels (docs/numerics_spec.md §2 step 5, §7).
template <block_scaled_format Format>
struct nearest_encoder {
  nearest_encoder(const quantize_options&, index_t /*source_cols*/, index_t /*chunk_cols*/) {}
  /// Codes of x[0..n) * factors[i / block_cols] into out (packed for FP4); row / first_col: where
  /// x starts in the source (unused here).
  void encode(const float* x, index_t n, const float* factors, std::uint8_t* out, index_t /*row*/, index_t /*first_col*/) {
    if constexpr (Format::is_fp4) {
      fast_block_kernels::template encode_e2m1_scaled<Format::block_cols>(x, n, factors, out);
    } else {
      fast_block_kernels::template encode_scaled<Format::element_type::traits, Format::block_cols>(x, n, factors, out);
    }
  }
  /// NVFP4 1x16 has a row kernel that makes block amaxes, scales and codes in one walk over the
  /// row, which quantize_panels then runs instead of its three passes.
  static constexpr bool quantizes_rows = std::is_same_v<Format, nvfp4_1x16>;
  template <class T>
  void quantize_row(const T* x, index_t n, tensor_scale scale, std::uint8_t* scale_codes, std::uint8_t* out) {
    fast_block_kernels::quantize_nvfp4_1x16(x, n, scale, scale_codes, out);
  }
};

/// max |x| bits over a view (see abs_bits_mask); >= float_inf_bits when x holds a NaN or an Inf.
template <quantizer_input T>
std::uint32_t amax_bits_fast(matrix_view<const T> x) {
  if (x.empty()) return 0;
  // A max does not care about order: a view with contiguous columns is scanned as its transpose.
  if (!x.rows_contiguous() && x.row_stride() == 1) x = x.transposed();
  const bool parallel = simd::worth_parallel(x.size());
  if (x.rows_contiguous()) {
    const index_t chunks = (x.cols() + amax_chunk_cols - 1) / amax_chunk_cols;
    return simd::parallel_max(x.rows() * chunks, parallel, [&](index_t begin, index_t end) {
      std::uint32_t result = 0;
      for (index_t item = begin; item < end; ++item) {
        const index_t c0 = item % chunks * amax_chunk_cols;
        const index_t n = std::min(amax_chunk_cols, x.cols() - c0);
        result = std::max(result, fast_block_kernels::abs_max_bits(x.row(item / chunks) + c0, n));
      }
      return result;
    });
  }
  return simd::parallel_max(x.rows(), parallel, [&](index_t begin, index_t end) {
    std::uint32_t result = 0;
    for (index_t r = begin; r < end; ++r)
      for (index_t c = 0; c < x.cols(); ++c) result = std::max(result, float_bits(to_float32(x(r, c))) & abs_bits_mask);
    return result;
  });
}

/// NVFP4 1x16 round-to-nearest of a view with contiguous columns (the columnwise copy of a
/// row-major source: x = sourceᵀ), whose 16-element blocks lie across the source's rows: threads
/// share column_band_walk's items, each step quantized across the lanes
/// (quantize_nvfp4_1x16_across) with nothing transposed but the packed codes. View rows past the
/// last whole vector, and each row's last partial block, are gathered and go through the row
/// kernel. Bit-identical to quantize_nvfp4_1x16 on each view row.
template <quantizer_input T>
void quantize_columns_nvfp4_1x16(matrix_view<const T> x, tensor_scale scale, std::uint8_t* data, index_t data_stride, std::uint8_t* scales,
                                 index_t scale_stride, bool parallel) {
  using kernels = fast_block_kernels;
  using vf = typename kernels::vf;
  using vi = typename kernels::vi;
  constexpr index_t lanes = kernels::width;
  constexpr int per_step = kernels::blocks_across_per_step;
  const column_band_walk<T> walk(x, lanes, 16, per_step);
  simd::parallel_ranges(walk.items(), parallel, [&](index_t first_item, index_t last_item) {
    const typename kernels::nvfp4_scale_constants constants(scale);
    walk.run(first_item, last_item, [&](index_t r0, index_t c0, int blocks, const T* source, index_t stride) {
      vi packed[per_step][2] = {};
      vi codes[per_step] = {};
      for (int k = 0; k < blocks; ++k) {
        vf v[16];
        kernels::load_across(source + 16 * k * stride, stride, v);
        kernels::quantize_nvfp4_1x16_across(v, constants, codes[k], packed[k]);
      }
      kernels::store_across(packed, codes, blocks, data + r0 * data_stride + c0 / 2, data_stride, scales + r0 * scale_stride + c0 / 16,
                            scale_stride);
    });
  });
  // What the bands left: whole rows past the last vector, the last partial block of the others.
  const bool rows_left = walk.vector_rows() < x.rows();
  if (!rows_left && walk.first_column_left(0) == x.cols()) return;
  simd::parallel_ranges(x.rows(), parallel && rows_left, [&](index_t first_row, index_t last_row) {
    std::vector<float> gathered(static_cast<std::size_t>(x.cols()));
    for (index_t r = first_row; r < last_row; ++r) {
      const index_t c0 = walk.first_column_left(r);
      if (c0 == x.cols()) continue;
      for (index_t c = c0; c < x.cols(); ++c) gathered[static_cast<std::size_t>(c - c0)] = to_float32(x(r, c));
      kernels::quantize_nvfp4_1x16(gathered.data(), x.cols() - c0, scale, scales + r * scale_stride + c0 / 16,
                                   data + r * data_stride + c0 / 2);
    }
  });
}

/// The block-scaling walk, written once: OpenMP over panels of 16 rows, each panel in chunks of
/// columns; per block_rows x block_cols tile the block amax, the block scales, then every row's
/// elements through the Encoder policy (nearest_encoder, stochastic_encoder). Same contract as
/// reference::quantize_with_amax for finite x. Writes every byte of q's data and scales (q has
/// x's shape; what it held before does not matter) and its tensor scale.
template <block_scaled_format Format, class Encoder, quantizer_input T>
void quantize_panels(matrix_view<const T> x, float global_amax, const quantize_options& options, quantized_tensor<Format>& q) {
  static_assert(panel_rows % Format::block_rows == 0 && panel_cols % Format::block_cols == 0);
  constexpr int block_cols = Format::block_cols;
  tensor_scale scale{1.0f, 1.0f};
  if constexpr (Format::has_tensor_scale) scale = nvfp4_tensor_scale(global_amax);
  q.set_tensor_scale(global_amax, scale.encode, scale.decode);
  if (x.empty()) return;

  std::uint8_t* const data = bytes_of(q.data());
  std::uint8_t* const scales = bytes_of(q.scales());
  const index_t data_stride = q.data_row_stride();
  const index_t scale_stride = q.scale_cols();
  const bool parallel = simd::worth_parallel(x.size());
  if constexpr (Encoder::quantizes_rows) {
    if (!x.rows_contiguous() && x.row_stride() == 1)
      return quantize_columns_nvfp4_1x16(x, scale, data, data_stride, scales, scale_stride, parallel);
  }

  // Contiguous float rows are read in place, a whole row at a time (one sequential stream for
  // the hardware prefetcher), and so are contiguous bf16 rows where the encoder's row kernel
  // reads bf16; other inputs are copied panel by panel into a small buffer.
  const bool in_place = (std::is_same_v<T, float> || Encoder::quantizes_rows) && x.rows_contiguous();
  // A view with contiguous columns (a transposed matrix) is copied 64 rows at a time: each of
  // its columns is then read 256 bytes at a time, and each page of the source is visited a
  // quarter as often as with 16 rows (faster at two threads: docs/benchmarks.md, "Figures behind code choices").
  const index_t rows_per_panel = !x.rows_contiguous() && x.row_stride() == 1 ? 4 * panel_rows : panel_rows;
  const index_t panels = (x.rows() + rows_per_panel - 1) / rows_per_panel;
  // Other contiguous rows (bf16 for the three-pass walk) are widened whole rows at a time, up to
  // a 1 MiB panel: each row is then read in one sequential stream. In 512-column pieces the
  // panel's 16 rows were 16 interleaved streams, and widening took a large share of a bf16 SR
  // quantize's time (docs/benchmarks.md, "Figures behind code choices").
  const bool whole_rows = x.rows_contiguous() && rows_per_panel * x.cols() <= max_widened_panel_floats;
  const index_t chunk_cols = in_place || whole_rows ? x.cols() : panel_cols;
  const index_t blocks_per_chunk = (chunk_cols + block_cols - 1) / block_cols;
  // Software prefetch of the next row pays only where a tile is one row walked by the three
  // passes (block amax, scales, encode: MXFP4 / MXFP8 quantize faster with it). The NVFP4 1x16
  // row kernel and 16x16 tiles run far slower with it, at every distance and locality hint tried
  // (figures: docs/benchmarks.md, "Figures behind code choices"; why was not measured: no hardware counters).
  constexpr bool prefetch_next_row = Format::block_rows == 1 && !Encoder::quantizes_rows;

  simd::parallel_ranges(panels, parallel, [&](index_t first_panel, index_t last_panel) {
    std::vector<float> buffer(in_place ? 0 : static_cast<std::size_t>(std::min(rows_per_panel, x.rows()) * chunk_cols));
    std::vector<std::uint32_t> amax_bits(static_cast<std::size_t>(blocks_per_chunk));
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(blocks_per_chunk));
    std::vector<float> factors(static_cast<std::size_t>(blocks_per_chunk));
    Encoder encoder(options, x.cols(), chunk_cols);

    for (index_t panel = first_panel; panel < last_panel; ++panel) {
      const index_t r0 = panel * rows_per_panel;
      const index_t rows = std::min(rows_per_panel, x.rows() - r0);
      for (index_t c0 = 0; c0 < x.cols(); c0 += chunk_cols) {
        const index_t cols = std::min(chunk_cols, x.cols() - c0);
        const index_t blocks = (cols + block_cols - 1) / block_cols;
        std::uint8_t* const row_data = data + r0 * data_stride + c0 / Format::elements_per_storage;
        std::uint8_t* const row_scales = scales + r0 * scale_stride + c0 / block_cols;
        index_t stride = 0;
        if constexpr (Encoder::quantizes_rows) {  // block amax, scales and codes row by row
          static_assert(Format::block_rows == 1);
          const auto quantize_rows = [&](const auto* first_row) {
            for (index_t i = 0; i < rows; ++i)
              encoder.quantize_row(first_row + i * stride, cols, scale, row_scales + i * scale_stride, row_data + i * data_stride);
          };
          if (in_place) {  // float or bf16, read where it lies
            stride = x.row_stride();
            quantize_rows(x.row(r0) + c0);
          } else {
            quantize_rows(load_panel(x, r0, rows, c0, cols, buffer.data(), chunk_cols, stride));
          }
          continue;
        }
        const float* tile = load_panel(x, r0, rows, c0, cols, buffer.data(), chunk_cols, stride);
        for (index_t t0 = 0; t0 < rows; t0 += Format::block_rows) {
          // One scale per block_rows x block_cols tile: the block amax runs over its rows.
          const index_t tile_rows = std::min<index_t>(Format::block_rows, rows - t0);
          std::fill_n(amax_bits.data(), blocks, 0u);
          for (index_t i = t0; i < t0 + tile_rows; ++i)
            fast_block_kernels::template block_abs_max_bits<block_cols>(tile + i * stride, cols, amax_bits.data());
          block_scales<Format>(amax_bits.data(), blocks, scale, options.mx_rule, codes.data(), factors.data());
          for (index_t i = t0; i < t0 + tile_rows; ++i) {
            std::memcpy(row_scales + i * scale_stride, codes.data(), static_cast<std::size_t>(blocks));
            // Read in place with one-row tiles, the next row is fetched piece by piece while this
            // one is encoded from cache (see prefetch_next_row).
            const float* const ahead = prefetch_next_row && in_place && r0 + i + 1 < x.rows() ? tile + (i + 1) * stride : nullptr;
            for (index_t c = 0; c < cols; c += encode_piece_cols) {
              const index_t n = std::min(encode_piece_cols, cols - c);
              if (ahead)
                for (index_t k = 0; k < n; k += 16) NVFP4_PREFETCH(ahead + c + k);
              encoder.encode(tile + i * stride + c, n, factors.data() + c / block_cols,
                             row_data + i * data_stride + c / Format::elements_per_storage, r0 + i, c0 + c);
            }
          }
        }
      }
    }
  });
}

/// The fast path of nvfp4::quantize_with_amax into q (x's shape): the walk with the encoder
/// options.rounding names. x must be finite and the rounding valid for Format (the entry points
/// check both).
template <block_scaled_format Format, quantizer_input T>
void quantize_with_amax_fast(matrix_view<const T> x, float global_amax, const quantize_options& options, quantized_tensor<Format>& q) {
  if constexpr (Format::is_fp4) {
    if (options.rounding == rounding_mode::stochastic)
      return quantize_panels<Format, stochastic_encoder<Format>>(x, global_amax, options, q);
  }
  quantize_panels<Format, nearest_encoder<Format>>(x, global_amax, options, q);
}

/// The same into a new tensor.
template <block_scaled_format Format, quantizer_input T>
quantized_tensor<Format> quantize_with_amax_fast(matrix_view<const T> x, float global_amax, const quantize_options& options) {
  quantized_tensor<Format> q(x.rows(), x.cols(), options.axis);
  quantize_with_amax_fast(x, global_amax, options, q);
  return q;
}

/// The fast path of nvfp4::dequantize; out must already have q's shape.
template <block_scaled_format Format>
void dequantize_fast(const quantized_tensor<Format>& q, matrix_view<float> out) {
  constexpr int block_cols = Format::block_cols;
  constexpr minifloat_traits element_traits = Format::element_type::traits;
  if (q.rows() == 0 || q.cols() == 0) return;
  const std::uint8_t* const data = bytes_of(q.data());
  const bool parallel = simd::worth_parallel(q.rows() * q.cols());
  simd::parallel_ranges(q.rows(), parallel, [&](index_t first_row, index_t last_row) {
    std::vector<float> scale_values(static_cast<std::size_t>(q.scale_cols()));
    std::vector<float> buffer;
    if (!out.rows_contiguous()) buffer.resize(static_cast<std::size_t>(q.cols()));
    for (index_t r = first_row; r < last_row; ++r) {
      for (index_t b = 0; b < q.scale_cols(); ++b) scale_values[static_cast<std::size_t>(b)] = q.scale(r, b).to_float();
      float* const row = out.rows_contiguous() ? out.row(r) : buffer.data();
      fast_block_kernels::template dequantize<element_traits, block_cols, Format::has_tensor_scale>(
          data + r * q.data_row_stride(), q.cols(), scale_values.data(), q.decode_scale(), row);
      if (!out.rows_contiguous())
        for (index_t c = 0; c < q.cols(); ++c) out(r, c) = buffer[static_cast<std::size_t>(c)];
    }
  });
}

}  // namespace nvfp4::detail
