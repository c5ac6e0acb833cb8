// tests/recipes/float8_pow2_scaling.hpp: a toy recipe written as a user writes their own (the
// example of docs/architecture.md, "Adding a recipe"): one header with the recipe struct, its
// field table and its policy. Per-tensor FP8 whose scale is the amax's power-of-two scale
// (quantize_fp8_current with power_2_scale) for every role, each columnwise copy with the same
// scale; fp8_gemm with the recipe's split-accumulator flags. Not a TE recipe.
#pragma once

#include <tuple>

#include "nvfp4/recipes/fp8_operands.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"

namespace nvfp4::test {

struct float8_pow2_scaling {  // the recipe: its fields, their table, its checks
  recipe_format fp8_format = recipe_format::hybrid;
  mm_params fp8_gemm_fprop{.use_split_accumulator = false};
  mm_params fp8_gemm_dgrad{.use_split_accumulator = true};
  mm_params fp8_gemm_wgrad{.use_split_accumulator = true};

  static constexpr auto fields() {
    using R = float8_pow2_scaling;
    return std::tuple{field_row("fp8_format", &R::fp8_format, field_origin::library, "E4M3 forward, E5M2 gradients (HYBRID)"),
                      field_row("fp8_gemm_fprop", &R::fp8_gemm_fprop, field_origin::library, "fprop GEMM's MMParams"),
                      field_row("fp8_gemm_dgrad", &R::fp8_gemm_dgrad, field_origin::library, "dgrad GEMM's MMParams"),
                      field_row("fp8_gemm_wgrad", &R::fp8_gemm_wgrad, field_origin::library, "wgrad GEMM's MMParams")};
  }
  void validate() const { detail::reject_pure_e5m2(fp8_format, "float8_pow2_scaling"); }
};

// Stateless: policy_base's hooks. The copies (W rowwise and columnwise, X rowwise and its saved
// columnwise copy, dY's two) and the GEMMs that consume them (fp8_gemm with the recipe's MMParams,
// as in TE's FP8 Linear) come from fp8_family_policy; the policy says how each role is quantized.
class float8_pow2_scaling_policy : public policy_base, public fp8_family_policy<float8_pow2_scaling, fp8_tensor, fp8_gemm_with_mm_params> {
 public:
  static constexpr const char* name = "Float8Pow2Scaling";
  static constexpr const char* short_name = "fp8_pow2";
  static constexpr bool quantized = true, takes_amax_rule = false;
  using fp8_family_policy::fp8_family_policy;

  // The roles: how W, X and dY are quantized.
  void quantize_weight(const linear_context&, matrix_view<const float> w, bool columnwise, bool, weight_operands& out) const {
    out.row.plain = pow2(w, forward_format(recipe_.fp8_format));
    if (columnwise) out.col = same_scale_columnwise(w, out.row.plain);
  }
  const input_operand& quantize_input(const linear_context&, matrix_view<const float> x, saved_input* saved, bool) {
    x_ = pow2(x, forward_format(recipe_.fp8_format));
    if (saved) saved->x_col = same_scale_columnwise(x, x_);
    return x_;
  }
  const gradient_operands& quantize_gradient(const linear_context&, matrix_view<const float> dy) {
    g_.row = pow2(dy, backward_format(recipe_.fp8_format));
    g_.col = same_scale_columnwise(dy, g_.row);
    return g_;
  }

 private:
  static fp8_tensor pow2(matrix_view<const float> v, fp8_format f) { return quantize_fp8_current(v, f, {.power_2_scale = true}); }
  static fp8_tensor same_scale_columnwise(matrix_view<const float> v, const fp8_tensor& row) {
    return quantize_fp8_with_scale(v.transposed(), row.format(), row.scale(), quantized_axis::columnwise);
  }
  fp8_tensor x_;
  gradient_operands g_;
};

}  // namespace nvfp4::test
