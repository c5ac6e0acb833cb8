// nvfp4/recipes/policy.hpp: what a recipe policy is. A policy is one recipe's part of a Linear
// layer (nn/linear.hpp, the driver): how each tensor role is quantized (TE's per-role quantizers:
// quantize_input, quantize_weight, quantize_gradient) and which GEMM consumes each copy (fprop,
// dgrad, wgrad), what it keeps between calls, and its names. The driver wires them the same way for
// every recipe (fprop: X's rowwise copy with W's; dgrad: dY's rowwise copy with W's columnwise one;
// wgrad: dY's columnwise copy with X's saved one) and does everything else: checks, the dtype
// copies, weight caching, the bias, the outputs, saved forwards. The `recipe_policy` concept below
// lists what a policy provides; a recipe is one header holding its struct, its field table
// (recipes/recipe_fields.hpp) and its policy (docs/architecture.md, "Adding a recipe").
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <variant>

#include "nvfp4/gemm/fp8/gemm.hpp"
#include "nvfp4/recipes/nvfp4_amax_rule.hpp"
#include "nvfp4/recipes/recipe_common.hpp"
#include "nvfp4/recipes/recipe_fields.hpp"

namespace nvfp4 {

class delayed_scaling_state;  // recipes/delayed_scaling.hpp: the state hooks hand out pointers to it

/// What a Linear layer tells its policy about the call in progress.
struct linear_context {
  index_t in_features = 0, out_features = 0;  ///< K and N of Y [M, N] = X [M, K] · Wᵀ
  gemm_mode mode = gemm_mode::exact;
  fp8::mma::tensor_core fp8_tensor_core = fp8::mma::tensor_core::hopper;
  index_t promotion_interval = 128;            ///< FP8 split accumulator, elements of K per promotion
  const nvfp4_amax_rule* amax_rule = nullptr;  ///< NVFP4's global-amax rule (null: TE's)
  std::span<const float> bias{};               ///< fprop's bias as the GEMM adds it (empty: none)
  std::uint64_t gradient_seed = 0;             ///< the recipe seed of this backward's NVFP4 gradients
  /// The max |value| of the tensor a role quantizer is handed, when the layer's NaN / Inf check
  /// found it (and every value finite) in the same pass; -1: unknown (quantizers take their own).
  float tensor_amax = -1.0f;

  const nvfp4_amax_rule& nvfp4_amax() const {
    static const nvfp4_amax_rule none{};
    return amax_rule ? *amax_rule : none;
  }
  /// The FP8 GEMM options of a recipe's MMParams (split accumulator or not), with a bias or none.
  fp8_gemm_options fp8_options(const mm_params& params, std::span<const float> with_bias = {}) const {
    return {.core = fp8_tensor_core,
            .mode = mode,
            .promotion_interval = params.use_split_accumulator ? promotion_interval : 0,
            .bias = with_bias};
  }
};

/// The state hooks of a policy without state between calls (every recipe but delayed scaling).
struct policy_base {
  /// The delayed-scaling state of a role, if the recipe keeps one.
  delayed_scaling_state* scaling_state(tensor_role) { return nullptr; }
  const delayed_scaling_state* scaling_state(tensor_role) const { return nullptr; }
  /// Take new scales: the forward roles (input, weight), the backward role (grad_output).
  void update_forward_roles() {}
  void update_backward_role() {}
};

/// A recipe policy P for the recipe struct P::recipe_type. Required:
///   names: name (TE's class name), short_name (reports); flags: quantized (the GEMMs add the bias
///     in bf16), takes_amax_rule (linear_options::nvfp4_amax allowed);
///   the recipe: a struct with validate() and a field table (recipes/recipe_fields.hpp); P(recipe),
///     recipe();
///   storage: weight_operands (W's copies: fprop's B, dgrad's B), saved_input (X's copy wgrad reads,
///     kept in a saved forward), input_operand / gradient_operands (what quantize_input /
///     quantize_gradient return, in the policy's own storage, valid until its next call);
///   roles: quantize_weight(ctx, w, columnwise, record, weight_operands&), pack_fprop_operand(ctx,
///     weight_operands&) (a kept W, packed once), quantize_input(ctx, x, saved_input* (null: no
///     backward), record), quantize_gradient(ctx, dy);
///   GEMMs: fprop(ctx, input_operand, weight_operands, y), dgrad(ctx, gradient_operands,
///     weight_operands, dx), wgrad(ctx, gradient_operands, saved_input, dw);
///   state hooks: scaling_state(role), update_forward_roles(), update_backward_role() (policy_base).
/// Optional: reads_bf16 (a bf16 layer hands its tensors over as bf16), runs_non_finite (NaN / Inf
/// go to the quantizers, as TE's delayed scaling takes them), switched_to(recipe) (a policy of the
/// next recipe of the same type that keeps this one's state, as TE keeps DelayedScaling's).
/// The roles and GEMMs are checked on fp32 views; a reads_bf16 policy takes bf16 views too.
template <class P>
concept recipe_policy = requires {
  typename P::recipe_type;
  typename P::weight_operands;
  typename P::saved_input;
  typename P::input_operand;
  typename P::gradient_operands;
  { P::name } -> std::convertible_to<const char*>;
  { P::short_name } -> std::convertible_to<const char*>;
  { P::quantized } -> std::convertible_to<bool>;
  { P::takes_amax_rule } -> std::convertible_to<bool>;
}
&&described_recipe<typename P::recipe_type>&& std::constructible_from<P, const typename P::recipe_type&>&& requires(
    P& p, const P& cp, const typename P::recipe_type& r, const linear_context& c, matrix_view<const float> v, matrix_view<float> out,
    typename P::weight_operands& w, typename P::saved_input& s, tensor_role role) {
  r.validate();
  { cp.recipe() } -> std::same_as<const typename P::recipe_type&>;
  p.quantize_weight(c, v, true, true, w);
  cp.pack_fprop_operand(c, w);
  { p.quantize_input(c, v, &s, true) } -> std::same_as<const typename P::input_operand&>;
  { p.quantize_gradient(c, v) } -> std::same_as<const typename P::gradient_operands&>;
  cp.fprop(c, std::declval<const typename P::input_operand&>(), std::as_const(w), out);
  cp.dgrad(c, std::declval<const typename P::gradient_operands&>(), std::as_const(w), out);
  cp.wgrad(c, std::declval<const typename P::gradient_operands&>(), std::as_const(s), out);
  { p.scaling_state(role) } -> std::same_as<delayed_scaling_state*>;
  p.update_forward_roles();
  p.update_backward_role();
}
&&(!requires { P::reads_bf16; } || std::same_as<decltype(P::reads_bf16), const bool>)&&(!requires {
  P::runs_non_finite;
} || std::same_as<decltype(P::runs_non_finite), const bool>);

/// Whether policy P takes NaN / Inf tensors as TE does (delayed scaling); the others' layers refuse
/// them before anything is computed.
template <class P>
constexpr bool runs_non_finite() {
  if constexpr (requires { P::runs_non_finite; })
    return P::runs_non_finite;
  else
    return false;
}

namespace detail {
template <class Recipe, class... Policies>
struct find_policy;
template <class Recipe, class First, class... Rest>
struct find_policy<Recipe, First, Rest...> {
  using type = std::conditional_t<std::is_same_v<typename First::recipe_type, Recipe>, First, typename find_policy<Recipe, Rest...>::type>;
};
template <class Recipe>
struct find_policy<Recipe> {
  using type = void;
};
}  // namespace detail

/// A list of policies (recipes/recipe.hpp has the library's; a user's own recipe is a list that
/// adds its policy, with_policy<P>, run by nn::basic_linear). The recipe variant is made of their
/// recipe types, in the list's order; for_each calls f(std::type_identity<P>{}) for each policy P.
template <recipe_policy... Policies>
struct policy_list {
  using recipe_variant = std::variant<typename Policies::recipe_type...>;
  template <class Recipe>
  using policy_for = typename detail::find_policy<Recipe, Policies...>::type;
  template <recipe_policy P>
  using with_policy = policy_list<Policies..., P>;
  /// The name of a recipe's policy (TE's class name).
  static const char* name_of(const recipe_variant& r) {
    return std::visit([](const auto& v) { return policy_for<std::remove_cvref_t<decltype(v)>>::name; }, r);
  }
  template <class F>
  static void for_each(F&& f) {
    (f(std::type_identity<Policies>{}), ...);
  }
};

}  // namespace nvfp4
