// nvfp4/nn/matmul.hpp: the FP32 matrix product of the parts of a model that are not quantized
// (attention, the FP32 and BF16 dense engines, Muon's Newton-Schulz iteration). Every output row
// is computed by one thread in a fixed order, so the result never depends on the thread count.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "nvfp4/config.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/scaling/matrix_view.hpp"

#if NVFP4_HAS_OPENMP
#include <omp.h>
#endif

namespace nvfp4::nn {

namespace detail {

/// Rows are handed out in groups of this many (the kernel's register block); the grouping, and
/// so every rounding, is the same whatever the number of threads.
inline constexpr index_t matmul_row_group = 4;

/// Columns per register tile: 4 rows x 32 floats stay in registers for the whole k loop.
inline constexpr index_t matmul_column_tile = 32;

/// c[i, :] (+)= sum over k in order of a(i, k) * b[k, :], for rows [begin, end) (whole groups but
/// the last). b is row-major [k, n]; c rows are contiguous with stride c_stride. Every element is
/// the same chain of multiply-adds in k order whichever tile or group computes it.
inline void matmul_rows(matrix_view<const float> a, const float* b, index_t n, float* c, index_t c_stride,
                        index_t begin, index_t end, bool accumulate) {
  constexpr index_t rows_per_group = matmul_row_group, tile = matmul_column_tile;
  const index_t depth = a.cols();
  for (index_t i = begin; i < end; i += rows_per_group) {
    const index_t group = std::min(rows_per_group, end - i);
    if (!accumulate) {
      for (index_t r = 0; r < group; ++r) std::fill_n(c + (i + r) * c_stride, n, 0.0f);
    }
    index_t j0 = 0;
    if (group == rows_per_group) {
      for (; j0 + tile <= n; j0 += tile) {
        float acc[rows_per_group][tile];
        for (index_t r = 0; r < rows_per_group; ++r)
          for (index_t j = 0; j < tile; ++j) acc[r][j] = c[(i + r) * c_stride + j0 + j];
        for (index_t k = 0; k < depth; ++k) {
          const float a0 = a(i, k), a1 = a(i + 1, k), a2 = a(i + 2, k), a3 = a(i + 3, k);
          const float* NVFP4_RESTRICT row = b + k * n + j0;
          for (index_t j = 0; j < tile; ++j) {
            const float bj = row[j];
            acc[0][j] += a0 * bj;
            acc[1][j] += a1 * bj;
            acc[2][j] += a2 * bj;
            acc[3][j] += a3 * bj;
          }
        }
        for (index_t r = 0; r < rows_per_group; ++r)
          for (index_t j = 0; j < tile; ++j) c[(i + r) * c_stride + j0 + j] = acc[r][j];
      }
    }
    // The columns past the last whole tile, or the rows of a short last group.
    for (index_t r = 0; r < group; ++r) {
      float* NVFP4_RESTRICT out = c + (i + r) * c_stride;
      for (index_t k = 0; k < depth; ++k) {
        const float ak = a(i + r, k);
        const float* NVFP4_RESTRICT row = b + k * n;
        for (index_t j = j0; j < n; ++j) out[j] += ak * row[j];
      }
    }
  }
}

}  // namespace detail

/// C = A·B, or C += A·B when `accumulate`: A [M, K] and B [K, N] with any strides (a transposed
/// view is fine), C [M, N] with contiguous rows, not overlapping A or B. FP32 products summed in
/// FP32 in the order k = 0, 1, ..., K-1 for every element. Throws shape_mismatch / null_pointer.
inline void matmul(matrix_view<const float> a, matrix_view<const float> b, matrix_view<float> c, bool accumulate = false) {
  a.validate("matmul A");
  b.validate("matmul B");
  c.validate("matmul C");
  nvfp4::detail::require(a.cols() == b.rows() && c.rows() == a.rows() && c.cols() == b.cols(), errc::shape_mismatch,
                         "matmul: A is " + std::to_string(a.rows()) + "x" + std::to_string(a.cols()) + ", B " +
                             std::to_string(b.rows()) + "x" + std::to_string(b.cols()) + ", C " + std::to_string(c.rows()) +
                             "x" + std::to_string(c.cols()) + "; need A [M, K], B [K, N], C [M, N]");
  nvfp4::detail::require(c.rows_contiguous() || c.cols() <= 1, errc::invalid_argument, "matmul: C needs contiguous rows");
  const index_t m = c.rows(), n = c.cols(), k = a.cols();
  if (m == 0 || n == 0) return;
  // B as a contiguous row-major [K, N] block: packed once when it is a strided or transposed view.
  std::vector<float> packed;
  const float* b_rows = b.data();
  if (!(b.rows_contiguous() && (b.row_stride() == n || k <= 1))) {
    packed.resize(static_cast<std::size_t>(k * n));
    for (index_t r = 0; r < k; ++r)
      for (index_t j = 0; j < n; ++j) packed[static_cast<std::size_t>(r * n + j)] = b(r, j);
    b_rows = packed.data();
  }
  const index_t c_stride = c.row_stride();
  const index_t groups = (m + detail::matmul_row_group - 1) / detail::matmul_row_group;
#if NVFP4_HAS_OPENMP
  // A team costs a few microseconds; small products run on the calling thread.
  if (groups > 1 && m * n * k >= (index_t{1} << 18) && !omp_in_parallel() && omp_get_max_threads() > 1) {
#pragma omp parallel for schedule(static)
    for (index_t g = 0; g < groups; ++g) {
      const index_t begin = g * detail::matmul_row_group;
      detail::matmul_rows(a, b_rows, n, c.data(), c_stride, begin, std::min(m, begin + detail::matmul_row_group), accumulate);
    }
    return;
  }
#endif
  (void)groups;
  detail::matmul_rows(a, b_rows, n, c.data(), c_stride, 0, m, accumulate);
}

}  // namespace nvfp4::nn
