// nvfp4/gemm/packing.hpp: GEMM operands unpacked once into what the kernels read: doubled E2M1
// values as int8 (exact, [-12, 12]), K padded to whole 64-element steps, and each group's scale
// split into m * 2^e (§6 step 1) plus the forms the vector kernels use.
#pragma once

#include <cstdint>
#include <cmath>
#include <cstring>
#include <vector>

#include "nvfp4/gemm/mma_model.hpp"
#include "nvfp4/gemm/operands.hpp"

namespace nvfp4::gemm_detail {

/// The scale of one 16-element group of one row, in every form a kernel needs.
struct group_scale {
  mma::scale_parts parts;
  double m_eighths = 0;           ///< m in eighths (0..15; 8 for E8M0)
  double effective_exponent = 0;  ///< e, or -1e9 for a zero scale (e_a + e_b < -1e8 marks it)
  float value = 0;                ///< the scale as a float (relaxed mode)
  double weight = 0;              ///< m * 2^(e - 4): weight_a * weight_b * 4 P_g is the group term
};

/// Rows of an operand: values[row][step*64 + k] and scales[row][step*4 + g].
struct unpacked_operand {
  index_t rows = 0;
  index_t steps = 0;
  std::vector<std::int8_t> values;
  std::vector<group_scale> scales;

  const std::int8_t* row_values(index_t r) const { return values.data() + r * steps * mma::step_k; }
  const group_scale* row_scales(index_t r) const { return scales.data() + r * steps * mma::groups_per_step; }
};

inline group_scale make_group_scale(const mma::scale_parts& parts) {
  group_scale s;
  s.parts = parts;
  s.m_eighths = parts.m_eighths;
  s.effective_exponent = parts.m_eighths == 0 ? -1e9 : parts.exponent;
  s.value = mma::scale_value(parts);
  s.weight = parts.is_nan ? 0.0 : std::ldexp(static_cast<double>(parts.m_eighths), parts.exponent - 4);
  return s;
}

/// Unpacks rows [0, q.rows()) padded with zero rows up to `padded_rows`.
template <class Format>
unpacked_operand unpack(const quantized_tensor<Format>& q, index_t padded_rows) {
  unpacked_operand u;
  u.rows = padded_rows;
  u.steps = (q.cols() + mma::step_k - 1) / mma::step_k;
  u.values.assign(static_cast<std::size_t>(padded_rows * u.steps * mma::step_k), 0);
  u.scales.assign(static_cast<std::size_t>(padded_rows * u.steps * mma::groups_per_step), make_group_scale({}));
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
    group_scale* scales = u.scales.data() + r * u.steps * mma::groups_per_step;
    for (index_t g = 0; g < u.steps * mma::groups_per_step; ++g) {
      const index_t block = g * mma::group_k / Format::block_cols;
      if (block < q.scale_cols()) scales[g] = make_group_scale(mma::decompose(q.scale(r, block)));
    }
  }
  return u;
}

}  // namespace nvfp4::gemm_detail
