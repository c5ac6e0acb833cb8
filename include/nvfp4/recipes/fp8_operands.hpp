// nvfp4/recipes/fp8_operands.hpp: the FP8-family policies' copies and GEMM wiring, written once
// (per-tensor current and delayed scaling, FP8 block scaling, MXFP8): W's rowwise copy (fprop's B,
// packable) and columnwise copy (dgrad's B), X's columnwise copy (wgrad's B), dY's two copies
// (dgrad's and wgrad's A), and fprop / dgrad / wgrad over them. A policy derives from
// fp8_family_policy and says only how each role is quantized (its quantize_* members) and which
// GEMM consumes the copies (the Gemm argument: fp8_gemm with the recipe's MMParams, or its own).
#pragma once

#include <variant>

#include "nvfp4/gemm/fp8/gemm.hpp"
#include "nvfp4/gemm/fp8/packed_weight.hpp"
#include "nvfp4/recipes/fprop_operand.hpp"
#include "nvfp4/recipes/policy.hpp"

namespace nvfp4 {

/// W's copies: `row` (fprop's B, packed once when the layer keeps W) and `col` (dgrad's B).
template <class Tensor>
struct fp8_weight_copies {
  fprop_operand<Tensor, fp8_packed_weight<Tensor>> row;
  Tensor col;
};
/// X's columnwise copy (wgrad's B), kept in a saved forward.
template <class Tensor>
struct fp8_saved_columnwise {
  Tensor x_col;
};
/// dY's copies: `row` (dgrad's A) and `col` (wgrad's A, from dYᵀ).
template <class Tensor>
struct fp8_gradient_copies {
  Tensor row, col;
};

namespace detail {
template <class T>
inline constexpr bool is_variant = false;
template <class... T>
inline constexpr bool is_variant<std::variant<T...>> = true;
}  // namespace detail

/// The three GEMMs of a Linear step.
enum class gemm_role { fprop, dgrad, wgrad };

/// fp8_gemm with the recipe's MMParams for the GEMM (fp8_gemm_fprop / _dgrad / _wgrad, TE's
/// split-accumulator flags) on the layer's FP8 tensor core.
struct fp8_gemm_with_mm_params {
  template <class Recipe>
  static fp8_gemm_options options(const linear_context& c, const Recipe& r, gemm_role role) {
    const mm_params& params =
        role == gemm_role::fprop ? r.fp8_gemm_fprop : (role == gemm_role::dgrad ? r.fp8_gemm_dgrad : r.fp8_gemm_wgrad);
    return c.fp8_options(params);
  }
  template <class A, class B>
  static void run(const A& a, const B& b, matrix_view<float> out, const fp8_gemm_options& options) {
    fp8_gemm(a, b, out, options);
  }
};

/// The part of an FP8-family policy that is the same for all of them: its recipe, the copies'
/// types (input_operand: X's rowwise copy, fprop's A), pack_fprop_operand, and the GEMMs that
/// TE's Linear runs on the copies (fprop: X rowwise with W rowwise, the bias in the epilogue;
/// dgrad: dY rowwise with W columnwise; wgrad: dY columnwise with X's saved columnwise copy).
/// Gemm gives `options(ctx, recipe, gemm_role)` and `run(a, b, out, options)`. Gradients is dY's
/// copies, or a std::variant of such (a backward format chosen at run time), visited.
template <class Recipe, class Tensor, class Gemm, class Gradients = fp8_gradient_copies<Tensor>>
class fp8_family_policy {
 public:
  using recipe_type = Recipe;
  using weight_operands = fp8_weight_copies<Tensor>;
  using saved_input = fp8_saved_columnwise<Tensor>;
  using input_operand = Tensor;
  using gradient_operands = Gradients;

  explicit fp8_family_policy(const Recipe& r) : recipe_(r) {}
  const Recipe& recipe() const { return recipe_; }
  void pack_fprop_operand(const linear_context&, weight_operands& w) const { w.row.pack(); }

  void fprop(const linear_context& c, const input_operand& x, const weight_operands& w, matrix_view<float> y) const {
    fp8_gemm_options options = Gemm::options(c, recipe_, gemm_role::fprop);
    options.bias = c.bias;
    w.row.run([&](const auto& b) { Gemm::run(x, b, y, options); });
  }
  void dgrad(const linear_context& c, const gradient_operands& g, const weight_operands& w, matrix_view<float> dx) const {
    with_copies(g, [&](const auto& dy) { Gemm::run(dy.row, w.col, dx, Gemm::options(c, recipe_, gemm_role::dgrad)); });
  }
  void wgrad(const linear_context& c, const gradient_operands& g, const saved_input& x, matrix_view<float> dw) const {
    with_copies(g, [&](const auto& dy) { Gemm::run(dy.col, x.x_col, dw, Gemm::options(c, recipe_, gemm_role::wgrad)); });
  }

 protected:
  Recipe recipe_;

 private:
  template <class F>
  static void with_copies(const gradient_operands& g, F&& f) {
    if constexpr (detail::is_variant<gradient_operands>)
      std::visit(f, g);
    else
      f(g);
  }
};

}  // namespace nvfp4
