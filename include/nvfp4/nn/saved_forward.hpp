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

#include <memory>
#include <type_traits>
#include <utility>
#include <variant>

#include "nvfp4/nn/detail/linear_storage.hpp"
#include "nvfp4/recipes/recipe.hpp"

namespace nvfp4::nn {

template <class Policies>
class basic_linear;

/// What a training forward of basic_linear<Policies> returns for its backward (see the header
/// comment). Default-constructed: empty, which backward refuses.
template <class Policies>
class basic_saved_forward {
 public:
  basic_saved_forward() = default;

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
  /// recipe is now). The list's first recipe (no quantization) for an empty handle.
  typename Policies::recipe_variant recipe() const {
    using variant = typename Policies::recipe_variant;
    return visit_record([](const auto& r) { return variant(r.policy->recipe()); }, variant{});
  }

 private:
  friend class basic_linear<Policies>;
  using handles = typename detail::storage_of<Policies>::records;
  template <class P>
  explicit basic_saved_forward(std::shared_ptr<const detail::forward_record<P>> r) : record_(std::move(r)) {}

  template <class F, class T>
  T visit_record(F&& f, T empty) const {
    return std::visit(
        [&]<class H>(const H& h) -> T {
          if constexpr (std::is_same_v<H, std::monostate>)
            return empty;
          else
            return f(*h);
        },
        record_);
  }

  handles record_;
};

/// The saved forward of the library's recipes' layer (nn::linear).
using saved_forward = basic_saved_forward<recipe_policies>;

}  // namespace nvfp4::nn
