// nvfp4/recipes/float8_block_scaling.hpp: TransformerEngine's Float8BlockScaling recipe (TE
// common/recipe/__init__.py, DeepSeek-V3 style): FP8 with fp32 scales per 1x128 block ("1D") or
// per 128x128 block ("2D"), power-of-two scales by default, split accumulation in every GEMM; and
// its policy: quantize_fp8_blockwise of each tensor and of its transpose with the role's block
// shape and scale options (both copies from one read, quantize_fp8_blockwise_both_into, into
// storage kept from step to step); fp8_gemm with the recipe's split-accumulator flags.
#pragma once

#include <string>
#include <tuple>

#include "nvfp4/recipes/fp8_operands.hpp"
#include "nvfp4/recipes/policy.hpp"
#include "nvfp4/recipes/recipe_common.hpp"
#include "nvfp4/recipes/recipe_fields.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"

namespace nvfp4 {

/// Float8BlockScaling with TE's field names and defaults (TE reads NVTE_FP8_BLOCK_SCALING_FP32_SCALES
/// to turn power-of-two scales off; here set the QParams).
struct float8_block_scaling {
  recipe_format fp8_format = recipe_format::e4m3;
  fp8_scale_options fp8_quant_fwd_inp{.power_2_scale = true, .amax_epsilon = 0.0f};
  fp8_scale_options fp8_quant_fwd_weight{.power_2_scale = true, .amax_epsilon = 0.0f};
  fp8_scale_options fp8_quant_bwd_grad{.power_2_scale = true, .amax_epsilon = 0.0f};
  int x_block_scaling_dim = 1;  ///< 1: 1x128 blocks, 2: 128x128
  int w_block_scaling_dim = 2;
  int grad_block_scaling_dim = 1;
  mm_params fp8_gemm_fprop{.use_split_accumulator = true};
  mm_params fp8_gemm_dgrad{.use_split_accumulator = true};
  mm_params fp8_gemm_wgrad{.use_split_accumulator = true};

  static constexpr auto fields() {
    using R = float8_block_scaling;
    return std::tuple{
        field_row("fp8_format", &R::fp8_format, field_origin::te, "E4M3 everywhere; HYBRID: E5M2 gradients"),
        field_row("fp8_quant_fwd_inp", &R::fp8_quant_fwd_inp, field_origin::te, "X's QParams (power_2_scale, amax_epsilon)"),
        field_row("fp8_quant_fwd_weight", &R::fp8_quant_fwd_weight, field_origin::te, "W's QParams"),
        field_row("fp8_quant_bwd_grad", &R::fp8_quant_bwd_grad, field_origin::te, "dY's QParams"),
        field_row("x_block_scaling_dim", &R::x_block_scaling_dim, field_origin::te, "X's blocks: 1 (1x128) or 2 (128x128)"),
        field_row("w_block_scaling_dim", &R::w_block_scaling_dim, field_origin::te, "W's blocks: 1 (1x128) or 2 (128x128)"),
        field_row("grad_block_scaling_dim", &R::grad_block_scaling_dim, field_origin::te, "dY's blocks: 1 (1x128) or 2 (128x128)"),
        field_row("fp8_gemm_fprop", &R::fp8_gemm_fprop, field_origin::te, "fprop GEMM's MMParams (split accumulator required)"),
        field_row("fp8_gemm_dgrad", &R::fp8_gemm_dgrad, field_origin::te, "dgrad GEMM's MMParams (split accumulator required)"),
        field_row("fp8_gemm_wgrad", &R::fp8_gemm_wgrad, field_origin::te, "wgrad GEMM's MMParams (split accumulator required)")};
  }

  /// TE's __post_init__ checks.
  void validate() const {
    const auto dim_ok = [](int d) { return d == 1 || d == 2; };
    detail::require(dim_ok(x_block_scaling_dim), errc::invalid_argument, "float8_block_scaling: only 1D or 2D blocks supported for x");
    detail::require(dim_ok(w_block_scaling_dim), errc::invalid_argument, "float8_block_scaling: only 1D or 2D blocks supported for w");
    detail::require(dim_ok(grad_block_scaling_dim), errc::invalid_argument,
                    "float8_block_scaling: only 1D or 2D blocks supported for grad");
    detail::require(!(x_block_scaling_dim == 2 && w_block_scaling_dim == 2), errc::invalid_argument,
                    "float8_block_scaling: 2D by 2D block GEMM not supported (x and w)");
    detail::require(!(x_block_scaling_dim == 2 && grad_block_scaling_dim == 2), errc::invalid_argument,
                    "float8_block_scaling: 2D by 2D block GEMM not supported (x and grad)");
    detail::require(!(w_block_scaling_dim == 2 && grad_block_scaling_dim == 2), errc::invalid_argument,
                    "float8_block_scaling: 2D by 2D block GEMM not supported (w and grad)");
    detail::require(fp8_gemm_fprop.use_split_accumulator, errc::invalid_argument,
                    "float8_block_scaling: split accumulator required for fprop");
    detail::require(fp8_gemm_dgrad.use_split_accumulator, errc::invalid_argument,
                    "float8_block_scaling: split accumulator required for dgrad");
    detail::require(fp8_gemm_wgrad.use_split_accumulator, errc::invalid_argument,
                    "float8_block_scaling: split accumulator required for wgrad");
    detail::reject_pure_e5m2(fp8_format, "float8_block_scaling");
  }

  /// The block shape and scale options of a role.
  fp8_block_shape block_shape(tensor_role role) const {
    const int dim =
        role == tensor_role::input ? x_block_scaling_dim : (role == tensor_role::weight ? w_block_scaling_dim : grad_block_scaling_dim);
    return dim == 1 ? fp8_block_shape::block_1x128 : fp8_block_shape::block_128x128;
  }
  const fp8_scale_options& scale_options(tensor_role role) const {
    return role == tensor_role::input ? fp8_quant_fwd_inp : (role == tensor_role::weight ? fp8_quant_fwd_weight : fp8_quant_bwd_grad);
  }
};

/// The policy of float8_block_scaling (see the header comment): its role quantizers; the copies
/// and GEMMs are fp8_family_policy's.
class float8_block_scaling_policy : public policy_base,
                                    public fp8_family_policy<float8_block_scaling, fp8_tensor, fp8_gemm_with_mm_params> {
 public:
  static constexpr const char* name = "Float8BlockScaling";
  static constexpr const char* short_name = "fp8_block";
  static constexpr bool quantized = true;
  static constexpr bool takes_amax_rule = false;

  using fp8_family_policy::fp8_family_policy;

  void quantize_weight(const linear_context&, matrix_view<const float> w, bool columnwise, bool, weight_operands& out) const {
    copies(tensor_role::weight, w, out.row.plain, columnwise ? &out.col : nullptr);
  }
  const input_operand& quantize_input(const linear_context&, matrix_view<const float> x, saved_input* saved, bool) {
    copies(tensor_role::input, x, x_row_, saved ? &saved->x_col : nullptr);
    return x_row_;
  }
  const gradient_operands& quantize_gradient(const linear_context&, matrix_view<const float> dy) {
    copies(tensor_role::grad_output, dy, g_.row, &g_.col);
    return g_;
  }

 private:
  /// A role's rowwise copy of v into `row` and, where `col` is given, its columnwise copy (of vᵀ):
  /// both from one read of v (quantize_fp8_blockwise_both_into), into tensors kept from step to
  /// step.
  void copies(tensor_role role, matrix_view<const float> v, fp8_tensor& row, fp8_tensor* col) const {
    const fp8_format f = role_format(recipe_.fp8_format, role);
    if (col)
      quantize_fp8_blockwise_both_into(v, f, recipe_.block_shape(role), recipe_.scale_options(role), row, *col);
    else
      quantize_fp8_blockwise_into(v, f, recipe_.block_shape(role), recipe_.scale_options(role), row);
  }
  fp8_tensor x_row_;     // X's rowwise copy (fprop): kept from step to step
  gradient_operands g_;  // dY's two copies (dgrad, wgrad): kept from step to step
};

}  // namespace nvfp4
