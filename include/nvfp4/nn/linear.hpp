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
//   std::vector<float> dx = layer.backward(                               // [tokens, 1024]
//       nvfp4::matrix_view<const float>::row_major(dy.data(), tokens, 4096));
//   // layer.weight_grad(), layer.bias_grad(): dW and db of that backward, fp32
//   layer.set_recipe(nvfp4::no_quantization{});                           // e.g. a BF16 cooldown
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
#pragma once

#include <algorithm>
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
#include "nvfp4/recipes/recipe.hpp"

namespace nvfp4::nn {

/// Where a layer's W, b and their gradients live.
enum class parameter_storage {
  owned,    ///< in the layer (weight(), bias(), weight_grad(), bias_grad())
  external  ///< the caller's (a framework's parameters): passed to each call as views, never copied
};

/// When delayed-scaling states update (take a new scale from their amax history).
enum class scaling_update {
  per_call,   ///< input and weight after each forward, grad_output after each backward
  per_region  ///< only where the caller ends a region: end_forward_region / end_backward_region
              ///< (TE: the outermost autocast's exit, the end of the backward pass)
};

/// What an evaluation forward (infer) does with delayed-scaling amaxes.
enum class eval_amaxes {
  record_nothing,  ///< neither record nor update (the library's inference forward)
  record_as_te     ///< record X's and W's amaxes into the step in progress, as TE's quantizers do
                   ///< under torch.no_grad(); they are max-merged into the next update
};

/// How a linear layer computes, beside its recipe.
struct linear_options {
  bool bias = false;                                    ///< a bias b [out_features], fp32
  high_precision dtype = high_precision::fp32;          ///< X, W, dY rounded to it; Y, dX written in it
  gemm_mode mode = gemm_mode::exact;                    ///< quantized GEMMs: tensor-core exact, or relaxed
  fp8::mma::tensor_core fp8_tensor_core = fp8::mma::tensor_core::hopper;  ///< per-tensor and block FP8 GEMMs
  index_t promotion_interval = 128;                     ///< FP8 split accumulator: elements of K per promotion
  std::uint64_t seed = 0;                               ///< the only source of randomness (NVFP4 SR)
  /// NVFP4 recipes: chooses each tensor's global amax in place of TE's maximum |value| (a research
  /// control, e.g. nn/amax_percentile.hpp's quantile; empty: TE). It sees X, W and dY in the
  /// layer's dtype and the RHT'd wgrad copies; FP8 and MXFP8 recipes refuse a layer that has one.
  nvfp4_amax_rule nvfp4_amax{};
  parameter_storage parameters = parameter_storage::owned;
  scaling_update delayed_update = scaling_update::per_call;
};

/// The parameters a call reads, in place: W [out_features, in_features] and b [out_features]
/// (empty for a layer without a bias).
struct linear_parameters {
  matrix_view<const float> weight;
  std::span<const float> bias{};
};

/// Where a backward writes dW [out_features, in_features] and db [out_features] (fp32).
struct linear_gradients {
  matrix_view<float> weight;
  std::span<float> bias{};
};

/// How a forward treats the quantized weight: TE's `is_first_microbatch` (None, True, False).
enum class weight_cache {
  off,      ///< quantize W on every call, keep nothing (TE: None)
  refresh,  ///< quantize W and keep it for later calls (TE: True)
  reuse     ///< run on the W kept by the last refresh, as W was then (TE: False; W's delayed-scaling
            ///< amax is not recorded). Without one kept since the last set_recipe, W is quantized
            ///< and kept, as refresh does (TE's linear.py quantizes and caches on a miss).
};
}  // namespace nvfp4::nn

/// Its names (the Python layer's weight_cache values; one table: nvfp4/detail/enum_names.hpp).
namespace nvfp4::detail {
template <>
struct enum_table<nn::weight_cache> {
  static constexpr enum_entry<nn::weight_cache> entries[] = {
      {"off", nn::weight_cache::off}, {"refresh", nn::weight_cache::refresh}, {"reuse", nn::weight_cache::reuse}};
};
}  // namespace nvfp4::detail

namespace nvfp4::nn {

/// An emulated TE Linear layer: the driver over its recipe's policy (see the header comment).
class linear {
 public:
  /// A layer with zero weights (set them through weight()), or, with parameter_storage::external,
  /// none (every call is given them). Throws invalid_argument for negative sizes, a weight of more
  /// than max_element_count elements (before allocating anything), or a recipe TE rejects
  /// (nvfp4::validate).
  linear(index_t in_features, index_t out_features, recipe r = no_quantization{}, linear_options options = {})
      : in_(in_features), out_(out_features), options_(options) {
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

  index_t in_features() const { return in_; }
  index_t out_features() const { return out_; }
  const linear_options& options() const { return options_; }
  const nvfp4::recipe& current_recipe() const { return recipe_; }

  /// Switches the recipe (e.g. a precision cooldown), choosing its policy. Throws invalid_argument
  /// / unsupported for a recipe TE rejects, before changing anything. Delayed scaling as TE
  /// (module/base.py set_meta_tensor): DelayedScaling -> DelayedScaling keeps each role's scale and
  /// history (delayed_scaling_policy::switch_to); from any other recipe the states start afresh.
  /// A forward saved for backward and a kept W are dropped: call set_recipe between steps.
  void set_recipe(nvfp4::recipe r) {
    validate(r);
    std::visit([&]<class R>(const R&) {
      nvfp4::detail::require(!options_.nvfp4_amax || recipe_policy_t<R>::takes_amax_rule, errc::unsupported,
                             "linear: linear_options::nvfp4_amax applies to NVFP4 recipes only; this layer's recipe is FP8");
    }, r);
    std::visit([&]<class R>(const R& next) {
      using P = recipe_policy_t<R>;
      if constexpr (requires(P& p) { p.switch_to(next); }) {
        if (auto* slot = std::get_if<policy_slot<P>>(&slots_)) {
          P kept = std::move(slot->policy);
          kept.switch_to(next);
          slots_.template emplace<policy_slot<P>>(std::move(kept));
          return;
        }
      }
      slots_.template emplace<policy_slot<P>>(P(next));
    }, r);
    recipe_ = std::move(r);
    saved_valid_ = false;
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
    return std::visit([&](auto& s) -> delayed_scaling_state* { return s.policy.scaling_state(role); }, slots_);
  }
  const delayed_scaling_state* scaling_state(nvfp4::tensor_role role) const {
    return std::visit([&](const auto& s) -> const delayed_scaling_state* { return s.policy.scaling_state(role); }, slots_);
  }

  /// Y = X Wᵀ (+ b), X [M, in_features], Y [M, out_features]; keeps what backward needs and, under
  /// delayed scaling, records the amaxes and steps the input and weight states. Throws
  /// shape_mismatch / null_pointer before writing Y, and non_finite_error for NaN or Inf in X or W
  /// except under delayed scaling, which runs such a tensor as TE does: its amax ignores NaN and
  /// keeps Inf (the scale then holds for up to amax_history_len updates), Inf casts to +-fp8_max
  /// and NaN to the NaN code (fp8_non_finite::te_satfinite).
  void forward(matrix_view<const float> x, matrix_view<float> y, weight_cache cache = weight_cache::off) {
    forward(owned_parameters("forward"), x, y, cache);
  }
  /// forward on the caller's parameters (read in place during the call, never kept). Throws
  /// shape_mismatch / null_pointer for parameters of another shape.
  void forward(const linear_parameters& p, matrix_view<const float> x, matrix_view<float> y, weight_cache cache = weight_cache::off) {
    check_call(p, x, y, "linear::forward");
    saved_valid_ = false;
    std::visit([&](auto& s) {
      // X checked before W's amax is recorded; copied only where the policy keeps a view of it.
      with_input(s, x, "input", x_scratch_, xb_scratch_, /*kept=*/!quantized(), [&](auto xv) {
        s.saved_weight.reset();  // dead since saved_valid_ fell: its operands may be reused now
        auto w = weight_for(s, cache, /*for_training=*/true, /*record=*/true);
        const auto yv = detail::scratch(x.rows(), out_, y_scratch_);
        s.policy.fprop(context(), xv, *w, yv, &s.saved_x, /*record=*/true);
        if (options_.delayed_update == scaling_update::per_call) s.policy.update_forward_roles();
        write_output(yv, y);
        s.saved_weight = std::move(w);
      });
    }, slots_);
    saved_rows_ = x.rows();
    saved_valid_ = true;
  }
  std::vector<float> forward(matrix_view<const float> x, weight_cache cache = weight_cache::off) {
    std::vector<float> y(detail::output_size(x.rows(), out_));
    forward(x, matrix_view<float>::row_major(y.data(), x.rows(), out_), cache);
    return y;
  }

  /// The inference forward: Y exactly as forward computes it, but nothing for backward (no
  /// columnwise copies; a forward already saved stays valid), and delayed-scaling states neither
  /// record nor update (the current scales are used). TE under fp8_autocast records amaxes in
  /// evaluation too; call forward for that. Throws as forward.
  void infer(matrix_view<const float> x, matrix_view<float> y, weight_cache cache = weight_cache::off) {
    infer(owned_parameters("infer"), x, y, cache);
  }
  /// infer on the caller's parameters; `amaxes` chooses whether delayed-scaling amaxes are
  /// recorded as TE records them under torch.no_grad() (never updated here either way).
  void infer(const linear_parameters& p, matrix_view<const float> x, matrix_view<float> y, weight_cache cache = weight_cache::off,
             eval_amaxes amaxes = eval_amaxes::record_nothing) {
    check_call(p, x, y, "linear::infer");
    const bool record = amaxes == eval_amaxes::record_as_te;
    std::visit([&](auto& s) {
      with_input(s, x, "input", infer_x_scratch_, infer_xb_scratch_, /*kept=*/false, [&](auto xv) {
        const auto w = weight_for(s, cache, /*for_training=*/false, record);
        const auto yv = detail::scratch(x.rows(), out_, infer_y_scratch_);
        s.policy.fprop(context(), xv, *w, yv, nullptr, record);
        write_output(yv, y);
      });
    }, slots_);
  }
  std::vector<float> infer(matrix_view<const float> x, weight_cache cache = weight_cache::off) {
    std::vector<float> y(detail::output_size(x.rows(), out_));
    infer(x, matrix_view<float>::row_major(y.data(), x.rows(), out_), cache);
    return y;
  }

  /// dX = dY W, dW = dYᵀ X, db = Σ_rows dY for the last forward's X; dY [M, out_features], dX [M,
  /// in_features]. Throws invalid_argument without a forward since the last backward or recipe
  /// change, shape_mismatch / non_finite_error before writing anything.
  void backward(matrix_view<const float> dy, matrix_view<float> dx) {
    nvfp4::detail::require(options_.parameters == parameter_storage::owned, errc::invalid_argument,
                           "linear::backward: this layer's parameters are external; pass where dW (and db) go: backward(dy, dx, gradients)");
    backward(dy, dx, linear_gradients{matrix_view<float>::row_major(weight_grad_.data(), out_, in_), bias_grad_});
  }
  /// backward writing dW and db into the caller's buffers (shapes checked before anything is written).
  void backward(matrix_view<const float> dy, matrix_view<float> dx, const linear_gradients& g) {
    detail::check_backward_call(in_, out_, options_.bias, saved_valid_, saved_rows_, dy, dx, g.weight, g.bias);
    const auto dxv = detail::scratch(dy.rows(), in_, dx_scratch_);
    linear_context c = context();
    c.gradient_seed = gradient_seed(steps_);
    std::visit([&](auto& s) {
      // no_quantization's float_gemm reads dY beside dW: a copy, as for its X.
      with_input(s, dy, "output gradient", g_scratch_, gb_scratch_, /*kept=*/!quantized(), [&](auto gv) {
        s.policy.bprop(c, gv, *s.saved_weight, s.saved_x, dxv, g.weight);
        if (options_.delayed_update == scaling_update::per_call) s.policy.update_backward_role();
        if (!g.bias.empty()) detail::sum_rows(gv, g.bias);
      });
    }, slots_);
    write_output(dxv, dx);
    saved_valid_ = false;
    ++steps_;
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
    std::visit([](auto& s) { s.policy.update_forward_roles(); }, slots_);
  }
  /// scaling_update::per_region: the end of a backward pass (TE updates the backward role once per
  /// backward). No effect for other recipes or per_call.
  void end_backward_region() {
    if (options_.delayed_update != scaling_update::per_region) return;
    std::visit([](auto& s) { s.policy.update_backward_role(); }, slots_);
  }

 private:
  /// A policy with what the layer keeps for it: the W kept by weight_cache::refresh, and the W and
  /// X copies a training forward saved for backward (the W shared with the kept one, not copied).
  template <class P>
  struct policy_slot {
    using operands = typename P::weight_operands;
    explicit policy_slot(P p) : policy(std::move(p)) {}
    P policy;
    std::shared_ptr<const operands> kept_weight, saved_weight;
    std::shared_ptr<operands> spare_weight;  // W's operands of calls that keep none, reused
    typename P::saved_input saved_x{};
  };
  template <class List>
  struct slots_of;
  template <class... Ps>
  struct slots_of<policy_list<Ps...>> {
    using type = std::variant<policy_slot<Ps>...>;
  };

  /// The layer's own W and b as a call's parameters (owned storage only).
  linear_parameters owned_parameters(const char* who) const {
    nvfp4::detail::require(options_.parameters == parameter_storage::owned, errc::invalid_argument,
                           std::string("linear::") + who + ": this layer's parameters are external; pass them: " + who + "(parameters, x, y)");
    return {matrix_view<const float>::row_major(weight_.data(), out_, in_), bias_};
  }
  linear_context context() const {
    return {.in_features = in_, .out_features = out_, .mode = options_.mode, .fp8_tensor_core = options_.fp8_tensor_core,
            .promotion_interval = options_.promotion_interval, .amax_rule = &options_.nvfp4_amax, .bias = params_.bias};
  }

  /// The checks of forward and infer that come before anything changes; then the call's parameters
  /// as the GEMMs take them. A quantized recipe's GEMM adds the bias in bf16: TE's linear.py casts
  /// it to bf16 when the activations are fp32 (cuBLAS has no FP8 GEMM with an fp32 bias), and a
  /// bf16 layer's bias is a bf16 parameter. No quantization adds it as given.
  void check_call(const linear_parameters& p, matrix_view<const float> x, matrix_view<float> y, const char* who) {
    detail::check_forward_call(in_, out_, options_.bias, p.weight, p.bias, x, y, who);
    params_ = p;
    if (p.bias.empty() || !quantized()) return;
    bias_scratch_.resize(p.bias.size());
    for (std::size_t i = 0; i < p.bias.size(); ++i) bias_scratch_[i] = bf16::from_float(p.bias[i]).to_float();
    params_.bias = bias_scratch_;
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
    if (cache == weight_cache::refresh) {
      w = std::make_shared<operands>();
    } else {
      if (!s.spare_weight || s.spare_weight.use_count() > 1) s.spare_weight = std::make_shared<operands>();
      w = s.spare_weight;
    }
    // Every policy copies or quantizes W at once: an fp32 layer's W is read in place.
    with_input(s, params_.weight, "weight", w_scratch_, wb_scratch_, /*kept=*/false, [&](auto wv) {
      s.policy.quantize_weight(context(), wv, /*columnwise=*/for_training || cache == weight_cache::refresh, record_amax, *w);
    });
    if (cache == weight_cache::refresh) {
      s.policy.pack_fprop_operand(context(), *w);
      s.kept_weight = w;
    }
    return w;
  }

  /// v in the layer's dtype, NaN / Inf refused unless the recipe runs them: a copy in `buffer`
  /// where the dtype rounds or the policy keeps a view of it past the call (`kept`), else v itself.
  matrix_view<const float> input_in_dtype(matrix_view<const float> v, const char* what, std::vector<float>& buffer, bool kept) const {
    return detail::in_place_or_copy(v, what, buffer, options_.dtype, runs_non_finite(), kept);
  }
  /// f(v in the layer's dtype): a bf16 copy for a bf16 layer whose policy reads bf16 tensors
  /// (reads_bf16: the same values in half the bytes) without an amax rule (which sees fp32
  /// values), else input_in_dtype's float view.
  template <class Slot, class F>
  void with_input(const Slot&, matrix_view<const float> v, const char* what, std::vector<float>& buffer, std::vector<bf16>& bf16_buffer,
                  bool kept, F&& f) const {
    using policy = decltype(Slot::policy);
    if constexpr (requires { policy::reads_bf16; }) {
      if (options_.dtype == high_precision::bf16 && !options_.nvfp4_amax) {
        f(detail::to_bf16(v, what, bf16_buffer, runs_non_finite()));
        return;
      }
    }
    f(input_in_dtype(v, what, buffer, kept));
  }
  /// Whether the current recipe quantizes (its GEMMs then add the bias in bf16, and it keeps no
  /// view of X).
  bool quantized() const {
    return std::visit([](const auto& s) { return std::decay_t<decltype(s.policy)>::quantized; }, slots_);
  }
  /// Whether the current recipe's policy takes NaN / Inf tensors as TE does (delayed scaling);
  /// every other recipe refuses them before anything is computed.
  bool runs_non_finite() const {
    return std::visit([](const auto& s) {
      using policy = std::decay_t<decltype(s.policy)>;
      if constexpr (requires { policy::runs_non_finite; }) return policy::runs_non_finite;
      else return false;
    }, slots_);
  }
  void write_output(matrix_view<const float> from, matrix_view<float> to) const { detail::write_in_dtype(from, to, options_.dtype); }

  index_t in_ = 0, out_ = 0;
  nvfp4::recipe recipe_;
  linear_options options_;
  std::vector<float> weight_, bias_, weight_grad_, bias_grad_;
  typename slots_of<recipe_policies>::type slots_{std::in_place_index<0>, no_quantization_policy(no_quantization{})};
  bool saved_valid_ = false;  // a training forward's copies wait for backward
  index_t saved_rows_ = 0;
  linear_parameters params_;  // the parameters of the call in progress (the bias as the GEMMs add it)
  std::uint64_t steps_ = 0;
  std::vector<float> bias_scratch_;  // the bias in bf16 for a quantized recipe's GEMMs
  std::vector<float> x_scratch_, w_scratch_, y_scratch_, g_scratch_, dx_scratch_, infer_x_scratch_, infer_y_scratch_;
  std::vector<bf16> xb_scratch_, wb_scratch_, gb_scratch_, infer_xb_scratch_;  // bf16 copies for policies that read them
};

}  // namespace nvfp4::nn
