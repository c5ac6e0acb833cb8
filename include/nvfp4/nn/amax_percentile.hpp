// nvfp4/nn/amax_percentile.hpp: an adaptive global amax, the q-quantile of |x| instead of its
// maximum, and an NVFP4 engine whose activations and gradients take their tensor scale from it.
// NOT a TransformerEngine recipe: TE's NVFP4 and FP8 scales always come from the true amax. A
// research control for tensors whose few largest values waste the scale's range.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/nn/dense.hpp"
#include "nvfp4/recipes/nvfp4_recipe.hpp"

namespace nvfp4::nn {

/// The q-quantile of |x| (the smallest |x_i| with at least ceil(q·n) of the n values at or below
/// it); q = 1 is the amax. Exact and order-independent. Throws invalid_argument for q outside
/// (0, 1], non_finite_input for NaN/Inf in x. Zero for an empty x.
inline float amax_percentile(std::span<const float> x, double q) {
  nvfp4::detail::require(q > 0.0 && q <= 1.0, errc::invalid_argument,
                         "amax_percentile: q must be in (0, 1], got " + std::to_string(q));
  if (x.empty()) return 0.0f;
  std::vector<float> magnitudes(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    nvfp4::detail::require(std::isfinite(x[i]), errc::non_finite_input, "amax_percentile: NaN or Inf at index " + std::to_string(i));
    magnitudes[i] = std::fabs(x[i]);
  }
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(x.size())));
  const auto index = std::min(x.size(), std::max<std::size_t>(rank, 1)) - 1;
  std::nth_element(magnitudes.begin(), magnitudes.begin() + static_cast<std::ptrdiff_t>(index), magnitudes.end());
  return magnitudes[index];
}

struct percentile_amax_options {
  double quantile = 0.999;           ///< in (0, 1]; 1 is TE's amax (the maximum)
  nvfp4_block_scaling recipe{};      ///< RHT / SR / 2-D switches; 4over6 and row scaling are not supported
  gemm_mode mode = gemm_mode::exact;
  std::uint64_t seed = 0;            ///< as linear_options::seed: gradient SR seeds derive from it per step
};

/// TE's NVFP4 recipe (nn/linear.hpp's NVFP4 GEMMs, BF16 high precision) except for the global amax
/// of activations and gradients: the quantile of |x| over the tensor (over the transformed values
/// for a copy with RHT); values above it saturate. Weights keep TE's amax. With quantile 1 every
/// result equals the Linear layer's NVFP4 bit for bit.
class nvfp4_percentile_engine final : public gemm_engine {
 public:
  explicit nvfp4_percentile_engine(percentile_amax_options options) : options_(options) {
    nvfp4::detail::require(options.quantile > 0.0 && options.quantile <= 1.0, errc::invalid_argument,
                           "nvfp4_percentile_engine: quantile must be in (0, 1], got " + std::to_string(options.quantile));
    options.recipe.validate();
    nvfp4::detail::require(options.recipe.nvfp4_4over6 == four_over_six_scope::none && !options.recipe.row_scaled_activation,
                           errc::unsupported, "nvfp4_percentile_engine: 4over6 and row-scaled activations are not supported");
  }
  std::string name() const override {
    char quantile[32];
    std::snprintf(quantile, sizeof quantile, "%g", options_.quantile);
    return std::string("nvfp4_amax_q") + quantile;
  }

  void forward(matrix_view<const float> x, matrix_view<const float> w, matrix_view<float> y, bool training) override {
    const std::vector<float> xr = bf16_copy(x), wr = bf16_copy(w);
    const auto xv = row_major(xr, x.rows(), x.cols()), wv = row_major(wr, w.rows(), w.cols());
    operand_pair ws = quantize_weight(wv, options_.recipe);
    const float x_amax = amax_percentile(xr, options_.quantile);
    const nvfp4_operand x_row{quantize_with_amax<nvfp4_1x16>(xv, x_amax), 448.0f, {}};
    nvfp4_gemm(x_row, ws.rowwise, y, options_.mode);
    round_to_bf16(y);
    if (training) {
      x_columnwise_ = columnwise_copy(xv, x_amax, {});
      w_columnwise_ = std::move(ws.columnwise);
      rows_ = x.rows();
    }
  }

  void backward(matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) override {
    nvfp4::detail::require(rows_ == dy.rows(), errc::invalid_argument, "nvfp4_percentile_engine: backward without its forward");
    const std::vector<float> gr = bf16_copy(dy);
    const auto gv = row_major(gr, dy.rows(), dy.cols());
    const float g_amax = amax_percentile(gr, options_.quantile);
    const std::uint64_t seed = nvfp4::detail::derived_seed(options_.seed, steps_++);  // the Linear's gradient_seed(step)
    const auto rounding = options_.recipe.disable_stochastic_rounding ? rounding_mode::nearest_even : rounding_mode::stochastic;
    const nvfp4_operand g_row{
        quantize_with_amax<nvfp4_1x16>(gv, g_amax, {.rounding = rounding, .seed = nvfp4::detail::derived_seed(seed, 0)}), 448.0f, {}};
    const nvfp4_operand g_col = columnwise_copy(gv, g_amax, {.rounding = rounding, .seed = nvfp4::detail::derived_seed(seed, 1)});
    nvfp4_gemm(g_row, w_columnwise_, dx, options_.mode);
    round_to_bf16(dx);
    nvfp4_gemm(g_col, x_columnwise_, dw, options_.mode);
    rows_ = -1;
  }

 private:
  static std::vector<float> bf16_copy(matrix_view<const float> v) {
    std::vector<float> out(static_cast<std::size_t>(v.rows() * v.cols()));
    for (index_t i = 0; i < v.rows(); ++i)
      for (index_t j = 0; j < v.cols(); ++j) out[static_cast<std::size_t>(i * v.cols() + j)] = bf16::from_float(v(i, j)).to_float();
    return out;
  }
  static matrix_view<const float> row_major(const std::vector<float>& v, index_t rows, index_t cols) {
    return matrix_view<const float>::row_major(v.data(), rows, cols);
  }
  static void round_to_bf16(matrix_view<float> m) {
    for (index_t i = 0; i < m.rows(); ++i)
      for (index_t j = 0; j < m.cols(); ++j) m(i, j) = bf16::from_float(m(i, j)).to_float();
  }
  /// The wgrad copy along M: with RHT, quantized against the quantile of the transformed values
  /// (TE: the amax after the transform); without, against the tensor's own.
  nvfp4_operand columnwise_copy(matrix_view<const float> v, float amax, quantize_options options) const {
    options.axis = quantized_axis::columnwise;
    if (options_.recipe.disable_rht) return {quantize_with_amax<nvfp4_1x16>(v.transposed(), amax, options), 448.0f, {}};
    const columnwise_rht t = rht_columnwise(v, options_.recipe.rht);
    std::vector<float> transformed(t.values.size());
    for (std::size_t i = 0; i < transformed.size(); ++i) transformed[i] = t.values[i].to_float();
    return {quantize_with_amax<nvfp4_1x16>(t.view(), amax_percentile(transformed, options_.quantile), options), 448.0f, {}};
  }

  percentile_amax_options options_;
  nvfp4_operand x_columnwise_, w_columnwise_;
  index_t rows_ = -1;
  std::uint64_t steps_ = 0;
};

}  // namespace nvfp4::nn
