// nvfp4/scaling/row_scaled_nvfp4.hpp: row-scaled NVFP4 (TransformerEngine's row_scaled_activation,
// TE pytorch/custom_recipes/reference_nvfp4.py and common/cast/dispatch/quantize.cuh): §2's
// two-level scaling with one amax, and so one FP32 tensor scale, per row instead of per tensor.
// Blocks are 1x16 and rounding is to nearest, as TE allows nothing else with it.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4 {

/// An NVFP4 1x16 tensor whose second-level scale is per row: row r was quantized with S_enc =
/// 2688 / row_amax[r] (§2 step 2 on that row's amax). values' own tensor-scale fields are unused.
struct row_scaled_nvfp4_tensor {
  nvfp4_tensor values;
  std::vector<float> row_amax;
};

namespace reference {

/// Row-scaled NVFP4 of x (pass x.transposed() for the columnwise copy, whose rows are x's
/// columns): each row's amax, then §2 steps 2-5 on that row with it. Throws non_finite_error on
/// NaN/Inf.
template <quantizer_input T>
row_scaled_nvfp4_tensor quantize_row_scaled(matrix_view<const T> x, quantized_axis axis = quantized_axis::rowwise) {
  reference::amax(x);  // rejects NaN/Inf before anything is produced
  row_scaled_nvfp4_tensor out{nvfp4_tensor(x.rows(), x.cols(), axis), std::vector<float>(static_cast<std::size_t>(x.rows()))};
  for (index_t r = 0; r < x.rows(); ++r) {
    float row_amax = 0.0f;
    for (index_t c = 0; c < x.cols(); ++c) row_amax = std::max(row_amax, std::fabs(to_float32(x(r, c))));
    out.row_amax[static_cast<std::size_t>(r)] = row_amax;
    const tensor_scale ts = nvfp4_tensor_scale(row_amax);
    for (index_t block = 0; block < out.values.scale_cols(); ++block) {
      const index_t c0 = block * 16, c1 = std::min<index_t>(c0 + 16, x.cols());
      float block_amax = 0.0f;
      for (index_t c = c0; c < c1; ++c) block_amax = std::max(block_amax, std::fabs(to_float32(x(r, c))));
      const ue4m3 scale = nvfp4_block_scale(block_amax, ts.encode);
      const float factor = nvfp4_block_encode_factor(scale, ts.decode);
      out.values.scales()[static_cast<std::size_t>(r * out.values.scale_cols() + block)] = scale;
      for (index_t c = c0; c < c1; ++c) {
        const e2m1 e = e2m1::from_float(to_float32(x(r, c)) * factor);
        auto& unit = out.values.data()[static_cast<std::size_t>(r * out.values.data_row_stride() + c / 2)];
        unit = unit.with(c & 1, e);
      }
    }
  }
  return out;
}

}  // namespace reference

/// Row-scaled NVFP4 (see reference::quantize_row_scaled), bit-identical to the reference for any
/// thread count: each row goes through nvfp4::quantize_with_amax with its own amax.
template <quantizer_input T>
row_scaled_nvfp4_tensor quantize_row_scaled(matrix_view<const T> x, quantized_axis axis = quantized_axis::rowwise) {
  detail::check_input_view(x, "quantize input");
  amax(x);  // rejects NaN/Inf before anything is produced
  row_scaled_nvfp4_tensor out{nvfp4_tensor(x.rows(), x.cols(), axis), std::vector<float>(static_cast<std::size_t>(x.rows()))};
  const index_t data_stride = out.values.data_row_stride(), scale_stride = out.values.scale_cols();
  simd::parallel_ranges(x.rows(), simd::worth_parallel(x.size()), [&](index_t begin, index_t end) {
    for (index_t r = begin; r < end; ++r) {
      const matrix_view<const T> row(&x(r, 0), 1, x.cols(), x.row_stride(), x.col_stride());
      float row_amax = 0.0f;
      for (index_t c = 0; c < x.cols(); ++c) row_amax = std::max(row_amax, std::fabs(to_float32(row(0, c))));
      out.row_amax[static_cast<std::size_t>(r)] = row_amax;
      const nvfp4_tensor q = quantize_with_amax<nvfp4_1x16>(row, row_amax);
      std::copy(q.data().begin(), q.data().end(), out.values.data().begin() + r * data_stride);
      std::copy(q.scales().begin(), q.scales().end(), out.values.scales().begin() + r * scale_stride);
    }
  });
  return out;
}

/// Dequantizes: x̂(r, c) = (e2m1 * block scale) * S_dec(r), S_dec(r) from row_amax[r] (§2 step 6).
inline void dequantize(const row_scaled_nvfp4_tensor& q, matrix_view<float> out) {
  out.validate("dequantize output");
  detail::require(out.rows() == q.values.rows() && out.cols() == q.values.cols(), errc::shape_mismatch,
                  "dequantize: output is " + std::to_string(out.rows()) + "x" + std::to_string(out.cols()) + ", tensor is " +
                      std::to_string(q.values.rows()) + "x" + std::to_string(q.values.cols()));
  for (index_t r = 0; r < out.rows(); ++r) {
    const float decode = nvfp4_tensor_scale(q.row_amax[static_cast<std::size_t>(r)]).decode;
    for (index_t c = 0; c < out.cols(); ++c) out(r, c) = q.values.element(r, c).to_float() * q.values.scale(r, c / 16).to_float() * decode;
  }
}

}  // namespace nvfp4
