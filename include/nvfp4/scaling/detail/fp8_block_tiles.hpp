// nvfp4/scaling/detail/fp8_block_tiles.hpp: the fast path of FP8 block scaling (TE's
// Float8BlockScaling quantizer, scaling/fp8_quantize.hpp) on 128 x 128 tiles of a source with
// contiguous rows (scaling/detail/source_tiles.hpp): each tile quantized into the rowwise copy,
// the columnwise one or both. Rowwise blocks go a tile row at a time; columnwise ones lie across
// the lanes of the vectors of a column group (one 1x128 block per lane: its amax a lane-wise max
// down the tile, its codes packed four to a 32-bit lane, and only they transposed). A block's
// scale is the caller's rule (fp8_scale_from_amax with the role's options) applied in scalar code
// to its amax, as in the reference; codes are fp8_lanes::codes of x times the scale, the
// reference's fp32 product and rounding.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "nvfp4/config.hpp"
#include "nvfp4/detail/scratch.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e5m2.hpp"
#include "nvfp4/scaling/detail/fp8_lanes.hpp"
#include "nvfp4/scaling/detail/source_tiles.hpp"
#include "nvfp4/simd/dispatch.hpp"
#include "nvfp4/simd/minifloat_lanes.hpp"

namespace nvfp4::detail::fp8_block_tiles {

/// The block length (both shapes) and so the tile side.
inline constexpr index_t side = 128;

/// Where one copy goes: its codes ([rows][cols], code_stride apart) and decode scales ([scale
/// rows][scale cols], scale_stride apart), as fp8_tensor holds them. codes == nullptr: not wanted.
struct copy_out {
  std::uint8_t* codes = nullptr;
  index_t code_stride = 0;
  float* scale_inv = nullptr;
  index_t scale_stride = 0;
  bool wanted() const { return codes != nullptr; }
};

/// What to make of every tile: block shape (128x128 or 1x128), element format, the scale rule
/// (amax -> scale), the copies.
template <class Rule>
struct job {
  bool square = false;
  bool e4m3 = true;
  const Rule* rule = nullptr;
  copy_out rows, cols;
};

template <class Ops>
struct kernels {
  static constexpr int width = Ops::width;
  using vf = typename Ops::vf;
  using vi = typename Ops::vi;
  using lanes = simd::minifloat_lanes<Ops>;
  using tile_view = source_tiles::tile_view;
  using prefetcher = source_tiles::prefetcher;
  static_assert(side % (2 * width) == 0);

  /// |x| bits, lane-wise.
  static NVFP4_ALWAYS_INLINE vi abs_bits(const float* p) { return Ops::bit_and(Ops::as_int(Ops::load(p)), Ops::set_int(0x7FFFFFFFu)); }

  /// The largest |x| of the whole (zero-padded) tile, as float bits.
  static std::uint32_t tile_amax_bits(const tile_view& t) {
    vi m0 = Ops::set_int(0), m1 = m0;
    for (index_t i = 0; i < t.rows; ++i)
      for (index_t j = 0; j < side; j += 2 * width) {
        m0 = Ops::max(m0, abs_bits(t.row(i) + j));
        m1 = Ops::max(m1, abs_bits(t.row(i) + j + width));
      }
    return Ops::reduce_max(Ops::max(m0, m1));
  }

  /// The 128 codes of a tile row times scale into out.
  template <minifloat_traits T>
  static NVFP4_ALWAYS_INLINE void encode_row(const float* row, float scale, std::uint8_t* out) {
    const vf factor = Ops::set(scale);
    for (index_t j = 0; j < side; j += width)
      Ops::store_bytes(out + j, fp8_lanes<Ops>::template codes<T>(Ops::mul(Ops::load(row + j), factor)));
  }

  /// The rowwise copy's part of a tile.
  template <minifloat_traits T, class Rule>
  static void rows(const tile_view& t, const job<Rule>& w, float tile_scale, prefetcher& next) {
    const copy_out& out = w.rows;
    alignas(64) std::uint8_t staged[side];
    for (index_t i = 0; i < t.rows; ++i) {
      next.step();
      const float* const row = t.row(i);
      float scale = tile_scale;
      if (!w.square) {
        vi m = abs_bits(row);
        for (index_t j = width; j < side; j += width) m = Ops::max(m, abs_bits(row + j));
        scale = (*w.rule)(std::bit_cast<float>(Ops::reduce_max(m)));
        out.scale_inv[(t.i0 + i) * out.scale_stride + t.j0 / side] = 1.0f / scale;
      }
      std::uint8_t* const codes = out.codes + (t.i0 + i) * out.code_stride + t.j0;
      if (t.cols == side) {
        encode_row<T>(row, scale, codes);
      } else {
        encode_row<T>(row, scale, staged);
        std::memcpy(codes, staged, static_cast<std::size_t>(t.cols));
      }
    }
  }

  /// The columnwise copy's part of a tile: for each group of `width` source columns, one block
  /// per lane down the tile's 128 rows (zero past its live rows), its codes four rows to a 32-bit
  /// lane and stored a lane (an output row) at a time into `staged` ([128 columns][128 rows]),
  /// whose rows then go to the copy. (Stored straight into eight output rows 4 KiB apart, 16
  /// bytes at a time, those stores took a third of this kernel's time.)
  template <minifloat_traits T, class Rule>
  static void columns(const tile_view& t, const job<Rule>& w, float tile_scale, std::uint8_t* staged, prefetcher& next) {
    const copy_out& out = w.cols;
    alignas(64) std::uint32_t amax[width];
    alignas(64) float scales[width];
    for (index_t g = 0; g < t.cols; g += width) {
      next.step();
      const index_t live = std::min<index_t>(width, t.cols - g);
      vf factor = Ops::set(tile_scale);
      if (!w.square) {
        vi m0 = abs_bits(t.row(0) + g), m1 = abs_bits(t.row(1) + g);
        for (index_t i = 2; i < side; i += 2) {
          m0 = Ops::max(m0, abs_bits(t.row(i) + g));
          m1 = Ops::max(m1, abs_bits(t.row(i + 1) + g));
        }
        Ops::store_bits(amax, Ops::max(m0, m1));
        for (int l = 0; l < width; ++l) {
          scales[l] = l < live ? (*w.rule)(std::bit_cast<float>(amax[l])) : 1.0f;
          if (l < live) out.scale_inv[(t.j0 + g + l) * out.scale_stride + t.i0 / side] = 1.0f / scales[l];
        }
        factor = Ops::load(scales);
      }
      const auto code = [&](index_t i) { return fp8_lanes<Ops>::template codes<T>(Ops::mul(Ops::load(t.row(i) + g), factor)); };
      for (index_t i = 0; i < side; i += 16) {
        vi word[4];
        for (int k = 0; k < 4; ++k)
          word[k] = lanes::bytes_to_word(code(i + 4 * k), code(i + 4 * k + 1), code(i + 4 * k + 2), code(i + 4 * k + 3));
        Ops::store_lanes4(staged + g * side + i, side, word[0], word[1], word[2], word[3]);
      }
    }
    for (index_t j = 0; j < t.cols; ++j)
      std::memcpy(out.codes + (t.j0 + j) * out.code_stride + t.i0, staged + j * side, static_cast<std::size_t>(t.rows));
  }

  /// The copies `w` asks for of one tile.
  template <minifloat_traits T, class Rule>
  static void tile(const tile_view& t, const job<Rule>& w, std::uint8_t* staged, prefetcher& next) {
    next.spread_over((w.rows.wanted() ? t.rows : 0) + (w.cols.wanted() ? (t.cols + width - 1) / width : 0));
    float tile_scale = 1.0f;
    if (w.square) {
      tile_scale = (*w.rule)(std::bit_cast<float>(tile_amax_bits(t)));
      const float scale_inv = 1.0f / tile_scale;
      if (w.rows.wanted()) w.rows.scale_inv[(t.i0 / side) * w.rows.scale_stride + t.j0 / side] = scale_inv;
      if (w.cols.wanted()) w.cols.scale_inv[(t.j0 / side) * w.cols.scale_stride + t.i0 / side] = scale_inv;
    }
    if (w.rows.wanted()) rows<T>(t, w, tile_scale, next);
    if (w.cols.wanted()) columns<T>(t, w, tile_scale, staged, next);
  }
};

/// The copies `w` asks for of a rows x cols source with contiguous rows (element (i, j) at
/// source[i * row_stride + j], T float or bf16), every tile on the library's threads.
template <class T, class Rule>
void quantize(const T* source, index_t row_stride, index_t rows, index_t cols, const job<Rule>& w, bool parallel) {
  using k = kernels<simd::ops>;
  source_tiles::walk<side, side>(source, row_stride, rows, cols, parallel,
                                 [&](const source_tiles::tile_view& t, source_tiles::prefetcher& next) {
                                   // The column copy's staging, borrowed once per thread and tile (the pool hands back the same
                                   // block, uninitialised: nothing is zeroed).
                                   scratch<std::uint8_t> staged(w.cols.wanted() ? static_cast<std::size_t>(side * side) : 0);
                                   if (w.e4m3)
                                     k::template tile<e4m3_traits>(t, w, staged.data(), next);
                                   else
                                     k::template tile<e5m2_traits>(t, w, staged.data(), next);
                                 });
}

}  // namespace nvfp4::detail::fp8_block_tiles
