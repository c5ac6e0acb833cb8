// nvfp4/nn/linear.hpp: an emulated TransformerEngine Linear layer, Y = X Wᵀ (+ b), forward and
// backward under any training recipe (recipes/recipe.hpp), with FP32 master weights. Every GEMM
// is composed of the library's public quantizers and GEMMs exactly as its recipe's policy says,
// so a test (or a user) can rebuild each result bit for bit; results depend on the seed only,
// never on the number of threads.
//
//   #include <nvfp4/nn/linear.hpp>
//
//   nvfp4::nn::linear layer(1024, 4096, nvfp4::nvfp4_block_scaling{},      // in, out features, recipe
//                           {.bias = true, .dtype = nvfp4::high_precision::bf16, .seed = 7});
//   std::copy(init.begin(), init.end(), layer.weight().begin());          // W [out, in], row-major fp32
//   auto x = nvfp4::matrix_view<const float>::row_major(xs.data(), tokens, 1024);
//   std::vector<float> y = layer.forward(x);                              // [tokens, 4096]
//   std::vector<float> dx = layer.backward(                               // [tokens, 1024], of the last forward
//       nvfp4::matrix_view<const float>::row_major(dy.data(), tokens, 4096));
//   // layer.weight_grad(), layer.bias_grad(): dW and db of that backward, fp32
//   layer.set_recipe(nvfp4::no_quantization{});                           // e.g. a BF16 cooldown
//
// forward(parameters, x, y) returns a saved_forward (nn/saved_forward.hpp): what that call's
// backward needs, owned by the caller, so calls and backwards may interleave in any order and a
// backward may run twice (backward(saved, dy, dx, gradients)). backward(dy, ...) is the same
// backward on the layer's last training forward, which the layer keeps for it.
//
// Each recipe's quantizers and GEMMs are its policy's (recipes/policies/<recipe>.hpp, listed in
// recipes/recipe.hpp): how it quantizes W, X and dY and which GEMM fprop, dgrad and wgrad run
// (X [M, K], W [N, K], dY [M, N]; fprop X·Wᵀ, dgrad dY·W, wgrad dYᵀ·X). This class is the driver
// over the policy chosen by set_recipe: checks, the dtype copies, weight caching, the bias, the
// outputs, the step count, and when delayed-scaling states update: after forward (input, weight)
// and backward (grad_output) under scaling_update::per_call, or once per region the caller ends
// (per_region, TE's autocast: end_forward_region, end_backward_region).
// Y and dX are written in the layer's dtype (bf16: rounded once from the fp32 epilogue, bias
// included); dW and db are fp32 (TE's main_grad); db is the fp32 sum of dY's rows in row order.
// X, W, b and dY may be given as fp32 or as bf16 values (input_matrix), Y and dX written as fp32
// or bf16 (output_matrix): a bf16 layer then reads a bf16 model's tensors as they are stored.
// Every recipe but no_quantization adds the bias rounded to bf16, as TE's linear.py hands it to
// the quantized GEMMs.
//
// infer(x) is the forward for evaluation and inference: the same Y bit for bit, without the
// columnwise copies backward needs, without touching a forward saved for backward, and without
// recording or updating delayed-scaling state (eval_amaxes::record_as_te records them as TE's
// quantizers do under torch.no_grad()). Both forward and infer take a weight_cache, TE's
// `is_first_microbatch`: refresh quantizes W and keeps it, reuse runs on the kept W (micro-batches,
// decode steps between optimizer steps), off quantizes W every call. The kept W's fprop operand
// is packed once for the GEMM kernels (nvfp4_packed_operand; FP8 and MXFP8: fp8_packed_weight,
// about 7 bytes per weight element besides the quantized copies; no quantization: Wᵀ, which
// float_gemm reads in place for decode-sized inputs).
//
// Parameters: owned by the layer (weight(), bias(), weight_grad(), bias_grad()), or, with
// parameter_storage::external, the caller's, passed to each call as views (linear_parameters,
// linear_gradients) and read in place: what a framework's layer (nvfp4.LinearCore) needs.
// A backward's dX / dW / db bits depend on its saved forward, dY, the layer's backward count
// (NVFP4's gradient seed, gradient_seed(steps())) and, under delayed scaling, the grad_output
// state at that moment: a second backward on one saved forward gives the first one's bits except
// where those advanced (NVFP4 with stochastic rounding: the next step's seed, as TE's RNG moves
// on; delayed scaling under per_call: the grad_output scale the first backward updated).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/nn/detail/linear_checks.hpp"
#include "nvfp4/nn/linear_options.hpp"
#include "nvfp4/nn/saved_forward.hpp"
#include "nvfp4/recipes/recipe.hpp"

namespace nvfp4::nn {

/// An emulated TE Linear layer: the driver over its recipe's policy (see the header comment).
class linear {
 public:
  /// A layer with zero weights (set them through weight()), or, with parameter_storage::external,
  /// none (every call is given them). Throws invalid_argument for negative sizes, a weight of more
  /// than max_element_count elements (before allocating anything), or a recipe TE rejects
  /// (nvfp4::validate).
  linear(index_t in_features, index_t out_features, recipe r = no_quantization{}, linear_options options = {})
      : id_(next_layer_id()), in_(in_features), out_(out_features), options_(options) {
    nvfp4::detail::require(in_features >= 0 && out_features >= 0, errc::invalid_argument, "linear: negative feature count");
    const index_t weight_count = nvfp4::detail::checked_element_count(out_features, in_features, errc::invalid_argument, "linear weight");
    nvfp4::detail::require(options.promotion_interval >= 0 && options.promotion_interval % fp8::mma::step_k == 0, errc::invalid_argument,
                    "linear: promotion_interval must be 0 or a multiple of 32");
    const bool owned = options.parameters == parameter_storage::owned;
    if (owned) weight_.assign(static_cast<std::size_t>(weight_count), 0.0f);
    if (owned) weight_grad_.assign(weight_.size(), 0.0f);
    if (owned && options.bias) bias_.assign(static_cast<std::size_t>(out_), 0.0f);
    if (owned && options.bias) bias_grad_.assign(bias_.size(), 0.0f);
    set_recipe(std::move(r));
  }
  /// Movable, not copyable (its policies' state is shared with the forwards it saved).
  linear(linear&&) = default;
  linear& operator=(linear&&) = default;
  linear(const linear&) = delete;
  linear& operator=(const linear&) = delete;

  index_t in_features() const { return in_; }
  index_t out_features() const { return out_; }
  const linear_options& options() const { return options_; }
  const nvfp4::recipe& current_recipe() const { return recipe_; }

  /// Switches the recipe (e.g. a precision cooldown), choosing its policy. Throws invalid_argument
  /// / unsupported for a recipe TE rejects, before changing anything. Delayed scaling as TE
  /// (module/base.py set_meta_tensor): DelayedScaling -> DelayedScaling keeps each role's scale and
  /// history (delayed_scaling_policy::switched_to); from any other recipe the states start afresh.
  /// A kept W is dropped; a saved forward keeps the recipe it ran under for its backward.
  void set_recipe(nvfp4::recipe r) {
    validate(r);
    std::visit([&]<class R>(const R&) {
      nvfp4::detail::require(!options_.nvfp4_amax || recipe_policy_t<R>::takes_amax_rule, errc::unsupported,
                             "linear: linear_options::nvfp4_amax applies to NVFP4 recipes only; this layer's recipe is FP8");
    }, r);
    std::visit([&]<class R>(const R& next) {
      using P = recipe_policy_t<R>;
      if constexpr (requires(const P& p) { p.switched_to(next); }) {
        if (auto* slot = std::get_if<policy_slot<P>>(&slots_)) {
          slots_.template emplace<policy_slot<P>>(std::make_shared<P>(slot->policy->switched_to(next)));
          return;
        }
      }
      slots_.template emplace<policy_slot<P>>(std::make_shared<P>(next));
    }, r);
    recipe_ = std::move(r);
  }

  /// The FP32 master weight W [out_features, in_features], row-major (empty for external storage).
  std::span<float> weight() { return weight_; }
  std::span<const float> weight() const { return weight_; }
  matrix_view<const float> weight_view() const { return matrix_view<const float>::row_major(weight_.data(), out_, in_); }
  /// The bias [out_features] (empty without one).
  std::span<float> bias() { return bias_; }
  std::span<const float> bias() const { return bias_; }
  /// dW [out_features, in_features] and db of the last backward, fp32.
  std::span<float> weight_grad() { return weight_grad_; }
  std::span<const float> weight_grad() const { return weight_grad_; }
  std::span<float> bias_grad() { return bias_grad_; }
  std::span<const float> bias_grad() const { return bias_grad_; }

  /// Backward calls so far; the NVFP4 gradients of the backward with number `step` (0, 1, ...)
  /// use gradient_seed(step) as their recipe seed. set_steps restores the count (checkpoints).
  std::uint64_t steps() const { return steps_; }
  void set_steps(std::uint64_t steps) { steps_ = steps; }
  std::uint64_t gradient_seed(std::uint64_t step) const { return nvfp4::detail::derived_seed(options_.seed, step); }

  /// The delayed-scaling state of a role (nullptr unless the recipe is delayed_scaling).
  delayed_scaling_state* scaling_state(nvfp4::tensor_role role) {
    return std::visit([&](auto& s) -> delayed_scaling_state* { return s.policy->scaling_state(role); }, slots_);
  }
  const delayed_scaling_state* scaling_state(nvfp4::tensor_role role) const {
    return std::visit([&](const auto& s) -> const delayed_scaling_state* { return std::as_const(*s.policy).scaling_state(role); }, slots_);
  }

  /// Y = X Wᵀ (+ b), X [M, in_features], Y [M, out_features]; keeps what backward needs (as the
  /// layer's last forward) and, under delayed scaling, records the amaxes and steps the input and
  /// weight states. Throws shape_mismatch / null_pointer before writing Y, and non_finite_error
  /// for NaN or Inf in X or W except under delayed scaling, which runs such a tensor as TE does:
  /// its amax ignores NaN and keeps Inf (the scale then holds for up to amax_history_len
  /// updates), Inf casts to +-fp8_max and NaN to the NaN code (fp8_non_finite::te_satfinite).
  void forward(matrix_view<const float> x, matrix_view<float> y, weight_cache cache = weight_cache::off) {
    (void)forward(owned_parameters("forward"), x, y, cache);
  }
  /// forward on the caller's parameters (read in place during the call, never kept); returns what
  /// its backward needs (also kept as the layer's last forward). Throws shape_mismatch /
  /// null_pointer for parameters of another shape.
  saved_forward forward(const linear_parameters& p, input_matrix x, output_matrix y, weight_cache cache = weight_cache::off) {
    check_call(p, x, y, "linear::forward");
    last_ = {};  // its record may be reused now, unless a caller holds it
    last_ = std::visit([&](auto& s, auto xv) { return run_forward(s, xv, y, cache); }, slots_, x);
    return last_;
  }
  std::vector<float> forward(matrix_view<const float> x, weight_cache cache = weight_cache::off) {
    std::vector<float> y(detail::output_size(x.rows(), out_));
    forward(x, matrix_view<float>::row_major(y.data(), x.rows(), out_), cache);
    return y;
  }

  /// The inference forward: Y exactly as forward computes it, but nothing for backward (no
  /// columnwise copies; the last forward stays the last), and delayed-scaling states neither
  /// record nor update (the current scales are used). TE under fp8_autocast records amaxes in
  /// evaluation too; call forward for that. Throws as forward.
  void infer(matrix_view<const float> x, matrix_view<float> y, weight_cache cache = weight_cache::off) {
    infer(owned_parameters("infer"), x, y, cache);
  }
  /// infer on the caller's parameters; `amaxes` chooses whether delayed-scaling amaxes are
  /// recorded as TE records them under torch.no_grad() (never updated here either way).
  void infer(const linear_parameters& p, input_matrix x, output_matrix y, weight_cache cache = weight_cache::off,
             eval_amaxes amaxes = eval_amaxes::record_nothing) {
    check_call(p, x, y, "linear::infer");
    const bool record = amaxes == eval_amaxes::record_as_te;
    std::visit([&](auto& s, auto x_given) {
      with_input(*s.policy, x_given, "input", infer_x_scratch_, infer_xb_scratch_, /*kept=*/false, [&](auto xv) {
        const auto w = weight_for(s, cache, /*for_training=*/false, record);
        const auto yv = detail::scratch(x_given.rows(), out_, infer_y_scratch_);
        s.policy->fprop(context(), xv, *w, yv, nullptr, record);
        write_output(yv, y);
      });
    }, slots_, x);
  }
  std::vector<float> infer(matrix_view<const float> x, weight_cache cache = weight_cache::off) {
    std::vector<float> y(detail::output_size(x.rows(), out_));
    infer(x, matrix_view<float>::row_major(y.data(), x.rows(), out_), cache);
    return y;
  }

  /// dX = dY W, dW = dYᵀ X, db = Σ_rows dY for the forward `saved` (of this layer, under the
  /// recipe it ran, whatever the layer's is now); dY [M, out_features], dX [M, in_features]. May
  /// run more than once on one saved forward (see the header comment for what then differs).
  /// Throws invalid_argument for an empty saved forward or another layer's, shape_mismatch /
  /// non_finite_error before writing anything.
  void backward(const saved_forward& saved, input_matrix dy, output_matrix dx, const linear_gradients& g) {
    const detail::extent dy_extent = detail::validated(dy, "linear output gradient"), dx_extent = detail::validated(dx, "linear input gradient");
    detail::check_backward_call(in_, out_, options_.bias, static_cast<bool>(saved), saved.rows(), dy_extent, dx_extent,
                                detail::validated(g.weight, "linear weight gradient"), g.bias);
    std::visit([&]<class H>(const H& record, auto dyv) {
      if constexpr (!std::is_same_v<H, std::monostate>) run_backward(*record, dyv, dx, g);
    }, saved.record_, dy);
  }
  /// backward on the last training forward, dW and db into the layer's weight_grad() and
  /// bias_grad() (owned storage) or the caller's buffers; that forward is then no longer kept.
  void backward(matrix_view<const float> dy, matrix_view<float> dx) {
    nvfp4::detail::require(options_.parameters == parameter_storage::owned, errc::invalid_argument,
                           "linear::backward: this layer's parameters are external; pass where dW (and db) go: backward(dy, dx, gradients)");
    backward(dy, dx, linear_gradients{matrix_view<float>::row_major(weight_grad_.data(), out_, in_), bias_grad_});
  }
  void backward(input_matrix dy, output_matrix dx, const linear_gradients& g) {
    backward(last_, dy, dx, g);
    last_ = {};
  }
  std::vector<float> backward(matrix_view<const float> dy) {
    std::vector<float> dx(detail::output_size(dy.rows(), in_));
    backward(dy, matrix_view<float>::row_major(dx.data(), dy.rows(), in_));
    return dx;
  }

  /// scaling_update::per_region: the end of an outermost forward region (TE: the outermost
  /// fp8_autocast's exit, quantization.py). With grad enabled the input and weight states update
  /// once from the amaxes of every call in the region (max-merged); without, nothing updates and
  /// the recorded amaxes wait for the next update. No effect for other recipes or per_call.
  void end_forward_region(bool grad_enabled) {
    if (!grad_enabled || options_.delayed_update != scaling_update::per_region) return;
    std::visit([](auto& s) { s.policy->update_forward_roles(); }, slots_);
  }
  /// scaling_update::per_region: the end of a backward pass (TE updates the backward role once per
  /// backward). No effect for other recipes or per_call.
  void end_backward_region() {
    if (options_.delayed_update != scaling_update::per_region) return;
    std::visit([](auto& s) { s.policy->update_backward_role(); }, slots_);
  }

 private:
  /// A policy (shared with the forwards it ran) with what the layer keeps for it: the W kept by
  /// weight_cache::refresh, and storage reused from call to call once no caller refers to it (W's
  /// operands of calls that keep none, a training forward's record).
  template <class P>
  struct policy_slot {
    using operands = typename P::weight_operands;
    explicit policy_slot(std::shared_ptr<P> p) : policy(std::move(p)) {}
    std::shared_ptr<P> policy;
    std::shared_ptr<const operands> kept_weight;
    std::shared_ptr<operands> spare_weight;
    std::shared_ptr<detail::forward_record<P>> spare_record;
  };
  template <class List>
  struct slots_of;
  template <class... Ps>
  struct slots_of<policy_list<Ps...>> {
    using type = std::variant<policy_slot<Ps>...>;
  };
  static std::uint64_t next_layer_id() {
    static std::atomic<std::uint64_t> count{0};
    return ++count;
  }

  /// A training forward under the slot's policy into a record (reused when no caller holds it).
  template <class P, class T>
  saved_forward run_forward(policy_slot<P>& s, matrix_view<const T> x, output_matrix y, weight_cache cache) {
    const std::shared_ptr<detail::forward_record<P>> record = detail::reusable(s.spare_record);
    record->weight.reset();  // the last step's W operands, free for weight_for to reuse
    // X checked before W's amax is recorded; copied into the record where the policy keeps a view of it.
    with_input(*s.policy, x, "input", P::quantized ? x_scratch_ : record->x_copy, xb_scratch_, /*kept=*/!P::quantized, [&](auto xv) {
      auto w = weight_for(s, cache, /*for_training=*/true, /*record=*/true);
      const auto yv = detail::scratch(x.rows(), out_, y_scratch_);
      s.policy->fprop(context(), xv, *w, yv, &record->input, /*record=*/true);
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
  /// A backward of one saved forward, under the policy that ran it.
  template <class P, class T>
  void run_backward(const detail::forward_record<P>& r, matrix_view<const T> dy, output_matrix dx, const linear_gradients& g) {
    nvfp4::detail::require(r.layer_id == id_, errc::invalid_argument, "linear::backward: the saved forward is another layer's");
    const auto dxv = detail::scratch(dy.rows(), in_, dx_scratch_);
    linear_context c = context();
    c.bias = {};
    c.gradient_seed = gradient_seed(steps_);
    // no_quantization's float_gemm reads dY beside dW: a copy, as for its X.
    with_input(*r.policy, dy, "output gradient", g_scratch_, gb_scratch_, /*kept=*/!P::quantized, [&](auto gv) {
      r.policy->bprop(c, gv, *r.weight, r.input, dxv, g.weight);
      if (options_.delayed_update == scaling_update::per_call) r.policy->update_backward_role();
      if (!g.bias.empty()) detail::sum_rows(gv, g.bias);
    });
    write_output(dxv, dx);
    ++steps_;
  }

  /// The layer's own W and b as a call's parameters (owned storage only).
  linear_parameters owned_parameters(const char* who) const {
    nvfp4::detail::require(options_.parameters == parameter_storage::owned, errc::invalid_argument,
                           std::string("linear::") + who + ": this layer's parameters are external; pass them: " + who + "(parameters, x, y)");
    return {matrix_view<const float>::row_major(weight_.data(), out_, in_), bias_};
  }
  linear_context context() const {
    return {.in_features = in_, .out_features = out_, .mode = options_.mode, .fp8_tensor_core = options_.fp8_tensor_core,
            .promotion_interval = options_.promotion_interval, .amax_rule = &options_.nvfp4_amax, .bias = call_bias_};
  }

  /// The checks of forward and infer that come before anything changes; then the call's parameters
  /// as the GEMMs take them. A quantized recipe's GEMM adds the bias in bf16: TE's linear.py casts
  /// it to bf16 when the activations are fp32 (cuBLAS has no FP8 GEMM with an fp32 bias), and a
  /// bf16 layer's bias is a bf16 parameter. No quantization adds it as given.
  void check_call(const linear_parameters& p, const input_matrix& x, const output_matrix& y, const char* who) {
    const detail::extent xe = detail::validated(x, "linear input"), ye = detail::validated(y, "linear output");
    const detail::extent we = detail::validated(p.weight, "linear weight");
    const auto [bias_size, bias_null] = std::visit([](auto b) { return std::pair{b.size(), b.data() == nullptr}; }, p.bias);
    detail::check_forward_call(in_, out_, options_.bias, we, bias_size, bias_null, xe, ye, who);
    call_weight_ = p.weight;
    std::visit([&]<class B>(std::span<const B> b) {
      if constexpr (std::is_same_v<B, float>) {
        call_bias_ = b;
        if (b.empty() || !quantized()) return;
      }
      bias_scratch_.resize(b.size());  // bf16 values widened, or fp32 ones rounded to bf16 for a quantized GEMM
      for (std::size_t i = 0; i < b.size(); ++i) bias_scratch_[i] = bf16::from_float(static_cast<float>(b[i])).to_float();
      call_bias_ = bias_scratch_;
    }, p.bias);
  }
  /// The W a forward runs on: the kept one (reuse), or W quantized now (kept, and its fprop
  /// operand packed once, for refresh: the products give the same bits). A training forward
  /// records W's delayed-scaling amax unless it reuses. Operands not kept are quantized into the
  /// slot's spare set when nothing else holds it (the last step's, once backward is done), so a
  /// policy that writes into them touches no fresh memory.
  template <class Slot>
  std::shared_ptr<const typename Slot::operands> weight_for(Slot& s, weight_cache cache, bool for_training, bool record) {
    using operands = typename Slot::operands;
    if (cache == weight_cache::reuse) {
      if (s.kept_weight) return s.kept_weight;
      cache = weight_cache::refresh;  // a miss: quantize and keep
    }
    const bool record_amax = for_training || record;
    std::shared_ptr<operands> w;
    w = cache == weight_cache::refresh ? std::make_shared<operands>() : detail::reusable(s.spare_weight);
    // Every policy copies or quantizes W at once: an fp32 layer's W is read in place.
    std::visit([&](auto w_given) {
      with_input(*s.policy, w_given, "weight", w_scratch_, wb_scratch_, /*kept=*/false, [&](auto wv) {
        s.policy->quantize_weight(context(), wv, /*columnwise=*/for_training || cache == weight_cache::refresh, record_amax, *w);
      });
    }, call_weight_);
    if (cache == weight_cache::refresh) {
      s.policy->pack_fprop_operand(context(), *w);
      s.kept_weight = w;
    }
    return w;
  }

  /// f(v in the layer's dtype) for policy P: v itself where it is already (fp32, no copy kept past
  /// the call), else an fp32 copy in `buffer`; for a bf16 layer whose policy reads bf16 tensors
  /// (reads_bf16: the same values in half the bytes) without an amax rule (which sees fp32
  /// values), bf16 values as given or a bf16 copy in `bf16_buffer`. NaN / Inf refused unless P
  /// runs them.
  template <class P, class T, class F>
  void with_input(const P&, matrix_view<const T> v, const char* what, std::vector<float>& buffer, std::vector<bf16>& bf16_buffer, bool kept,
                  F&& f) const {
    if constexpr (requires { P::reads_bf16; }) {
      if (options_.dtype == high_precision::bf16 && !options_.nvfp4_amax) {
        if constexpr (std::is_same_v<T, bf16>) f(detail::as_bf16(v, what, bf16_buffer, runs_non_finite<P>()));
        else f(detail::to_bf16(v, what, bf16_buffer, runs_non_finite<P>()));
        return;
      }
    }
    f(detail::in_place_or_copy(v, what, buffer, options_.dtype, runs_non_finite<P>(), kept));
  }
  /// Whether the current recipe quantizes (its GEMMs then add the bias in bf16, and it keeps no
  /// view of X).
  bool quantized() const {
    return std::visit([](const auto& s) { return std::decay_t<decltype(*s.policy)>::quantized; }, slots_);
  }
  /// Whether policy P takes NaN / Inf tensors as TE does (delayed scaling); every other recipe
  /// refuses them before anything is computed.
  template <class P>
  static constexpr bool runs_non_finite() {
    if constexpr (requires { P::runs_non_finite; }) return P::runs_non_finite;
    else return false;
  }
  void write_output(matrix_view<const float> from, output_matrix to) const {
    std::visit([&](auto out) { detail::write_in_dtype(from, out, options_.dtype); }, to);
  }

  std::uint64_t id_ = 0;  // which layer a saved forward belongs to
  index_t in_ = 0, out_ = 0;
  nvfp4::recipe recipe_;
  linear_options options_;
  std::vector<float> weight_, bias_, weight_grad_, bias_grad_;
  typename slots_of<recipe_policies>::type slots_{std::in_place_index<0>, std::make_shared<no_quantization_policy>(no_quantization{})};
  saved_forward last_;        // the last training forward, for backward(dy, ...)
  input_matrix call_weight_;            // the W of the call in progress
  std::span<const float> call_bias_;    // its bias as the GEMMs add it
  std::uint64_t steps_ = 0;
  std::vector<float> bias_scratch_;  // the bias in bf16 for a quantized recipe's GEMMs
  std::vector<float> x_scratch_, w_scratch_, y_scratch_, g_scratch_, dx_scratch_, infer_x_scratch_, infer_y_scratch_;
  std::vector<bf16> xb_scratch_, wb_scratch_, gb_scratch_, infer_xb_scratch_;  // bf16 copies for policies that read them
};

}  // namespace nvfp4::nn
