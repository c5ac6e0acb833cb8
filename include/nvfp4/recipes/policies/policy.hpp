// nvfp4/recipes/policies/policy.hpp: what a recipe policy is. A policy is one recipe family's part
// of a Linear layer (nn/linear.hpp, the driver): how it quantizes W, X and dY, which GEMM each of
// fprop, dgrad and wgrad runs, what it keeps between calls, and its names. The driver does
// everything else (checks, the dtype copies, weight caching, the bias, the outputs), the same way
// for every recipe. A new recipe is one policy header plus one line in recipes/recipe.hpp's list
// (docs/architecture.md, "Adding a recipe").
//
// A policy P for a recipe struct R provides:
//   using recipe_type = R;  static constexpr const char* name, short_name;   TE's class name, a report name
//   static constexpr bool quantized, takes_amax_rule;  bias added in bf16 / linear_options::nvfp4_amax allowed
//   struct weight_operands;  struct saved_input;       W's copies; X's copy that wgrad reads
//   explicit P(const R&);  const R& recipe() const;
//   void quantize_weight(ctx, w, columnwise, record, weight_operands&);   rowwise always, columnwise if asked
//   void pack_fprop_operand(ctx, weight_operands&) const;                  a kept W, packed once
//   void fprop(ctx, x, const weight_operands&, y, saved_input* (null: inference), record);
//   void bprop(ctx, dy, const weight_operands&, const saved_input&, dx, dw);
// and, from policy_base, the hooks a stateful recipe (delayed scaling) overrides.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>
#include <variant>

#include "nvfp4/gemm/fp8/gemm.hpp"
#include "nvfp4/recipes/delayed_scaling.hpp"
#include "nvfp4/recipes/nvfp4_amax_rule.hpp"
#include "nvfp4/recipes/recipe_common.hpp"

namespace nvfp4 {

/// What a Linear layer tells its policy about the call in progress.
struct linear_context {
  index_t in_features = 0, out_features = 0;  ///< K and N of Y [M, N] = X [M, K] · Wᵀ
  gemm_mode mode = gemm_mode::exact;
  fp8::mma::tensor_core fp8_tensor_core = fp8::mma::tensor_core::hopper;
  index_t promotion_interval = 128;            ///< FP8 split accumulator, elements of K per promotion
  const nvfp4_amax_rule* amax_rule = nullptr;  ///< NVFP4's global-amax rule (null: TE's)
  std::span<const float> bias{};               ///< fprop's bias as the GEMM adds it (empty: none)
  std::uint64_t gradient_seed = 0;             ///< the recipe seed of this backward's NVFP4 gradients

  const nvfp4_amax_rule& nvfp4_amax() const {
    static const nvfp4_amax_rule none{};
    return amax_rule ? *amax_rule : none;
  }
  /// The FP8 GEMM options of a recipe's MMParams (split accumulator or not), with a bias or none.
  fp8_gemm_options fp8_options(const mm_params& params, std::span<const float> with_bias = {}) const {
    return {.core = fp8_tensor_core, .mode = mode, .promotion_interval = params.use_split_accumulator ? promotion_interval : 0,
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

/// A list of policies (recipes/recipe.hpp has the library's): the recipe variant is made of their
/// recipe types, in the list's order; for_each calls f(std::type_identity<P>{}) for each policy P.
template <class... Policies>
struct policy_list {
  using recipe_variant = std::variant<typename Policies::recipe_type...>;
  template <class Recipe>
  using policy_for = typename detail::find_policy<Recipe, Policies...>::type;
  template <class F>
  static void for_each(F&& f) {
    (f(std::type_identity<Policies>{}), ...);
  }
};

}  // namespace nvfp4
