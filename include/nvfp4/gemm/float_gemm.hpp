// nvfp4/gemm/float_gemm.hpp: the library's plain fp32 GEMM, D = C + A·Bᵀ with every output one
// fp32 fused-multiply-add chain in K order. It serves the high-precision paths (the FP32 / BF16
// "no quantization" recipe): a defined order makes their results the same on every build and
// thread count, unlike a BLAS, whose order is its own business. Its relaxed form runs bf16
// operands on BF16 tiles where the machine has them (the tile chain of gemm/tile_model.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "nvfp4/detail/scratch.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/gemm/detail/float_tile_kernel.hpp"
#include "nvfp4/gemm/detail/tile_gemm.hpp"
#include "nvfp4/gemm/detail/tile_sources.hpp"
#include "nvfp4/gemm/operands.hpp"
#include "nvfp4/gemm/tile_model.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/simd/dispatch.hpp"
#include "nvfp4/simd/panels.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4 {

namespace detail {
/// Throws unless A [M, K], B [N, K], C (empty or [M, N]) and D [M, N] fit together.
inline void check_float_gemm(matrix_view<const float> a, matrix_view<const float> b, matrix_view<const float> c, matrix_view<float> d,
                             const char* what) {
  a.validate("A");
  b.validate("B");
  d.validate("D");
  const auto shape = [](index_t r, index_t k) { return std::to_string(r) + "x" + std::to_string(k); };
  require(a.cols() == b.cols(), errc::shape_mismatch,
          std::string(what) + ": A is " + shape(a.rows(), a.cols()) + " and B is " + shape(b.rows(), b.cols()) +
              ": both must be [rows, K] with the same K (B is [N, K])");
  require(d.rows() == a.rows() && d.cols() == b.rows(), errc::shape_mismatch,
          std::string(what) + ": D is " + shape(d.rows(), d.cols()) + ", expected " + shape(a.rows(), b.rows()));
  if (!c.empty() || c.data() != nullptr) {
    c.validate("C");
    require(c.rows() == a.rows() && c.cols() == b.rows(), errc::shape_mismatch,
            std::string(what) + ": C is " + shape(c.rows(), c.cols()) + ", expected " + shape(a.rows(), b.rows()));
  }
}
}  // namespace detail

namespace reference {

/// D = C + A·Bᵀ: for each output, acc = C(i, j) (or 0), then acc = fma(A(i, k), B(j, k), acc) for
/// k = 0, 1, ..., K-1, one fp32 rounding per step. `c` may be empty; it may alias `d`.
inline void float_gemm(matrix_view<const float> a, matrix_view<const float> b, matrix_view<const float> c, matrix_view<float> d) {
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < b.rows(); ++j) {
      float acc = c.empty() ? 0.0f : c(i, j);
      for (index_t k = 0; k < a.cols(); ++k) acc = std::fma(a(i, k), b(j, k), acc);
      d(i, j) = acc;
    }
}

/// float_gemm with a mode: exact as above; relaxed, where this machine runs the relaxed GEMMs on
/// BF16 tiles for this shape (tiles::relaxed_on_tiles) and every value of A and B is a bf16 that
/// fits them (tiles::fits_tiles), D = C +
/// the tile chain from +0 over all of K (tile_model::chain; + C in fp32 where C is given), else
/// exact.
inline void float_gemm(matrix_view<const float> a, matrix_view<const float> b, matrix_view<const float> c, matrix_view<float> d,
                       gemm_mode mode) {
  using namespace nvfp4::detail::tiles;
  if (mode == gemm_mode::relaxed && relaxed_on_tiles(a.rows(), b.rows()) &&
      fits_tiles(scalar_stats(float_source{a}, a.rows(), a.cols()), scalar_stats(float_source{b}, b.rows(), b.cols()), a.cols())) {
    for (index_t i = 0; i < a.rows(); ++i)
      for (index_t j = 0; j < b.rows(); ++j) {
        const float chain = tile_model::chain(
            a.cols(), 0.0f, [&](index_t k) { return a(i, k); }, [&](index_t k) { return b(j, k); });
        d(i, j) = c.empty() ? chain : c(i, j) + chain;
      }
    return;
  }
  float_gemm(a, b, c, d);
}

}  // namespace reference

namespace detail {

/// float_gemm's relaxed product on tile unit Tiles (see reference::float_gemm with a mode); false,
/// with nothing written, where A's or B's values do not fit the tiles.
template <class Tiles>
bool float_gemm_on_tiles(matrix_view<const float> a, matrix_view<const float> b, matrix_view<const float> c, matrix_view<float> d) {
  tiles::packed_operand pa, pb;
  tiles::pack(tiles::float_source{a}, a.rows(), a.cols(), false, pa);
  if (!pa.stats.representable) return false;
  tiles::pack(tiles::float_source{b}, b.rows(), b.cols(), true, pb);
  if (!tiles::fits_tiles(pa.stats, pb.stats, a.cols())) return false;
  const bool has_c = !c.empty();
  tiles::run<Tiles>(pa, pb, 0, tiles::no_block_merge{}, [&](index_t i, index_t j0, const float* v, index_t count) {
    for (index_t t = 0; t < count; ++t) d(i, j0 + t) = has_c ? c(i, j0 + t) + v[t] : v[t];
  });
  return true;
}

/// The fast fp32 GEMM's blocking around its tile kernel (gemm/detail/float_tile_kernel.hpp), the
/// classic packed GEMM's: A and B are packed once per call (by the team), A into tiles of MR rows,
/// B into panels of NR columns, K chunk by K chunk (with one block of rows, each work item packs
/// its own panels of B instead). A work item is `block_rows` rows of A against a group of panels,
/// walked one K chunk of `chunk_k` at a time: for each panel the tile kernel runs down the item's
/// rows, the panel's chunk (32 KB on AVX-512) staying in L1 and the rows' chunk (about 200 KB) in
/// L2. Each output's chain continues chunk after chunk from its
/// stored fp32 partial (exact; the item's staging block), in the one thread that owns the item, so
/// the result is the reference's for any thread count.
struct float_gemm_blocking {
  using kernel = float_tile_kernel<simd::ops>;
  static constexpr index_t mr = kernel::mr, nr = kernel::nr;
  static constexpr index_t chunk_k = 256;
  static constexpr index_t block_rows = 16 * mr;
  /// Columns per work item: 256, so that an item's chunk of B (256 KB), its rows of A (200 KB) and
  /// its partial sums (200 KB) stay in a 1-2 MB L2 together (1024 columns, 2 MB, measured 1.10x
  /// slower at 2048³ on a 2 MB L2); 128 for at most few_rows rows of A (decode shapes), so that a
  /// team still finds enough items.
  static constexpr index_t group_cols = 256, small_group_cols = 128;
};
/// Up to this many rows of A, float_gemm's work items are narrower (float_gemm_blocking).
inline constexpr index_t few_rows = 16;

/// out[kk·NR + c] = B(j0 + c, k0 + kk) for kk < kc, c < NR, zero past `cols`: one K chunk of one
/// panel of B.
inline void pack_float_panel(matrix_view<const float> b, index_t j0, index_t cols, index_t k0, index_t kc, float* out) {
  constexpr index_t nr = float_gemm_blocking::nr;
  if (b.col_stride() == 1) {
    // Row-major B: the transpose of `cols` rows, 16 x 16 floats at a time.
    simd::fast_panels::transpose_panel(&b(j0, k0), b.row_stride(), kc, cols, out, nr);
    if (cols < nr)
      for (index_t kk = 0; kk < kc; ++kk) std::fill(out + kk * nr + cols, out + (kk + 1) * nr, 0.0f);
  } else if (b.row_stride() == 1) {
    const float* src = &b(j0, k0);  // K-major: each k a run of the panel's columns
    for (index_t kk = 0; kk < kc; ++kk, src += b.col_stride()) {
      std::copy_n(src, cols, out + kk * nr);
      std::fill(out + kk * nr + cols, out + (kk + 1) * nr, 0.0f);
    }
  } else {
    for (index_t kk = 0; kk < kc; ++kk)
      for (index_t c = 0; c < nr; ++c) out[kk * nr + c] = c < cols ? b(j0 + c, k0 + kk) : 0.0f;
  }
}

/// pack_float_panel for `count` consecutive panels from column j0 of a K-major B (B(j, k) at
/// j + k·ld), panel q at out + q·kc·NR: each k is one run of all their columns (count · NR floats),
/// where a panel at a time would read NR floats per k, a page apart at N = 4096.
inline void pack_float_panels_k_major(matrix_view<const float> b, index_t j0, index_t count, index_t k0, index_t kc, float* out) {
  constexpr index_t nr = float_gemm_blocking::nr;
  const index_t n = b.rows();
  const float* src = &b(j0, k0);
  for (index_t kk = 0; kk < kc; ++kk, src += b.col_stride())
    for (index_t q = 0; q < count; ++q) {
      const index_t cols = std::min(nr, n - j0 - q * nr);
      float* const dst = out + (q * kc + kk) * nr;
      std::copy_n(src + q * nr, cols, dst);
      std::fill(dst + cols, dst + nr, 0.0f);
    }
}

/// out[t][kk][r] (tile t of MR rows, rows past `rows` zero) = A(i0 + t·MR + r, k0 + kk), kk < kc.
inline void pack_float_rows(matrix_view<const float> a, index_t i0, index_t rows, index_t k0, index_t kc, float* out) {
  constexpr index_t mr = float_gemm_blocking::mr;
  for (index_t t0 = 0; t0 < rows; t0 += mr, out += kc * mr) {
    const index_t here = std::min(mr, rows - t0);
    if (a.col_stride() == 1 && here == mr) {
      simd::fast_panels::transpose_panel(&a(i0 + t0, k0), a.row_stride(), kc, mr, out, mr);
    } else if (a.row_stride() == 1) {
      const float* src = &a(i0 + t0, k0);  // column-major A (a transposed view): MR values per k
      for (index_t kk = 0; kk < kc; ++kk, src += a.col_stride()) {
        std::copy_n(src, here, out + kk * mr);
        std::fill(out + kk * mr + here, out + (kk + 1) * mr, 0.0f);
      }
    } else {
      for (index_t kk = 0; kk < kc; ++kk)
        for (index_t r = 0; r < mr; ++r) out[kk * mr + r] = r < here ? a(i0 + t0 + r, k0 + kk) : 0.0f;
    }
  }
}

/// The fast path of float_gemm: D = C + A·Bᵀ, bit-identical to reference::float_gemm for any
/// thread count and any build (the tile kernel's lanes each run one output's K-order chain).
inline void float_gemm_fast(matrix_view<const float> a, matrix_view<const float> b, matrix_view<const float> c, matrix_view<float> d) {
  using blocking = float_gemm_blocking;
  using kernel = blocking::kernel;
  constexpr index_t mr = blocking::mr, nr = blocking::nr, chunk_k = blocking::chunk_k;
  const index_t m = a.rows(), n = b.rows(), k = a.cols();
  if (m == 0 || n == 0) return;
  if (k == 0) {  // no products: D = C (or +0)
    for (index_t i = 0; i < m; ++i)
      for (index_t j = 0; j < n; ++j) d(i, j) = c.empty() ? 0.0f : c(i, j);
    return;
  }
  const index_t panels = (n + nr - 1) / nr;
  const bool parallel = simd::worth_parallel(m * n * ((k + 63) / 64));
  // With one block of rows, each panel of B serves one work item, which packs it itself into a
  // per-thread buffer that stays in cache (packing all of B first would write it out to memory and
  // read it back: the decode shapes' cost). That also beats reading a K-major B in place (128
  // bytes per k, 16 KB apart at N = 4096): 16 x 4096 x 4096 on Wᵀ, 14-17 ms against 26-31.
  const index_t a_tiles = (m + mr - 1) / mr;
  const index_t block_rows = std::min(blocking::block_rows, a_tiles * mr);
  const index_t row_blocks = (m + block_rows - 1) / block_rows;
  const bool b_per_item = row_blocks == 1;
  const index_t packed_panels = b_per_item ? 0 : panels;
  // Both operands packed K chunk by K chunk: [chunk][panel][k][NR] and [chunk][tile][k][MR], so
  // that what an item reads in one chunk (its panels, its tiles) is contiguous; with each panel or
  // tile whole in K, the ones an item reads would sit a multiple of 128 KB apart at K = 4096 and
  // share a few L2 sets. Chunk k0's part starts at k0 · panels · NR (every earlier chunk is whole).
  scratch<float> packed_b(static_cast<std::size_t>(packed_panels * k * nr));
  const auto b_chunk = [&](index_t p, index_t k0) {
    return packed_b.data() + k0 * packed_panels * nr + p * std::min(chunk_k, k - k0) * nr;
  };
  simd::parallel_ranges(packed_panels, parallel, [&](index_t begin, index_t end) {
    for (index_t p = begin; p < end; ++p)
      for (index_t k0 = 0; k0 < k; k0 += chunk_k) {
        const index_t j0 = p * nr;
        pack_float_panel(b, j0, std::min(nr, n - j0), k0, std::min(chunk_k, k - k0), b_chunk(p, k0));
      }
  });
  // A, tile by tile (each tile's K-major rows, zero past M): every item reads its rows from here.
  scratch<float> packed_a(static_cast<std::size_t>(a_tiles * k * mr));
  const auto a_chunk = [&](index_t t, index_t k0) { return packed_a.data() + k0 * a_tiles * mr + t * std::min(chunk_k, k - k0) * mr; };
  simd::parallel_ranges(a_tiles, parallel, [&](index_t begin, index_t end) {
    for (index_t t = begin; t < end; ++t)
      for (index_t k0 = 0; k0 < k; k0 += chunk_k)
        pack_float_rows(a, t * mr, std::min(mr, m - t * mr), k0, std::min(chunk_k, k - k0), a_chunk(t, k0));
  });
  const index_t group_panels = (m > few_rows ? blocking::group_cols : blocking::small_group_cols) / nr;
  const index_t groups = (panels + group_panels - 1) / group_panels;
  // Each item's partial sums live in a contiguous staging block (block_rows x the group's columns,
  // zero past the edges, so every tile is whole) from C to D: rows of D 16 KB apart (4096
  // columns) would map the item's partial sums onto a few L2 sets, and a strided C or D needs no
  // path of its own.
  const index_t staged_cols = group_panels * nr;
  struct thread_state {
    scratch<float> staged, own_b;
  };
  simd::parallel_dynamic(
      row_blocks * groups, parallel,
      [&] {
        return thread_state{scratch<float>(static_cast<std::size_t>(block_rows * staged_cols)),
                            scratch<float>(static_cast<std::size_t>(b_per_item ? std::min(k, chunk_k) * staged_cols : 0))};
      },
      [&](index_t item, thread_state& state) {
        const index_t i0 = (item % row_blocks) * block_rows, rows = std::min(block_rows, m - i0);
        const index_t p_begin = (item / row_blocks) * group_panels, p_end = std::min(panels, p_begin + group_panels);
        const index_t j_begin = p_begin * nr, cols = std::min(n, p_end * nr) - j_begin;
        const index_t padded_rows = (rows + mr - 1) / mr * mr, padded_cols = (p_end - p_begin) * nr;
        float* const staged = state.staged.data();
        for (index_t r = 0; r < padded_rows; ++r) {
          float* const row = staged + r * staged_cols;
          index_t filled = 0;
          if (r < rows && !c.empty()) {
            if (c.col_stride() == 1)
              std::copy_n(&c(i0 + r, j_begin), cols, row);
            else
              for (index_t j = 0; j < cols; ++j) row[j] = c(i0 + r, j_begin + j);
            filled = cols;
          }
          std::fill(row + filled, row + padded_cols, 0.0f);
        }
        const index_t group_here = p_end - p_begin;
        for (index_t k0 = 0; k0 < k; k0 += chunk_k) {
          const index_t kc = std::min(chunk_k, k - k0);
          // This item's panels of B for this chunk, when it packs them ([panel][k][NR]), just
          // before the kernels read them.
          const auto own_chunk = [&](index_t p) { return state.own_b.data() + (p - p_begin) * kc * nr; };
          if (b_per_item) {
            if (b.row_stride() == 1 && b.col_stride() != 1)
              pack_float_panels_k_major(b, j_begin, group_here, k0, kc, own_chunk(p_begin));
            else
              for (index_t p = p_begin; p < p_end; ++p) pack_float_panel(b, p * nr, std::min(nr, n - p * nr), k0, kc, own_chunk(p));
          }
          for (index_t p = p_begin; p < p_end; ++p) {
            const index_t j0 = p * nr;
            const float* panel = b_per_item ? own_chunk(p) : b_chunk(p, k0);
            for (index_t t0 = 0; t0 < rows; t0 += mr) {
              const float* a_tile = a_chunk((i0 + t0) / mr, k0);
              float* const out = staged + t0 * staged_cols + (j0 - j_begin);
              const auto tile = [&]<int R>(std::integral_constant<int, R>) {
                // The packed panel's stride is a constant the kernel is compiled for.
                kernel::template run<R>(kc, a_tile, panel, std::integral_constant<index_t, nr>{}, out, staged_cols, out, staged_cols);
              };
              // A last tile of few rows computes only those (a third or two thirds of the tile's).
              constexpr int third = std::max<int>(1, mr / 3), two_thirds = std::max<int>(third, 2 * mr / 3);
              const index_t here = rows - t0;
              if (here <= third)
                tile(std::integral_constant<int, third>{});
              else if (here <= two_thirds)
                tile(std::integral_constant<int, two_thirds>{});
              else
                tile(std::integral_constant<int, mr>{});
            }
          }
        }
        for (index_t r = 0; r < rows; ++r) {
          const float* const row = staged + r * staged_cols;
          if (d.col_stride() == 1)
            std::copy_n(row, cols, &d(i0 + r, j_begin));
          else
            for (index_t j = 0; j < cols; ++j) d(i0 + r, j_begin + j) = row[j];
        }
      });
}

}  // namespace detail

/// D = C + A·Bᵀ with A [M, K], B [N, K] (the "TN" layout), C empty or [M, N] (may alias D): each
/// output is one fp32 FMA chain over k = 0..K-1 (see reference::float_gemm), the same result on
/// every build and thread count. Throws shape_mismatch / null_pointer before writing anything.
inline void float_gemm(matrix_view<const float> a, matrix_view<const float> b, matrix_view<const float> c, matrix_view<float> d) {
  detail::check_float_gemm(a, b, c, d, "float_gemm");
  detail::float_gemm_fast(a, b, c, d);
}

/// float_gemm with a mode (see reference::float_gemm with a mode): relaxed runs bf16 operands on
/// BF16 tiles where the machine has them (the BF16 recipe's tensors: every value a bf16), else
/// it is float_gemm. Bit-identical to the reference for any thread count.
inline void float_gemm(matrix_view<const float> a, matrix_view<const float> b, matrix_view<const float> c, matrix_view<float> d,
                       gemm_mode mode) {
  detail::check_float_gemm(a, b, c, d, "float_gemm");
  if (mode == gemm_mode::relaxed && detail::tiles::relaxed_on_tiles(a.rows(), b.rows()) &&
      detail::float_gemm_on_tiles<simd::amx::hardware_tiles>(a, b, c, d))
    return;
  detail::float_gemm_fast(a, b, c, d);
}

}  // namespace nvfp4
