// nvfp4/recipes/no_quantization.hpp: the "no quantization" recipe, a Linear layer in its own high
// precision (FP32 or BF16: recipes/recipe_common.hpp's high_precision) with the same interface as
// the quantized recipes (what TE runs outside an FP8/FP4 autocast region), and its policy:
// float_gemm on X, W, dY as the driver rounded them to the dtype (fprop X·Wᵀ, dgrad dY·W, wgrad
// dYᵀ·X) in the layer's GEMM mode; the bias is added as given, after the GEMM.
#pragma once

#include <tuple>
#include <utility>
#include <vector>

#include "nvfp4/gemm/float_gemm.hpp"
#include "nvfp4/recipes/policy.hpp"
#include "nvfp4/recipes/recipe_common.hpp"
#include "nvfp4/simd/panels.hpp"

namespace nvfp4 {

/// No quantization: the three GEMMs take the layer's tensors in its precision (BF16: rounded to
/// bf16) with exact products and an fp32 accumulation in K order (nvfp4::float_gemm), or, in the
/// relaxed mode, float_gemm's relaxed form (the BF16 tiles where this machine has them and the values
/// fit, as a bf16 layer's do). cuBLAS's GEMMs accumulate in their own order, so either is emulated,
/// not bit-exact with a GPU.
struct no_quantization {
  static constexpr auto fields() { return std::tuple{}; }
  void validate() const {}
};

class no_quantization_policy : public policy_base {
 public:
  using recipe_type = no_quantization;
  static constexpr const char* name = "NoQuantization";
  static constexpr const char* short_name = "";  // reports name the dtype instead (fp32, bf16)
  static constexpr bool quantized = false;
  static constexpr bool takes_amax_rule = true;  // nothing to choose, nothing refused

  struct weight_operands {
    std::vector<float> values;       // W in the dtype, row-major [N, K]
    bool values_transposed = false;  // values hold Wᵀ [K, N] instead (a kept W, packed)
  };
  /// X in the dtype: a view of the copy the driver keeps with the saved forward.
  struct saved_input {
    matrix_view<const float> x;
  };
  using input_operand = matrix_view<const float>;      // X in the dtype
  using gradient_operands = matrix_view<const float>;  // dY in the dtype

  explicit no_quantization_policy(const no_quantization& r) : recipe_(r) {}
  const no_quantization& recipe() const { return recipe_; }

  void quantize_weight(const linear_context&, matrix_view<const float> w, bool, bool, weight_operands& out) const {
    out.values_transposed = false;
    if (w.col_stride() == 1 && (w.rows() <= 1 || w.row_stride() == w.cols())) {
      out.values.assign(w.data(), w.data() + w.size());
      return;
    }
    out.values.resize(static_cast<std::size_t>(w.size()));  // a strided view of the caller's W
    for (index_t r = 0; r < w.rows(); ++r)
      for (index_t c = 0; c < w.cols(); ++c) out.values[static_cast<std::size_t>(r * w.cols() + c)] = w(r, c);
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
  const input_operand& quantize_input(const linear_context&, matrix_view<const float> x, saved_input* saved, bool) {
    if (saved) saved->x = x;
    x_ = x;
    return x_;
  }
  const gradient_operands& quantize_gradient(const linear_context&, matrix_view<const float> dy) {
    dy_ = dy;
    return dy_;
  }
  void fprop(const linear_context& c, const input_operand& x, const weight_operands& w, matrix_view<float> y) const {
    float_gemm(x, weight_rows(c, w), {}, y, c.mode);
    if (!c.bias.empty())
      for (index_t i = 0; i < y.rows(); ++i)
        for (index_t j = 0; j < y.cols(); ++j) y(i, j) += c.bias[static_cast<std::size_t>(j)];
  }
  void dgrad(const linear_context& c, const gradient_operands& dy, const weight_operands& w, matrix_view<float> dx) const {
    float_gemm(dy, weight_rows(c, w).transposed(), {}, dx, c.mode);
  }
  void wgrad(const linear_context& c, const gradient_operands& dy, const saved_input& saved, matrix_view<float> dw) const {
    float_gemm(dy.transposed(), saved.x.transposed(), {}, dw, c.mode);
  }

 private:
  /// W [N, K] (fprop's B) as a view of the stored values.
  static matrix_view<const float> weight_rows(const linear_context& c, const weight_operands& w) {
    return w.values_transposed ? matrix_view<const float>(w.values.data(), c.out_features, c.in_features, 1, c.out_features)
                               : matrix_view<const float>::row_major(w.values.data(), c.out_features, c.in_features);
  }
  no_quantization recipe_;
  input_operand x_;
  gradient_operands dy_;
};

}  // namespace nvfp4
