// nvfp4/nn/detail/linear_storage.hpp: what an nn::basic_linear keeps per policy, and the record a
// training forward leaves for its backward (nn/saved_forward.hpp hands it out). Storage is reused
// from call to call once nothing else refers to it, so a steady training step allocates nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <variant>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/recipes/nvfp4_amax_rule.hpp"
#include "nvfp4/recipes/policy.hpp"

namespace nvfp4::nn::detail {

/// `spare` itself when nothing else holds it (its last user done with it), else a fresh T put in
/// its place.
template <class T>
std::shared_ptr<T> reusable(std::shared_ptr<T>& spare) {
  if (spare && spare.use_count() == 1) {
    std::atomic_thread_fence(std::memory_order_acquire);  // after the other owners' last reads (their release)
    return spare;
  }
  spare = std::make_shared<T>();
  return spare;
}

/// One training forward under policy P: the policy object that ran it (a later set_recipe makes a
/// new one, so this forward's recipe stays; delayed scaling's states inside it are shared along a
/// DelayedScaling -> DelayedScaling chain, so its backward reads and records the layer's live
/// grad_output state, as TE's backward quantizes dY with the module's current scaling state), W's
/// operands (shared with a kept W), X's copy for wgrad, and X in the dtype where the policy keeps
/// a view of it (no quantization's float_gemm reads X itself).
template <class P>
struct forward_record {
  using policy_type = P;
  std::uint64_t layer_id = 0;
  index_t rows = 0;
  high_precision dtype = high_precision::fp32;
  std::shared_ptr<P> policy;
  std::shared_ptr<const typename P::weight_operands> weight;
  typename P::saved_input input{};
  std::vector<float> x_copy;
};

/// A policy (shared with the forwards it ran) with what the layer keeps for it: the W kept by
/// weight_cache::refresh, and storage reused from call to call once no caller refers to it (W's
/// operands of calls that keep none, a training forward's record).
template <class P>
struct policy_slot {
  using operands = typename P::weight_operands;
  policy_slot() = default;
  explicit policy_slot(std::shared_ptr<P> p) : policy(std::move(p)) {}
  std::shared_ptr<P> policy;
  std::shared_ptr<const operands> kept_weight;
  std::shared_ptr<operands> spare_weight;
  std::shared_ptr<forward_record<P>> spare_record;
};

/// Switches `slots` to the policy of recipe `r` (of the list Policies), checked first: unsupported
/// for an NVFP4 amax rule (linear_options::nvfp4_amax) under an FP8 recipe. DelayedScaling ->
/// DelayedScaling keeps each role's state (P::switched_to), as TE; any other switch starts afresh.
template <class Policies, class Slots>
void switch_policy(Slots& slots, const typename Policies::recipe_variant& r, const nvfp4_amax_rule& amax_rule) {
  std::visit(
      [&]<class R>(const R& next) {
        using P = typename Policies::template policy_for<R>;
        nvfp4::detail::require(!amax_rule || P::takes_amax_rule, errc::unsupported,
                               "linear: linear_options::nvfp4_amax applies to NVFP4 recipes only; this layer's recipe is FP8");
        if constexpr (requires(const P& p) { p.switched_to(next); }) {
          if (auto* slot = std::get_if<policy_slot<P>>(&slots)) {
            slots.template emplace<policy_slot<P>>(std::make_shared<P>(slot->policy->switched_to(next)));
            return;
          }
        }
        slots.template emplace<policy_slot<P>>(std::make_shared<P>(next));
      },
      r);
}

/// A new layer's id (which layer a saved forward belongs to), counted per layer type.
template <class Layer>
std::uint64_t next_layer_id() {
  static std::atomic<std::uint64_t> count{0};
  return ++count;
}

/// The variant of slots of a policy list, and of handles on its records (empty first).
template <class List>
struct storage_of;
template <class... Ps>
struct storage_of<policy_list<Ps...>> {
  using slots = std::variant<policy_slot<Ps>...>;
  using records = std::variant<std::monostate, std::shared_ptr<const forward_record<Ps>>...>;
};

}  // namespace nvfp4::nn::detail
