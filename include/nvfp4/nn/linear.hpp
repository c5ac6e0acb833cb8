// nvfp4/nn/linear.hpp: an emulated TransformerEngine Linear layer, Y = X Wᵀ (+ b), forward and
// backward under any training recipe (recipes/recipe.hpp), with FP32 master weights; results
// depend on the seed only, never on the thread count. This is the driver: the recipe's policy
// (recipes/policy.hpp) says how X, W and dY are quantized and which GEMM consumes each copy; the
// wiring is here, once: fprop (X rowwise, W rowwise), dgrad (dY rowwise, W columnwise), wgrad (dY
// columnwise, X's saved columnwise copy); with the checks, the dtype copies (bf16: inputs rounded,
// Y and dX rounded once from the fp32 epilogue; dW, db fp32), weight caching (TE's
// is_first_microbatch), the bias (bf16 for quantized recipes, as TE's linear.py), saved forwards
// (nn/saved_forward.hpp), the backward count (NVFP4's gradient seed) and delayed-scaling updates.
//
//   nvfp4::nn::linear layer(1024, 4096, nvfp4::nvfp4_block_scaling{}, {.bias = true, .seed = 7});
//   std::vector<float> y = layer.forward(x);     // X [tokens, 1024] -> Y [tokens, 4096]
//   std::vector<float> dx = layer.backward(dy);  // of the last forward; weight_grad(), bias_grad()
//   auto saved = layer.forward(params, x, y);    // a framework's call: backward(saved, dy, dx, grads)
// basic_linear<Policies> runs any policy list, a user's recipe included (docs/architecture.md).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/nn/detail/linear_checks.hpp"
#include "nvfp4/nn/detail/linear_storage.hpp"
#include "nvfp4/nn/detail/owned_parameters.hpp"
#include "nvfp4/nn/linear_options.hpp"
#include "nvfp4/nn/saved_forward.hpp"
#include "nvfp4/recipes/recipe.hpp"

namespace nvfp4::nn {

/// An emulated TE Linear layer over the policies of `Policies` (see the header comment).
template <class Policies>
class basic_linear : public detail::owned_parameters<basic_linear<Policies>> {
  using owned = detail::owned_parameters<basic_linear<Policies>>;

 public:
  using recipe_type = typename Policies::recipe_variant;
  using saved_forward = basic_saved_forward<Policies>;
  using owned::backward, owned::forward, owned::infer;  // the calls on owned W and b (weight(), bias(), ...)

  /// Zero weights (set them through weight()), or none with parameter_storage::external. Throws
  /// invalid_argument for negative sizes, a weight over max_element_count elements (before
  /// allocating), a bad promotion_interval, or a recipe TE rejects.
  basic_linear(index_t in_features, index_t out_features, recipe_type r = {}, linear_options options = {})
      : id_(detail::next_layer_id<basic_linear>()), in_(in_features), out_(out_features), options_(std::move(options)) {
    owned::allocate(static_cast<std::size_t>(detail::checked_weight_count(in_, out_, options_)), out_, options_);
    set_recipe(std::move(r));
  }
  basic_linear(basic_linear&&) = default;  // movable, not copyable: its policies are shared with its saved forwards

  index_t in_features() const { return in_; }
  index_t out_features() const { return out_; }
  const linear_options& options() const { return options_; }
  const recipe_type& current_recipe() const { return recipe_; }

  /// Switches the recipe (a precision cooldown); checked before anything changes. DelayedScaling
  /// -> DelayedScaling keeps each role's state, as TE (switched_to); any other switch starts
  /// afresh. A kept W is dropped; saved forwards keep the recipe they ran.
  void set_recipe(recipe_type r) {
    validate(r);
    detail::switch_policy<Policies>(slots_, r, options_.nvfp4_amax);
    recipe_ = std::move(r);
  }

  /// Backward calls so far; backward number `step` uses gradient_seed(step) as NVFP4's gradient
  /// seed. set_steps restores the count (checkpoints).
  std::uint64_t steps() const { return steps_; }
  void set_steps(std::uint64_t steps) { steps_ = steps; }
  std::uint64_t gradient_seed(std::uint64_t step) const { return nvfp4::derived_seed(options_.seed, step); }

  /// The delayed-scaling state of a role (nullptr unless the recipe keeps one).
  delayed_scaling_state* scaling_state(tensor_role role) {
    return std::visit([&](auto& s) { return s.policy->scaling_state(role); }, slots_);
  }
  const delayed_scaling_state* scaling_state(tensor_role role) const {
    return std::visit([&](const auto& s) { return std::as_const(*s.policy).scaling_state(role); }, slots_);
  }

  /// The training forward: Y = X Wᵀ (+ b), X [M, in], Y [M, out]; returns what its backward needs
  /// (also kept as the last forward); delayed scaling records amaxes. Throws shape_mismatch /
  /// null_pointer, non_finite_error (delayed scaling runs NaN / Inf, as TE) before writing Y.
  saved_forward forward(const linear_parameters& p, input_matrix x, output_matrix y, weight_cache cache = weight_cache::off) {
    begin_call(p, x, y, "linear::forward");
    last_ = {};  // its record may be reused now, unless a caller holds it
    last_ = std::visit([&](auto& s, auto xv) { return run_forward(s, xv, y, cache); }, slots_, x);
    return last_;
  }
  /// The evaluation forward: forward's Y, nothing saved, no delayed-scaling update; `amaxes`:
  /// record X's and W's amaxes as TE does under torch.no_grad(), or not. Throws as forward.
  void infer(const linear_parameters& p, input_matrix x, output_matrix y, weight_cache cache = weight_cache::off,
             eval_amaxes amaxes = eval_amaxes::record_nothing) {
    begin_call(p, x, y, "linear::infer");
    const bool record = amaxes == eval_amaxes::record_as_te;
    std::visit(
        [&]<class P>(detail::policy_slot<P>& s, auto xv) {
          detail::with_input<P>(options_, xv, "input", infer_x_, infer_xb_, /*kept=*/false, [&](auto x_in, float x_amax) {
            const auto w = weight_for(s, cache, /*for_training=*/false, record);
            const auto yv = detail::scratch(xv.rows(), out_, infer_y_);
            s.policy->fprop(context(), s.policy->quantize_input(context(x_amax), x_in, nullptr, record), *w, yv);
            write_output(yv, y);
          });
        },
        slots_, x);
  }
  /// dX = dY W, dW = dYᵀ X, db = Σ_rows dY of this layer's forward `saved`, under its recipe; any
  /// order, more than once (same bits unless NVFP4's seed, the backward count, or delayed scaling's
  /// grad_output scale moved). Throws invalid_argument (empty, another layer's), shape_mismatch, non_finite_error first.
  void backward(const saved_forward& saved, input_matrix dy, output_matrix dx, const linear_gradients& g) {
    const detail::extent dye = detail::validated(dy, "linear output gradient"), dxe = detail::validated(dx, "linear input gradient");
    detail::check_backward_call(in_, out_, options_.bias, static_cast<bool>(saved), saved.rows(), dye, dxe,
                                detail::validated(g.weight, "linear weight gradient"), g.bias);
    std::visit(
        [&]<class H>(const H& record, auto dyv) {
          if constexpr (!std::is_same_v<H, std::monostate>) run_backward(*record, dyv, dx, g);
        },
        saved.record_, dy);
  }
  /// backward on the last training forward, which is then no longer kept; dW and db into the
  /// caller's buffers (owned storage: backward(dy) writes weight_grad() and bias_grad()).
  void backward(input_matrix dy, output_matrix dx, const linear_gradients& g) {
    backward(last_, dy, dx, g);
    last_ = {};
  }
  /// scaling_update::per_region: the outermost forward region's end (TE's autocast exit) updates
  /// the input and weight states once (grad enabled; else the amaxes wait), a backward pass's end
  /// the grad_output state. No effect for other recipes or per_call.
  void end_forward_region(bool grad_enabled) {
    if (grad_enabled && options_.delayed_update == scaling_update::per_region)
      std::visit([](auto& s) { s.policy->update_forward_roles(); }, slots_);
  }
  void end_backward_region() {
    if (options_.delayed_update == scaling_update::per_region) std::visit([](auto& s) { s.policy->update_backward_role(); }, slots_);
  }

 private:
  linear_context context(float tensor_amax = -1.0f) const { return detail::context_of(in_, out_, options_, call_bias_, tensor_amax); }
  /// forward's and infer's checks, before anything changes; then the call's W and bias.
  void begin_call(const linear_parameters& p, const input_matrix& x, const output_matrix& y, const char* who) {
    detail::check_forward_views(in_, out_, options_.bias, p, x, y, who);
    call_weight_ = p.weight;
    const bool quantized = std::visit([](const auto& s) { return std::decay_t<decltype(*s.policy)>::quantized; }, slots_);
    call_bias_ = detail::gemm_bias(p.bias, quantized, bias_scratch_);
  }

  /// The wiring of a training forward: X's copies (the columnwise one into the saved record), the
  /// W the cache says, fprop.
  template <class P, class T>
  saved_forward run_forward(detail::policy_slot<P>& s, matrix_view<const T> x, output_matrix y, weight_cache cache) {
    const std::shared_ptr<detail::forward_record<P>> record = detail::reusable(s.spare_record);
    record->weight.reset();  // the last step's W operands, free for weight_for to reuse
    // X checked before W's amax is recorded; copied into the record where the policy keeps a view of it.
    detail::with_input<P>(
        options_, x, "input", P::quantized ? x_ : record->x_copy, xb_, /*kept=*/!P::quantized, [&](auto xv, float x_amax) {
          auto w = weight_for(s, cache, /*for_training=*/true, /*record=*/true);
          const auto yv = detail::scratch(x.rows(), out_, y_);
          s.policy->fprop(context(), s.policy->quantize_input(context(x_amax), xv, &record->input, /*record=*/true), *w, yv);
          if (options_.delayed_update == scaling_update::per_call) s.policy->update_forward_roles();
          write_output(yv, y);
          record->weight = std::move(w);
        });
    record->layer_id = id_;
    record->rows = x.rows();
    record->dtype = options_.dtype;
    record->policy = s.policy;
    return saved_forward(std::shared_ptr<const detail::forward_record<P>>(record));
  }
  /// The wiring of a backward, under the policy that ran the forward: dY's copies, dgrad, wgrad.
  template <class P, class T>
  void run_backward(const detail::forward_record<P>& r, matrix_view<const T> dy, output_matrix dx, const linear_gradients& g) {
    nvfp4::detail::require(r.layer_id == id_, errc::invalid_argument, "linear::backward: the saved forward is another layer's");
    const auto dxv = detail::scratch(dy.rows(), in_, dx_);
    linear_context c = context();  // (its bias is fprop's: dgrad and wgrad add none)
    c.gradient_seed = gradient_seed(steps_);
    // no_quantization's float_gemm reads dY beside dW: a copy, as for its X.
    detail::with_input<P>(options_, dy, "output gradient", g_, gb_, /*kept=*/!P::quantized, [&](auto gv, float dy_amax) {
      c.tensor_amax = dy_amax;
      const auto& grads = r.policy->quantize_gradient(c, gv);
      r.policy->dgrad(c, grads, *r.weight, dxv);
      r.policy->wgrad(c, grads, r.input, g.weight);
      if (options_.delayed_update == scaling_update::per_call) r.policy->update_backward_role();
      if (!g.bias.empty()) detail::sum_rows(gv, g.bias);
    });
    write_output(dxv, dx);
    ++steps_;
  }
  /// The W a forward runs on: the kept one (reuse; a miss quantizes and keeps), or W quantized now
  /// (refresh: kept and packed once; off: into the slot's spare set). Training records W's amax.
  template <class P>
  std::shared_ptr<const typename P::weight_operands> weight_for(detail::policy_slot<P>& s, weight_cache cache, bool for_training,
                                                                bool record) {
    if (cache == weight_cache::reuse) {
      if (s.kept_weight) return s.kept_weight;
      cache = weight_cache::refresh;
    }
    using operands = typename P::weight_operands;
    const std::shared_ptr<operands> w = cache == weight_cache::refresh ? std::make_shared<operands>() : detail::reusable(s.spare_weight);
    std::visit(
        [&](auto w_given) {
          detail::with_input<P>(options_, w_given, "weight", w_, wb_, /*kept=*/false, [&](auto wv, float w_amax) {
            s.policy->quantize_weight(context(w_amax), wv, /*columnwise=*/for_training || cache == weight_cache::refresh,
                                      for_training || record, *w);
          });
        },
        call_weight_);
    if (cache == weight_cache::refresh) {
      s.policy->pack_fprop_operand(context(), *w);
      s.kept_weight = w;
    }
    return w;
  }
  void write_output(matrix_view<const float> from, output_matrix to) const { detail::write_output(from, to, options_.dtype); }

  std::uint64_t id_ = 0;  // which layer a saved forward belongs to
  index_t in_ = 0, out_ = 0;
  recipe_type recipe_;
  linear_options options_;
  typename detail::storage_of<Policies>::slots slots_;
  saved_forward last_;  // the last training forward, for backward(dy, ...)
  std::uint64_t steps_ = 0;
  input_matrix call_weight_;                                                  // the call in progress: its W,
  std::span<const float> call_bias_;                                          // and its bias as the GEMMs add it
  std::vector<float> bias_scratch_, x_, w_, y_, g_, dx_, infer_x_, infer_y_;  // reused from call to call
  std::vector<bf16> xb_, wb_, gb_, infer_xb_;                                 // bf16 copies for policies that read them
};

/// The layer of the library's recipes.
using linear = basic_linear<recipe_policies>;

}  // namespace nvfp4::nn
