// nvfp4/gemm/detail/tile_gemm.hpp: the relaxed GEMMs' engine on BF16 tiles (Intel AMX, TDPBF16PS).
// Each operand is folded once into bf16 values (a family's source: gemm/detail/tile_sources.hpp)
// and packed in the tile unit's layout; every output then lives in an fp32 tile over all of K
// (or in a fresh one per K block, FP8 block scaling, whose partials a merge step scales into the
// output) and goes through its family's epilogue once. What it computes is tile_model::chain
// (gemm/tile_model.hpp) for every output, as long as fits_tiles() accepts the operands' folded
// values (no denormal, inexact or non-finite value, no product or sum outside fp32's normal range:
// then the tile unit's flush-to-zero never acts). Each output is computed start to end by one
// thread, so results do not depend on the thread count.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "nvfp4/detail/scratch.hpp"
#include "nvfp4/gemm/tile_model.hpp"
#include "nvfp4/simd/amx/tiles.hpp"
#include "nvfp4/simd/dispatch.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4::detail::tiles {

/// Rows of an A tile and columns of a B tile; K of one tile step (16 bf16 pairs per tile row).
inline constexpr int lanes = 16;
inline constexpr int step_k = tile_model::step_k;

/// One tile: 16 rows of 32 bf16 (16 pairs; element 2p of a pair first). A tile of A: row r = row
/// r of the block, pair p = K elements 2p, 2p + 1 of the step. A tile of B: row p = pair p of each
/// of the block's 16 columns in turn (the layout TDPBF16PS reads its second source in). 1 KiB,
/// rows 64 bytes apart.
struct alignas(64) tile {
  std::uint16_t words[lanes * step_k];
};

/// The relaxed GEMMs run on tiles on this machine (simd::amx::relaxed_usable: AMX-BF16 present,
/// allowed by the OS, not turned off).
inline bool relaxed_on_tiles() { return simd::amx::relaxed_usable(); }

/// The least M and N of a product the relaxed GEMMs run on tiles: folding and packing both
/// operands costs about as much as the vector kernels' whole product below it (a decode-shaped
/// product, M = 16, ran 5x slower on the tiles: docs/benchmarks.md).
inline constexpr index_t min_tile_product_side = 128;

/// Whether a relaxed product of M x N outputs runs on tiles here (the operands' values decide
/// the rest: fits_tiles).
inline bool relaxed_on_tiles(index_t m, index_t n) { return std::min(m, n) >= min_tile_product_side && relaxed_on_tiles(); }

// ---- which operands the tiles compute exactly as the model ------------------------------------

/// What fits_tiles() needs to know of an operand's folded values.
struct fold_stats {
  bool representable = true;  ///< every value a finite bf16 that is zero or normal
  int exponent_min = 1000;    ///< floor(log2 |v|) over the non-zero values (none: min > max)
  int exponent_max = -1000;

  bool empty() const { return exponent_min > exponent_max; }
  /// Adds one value (the scalar form, for the references).
  void add(double value) {
    const float f = static_cast<float>(value);
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
    if (!(static_cast<double>(f) == value) || (bits & 0xFFFFu) != 0 || !std::isfinite(f) ||
        (f != 0.0f && std::fpclassify(f) != FP_NORMAL)) {
      representable = false;
      return;
    }
    if (f == 0.0f) return;
    const int e = std::ilogb(f);
    exponent_min = std::min(exponent_min, e);
    exponent_max = std::max(exponent_max, e);
  }
  void merge(const fold_stats& o) {
    representable = representable && o.representable;
    exponent_min = std::min(exponent_min, o.exponent_min);
    exponent_max = std::max(exponent_max, o.exponent_max);
  }
};

/// Whether a product of operands with these folded values over `k` elements runs on the tiles
/// exactly as tile_model says, with no denormal and no overflow anywhere: both representable, and
/// (when both have non-zero values) every product a multiple of 2^-126 (each bf16 value is a
/// multiple of 2^(e - 7): the least exponents add up to at least -112, so every partial sum is a
/// multiple of 2^-126 too, zero or normal) and every partial sum below 2^127 (the largest
/// magnitudes below 2^(e_max + 1) each, times the padded K).
inline bool fits_tiles(const fold_stats& a, const fold_stats& b, index_t k) {
  if (!a.representable || !b.representable) return false;
  if (a.empty() || b.empty()) return true;
  const index_t padded = std::max<index_t>(step_k, (k + step_k - 1) / step_k * step_k);
  const int log2_k = std::bit_width(static_cast<std::uint64_t>(padded - 1));
  return a.exponent_min + b.exponent_min >= -112 && a.exponent_max + b.exponent_max + 2 + log2_k <= 127;
}

// ---- packing ----------------------------------------------------------------------------------

/// An operand packed in tiles: blocks of 16 rows (zero past the rows), each a run of `steps`
/// tiles (zero past K), [block][step].
struct packed_operand {
  index_t rows = 0, k = 0, blocks = 0, steps = 0;
  scratch<tile> storage;  ///< borrowed from the calling thread's pool (detail/scratch.hpp)
  fold_stats stats;
  const tile* at(index_t block, index_t step) const { return storage.data() + block * steps + step; }
};

/// The bf16 halves of 16 x 32 fp32 bit patterns into `words` (row r: its 32 values in K order,
/// i.e. 16 pairs), and their fold_stats: whether any value has low bits (not a bf16), is a
/// denormal or is Inf / NaN, and the exponent range of the non-zero values. Branch-free loops over
/// 32- and 16-bit lanes, which the compiler vectorizes: the least non-zero magnitude comes from the
/// minimum of (magnitude - 1) in 16-bit arithmetic (a zero wraps to 0xFFFF), the largest from the
/// maximum; a bf16 magnitude's exponent field is its bits 7..14, monotonic in the magnitude.
inline fold_stats narrow_to_bf16(const std::uint32_t (&bits)[lanes][step_k], std::uint16_t* NVFP4_RESTRICT words) {
  const std::uint32_t* flat = &bits[0][0];
  std::uint32_t low = 0;
  for (int i = 0; i < lanes * step_k; ++i) {
    low |= flat[i] & 0xFFFFu;
    words[i] = static_cast<std::uint16_t>(flat[i] >> 16);
  }
  std::uint16_t least_minus_one = 0xFFFF, largest = 0;
  for (int i = 0; i < lanes * step_k; ++i) {
    const std::uint16_t magnitude = static_cast<std::uint16_t>(words[i] & 0x7FFF);
    least_minus_one = std::min(least_minus_one, static_cast<std::uint16_t>(magnitude - 1));
    largest = std::max(largest, magnitude);
  }
  fold_stats s;
  if (least_minus_one == 0xFFFF) {  // all zeros
    s.representable = low == 0;
    return s;
  }
  const int field_min = (least_minus_one + 1) >> 7, field_max = largest >> 7;
  s.representable = low == 0 && field_min != 0 && field_max != 255;
  s.exponent_min = field_min - 127;
  s.exponent_max = field_max - 127;
  return s;
}

/// dst[p][n] = src[n][p] for a 16 x 16 matrix of bf16 pairs (a B tile from 16 columns' pairs),
/// with the in-register dword transpose of this build's lanes (16 x 16 at once, or 8 x 8 blocks);
/// one lane wide, a plain loop.
inline void transpose_pairs(const std::uint16_t* NVFP4_RESTRICT src, std::uint16_t* NVFP4_RESTRICT dst) {
  using ops = simd::ops;
  constexpr int w = ops::width;
  if constexpr (w == 1) {
    for (int p = 0; p < lanes; ++p)
      for (int n = 0; n < lanes; ++n) {
        dst[2 * (p * lanes + n)] = src[2 * (n * lanes + p)];
        dst[2 * (p * lanes + n) + 1] = src[2 * (n * lanes + p) + 1];
      }
  } else {
    // The vector loads and stores (intrinsics) may alias the 16-bit words.
    for (int bi = 0; bi < lanes; bi += w)
      for (int bj = 0; bj < lanes; bj += w) {
        typename ops::vi rows[w];
        for (int r = 0; r < w; ++r) rows[r] = ops::load_bits(reinterpret_cast<const std::uint32_t*>(src + 2 * ((bi + r) * lanes + bj)));
        ops::transpose(rows);
        for (int r = 0; r < w; ++r) ops::store_bits(reinterpret_cast<std::uint32_t*>(dst + 2 * ((bj + r) * lanes + bi)), rows[r]);
      }
  }
}

/// Folds and packs a [rows, k] operand: source.fill(row0, step, bits) writes the fp32 bit patterns
/// of rows row0 .. row0 + 15, K elements 32·step .. 32·step + 31 (zero past the operand). Tiles
/// are split over a team when the operand is large; stats is the whole operand's.
template <class Source>
void pack(const Source& source, index_t rows, index_t k, bool as_b, packed_operand& out) {
  out.rows = rows;
  out.k = k;
  out.blocks = (rows + lanes - 1) / lanes;
  out.steps = (k + step_k - 1) / step_k;
  const index_t count = out.blocks * out.steps;
  if (out.storage.size() != static_cast<std::size_t>(count)) {
    out.storage = scratch<tile>();  // back to the pool first, so that the next borrow can take it
    out.storage = scratch<tile>(static_cast<std::size_t>(count));
  }
  tile* const tiles = out.storage.data();
  out.stats = simd::parallel_reduce(
      count, simd::worth_parallel(rows * k), fold_stats{},
      [&](index_t begin, index_t end) {
        fold_stats local;
        alignas(64) std::uint32_t bits[lanes][step_k];
        alignas(64) std::uint16_t words[lanes * step_k];
        for (index_t t = begin; t < end; ++t) {
          const index_t block = t / out.steps, step = t % out.steps;
          source.fill(block * lanes, step, bits);
          // As A, row r's words are the tile's row r; as B, the tile is their transpose (pairs).
          if (!as_b) {
            local.merge(narrow_to_bf16(bits, tiles[t].words));
          } else {
            local.merge(narrow_to_bf16(bits, words));
            transpose_pairs(words, tiles[t].words);
          }
        }
        return local;
      },
      [](fold_stats x, const fold_stats& y) {
        x.merge(y);
        return x;
      });
}

// ---- the driver -------------------------------------------------------------------------------

/// Tile registers: tmm0-3 the accumulators of a block of 2 x 2 tiles (tmm 2r + c), tmm4-5 two
/// tiles of A, tmm6-7 two of B; all 16 rows of 64 bytes.
constexpr simd::amx::tile_config tile_setup() {
  simd::amx::tile_config config;
  for (int t = 0; t < 8; ++t) config.set(t, lanes, 64);
  return config;
}

/// The tile unit configured for this thread while the object lives.
template <class Tiles>
struct tile_session {
  tile_session() { Tiles::configure(tile_setup()); }
  ~tile_session() { Tiles::release(); }
  tile_session(const tile_session&) = delete;
  tile_session& operator=(const tile_session&) = delete;
};

/// A work item's shape: `item_blocks` blocks of 16 rows of A against `panel_blocks` blocks of 16
/// columns of B, walked `chunk_steps` K steps at a time (a chunk of the item's A and B stays in
/// L2 while every 2 x 2 block of the item goes over it; the accumulators go to the item's staged
/// fp32 tiles between chunks, which changes no bit).
struct blocking {
  index_t item_blocks = 8, panel_blocks = 16, chunk_steps = 32;
};

template <int N, class F>
NVFP4_ALWAYS_INLINE void static_for(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f.template operator()<I>(), ...); }
  (std::make_integer_sequence<int, N>{});
}

/// steps tile steps into the accumulators tmm0-3 of an R x C block: a[r] and b[c] point at the
/// first step's tiles (a block's steps are consecutive tiles).
template <class Tiles, int R, int C>
NVFP4_ALWAYS_INLINE void accumulate(const tile* const (&a)[R], const tile* const (&b)[C], index_t steps) {
  for (index_t s = 0; s < steps; ++s) {
    static_for<R>([&]<int r>() { Tiles::template load<4 + r>(a[r] + s, 64); });
    static_for<C>([&]<int c>() { Tiles::template load<6 + c>(b[c] + s, 64); });
    static_for<R>([&]<int r>() { static_for<C>([&]<int c>() { Tiles::template dot_bf16<2 * r + c, 4 + r, 6 + c>(); }); });
  }
}

/// f(integral_constant R, integral_constant C) for a block of r x c tiles (each 1 or 2).
template <class F>
NVFP4_ALWAYS_INLINE void for_shape(index_t r, index_t c, F&& f) {
  using one = std::integral_constant<int, 1>;
  using two = std::integral_constant<int, 2>;
  if (r >= 2 && c >= 2)
    f(two{}, two{});
  else if (r >= 2)
    f(two{}, one{});
  else if (c >= 2)
    f(one{}, two{});
  else
    f(one{}, one{});
}

/// No K blocks: every output's tile runs over all of K.
struct no_block_merge {
  void operator()(index_t, index_t, index_t, const float*, float*) const {}
};

/// out = the tile chain of A·Bᵀ for every output (tile_model::chain from +0 over all of K), handed
/// to store(i, j0, values, count) by row segments. With block_steps > 0, K is cut into blocks of
/// that many steps instead: each block's chain starts from +0 in its own tile, and
/// merge(row_block, column_block, k_block, partial, y) folds the 16 x 16 partial (row-major) into
/// the output tile y (row-major, from +0), which is what is stored. Call only where fits_tiles()
/// accepts a and b.
template <class Tiles, class Merge, class Store>
void run(const packed_operand& a, const packed_operand& b, index_t block_steps, const Merge& merge, const Store& store,
         blocking shape = {}) {
  const index_t m = a.rows, n = b.rows, steps = a.steps;
  if (m == 0 || n == 0) return;
  const index_t item_blocks = shape.item_blocks, panel_blocks = shape.panel_blocks;
  // Chunks of whole K blocks, so that no block straddles two.
  const index_t chunk = block_steps > 0 ? block_steps * std::max<index_t>(1, shape.chunk_steps / block_steps) : shape.chunk_steps;
  const index_t row_groups = (a.blocks + item_blocks - 1) / item_blocks;
  const index_t panels = (b.blocks + panel_blocks - 1) / panel_blocks;
  constexpr index_t tile_floats = lanes * lanes;
  struct thread_state {
    tile_session<Tiles> session;
    scratch<float> staged;   // the item's output tiles, [row block][column block][16][16]
    scratch<float> partial;  // a 2 x 2 block's K-block partials, two sets (the pipeline's)
    scratch<float> row;      // one row of the item's panel, for store
  };
  // Work in units of about a nanosecond: a 16-output row of a tile step is about one.
  const bool parallel = simd::worth_parallel(m * n / lanes * std::max<index_t>(1, steps));
  simd::parallel_dynamic(
      row_groups * panels, parallel,
      [&] {
        return thread_state{{},
                            scratch<float>(static_cast<std::size_t>(item_blocks * panel_blocks * tile_floats)),
                            scratch<float>(static_cast<std::size_t>(2 * 4 * tile_floats)),
                            scratch<float>(static_cast<std::size_t>(panel_blocks * lanes))};
      },
      [&](index_t item, thread_state& state) {
        const index_t panel = item / row_groups, group = item % row_groups;
        const index_t rb0 = group * item_blocks, cb0 = panel * panel_blocks;
        const index_t rbs = std::min(item_blocks, a.blocks - rb0), cbs = std::min(panel_blocks, b.blocks - cb0);
        float* const staged = state.staged.data();
        const auto staged_tile = [&](index_t rb, index_t cb) { return staged + (rb * panel_blocks + cb) * tile_floats; };
        if (block_steps > 0 || steps == 0)  // K blocks start from +0; no K at all: every output is +0
          for (index_t rb = 0; rb < rbs; ++rb) std::fill_n(staged_tile(rb, 0), cbs * tile_floats, 0.0f);
        for (index_t s0 = 0; s0 < steps; s0 += chunk) {
          const index_t s1 = std::min(steps, s0 + chunk);
          for (index_t cb = 0; cb < cbs; cb += 2)
            for (index_t rb = 0; rb < rbs; rb += 2)
              for_shape(rbs - rb, cbs - cb, [&]<int R, int C>(std::integral_constant<int, R>, std::integral_constant<int, C>) {
                const tile* ta[R];
                const tile* tb[C];
                if (block_steps == 0) {
                  static_for<R>([&]<int r>() {
                    static_for<C>([&]<int c>() {
                      if (s0 == 0)
                        Tiles::template zero<2 * r + c>();
                      else
                        Tiles::template load<2 * r + c>(staged_tile(rb + r, cb + c), 64);
                    });
                  });
                  for (int r = 0; r < R; ++r) ta[r] = a.at(rb0 + rb + r, s0);
                  for (int c = 0; c < C; ++c) tb[c] = b.at(cb0 + cb + c, s0);
                  accumulate<Tiles, R, C>(ta, tb, s1 - s0);
                  static_for<R>(
                      [&]<int r>() { static_for<C>([&]<int c>() { Tiles::template store<2 * r + c>(staged_tile(rb + r, cb + c), 64); }); });
                  return;
                }
                // K blocks in a software pipeline: block kb's partials are stored, block kb + 1's
                // multiplies are issued into the accumulators, and only then are kb's partials
                // merged (vector work, from memory), so that the tile unit computes the next
                // block while the vector units merge this one. Every output still takes its
                // blocks' partials in K order, each a chain from +0: the same bits as merging
                // each block before the next one starts.
                const auto issue = [&](index_t k0) {
                  static_for<R>([&]<int r>() { static_for<C>([&]<int c>() { Tiles::template zero<2 * r + c>(); }); });
                  for (int r = 0; r < R; ++r) ta[r] = a.at(rb0 + rb + r, k0);
                  for (int c = 0; c < C; ++c) tb[c] = b.at(cb0 + cb + c, k0);
                  accumulate<Tiles, R, C>(ta, tb, std::min(s1, k0 + block_steps) - k0);
                };
                issue(s0);
                for (index_t k0 = s0, round = 0; k0 < s1; k0 += block_steps, ++round) {
                  float* const partial = state.partial.data() + (round % 2) * 4 * tile_floats;
                  static_for<R>([&]<int r>() {
                    static_for<C>([&]<int c>() { Tiles::template store<2 * r + c>(partial + (2 * r + c) * tile_floats, 64); });
                  });
                  if (k0 + block_steps < s1) issue(k0 + block_steps);
                  for (int r = 0; r < R; ++r)
                    for (int c = 0; c < C; ++c)
                      merge(rb0 + rb + r, cb0 + cb + c, k0 / block_steps, partial + (2 * r + c) * tile_floats, staged_tile(rb + r, cb + c));
                }
              });
        }
        float* const row = state.row.data();
        const index_t j0 = cb0 * lanes, cols = std::min(cbs * lanes, n - j0);
        for (index_t rb = 0; rb < rbs; ++rb)
          for (int r = 0; r < lanes; ++r) {
            const index_t i = (rb0 + rb) * lanes + r;
            if (i >= m) break;
            for (index_t cb = 0; cb < cbs; ++cb) std::copy_n(staged_tile(rb, cb) + r * lanes, lanes, row + cb * lanes);
            store(i, j0, static_cast<const float*>(row), cols);
          }
      });
}

}  // namespace nvfp4::detail::tiles
