// nvfp4/recipes/policies/no_quantization.hpp: the policy of no_quantization, a Linear layer in its
// high precision: float_gemm on X, W, dY as the driver rounded them to the dtype (fprop X·Wᵀ,
// dgrad dY·W, wgrad dYᵀ·X); the bias is added as given, after the GEMM.
#pragma once

#include <utility>
#include <vector>

#include "nvfp4/gemm/float_gemm.hpp"
#include "nvfp4/recipes/no_quantization.hpp"
#include "nvfp4/recipes/policies/policy.hpp"
#include "nvfp4/simd/panels.hpp"

namespace nvfp4 {

class no_quantization_policy : public policy_base {
 public:
  using recipe_type = no_quantization;
  static constexpr const char* name = "NoQuantization";
  static constexpr const char* short_name = "";  // reports name the dtype instead (fp32, bf16)
  static constexpr bool quantized = false;
  static constexpr bool takes_amax_rule = true;  // nothing to choose, nothing refused

  struct weight_operands {
    std::vector<float> values;     // W in the dtype, row-major [N, K]
    bool values_transposed = false;  // values hold Wᵀ [K, N] instead (a kept W, packed)
  };
  /// X in the dtype: a view of the driver's scratch copy, which stays until the next forward.
  struct saved_input {
    matrix_view<const float> x;
  };

  explicit no_quantization_policy(const no_quantization& r) : recipe_(r) {}
  const no_quantization& recipe() const { return recipe_; }

  void quantize_weight(const linear_context&, matrix_view<const float> w, bool, bool, weight_operands& out) const {
    out.values.assign(w.data(), w.data() + w.rows() * w.cols());  // w is the row-major dtype copy
  }
  /// A kept W is stored as Wᵀ: for decode-sized X float_gemm reads it in place as fprop's B
  /// (K-major) instead of packing W on every call. The roles swap for dgrad, whose B (Wᵀ, row-major
  /// then) is packed where W's transposed view was read in place.
  void pack_fprop_operand(const linear_context& c, weight_operands& w) const {
    std::vector<float> transposed(w.values.size());
    simd::fast_panels::transpose_panel(w.values.data(), c.in_features, c.in_features, c.out_features, transposed.data(), c.out_features);
    w.values = std::move(transposed);
    w.values_transposed = true;
  }
  void fprop(const linear_context& c, matrix_view<const float> x, const weight_operands& w, matrix_view<float> y, saved_input* saved,
             bool) const {
    float_gemm(x, weight_rows(c, w), {}, y);
    if (!c.bias.empty())
      for (index_t i = 0; i < y.rows(); ++i)
        for (index_t j = 0; j < y.cols(); ++j) y(i, j) += c.bias[static_cast<std::size_t>(j)];
    if (saved) saved->x = x;
  }
  void bprop(const linear_context& c, matrix_view<const float> dy, const weight_operands& w, const saved_input& saved,
             matrix_view<float> dx, matrix_view<float> dw) const {
    float_gemm(dy, weight_rows(c, w).transposed(), {}, dx);
    float_gemm(dy.transposed(), saved.x.transposed(), {}, dw);
  }

 private:
  /// W [N, K] (fprop's B) as a view of the stored values.
  static matrix_view<const float> weight_rows(const linear_context& c, const weight_operands& w) {
    return w.values_transposed ? matrix_view<const float>(w.values.data(), c.out_features, c.in_features, 1, c.out_features)
                               : matrix_view<const float>::row_major(w.values.data(), c.out_features, c.in_features);
  }
  no_quantization recipe_;
};

}  // namespace nvfp4
