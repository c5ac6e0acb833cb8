// nvfp4/recipes/mxfp8_block_scaling.hpp: TransformerEngine's MXFP8BlockScaling recipe (TE
// common/recipe/__init__.py): blocks of 32 with an E8M0 scale by TE's round-up rule
// (scaling/mxfp8_quantize.hpp), both copies of every tensor quantized from the high-precision
// tensor, the GEMMs as Blackwell's kind::mxf8f6f4 computes them; and its policy: quantize_mxfp8_te
// of each tensor and of its transpose (both from one read: quantize_mxfp8_te_both_into); X and W
// E4M3 for both formats TE allows (E4M3, HYBRID), dY in the recipe's backward format;
// mxfp8_gemm. Every copy is written into storage kept from step to step (the layer's W operands
// and saved X, this policy's X and dY copies).
#pragma once

#include <tuple>
#include <variant>

#include "nvfp4/gemm/fp8/gemm.hpp"
#include "nvfp4/recipes/fp8_operands.hpp"
#include "nvfp4/recipes/policy.hpp"
#include "nvfp4/recipes/recipe_common.hpp"
#include "nvfp4/recipes/recipe_fields.hpp"
#include "nvfp4/scaling/mxfp8_quantize.hpp"

namespace nvfp4 {

/// MXFP8BlockScaling with TE's field names and defaults.
struct mxfp8_block_scaling {
  int margin = 0;  ///< present in TE's recipe, not used by its MXFP8 quantizers
  recipe_format fp8_format = recipe_format::e4m3;
  bool enable_2d_quantization = false;  ///< 2-D weight blocks: not emulated by this version

  static constexpr auto fields() {
    using R = mxfp8_block_scaling;
    return std::tuple{field_row("margin", &R::margin, field_origin::te, "present in TE's recipe, unused by its MXFP8 quantizers"),
                      field_row("fp8_format", &R::fp8_format, field_origin::te, "E4M3 everywhere; HYBRID: E5M2 gradients"),
                      field_row("enable_2d_quantization", &R::enable_2d_quantization, field_origin::te,
                                "32x32 weight blocks: not emulated (validate() refuses it)")};
  }

  /// TE's check (no pure E5M2) and ours (2-D weight blocks are not emulated).
  void validate() const {
    detail::reject_pure_e5m2(fp8_format, "mxfp8_block_scaling");
    detail::require(!enable_2d_quantization, errc::unsupported,
                    "mxfp8_block_scaling: enable_2d_quantization (2-D MXFP8 weight blocks) is not emulated by this version");
  }
};

/// mxfp8_gemm as Blackwell's kind::mxf8f6f4 runs it (no promotion interval), for every GEMM.
struct mxfp8_gemm_blackwell {
  static fp8_gemm_options options(const linear_context& c, const mxfp8_block_scaling&, gemm_role) {
    return {.core = fp8::mma::tensor_core::blackwell, .mode = c.mode, .promotion_interval = 0};
  }
  template <class A, class B>
  static void run(const A& a, const B& b, matrix_view<float> out, const fp8_gemm_options& options) {
    mxfp8_gemm(a, b, out, options);
  }
};

/// The policy of mxfp8_block_scaling (see the header comment): its role quantizers; the copies and
/// the wiring of the GEMMs are fp8_family_policy's, over mxfp8_gemm_blackwell.
class mxfp8_block_scaling_policy
    : public policy_base,
      public fp8_family_policy<
          mxfp8_block_scaling, quantized_tensor<mxfp8>, mxfp8_gemm_blackwell,
          std::variant<fp8_gradient_copies<quantized_tensor<mxfp8>>, fp8_gradient_copies<quantized_tensor<mxfp8_e5m2>>>> {
 public:
  static constexpr const char* name = "MXFP8BlockScaling";
  static constexpr const char* short_name = "mxfp8";
  static constexpr bool quantized = true;
  static constexpr bool takes_amax_rule = false;
  /// dY's rowwise and columnwise copies in the backward format: E4M3 (mxfp8) or E5M2.
  template <class Format>
  using gradient_pair = fp8_gradient_copies<quantized_tensor<Format>>;

  explicit mxfp8_block_scaling_policy(const mxfp8_block_scaling& r) : fp8_family_policy(r) {
    if (backward_format(r.fp8_format) == fp8_format::e5m2) g_.emplace<gradient_pair<mxfp8_e5m2>>();
  }

  void quantize_weight(const linear_context&, matrix_view<const float> w, bool columnwise, bool, weight_operands& out) const {
    if (columnwise)
      quantize_mxfp8_te_both_into(w, out.row.plain, out.col);
    else
      quantize_mxfp8_te_into(w, out.row.plain);
  }
  const input_operand& quantize_input(const linear_context&, matrix_view<const float> x, saved_input* saved, bool) {
    if (saved)
      quantize_mxfp8_te_both_into(x, x_row_, saved->x_col);
    else
      quantize_mxfp8_te_into(x, x_row_);
    return x_row_;
  }
  const gradient_operands& quantize_gradient(const linear_context&, matrix_view<const float> dy) {
    std::visit([&](auto& g) { quantize_mxfp8_te_both_into(dy, g.row, g.col); }, g_);
    return g_;
  }

 private:
  // Kept from step to step: X's rowwise copy (fprop), dY's two copies in the backward format.
  quantized_tensor<mxfp8> x_row_;
  gradient_operands g_;
};

}  // namespace nvfp4
