// nvfp4/gemm/fast_gemm.hpp: the fast block-scaled MMA driver: unpack the operands once, then
// OpenMP over output tiles (each output is computed start to end by one thread, so results do not
// depend on the thread count), with the AVX-512 VNNI kernel where the build has it and the
// portable scalar step otherwise. Inputs are checked by gemm.hpp; nothing here throws.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "nvfp4/gemm/packing.hpp"
#include "nvfp4/gemm/reference.hpp"
#include "nvfp4/gemm/simd/mma_avx512.hpp"

namespace nvfp4::fast {

namespace detail_gemm {

/// Portable path: the reference step on pre-unpacked rows, parallel over output rows.
inline void portable_mma(const gemm_detail::unpacked_operand& a, const gemm_detail::unpacked_operand& b, index_t m,
                         index_t n, matrix_view<const float> c, matrix_view<float> d, gemm_mode mode) {
  mma::scale_parts a_scales[mma::groups_per_step], b_scales[mma::groups_per_step];
#pragma omp parallel for schedule(static) private(a_scales, b_scales) if (m * n * a.steps > 4096)
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      float accumulator = c.empty() ? 0.0f : c(i, j);
      for (index_t s = 0; s < a.steps; ++s) {
        const std::int8_t* a_values = a.row_values(i) + s * mma::step_k;
        const std::int8_t* b_values = b.row_values(j) + s * mma::step_k;
        for (int g = 0; g < mma::groups_per_step; ++g) {
          a_scales[g] = a.row_scales(i)[s * mma::groups_per_step + g].parts;
          b_scales[g] = b.row_scales(j)[s * mma::groups_per_step + g].parts;
        }
        accumulator = mode == gemm_mode::exact ? mma::step(a_values, b_values, a_scales, b_scales, accumulator)
                                               : mma::relaxed_step(a_values, b_values, a_scales, b_scales, accumulator);
      }
      d(i, j) = accumulator;
    }
}

#if NVFP4_HAS_AVX512_VNNI
inline void avx512_mma(const gemm_detail::unpacked_operand& a, const gemm_detail::unpacked_operand& b, index_t m,
                       index_t n, matrix_view<const float> c, matrix_view<float> d, gemm_mode mode) {
  namespace k = gemm_detail::avx512;
  const index_t steps = a.steps;
  // Σ a2 per (row, step, group): undoes the +12 offset that makes B's bytes unsigned.
  std::vector<std::int32_t> a_sums(static_cast<std::size_t>(m * steps * 4));
  for (index_t i = 0; i < m; ++i)
    for (index_t g = 0; g < steps * 4; ++g) {
      std::int32_t sum = 0;
      for (int e = 0; e < 16; ++e) sum += a.row_values(i)[g * 16 + e];
      a_sums[static_cast<std::size_t>(i * steps * 4 + g)] = sum;
    }
  const index_t tiles = (n + k::tile_n - 1) / k::tile_n;
  std::vector<k::packed_b_tile> packed(static_cast<std::size_t>(tiles));
#pragma omp parallel for schedule(static) if (tiles > 1 && n * steps > 4096)
  for (index_t t = 0; t < tiles; ++t) packed[static_cast<std::size_t>(t)] = k::pack_b_tile(b, t * k::tile_n);

  // Work items: a block of rows against a group of tiles whose B stays in L2 (~512 KiB).
  const index_t tile_bytes = steps * 16 * 64 * 2 + steps * 4 * k::tile_n * 20;
  const index_t tiles_per_group = std::max<index_t>(1, std::min<index_t>(tiles, (index_t{512} << 10) / tile_bytes));
  const index_t tile_groups = (tiles + tiles_per_group - 1) / tiles_per_group;
  const index_t row_blocks = (m + k::max_tile_rows - 1) / k::max_tile_rows;
  const bool exact = mode == gemm_mode::exact;
#pragma omp parallel for schedule(dynamic, 1) collapse(2) if (row_blocks * tiles > 1 && m * n * steps > 16384)
  for (index_t group = 0; group < tile_groups; ++group)
    for (index_t rb = 0; rb < row_blocks; ++rb) {
      const index_t i0 = rb * k::max_tile_rows;
      const index_t rows = std::min<index_t>(k::max_tile_rows, m - i0);
      for (index_t t = group * tiles_per_group; t < std::min(tiles, (group + 1) * tiles_per_group); ++t) {
        const index_t j0 = t * k::tile_n;
        const index_t n_valid = std::min<index_t>(k::tile_n, n - j0);
        const auto& bt = packed[static_cast<std::size_t>(t)];
        switch (rows) {
          case 4: k::tile_kernel<4>(a, a_sums.data(), bt, i0, j0, n_valid, c, d, exact); break;
          case 3: k::tile_kernel<3>(a, a_sums.data(), bt, i0, j0, n_valid, c, d, exact); break;
          case 2: k::tile_kernel<2>(a, a_sums.data(), bt, i0, j0, n_valid, c, d, exact); break;
          default: k::tile_kernel<1>(a, a_sums.data(), bt, i0, j0, n_valid, c, d, exact); break;
        }
      }
    }
}
#endif

}  // namespace detail_gemm

/// D = C + A·Bᵀ (see nvfp4::block_scaled_mma), bit-identical to the reference. `c` may alias `d`:
/// each output's C is read before its D is written, by the same thread.
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
void block_scaled_mma(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b,
                      matrix_view<const float> c, matrix_view<float> d, gemm_mode mode) {
  const index_t m = a.rows(), n = b.rows();
  if (m == 0 || n == 0) return;
#if NVFP4_HAS_AVX512_VNNI
  const auto a_unpacked = gemm_detail::unpack(a, m);
  const auto b_unpacked = gemm_detail::unpack(b, (n + 15) / 16 * 16);
  detail_gemm::avx512_mma(a_unpacked, b_unpacked, m, n, c, d, mode);
#else
  const auto a_unpacked = gemm_detail::unpack(a, m);
  const auto b_unpacked = gemm_detail::unpack(b, n);
  detail_gemm::portable_mma(a_unpacked, b_unpacked, m, n, c, d, mode);
#endif
}

}  // namespace nvfp4::fast
