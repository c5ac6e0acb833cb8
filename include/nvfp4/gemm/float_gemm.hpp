// nvfp4/gemm/float_gemm.hpp: the library's plain fp32 GEMM, D = C + A·Bᵀ with every output one
// fp32 fused-multiply-add chain in K order. It serves the high-precision paths (the FP32 / BF16
// "no quantization" recipe, the relaxed FP8 modes): a defined order makes their results the same
// on every build and thread count, unlike a BLAS, whose order is its own business.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/scaling/detail/block_kernels.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4 {

namespace detail {
/// Throws unless A [M, K], B [N, K], C (empty or [M, N]) and D [M, N] fit together.
inline void check_float_gemm(matrix_view<const float> a, matrix_view<const float> b, matrix_view<const float> c,
                             matrix_view<float> d, const char* what) {
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
inline void float_gemm(matrix_view<const float> a, matrix_view<const float> b, matrix_view<const float> c,
                       matrix_view<float> d) {
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < b.rows(); ++j) {
      float acc = c.empty() ? 0.0f : c(i, j);
      for (index_t k = 0; k < a.cols(); ++k) acc = std::fma(a(i, k), b(j, k), acc);
      d(i, j) = acc;
    }
}

}  // namespace reference

namespace detail {

/// The fast fp32 GEMM's blocking: register blocks of `block_rows` output rows by `block_cols`
/// output columns, walked over one K chunk of `chunk_k`, in panels of `panel_cols` columns of B.
struct float_gemm_blocking {
  static constexpr index_t block_rows = 4, block_cols = 64, chunk_k = 256, panel_cols = 256;
};
/// The most rows of A for which float_gemm_fast reads a K-major B in place.
inline constexpr index_t in_place_max_rows = 16;

/// acc[r][j] = fma(a_r[k], b[k][j], acc[r][j]) over k in [0, kc), for R rows: the j loop is
/// contiguous and without dependencies, so the compiler vectorizes it for whatever ISA the
/// translation unit targets (AVX-512, AVX2 + FMA, or plain scalar fma). The order per output is
/// K order, as the reference's.
template <int R, class Stride>
inline void float_gemm_micro_block(const float* const* a_rows, const float* b_panel, Stride b_stride, index_t kc, float* out,
                                   index_t out_stride, index_t cols) {
  constexpr index_t block_cols = float_gemm_blocking::block_cols;
  float acc[R][block_cols];
  for (int r = 0; r < R; ++r)
    for (index_t j = 0; j < block_cols; ++j) acc[r][j] = j < cols ? out[r * out_stride + j] : 0.0f;
  for (index_t k = 0; k < kc; ++k) {
    const float* b_row = b_panel + k * b_stride;
    for (int r = 0; r < R; ++r) {
      const float a_value = a_rows[r][k];
      for (index_t j = 0; j < block_cols; ++j) acc[r][j] = std::fma(a_value, b_row[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (index_t j = 0; j < cols; ++j) out[r * out_stride + j] = acc[r][j];
}

/// The fast path of float_gemm: D = C + A·Bᵀ, bit-identical to reference::float_gemm for any
/// thread count: each output is computed start to end by one thread in K order; the threads only
/// pick which work item (a panel of B against 64 rows of A) they compute. For at most
/// in_place_max_rows rows of A, a K-major B (a transposed view: B(j, k) at j + k * ld) is read in
/// place, as the micro kernel wants it; any other B is packed panel by panel.
inline void float_gemm_fast(matrix_view<const float> a, matrix_view<const float> b, matrix_view<const float> c,
                            matrix_view<float> d) {
  constexpr index_t block_rows = float_gemm_blocking::block_rows, block_cols = float_gemm_blocking::block_cols;
  constexpr index_t chunk_k = float_gemm_blocking::chunk_k, panel_cols = float_gemm_blocking::panel_cols;
  const index_t m = a.rows(), n = b.rows(), k = a.cols();
  if (m == 0 || n == 0) return;
  const index_t panels = (n + panel_cols - 1) / panel_cols;
  const index_t row_groups = (m + 63) / 64;
  const index_t items = panels * row_groups;
  // B in place (B(j, k) at j + k * ld): only for a few rows of A (decode shapes), where packing
  // B would cost more than the product; with more rows the micro kernel re-reads each block of B
  // once per 4 rows, and K-strided reads of it cost more than one packed copy (4096³: 1.45x).
  const bool b_in_place = b.row_stride() == 1 && b.col_stride() >= n && m <= in_place_max_rows;
  struct thread_state {
    std::vector<float> packed;   // B's panel, K-major: packed[kk][j] = B(j0 + j, kk), zero past N
    std::vector<float> a_chunk;
    std::vector<float> staged;
    index_t packed_panel = -1;
  };
  // Work in units of one 64-element K step of one output (simd/parallel.hpp's threshold).
  simd::parallel_dynamic(
      items, simd::worth_parallel(m * n * ((k + 63) / 64)),
      [&] {
        // In place, only a last block narrower than block_cols is copied (zero-padded), a chunk at a time.
        const index_t packed_size = b_in_place ? chunk_k * block_cols : std::max<index_t>(k, 1) * panel_cols;
        return thread_state{std::vector<float>(static_cast<std::size_t>(packed_size)),
                            std::vector<float>(static_cast<std::size_t>(64 * chunk_k)),
                            std::vector<float>(static_cast<std::size_t>(64 * panel_cols)), -1};
      },
      [&](index_t item, thread_state& state) {
        std::vector<float>& packed = state.packed;
        std::vector<float>& a_chunk = state.a_chunk;
        std::vector<float>& staged = state.staged;
        const index_t p = item / row_groups, i0 = (item % row_groups) * 64;
        const index_t j0 = p * panel_cols, cols = std::min(panel_cols, n - j0), rows = std::min<index_t>(64, m - i0);
        if (!b_in_place && state.packed_panel != p) {
          if (b.rows_contiguous()) {
            // Row-major B: the panel is the transpose of its rows, 16 x 16 floats at a time (a loop
            // over K then the columns would read one float per row of B, K floats apart).
            fast_block_kernels::transpose_panel(&b(j0, 0), b.row_stride(), k, cols, packed.data(), panel_cols);
            if (cols < panel_cols)
              for (index_t kk = 0; kk < k; ++kk) std::fill_n(packed.data() + kk * panel_cols + cols, panel_cols - cols, 0.0f);
          } else {
            // K-major B (each k a run of the panel's columns in memory) or any other strides.
            for (index_t kk = 0; kk < k; ++kk)
              for (index_t j = 0; j < panel_cols; ++j)
                packed[static_cast<std::size_t>(kk * panel_cols + j)] = j < cols ? b(j0 + j, kk) : 0.0f;
          }
          state.packed_panel = p;
        }
        for (index_t i = 0; i < rows; ++i)
          for (index_t j = 0; j < cols; ++j)
            staged[static_cast<std::size_t>(i * panel_cols + j)] = c.empty() ? 0.0f : c(i0 + i, j0 + j);
        for (index_t k0 = 0; k0 < k; k0 += chunk_k) {
          const index_t kc = std::min(chunk_k, k - k0);
          for (index_t i = 0; i < rows; ++i)
            for (index_t kk = 0; kk < kc; ++kk) a_chunk[static_cast<std::size_t>(i * chunk_k + kk)] = a(i0 + i, k0 + kk);
          for (index_t jb = 0; jb < cols; jb += block_cols) {
            const index_t block_width = std::min(block_cols, cols - jb);
            const float* b_panel = packed.data() + k0 * panel_cols + jb;
            index_t b_stride = panel_cols;
            if (b_in_place) {
              b_stride = b.col_stride();
              b_panel = &b(j0 + jb, k0);
              if (block_width < block_cols) {  // the micro kernel reads block_cols columns
                for (index_t kk = 0; kk < kc; ++kk)
                  for (index_t j = 0; j < block_cols; ++j)
                    packed[static_cast<std::size_t>(kk * block_cols + j)] = j < block_width ? b_panel[kk * b_stride + j] : 0.0f;
                b_panel = packed.data();
                b_stride = block_cols;
              }
            }
            // The packed panel's stride is a constant the micro kernel is compiled for (a
            // run-time stride there cost ~4% at 4096³).
            const auto row_blocks = [&](auto stride) {
              for (index_t r0 = 0; r0 < rows; r0 += block_rows) {
                const float* a_rows[block_rows];
                const index_t r_count = std::min(block_rows, rows - r0);
                for (index_t r = 0; r < r_count; ++r) a_rows[r] = a_chunk.data() + (r0 + r) * chunk_k;
                float* out = staged.data() + r0 * panel_cols + jb;
                switch (r_count) {
                  case 4: float_gemm_micro_block<4>(a_rows, b_panel, stride, kc, out, panel_cols, block_width); break;
                  case 3: float_gemm_micro_block<3>(a_rows, b_panel, stride, kc, out, panel_cols, block_width); break;
                  case 2: float_gemm_micro_block<2>(a_rows, b_panel, stride, kc, out, panel_cols, block_width); break;
                  default: float_gemm_micro_block<1>(a_rows, b_panel, stride, kc, out, panel_cols, block_width); break;
                }
              }
            };
            if (b_stride == panel_cols) {
              row_blocks(std::integral_constant<index_t, panel_cols>{});
            } else {
              row_blocks(b_stride);
            }
          }
        }
        for (index_t i = 0; i < rows; ++i)
          for (index_t j = 0; j < cols; ++j) d(i0 + i, j0 + j) = staged[static_cast<std::size_t>(i * panel_cols + j)];
      });
}

}  // namespace detail

/// D = C + A·Bᵀ with A [M, K], B [N, K] (the "TN" layout), C empty or [M, N] (may alias D): each
/// output is one fp32 FMA chain over k = 0..K-1 (see reference::float_gemm), the same result on
/// every build and thread count. Throws shape_mismatch / null_pointer before writing anything.
inline void float_gemm(matrix_view<const float> a, matrix_view<const float> b, matrix_view<const float> c,
                       matrix_view<float> d) {
  detail::check_float_gemm(a, b, c, d, "float_gemm");
  detail::float_gemm_fast(a, b, c, d);
}

}  // namespace nvfp4
