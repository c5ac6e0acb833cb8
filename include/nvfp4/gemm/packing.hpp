// nvfp4/gemm/packing.hpp: GEMM operands unpacked once for the portable fast path: doubled E2M1
// values as int8 (exact, [-12, 12]), K padded to whole 64-element steps, and each group's scale
// split into m * 2^e (§6 step 1). The AVX-512 kernels have their own layouts
// (simd/mma_operands_avx512.hpp).
#pragma once

#include <cstdint>
#include <cmath>
#include <cstring>
#include <vector>

#include "nvfp4/gemm/mma_model.hpp"
#include "nvfp4/gemm/operands.hpp"

namespace nvfp4::gemm_detail {

/// Rows of an operand: values[row][step*64 + k] and scales[row][step*4 + g].
struct unpacked_operand {
  index_t rows = 0;
  index_t steps = 0;
  std::vector<std::int8_t> values;
  std::vector<mma::scale_parts> scales;

  const std::int8_t* row_values(index_t r) const { return values.data() + r * steps * mma::step_k; }
  const mma::scale_parts* row_scales(index_t r) const { return scales.data() + r * steps * mma::groups_per_step; }
};

/// Unpacks rows [0, q.rows()) padded with zero rows up to `padded_rows`.
template <class Format>
unpacked_operand unpack(const quantized_tensor<Format>& q, index_t padded_rows) {
  unpacked_operand u;
  u.rows = padded_rows;
  u.steps = (q.cols() + mma::step_k - 1) / mma::step_k;
  u.values.assign(static_cast<std::size_t>(padded_rows * u.steps * mma::step_k), 0);
  u.scales.assign(static_cast<std::size_t>(padded_rows * u.steps * mma::groups_per_step),
                  mma::padding_scale<typename Format::scale_type>());
  const auto data = q.data();
#pragma omp parallel for schedule(static) if (q.rows() * q.cols() > (1 << 16))
  for (index_t r = 0; r < q.rows(); ++r) {
    // A row of odd length ends in a zero nibble, which unpacks to a zero in the padding.
    std::int8_t* values = u.values.data() + r * u.steps * mma::step_k;
    const auto* bytes = data.data() + r * q.data_row_stride();
    for (index_t byte = 0; byte < q.data_row_stride(); ++byte) {
      const std::uint16_t pair = mma::doubled_pairs.pairs[bytes[byte].bits()];
      std::memcpy(values + 2 * byte, &pair, 2);  // little-endian: the low element first
    }
    mma::scale_parts* scales = u.scales.data() + r * u.steps * mma::groups_per_step;
    for (index_t g = 0; g < u.steps * mma::groups_per_step; ++g) {
      const index_t block = g * mma::group_k / Format::block_cols;
      if (block < q.scale_cols()) scales[g] = mma::decompose(q.scale(r, block));
    }
  }
  return u;
}

}  // namespace nvfp4::gemm_detail
