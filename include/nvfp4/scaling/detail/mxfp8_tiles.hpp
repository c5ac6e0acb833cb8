// nvfp4/scaling/detail/mxfp8_tiles.hpp: the fast path of TE's MXFP8 quantizer (quantize_mxfp8_te,
// scaling/mxfp8_quantize.hpp) on 32 x 128 tiles of a source with contiguous rows
// (scaling/detail/source_tiles.hpp): each tile quantized into the rowwise copy (32-element blocks
// along the source's rows), the columnwise one (blocks down its columns: the copy of sourceᵀ) or
// both. Rowwise, `width` blocks go at a time: their amaxes out of one max tree (reduce_max_each),
// their scales out of one mxfp8_te_scale_lanes. Columnwise, a column group's 32 rows lie in 32
// registers, one block per lane, and only the packed codes are transposed. Scales by TE's rule
// (e8m0_round_up of amax * fp32(1 / fp8_max)) and codes by fp8_lanes::codes of x times 2^(127 -
// b): the reference's operations, lane for lane.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "nvfp4/config.hpp"
#include "nvfp4/detail/scratch.hpp"
#include "nvfp4/scaling/detail/block_kernels.hpp"
#include "nvfp4/scaling/detail/fp8_lanes.hpp"
#include "nvfp4/scaling/detail/source_tiles.hpp"
#include "nvfp4/simd/dispatch.hpp"

namespace nvfp4::detail::mxfp8_tiles {

inline constexpr index_t block = 32;
/// Tile shape: one block down, four along.
inline constexpr index_t tile_rows = block, tile_cols = 4 * block;

/// Where one copy goes: codes ([rows][cols], code_stride apart) and E8M0 scale codes ([rows]
/// [scale cols], scale_stride apart). codes == nullptr: not wanted.
struct copy_out {
  std::uint8_t* codes = nullptr;
  index_t code_stride = 0;
  std::uint8_t* scales = nullptr;
  index_t scale_stride = 0;
  bool wanted() const { return codes != nullptr; }
};

template <class Ops>
struct kernels {
  static constexpr int width = Ops::width;
  using vf = typename Ops::vf;
  using vi = typename Ops::vi;
  using blocks = block_kernels<Ops>;
  using tile_view = source_tiles::tile_view;
  using prefetcher = source_tiles::prefetcher;
  static_assert(block % width == 0);

  static NVFP4_ALWAYS_INLINE vi abs_bits(const float* p) { return Ops::bit_and(Ops::as_int(Ops::load(p)), Ops::set_int(0x7FFFFFFFu)); }

  /// Rowwise, a step takes `width` blocks: group_rows tile rows of group_cols blocks each.
  static constexpr index_t per_row = tile_cols / block;
  static constexpr index_t group_rows = width >= per_row ? width / per_row : 1, group_cols = width / group_rows;
  static_assert(group_rows * group_cols == width && per_row % group_cols == 0);

  /// The calls of next.step() that rows() makes for tile t.
  static index_t row_steps(const tile_view& t) { return (t.rows + group_rows - 1) / group_rows * (per_row / group_cols); }

  /// The rowwise copy's part of a tile: its blocks `width` at a time, the group's amaxes reduced
  /// together (reduce_max_each) and scaled in one step.
  template <minifloat_traits T>
  static void rows(const tile_view& t, const copy_out& out, float reciprocal, prefetcher& next) {
    alignas(64) float factors[width];
    alignas(64) std::uint8_t scale_codes[width];
    alignas(64) std::uint8_t staged[block];
    for (index_t i = 0; i < t.rows; i += group_rows)
      for (index_t cb0 = 0; cb0 < per_row; cb0 += group_cols) {
        next.step();
        vi block_max[width];
        for (index_t r = 0; r < group_rows; ++r)
          for (index_t c = 0; c < group_cols; ++c) {
            const float* const p = t.row(i + r) + (cb0 + c) * block;
            vi m = abs_bits(p);
            for (index_t k = width; k < block; k += width) m = Ops::max(m, abs_bits(p + k));
            block_max[r * group_cols + c] = m;
          }
        vi code;
        vf factor;
        blocks::mxfp8_te_scale_lanes(Ops::reduce_max_each(block_max), reciprocal, code, factor);
        Ops::store_bytes(scale_codes, code);
        Ops::store(factors, factor);
        for (index_t r = 0; r < group_rows && i + r < t.rows; ++r) {
          std::uint8_t* const row_codes = out.codes + (t.i0 + i + r) * out.code_stride + t.j0;
          std::uint8_t* const row_scales = out.scales + (t.i0 + i + r) * out.scale_stride + t.j0 / block;
          for (index_t c = 0; c < group_cols; ++c) {
            const index_t cb = cb0 + c, live = std::min(block, t.cols - cb * block);
            if (live <= 0) break;
            row_scales[cb] = scale_codes[r * group_cols + c];
            const float* const p = t.row(i + r) + cb * block;
            std::uint8_t* const codes = live == block ? row_codes + cb * block : staged;
            const vf f = Ops::set(factors[r * group_cols + c]);
            for (index_t k = 0; k < block; k += width)
              Ops::store_bytes(codes + k, fp8_lanes<Ops>::template codes<T>(Ops::mul(Ops::load(p + k), f)));
            if (live < block) std::memcpy(row_codes + cb * block, staged, static_cast<std::size_t>(live));
          }
        }
      }
  }

  /// The columnwise copy's part of a tile: for each group of `width` source columns, the 32 rows
  /// in 32 registers (one block per lane), their scales and codes, four codes to a 32-bit lane,
  /// into `staged` ([128 columns][32 rows]), whose rows then go to the copy.
  template <minifloat_traits T>
  static void columns(const tile_view& t, const copy_out& out, float reciprocal, std::uint8_t* staged, prefetcher& next) {
    alignas(64) std::uint8_t scale_codes[width];
    for (index_t g = 0; g < t.cols; g += width) {
      next.step();
      vf v[block];
#pragma GCC unroll 32
      for (int i = 0; i < block; ++i) v[i] = Ops::load(t.row(i) + g);
      vi code;
      vf factor;
      blocks::mxfp8_te_scale_lanes(blocks::lane_abs_max_bits(v), reciprocal, code, factor);
      const auto encoded = [&](int i) { return fp8_lanes<Ops>::template codes<T>(Ops::mul(v[i], factor)); };
      vi packed[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j)
        packed[j] = blocks::bytes_to_word(encoded(4 * j), encoded(4 * j + 1), encoded(4 * j + 2), encoded(4 * j + 3));
      Ops::store_lanes4(staged + g * block, block, packed[0], packed[1], packed[2], packed[3]);
      Ops::store_lanes4(staged + g * block + 16, block, packed[4], packed[5], packed[6], packed[7]);
      Ops::store_bytes(scale_codes, code);
      const index_t live = std::min<index_t>(width, t.cols - g);
      for (index_t l = 0; l < live; ++l) out.scales[(t.j0 + g + l) * out.scale_stride + t.i0 / block] = scale_codes[l];
    }
    for (index_t j = 0; j < t.cols; ++j)
      std::memcpy(out.codes + (t.j0 + j) * out.code_stride + t.i0, staged + j * block, static_cast<std::size_t>(t.rows));
  }
};

/// TE's MXFP8 quantization (elements of format T) of a rows x cols source with contiguous rows
/// (element (i, j) at source[i * row_stride + j], S float or bf16) into the copies wanted, every
/// tile on the library's threads.
template <minifloat_traits T, class S>
void quantize(const S* source, index_t row_stride, index_t rows, index_t cols, float reciprocal, const copy_out& along_rows,
              const copy_out& along_cols, bool parallel) {
  using k = kernels<simd::ops>;
  source_tiles::walk<tile_rows, tile_cols>(
      source, row_stride, rows, cols, parallel, [&](const source_tiles::tile_view& t, source_tiles::prefetcher& next) {
        next.spread_over((along_rows.wanted() ? k::row_steps(t) : 0) + (along_cols.wanted() ? (t.cols + k::width - 1) / k::width : 0));
        if (along_rows.wanted()) k::template rows<T>(t, along_rows, reciprocal, next);
        if (along_cols.wanted()) {
          scratch<std::uint8_t> staged(static_cast<std::size_t>(tile_cols * tile_rows));
          k::template columns<T>(t, along_cols, reciprocal, staged.data(), next);
        }
      });
}

}  // namespace nvfp4::detail::mxfp8_tiles
