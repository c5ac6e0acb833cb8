// nvfp4/nn/saved_forward.hpp: what one training forward of an nn::linear leaves for its backward,
// owned by the caller (TE's ctx.save_for_backward): the recipe's policy object that ran it, W's
// operands as that forward quantized them, X's saved copies, the row count and the dtype. A layer
// can run any number of forwards before their backwards, in any order, and a backward can run
// more than once on one saved forward (torch's retain_graph).
//
//   nvfp4::nn::saved_forward s1 = layer.forward(params, x1, y1);   // two calls before a backward
//   nvfp4::nn::saved_forward s2 = layer.forward(params, x2, y2);
//   layer.backward(s1, dy1, dx1, grads1);                          // each its own forward's gradients
//   layer.backward(s2, dy2, dx2, grads2);
//
// A saved forward is a handle: copies share one immutable record, and the layer recycles the
// record's storage once no handle refers to it (a steady training step allocates nothing). Copying,
// keeping and dropping handles is safe from any thread; the layer's own calls are not (serialize
// them, as the Python LinearCore does with a mutex per layer).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "nvfp4/recipes/recipe.hpp"

namespace nvfp4::nn {

class linear;

namespace detail {

/// One training forward under policy P: the policy object that ran it (a later set_recipe makes a
/// new one, so this forward's recipe stays; delayed scaling's states inside it are shared along a
/// DelayedScaling -> DelayedScaling chain, so its backward reads and records the layer's live
/// grad_output state, as TE's backward quantizes dY with the module's current scaling state), W's
/// operands (shared with a kept W), X's copies for wgrad, and X in the dtype where the policy keeps
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

/// `spare` itself when nothing else holds it (its last user done with it), else a fresh T put in
/// its place: storage a layer reuses from call to call while no caller still refers to it.
template <class T>
std::shared_ptr<T> reusable(std::shared_ptr<T>& spare) {
  if (spare && spare.use_count() == 1) {
    std::atomic_thread_fence(std::memory_order_acquire);  // after the other owners' last reads (their release)
    return spare;
  }
  spare = std::make_shared<T>();
  return spare;
}

template <class List>
struct record_handles;
template <class... Ps>
struct record_handles<policy_list<Ps...>> {
  using type = std::variant<std::monostate, std::shared_ptr<const forward_record<Ps>>...>;
};

}  // namespace detail

/// What a training forward of nn::linear returns for its backward (see the header comment).
/// Default-constructed: empty, which backward refuses.
class saved_forward {
 public:
  saved_forward() = default;

  /// Whether it holds a forward (false when default-constructed).
  explicit operator bool() const { return !std::holds_alternative<std::monostate>(record_); }
  /// M, the rows of the forward's X (dY and dX of its backward have as many).
  index_t rows() const {
    return visit_record([](const auto& r) { return r.rows; }, index_t{0});
  }
  /// The layer's dtype when the forward ran (its backward writes dX in it).
  high_precision dtype() const {
    return visit_record([](const auto& r) { return r.dtype; }, high_precision::fp32);
  }
  /// The recipe that ran the forward (a copy; its backward runs under it, whatever the layer's
  /// recipe is now). no_quantization for an empty handle.
  nvfp4::recipe recipe() const {
    return visit_record([](const auto& r) { return nvfp4::recipe(r.policy->recipe()); }, nvfp4::recipe(no_quantization{}));
  }

 private:
  friend class linear;
  using handles = typename detail::record_handles<recipe_policies>::type;
  template <class P>
  explicit saved_forward(std::shared_ptr<const detail::forward_record<P>> r) : record_(std::move(r)) {}

  template <class F, class T>
  T visit_record(F&& f, T empty) const {
    return std::visit([&]<class H>(const H& h) -> T {
      if constexpr (std::is_same_v<H, std::monostate>) return empty;
      else return f(*h);
    }, record_);
  }

  handles record_;
};

}  // namespace nvfp4::nn
