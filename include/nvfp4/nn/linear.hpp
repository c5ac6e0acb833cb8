// nvfp4/nn/linear.hpp: an emulated TransformerEngine Linear layer, Y = X Wᵀ (+ b), forward and
// backward under any training recipe (recipes/recipe.hpp), with FP32 master weights. Every GEMM
// is composed of the library's public quantizers and GEMMs exactly as documented below, so a test
// (or a user) can rebuild each result bit for bit; results depend on the seed only, never on the
// number of threads.
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
// The three GEMMs per recipe (X [M, K], W [N, K], dY [M, N]; "(rowwise)" blocks along a row,
// "(columnwise)" is the transposed copy, blocks along the other dimension; see docs/recipes.md):
// - no_quantization: float_gemm on X, W, dY rounded to the dtype (fprop X·Wᵀ, dgrad dY·W, wgrad
//   dYᵀ·X).
// - nvfp4_block_scaling: quantize_activation(X), quantize_weight(W), quantize_gradient(dY), each
//   with options.nvfp4_amax, the gradients' recipe seed replaced by gradient_seed(step); fprop
//   nvfp4_gemm(X rowwise, W rowwise), dgrad nvfp4_gemm(dY rowwise, W columnwise), wgrad
//   nvfp4_gemm(dY columnwise, X columnwise).
// - float8_current_scaling: quantize_fp8_current per tensor (X, W in the forward format, dY in the
//   backward one); the columnwise copy is quantize_fp8_with_scale of the transpose with the same
//   scale; fp8_gemm with the recipe's split-accumulator flags.
// - delayed_scaling: quantize_fp8_with_scale with scaling_state(role)->scale(), the tensor's amax
//   recorded; the input and weight states update() after forward, grad_output after backward
//   (scaling_update::per_call), or once per region the caller ends (per_region, TE's autocast:
//   end_forward_region, end_backward_region).
// - float8_block_scaling: quantize_fp8_blockwise of each tensor and its transpose with the role's
//   block shape and scale options; fp8_gemm.
// - mxfp8_block_scaling: quantize_mxfp8_te of each tensor and its transpose; mxfp8_gemm.
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
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/gemm/float_gemm.hpp"
#include "nvfp4/gemm/fp8_packed_weight.hpp"
#include "nvfp4/recipes/nvfp4_packed_operand.hpp"
#include "nvfp4/recipes/recipe.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"
#include "nvfp4/scaling/mxfp8_quantize.hpp"

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
  mma8::tensor_core fp8_tensor_core = mma8::tensor_core::hopper;  ///< per-tensor and block FP8 GEMMs
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

/// An emulated TE Linear layer (see the header comment for what each recipe computes).
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
    nvfp4::detail::require(options.promotion_interval >= 0 && options.promotion_interval % mma8::step_k == 0, errc::invalid_argument,
                    "linear: promotion_interval must be 0 or a multiple of 32");
    if (options.parameters == parameter_storage::owned) {
      weight_.assign(static_cast<std::size_t>(weight_count), 0.0f);
      weight_grad_.assign(weight_.size(), 0.0f);
    }
    if (options.bias && options.parameters == parameter_storage::owned) {
      bias_.assign(static_cast<std::size_t>(out_), 0.0f);
      bias_grad_.assign(bias_.size(), 0.0f);
    }
    set_recipe(std::move(r));
  }

  index_t in_features() const { return in_; }
  index_t out_features() const { return out_; }
  const linear_options& options() const { return options_; }
  const nvfp4::recipe& current_recipe() const { return recipe_; }

  /// Switches the recipe (e.g. a precision cooldown). Throws invalid_argument / unsupported for a
  /// recipe TE rejects, before changing anything. Delayed scaling as TE (module/base.py
  /// set_meta_tensor): DelayedScaling -> DelayedScaling keeps each role's scale and history (cut
  /// or zero-padded to the new amax_history_len; format, margin and amax algorithm as first set,
  /// delayed_scaling_state::switch_to); from any other recipe the states start afresh (scale 1,
  /// zero history). A forward saved for backward is dropped: call set_recipe between steps.
  void set_recipe(nvfp4::recipe r) {
    validate(r);
    nvfp4::detail::require(!options_.nvfp4_amax || std::holds_alternative<nvfp4_block_scaling>(r) ||
                               std::holds_alternative<no_quantization>(r),
                           errc::unsupported, "linear: linear_options::nvfp4_amax applies to NVFP4 recipes only; this layer's recipe is FP8");
    const bool keep_states = std::holds_alternative<delayed_scaling>(recipe_) && std::holds_alternative<delayed_scaling>(r);
    recipe_ = std::move(r);
    if (const auto* d = std::get_if<delayed_scaling>(&recipe_)) {
      for (nvfp4::tensor_role role : {nvfp4::tensor_role::input, nvfp4::tensor_role::weight, nvfp4::tensor_role::grad_output}) {
        delayed_scaling_state& state = states_[static_cast<std::size_t>(role)];
        if (keep_states) {
          state.switch_to(d->amax_history_len, d->unfused_update);
        } else {
          state = delayed_scaling_state(*d, role_format(d->fp8_format, role));
        }
      }
    }
    saved_ = {};
    kept_weight_.reset();
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
    return std::holds_alternative<delayed_scaling>(recipe_) ? &states_[static_cast<std::size_t>(role)] : nullptr;
  }
  const delayed_scaling_state* scaling_state(nvfp4::tensor_role role) const {
    return std::holds_alternative<delayed_scaling>(recipe_) ? &states_[static_cast<std::size_t>(role)] : nullptr;
  }

  /// Y = X Wᵀ (+ b), X [M, in_features], Y [M, out_features]; keeps what backward needs and, under
  /// delayed scaling, records the amaxes and steps the input and weight states. Throws
  /// shape_mismatch / null_pointer / non_finite_error (NaN or Inf in X or W) before writing Y;
  /// under delayed scaling the refused tensor's amax is recorded first, as TE's quantizer records
  /// it (NaN ignored, Inf kept: the scale then holds for up to amax_history_len updates).
  void forward(matrix_view<const float> x, matrix_view<float> y, weight_cache cache = weight_cache::off) {
    forward(owned_parameters("forward"), x, y, cache);
  }
  /// forward on the caller's parameters (read in place during the call, never kept). Throws
  /// shape_mismatch / null_pointer for parameters of another shape.
  void forward(const linear_parameters& p, matrix_view<const float> x, matrix_view<float> y, weight_cache cache = weight_cache::off) {
    check_forward(x, y, "linear::forward", cache);
    check_parameters(p, "linear::forward");
    params_ = gemm_parameters(p);
    saved_.valid = false;
    const auto xv = to_dtype(x, "input", x_scratch_, nvfp4::tensor_role::input);  // X checked before W's amax is recorded
    std::shared_ptr<const weight_operands> w = weight_for(cache, /*for_training=*/true);
    const auto rv = scratch(x.rows(), out_, y_scratch_);
    std::visit([&](const auto& r) { fprop(r, xv, *w, rv, /*training=*/true, /*record=*/true); }, recipe_);
    if (std::holds_alternative<delayed_scaling>(recipe_) && options_.delayed_update == scaling_update::per_call) {
      states_[0].update();
      states_[1].update();  // after a reuse nothing was recorded: TE's kernel then leaves it as it was
    }
    write_output(rv, y);
    saved_.weight = std::move(w);
    saved_.rows = x.rows();
    saved_.valid = true;
  }
  std::vector<float> forward(matrix_view<const float> x, weight_cache cache = weight_cache::off) {
    std::vector<float> y(output_size(x.rows(), out_));
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
    check_forward(x, y, "linear::infer", cache);
    check_parameters(p, "linear::infer");
    params_ = gemm_parameters(p);
    const bool record = amaxes == eval_amaxes::record_as_te;
    const auto xv = record ? to_dtype(x, "input", infer_x_scratch_, nvfp4::tensor_role::input) : to_dtype(x, "input", infer_x_scratch_);
    const std::shared_ptr<const weight_operands> w = weight_for(cache, /*for_training=*/false, record);
    const auto rv = scratch(x.rows(), out_, infer_y_scratch_);
    std::visit([&](const auto& r) { fprop(r, xv, *w, rv, /*training=*/false, record); }, recipe_);
    write_output(rv, y);
  }
  std::vector<float> infer(matrix_view<const float> x, weight_cache cache = weight_cache::off) {
    std::vector<float> y(output_size(x.rows(), out_));
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
    dy.validate("linear output gradient");
    dx.validate("linear input gradient");
    nvfp4::detail::require(saved_.valid, errc::invalid_argument, "linear::backward: no forward to differentiate (call forward first)");
    nvfp4::detail::require(dy.rows() == saved_.rows && dy.cols() == out_, errc::shape_mismatch,
                    "linear::backward: dY is " + shape(dy.rows(), dy.cols()) + ", expected " + shape(saved_.rows, out_));
    nvfp4::detail::require(dx.rows() == saved_.rows && dx.cols() == in_, errc::shape_mismatch,
                    "linear::backward: dX is " + shape(dx.rows(), dx.cols()) + ", expected " + shape(saved_.rows, in_));
    g.weight.validate("linear weight gradient");
    nvfp4::detail::require(g.weight.rows() == out_ && g.weight.cols() == in_, errc::shape_mismatch,
                           "linear::backward: dW is " + shape(g.weight.rows(), g.weight.cols()) + ", expected " + shape(out_, in_));
    nvfp4::detail::require(g.bias.size() == (options_.bias ? static_cast<std::size_t>(out_) : 0), errc::shape_mismatch,
                           "linear::backward: db has " + std::to_string(g.bias.size()) + " values, expected " +
                               std::to_string(options_.bias ? out_ : 0));
    const auto gv = to_dtype(dy, "output gradient", g_scratch_, nvfp4::tensor_role::grad_output);
    const auto dxv = scratch(dy.rows(), in_, dx_scratch_);
    const auto dwv = g.weight;
    std::visit([&](const auto& r) { bprop(r, gv, dxv, dwv); }, recipe_);
    if (!g.bias.empty()) {
      std::fill(g.bias.begin(), g.bias.end(), 0.0f);
      for (index_t i = 0; i < gv.rows(); ++i)
        for (index_t j = 0; j < out_; ++j) g.bias[static_cast<std::size_t>(j)] += gv(i, j);
    }
    write_output(dxv, dx);
    saved_.valid = false;
    ++steps_;
  }
  std::vector<float> backward(matrix_view<const float> dy) {
    std::vector<float> dx(output_size(dy.rows(), in_));
    backward(dy, matrix_view<float>::row_major(dx.data(), dy.rows(), in_));
    return dx;
  }

  /// scaling_update::per_region: the end of an outermost forward region (TE: the outermost
  /// fp8_autocast's exit, quantization.py). With grad enabled the input and weight states update
  /// once from the amaxes of every call in the region (max-merged); without, nothing updates and
  /// the recorded amaxes wait for the next update. No effect for other recipes or per_call.
  void end_forward_region(bool grad_enabled) {
    if (!grad_enabled || options_.delayed_update != scaling_update::per_region || !std::holds_alternative<delayed_scaling>(recipe_)) return;
    states_[static_cast<std::size_t>(nvfp4::tensor_role::input)].update();
    states_[static_cast<std::size_t>(nvfp4::tensor_role::weight)].update();
  }
  /// scaling_update::per_region: the end of a backward pass (TE updates the backward role once per
  /// backward). No effect for other recipes or per_call.
  void end_backward_region() {
    if (options_.delayed_update != scaling_update::per_region || !std::holds_alternative<delayed_scaling>(recipe_)) return;
    states_[static_cast<std::size_t>(nvfp4::tensor_role::grad_output)].update();
  }

 private:
  /// W as one recipe's GEMMs read it: rowwise for fprop, columnwise for dgrad (made when a
  /// backward may follow or the weight is kept). Shared between the kept weight and a forward
  /// saved for backward, so neither copies it.
  struct weight_operands {
    std::vector<float> values;                  // no quantization: W in the dtype, row-major [N, K]
    bool values_transposed = false;             // values hold Wᵀ [K, N] instead (a kept W, packed)
    nvfp4_operand nvfp4_row, nvfp4_col;
    fp8_tensor fp8_row, fp8_col;                // per-tensor and block FP8
    quantized_tensor<mxfp8> mx_row, mx_col;     // MXFP8 (weights are E4M3)
    // A kept W's fprop operand packed once for the GEMM kernels (weight_cache::refresh); its
    // nvfp4_row / fp8_row / mx_row is then moved in here.
    nvfp4_packed_operand nvfp4_row_packed;
    fp8_packed_weight<fp8_tensor> fp8_row_packed;
    fp8_packed_weight<quantized_tensor<mxfp8>> mx_row_packed;
  };

  /// What backward needs from forward, per recipe family.
  struct saved_state {
    bool valid = false;
    index_t rows = 0;
    std::shared_ptr<const weight_operands> weight;  // the W of that forward
    nvfp4_operand x_nvfp4;                          // NVFP4: X's columnwise copy
    fp8_tensor x_fp8;                               // FP8 recipes: X's columnwise copy
    quantized_tensor<mxfp8> x_mx;                   // MXFP8: X's columnwise copy
  };

  static std::string shape(index_t r, index_t c) { return std::to_string(r) + "x" + std::to_string(c); }
  /// rows * cols for a result buffer, refused (invalid_argument) above max_element_count.
  static std::size_t output_size(index_t rows, index_t cols) {
    return static_cast<std::size_t>(nvfp4::detail::checked_element_count(std::max<index_t>(rows, 0), cols, errc::invalid_argument, "linear output"));
  }

  /// The layer's own W and b as a call's parameters (owned storage only).
  linear_parameters owned_parameters(const char* who) const {
    nvfp4::detail::require(options_.parameters == parameter_storage::owned, errc::invalid_argument,
                           std::string("linear::") + who + ": this layer's parameters are external; pass them: " + who + "(parameters, x, y)");
    return {matrix_view<const float>::row_major(weight_.data(), out_, in_), bias_};
  }
  /// The parameters as the GEMMs take them. A quantized recipe's GEMM adds the bias in bf16: TE's
  /// linear.py casts it to bf16 when the activations are fp32 (cuBLAS has no FP8 GEMM with an fp32
  /// bias), and a bf16 layer's bias is a bf16 parameter. No quantization adds it as given.
  linear_parameters gemm_parameters(const linear_parameters& p) {
    if (p.bias.empty() || std::holds_alternative<no_quantization>(recipe_)) return p;
    bias_scratch_.resize(p.bias.size());
    for (std::size_t i = 0; i < p.bias.size(); ++i) bias_scratch_[i] = bf16::from_float(p.bias[i]).to_float();
    return {p.weight, bias_scratch_};
  }
  void check_parameters(const linear_parameters& p, const char* who) const {
    p.weight.validate("linear weight");
    nvfp4::detail::require(p.weight.rows() == out_ && p.weight.cols() == in_, errc::shape_mismatch,
                           std::string(who) + ": W is " + shape(p.weight.rows(), p.weight.cols()) + ", expected " + shape(out_, in_));
    const std::size_t expected = options_.bias ? static_cast<std::size_t>(out_) : 0;
    nvfp4::detail::require(p.bias.size() == expected, errc::shape_mismatch,
                           std::string(who) + ": b has " + std::to_string(p.bias.size()) + " values, expected " + std::to_string(expected) +
                               (options_.bias ? "" : " (the layer has no bias)"));
    nvfp4::detail::require(p.bias.empty() || p.bias.data() != nullptr, errc::null_pointer, std::string(who) + ": b is a null pointer");
  }

  /// The checks of forward and infer that come before anything changes.
  void check_forward(matrix_view<const float> x, matrix_view<float> y, const char* who, weight_cache /*cache*/) const {
    x.validate("linear input");
    y.validate("linear output");
    nvfp4::detail::require(x.cols() == in_, errc::shape_mismatch,
                           std::string(who) + ": X has " + std::to_string(x.cols()) + " columns, the layer " + std::to_string(in_) + " inputs");
    nvfp4::detail::require(y.rows() == x.rows() && y.cols() == out_, errc::shape_mismatch,
                           std::string(who) + ": Y is " + shape(y.rows(), y.cols()) + ", expected " + shape(x.rows(), out_));
  }

  /// The W a forward runs on: the kept one (reuse), or W quantized now (kept too for refresh).
  /// A training forward records W's delayed-scaling amax unless it reuses.
  std::shared_ptr<const weight_operands> weight_for(weight_cache cache, bool for_training, bool record = true) {
    if (cache == weight_cache::reuse) {
      if (kept_weight_) return kept_weight_;
      cache = weight_cache::refresh;  // a miss: quantize and keep
    }
    const bool record_amax = for_training || record;
    const auto wv = record_amax ? to_dtype(params_.weight, "weight", w_scratch_, nvfp4::tensor_role::weight)
                                : to_dtype(params_.weight, "weight", w_scratch_);
    auto w = std::make_shared<weight_operands>();
    const bool columnwise = for_training || cache == weight_cache::refresh;
    std::visit([&](const auto& r) { quantize_weight_operands(r, wv, columnwise, record_amax, *w); }, recipe_);
    if (cache == weight_cache::refresh) {
      // A weight kept for several products is packed once (what every unpacked GEMM call redoes);
      // the products give the same bits.
      std::visit([&](const auto& r) { pack_fprop_operand(r, *w); }, recipe_);
      kept_weight_ = w;
    }
    return w;
  }

  /// A row-major [rows, cols] view of `buffer`, grown as needed (layer buffers are reused from
  /// step to step: touching fresh memory costs more than the copies).
  static matrix_view<float> scratch(index_t rows, index_t cols, std::vector<float>& buffer) {
    const auto size = output_size(rows, cols);
    if (buffer.size() < size) buffer.resize(size);
    return matrix_view<float>::row_major(buffer.data(), rows, cols);
  }
  /// A row-major copy of v in the layer's dtype, in `buffer`; rejects NaN / Inf as the quantizers do.
  matrix_view<const float> to_dtype(matrix_view<const float> v, const char* what, std::vector<float>& buffer) const {
    const matrix_view<float> out = scratch(v.rows(), v.cols(), buffer);
    for (index_t r = 0; r < v.rows(); ++r)
      for (index_t c = 0; c < v.cols(); ++c) {
        const float value = v(r, c);
        if (!std::isfinite(value)) throw non_finite_error(what, r, c, value);
        out(r, c) = options_.dtype == high_precision::bf16 ? bf16::from_float(value).to_float() : value;
      }
    return out;
  }
  /// to_dtype for a tensor whose delayed-scaling amax this call records: when it is refused (NaN /
  /// Inf), its amax is recorded first as TE's quantizer computes it (|value| in the dtype, max
  /// that ignores NaN, so an Inf is kept), then the error goes on.
  matrix_view<const float> to_dtype(matrix_view<const float> v, const char* what, std::vector<float>& buffer, nvfp4::tensor_role role) {
    try {
      return to_dtype(v, what, buffer);
    } catch (const non_finite_error&) {
      if (std::holds_alternative<delayed_scaling>(recipe_)) {
        float amax = 0.0f;
        for (index_t r = 0; r < v.rows(); ++r)
          for (index_t c = 0; c < v.cols(); ++c) {
            const float value = options_.dtype == high_precision::bf16 ? bf16::from_float(v(r, c)).to_float() : v(r, c);
            amax = std::fmax(amax, std::fabs(value));
          }
        states_[static_cast<std::size_t>(role)].record(amax);
      }
      throw;
    }
  }
  void write_output(matrix_view<const float> from, matrix_view<float> to) const {
    for (index_t r = 0; r < from.rows(); ++r)
      for (index_t c = 0; c < from.cols(); ++c)
        to(r, c) = options_.dtype == high_precision::bf16 ? bf16::from_float(from(r, c)).to_float() : from(r, c);
  }
  std::span<const float> bias_span() const { return params_.bias; }
  fp8_gemm_options fp8_options(const mm_params& params, std::span<const float> bias = {}) const {
    return {.core = options_.fp8_tensor_core, .mode = options_.mode,
            .promotion_interval = params.use_split_accumulator ? options_.promotion_interval : 0, .bias = bias};
  }
  /// gemm(B) on W's rowwise copy: its packed form where the weight was kept, else the copy itself.
  template <class Packed, class Plain, class Gemm>
  static void on_fprop_operand(const Packed& packed, const Plain& plain, Gemm&& gemm) {
    if (packed) {
      gemm(packed);
    } else {
      gemm(plain);
    }
  }
  /// fprop's FP8 GEMM on W's rowwise copy, packed or not.
  void fp8_fprop_gemm(const fp8_tensor& x8, const weight_operands& w, matrix_view<float> y, const mm_params& params) const {
    on_fprop_operand(w.fp8_row_packed, w.fp8_row, [&](const auto& b) { fp8_gemm(x8, b, y, fp8_options(params, bias_span())); });
  }
  void add_bias(matrix_view<float> y) const {
    const std::span<const float> bias = params_.bias;
    if (bias.empty()) return;
    for (index_t i = 0; i < y.rows(); ++i)
      for (index_t j = 0; j < y.cols(); ++j) y(i, j) += bias[static_cast<std::size_t>(j)];
  }

  // Per recipe family: quantize_weight_operands (W's copies), pack_fprop_operand (a kept W's
  // fprop operand, packed), fprop (X's copies and the fprop GEMM; X's columnwise copy only when
  // `training`), bprop (dY's copies, dgrad and wgrad).

  // ---- no quantization ----
  void quantize_weight_operands(const no_quantization&, matrix_view<const float> w, bool, bool, weight_operands& out) const {
    out.values.assign(w.data(), w.data() + w.rows() * w.cols());  // w is the row-major dtype copy
  }
  /// A kept W is stored as Wᵀ: for decode-sized X float_gemm reads it in place as fprop's B
  /// (K-major) instead of packing W on every call. The roles swap for dgrad, whose B (Wᵀ, row-major
  /// then) is packed where W's transposed view was read in place.
  void pack_fprop_operand(const no_quantization&, weight_operands& w) const {
    std::vector<float> transposed(w.values.size());
    nvfp4::detail::fast_block_kernels::transpose_panel(w.values.data(), in_, in_, out_, transposed.data(), out_);
    w.values = std::move(transposed);
    w.values_transposed = true;
  }
  /// W [N, K] (fprop's B) and Wᵀ [K, N] (dgrad's B) as views of the stored values.
  matrix_view<const float> weight_rows(const weight_operands& w) const {
    return w.values_transposed ? matrix_view<const float>(w.values.data(), out_, in_, 1, out_)
                               : matrix_view<const float>::row_major(w.values.data(), out_, in_);
  }
  matrix_view<const float> weight_columns(const weight_operands& w) const { return weight_rows(w).transposed(); }
  void fprop(const no_quantization&, matrix_view<const float> x, const weight_operands& w, matrix_view<float> y, bool, bool) {
    float_gemm(x, weight_rows(w), {}, y);
    add_bias(y);  // X in the dtype stays in its scratch buffer for backward
  }
  void bprop(const no_quantization&, matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) {
    const auto x = matrix_view<const float>::row_major(x_scratch_.data(), saved_.rows, in_);
    float_gemm(dy, weight_columns(*saved_.weight), {}, dx);
    float_gemm(dy.transposed(), x.transposed(), {}, dw);
  }

  // ---- NVFP4 ----
  void quantize_weight_operands(const nvfp4_block_scaling& r, matrix_view<const float> w, bool columnwise, bool, weight_operands& out) const {
    if (columnwise) {
      operand_pair ws = quantize_weight(w, r, options_.nvfp4_amax);
      out.nvfp4_row = std::move(ws.rowwise);
      out.nvfp4_col = std::move(ws.columnwise);
    } else {
      out.nvfp4_row = quantize_weight_rowwise(w, r, options_.nvfp4_amax);
    }
  }
  static void pack_fprop_operand(const nvfp4_block_scaling&, weight_operands& w) {
    w.nvfp4_row_packed = nvfp4_packed_operand(std::move(w.nvfp4_row));
  }
  void fprop(const nvfp4_block_scaling& r, matrix_view<const float> x, const weight_operands& w, matrix_view<float> y, bool training, bool) {
    const auto gemm = [&](const nvfp4_operand& x_row) {
      on_fprop_operand(w.nvfp4_row_packed, w.nvfp4_row, [&](const auto& b) { nvfp4_gemm(x_row, b, y, options_.mode, bias_span()); });
    };
    if (training) {
      operand_pair xs = quantize_activation(x, r, options_.nvfp4_amax);
      gemm(xs.rowwise);
      saved_.x_nvfp4 = std::move(xs.columnwise);
    } else {
      gemm(quantize_activation_rowwise(x, r, options_.nvfp4_amax));
    }
  }
  void bprop(const nvfp4_block_scaling& r, matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) {
    nvfp4_block_scaling step_recipe = r;
    step_recipe.seed = gradient_seed(steps_);
    const operand_pair gs = quantize_gradient(dy, step_recipe, options_.nvfp4_amax);
    nvfp4_gemm(gs.rowwise, saved_.weight->nvfp4_col, dx, options_.mode);
    nvfp4_gemm(gs.columnwise, saved_.x_nvfp4, dw, options_.mode);
  }

  // ---- FP8 current scaling ----
  void quantize_weight_operands(const float8_current_scaling& r, matrix_view<const float> w, bool columnwise, bool,
                                weight_operands& out) const {
    const fp8_format f = forward_format(r.fp8_format);
    out.fp8_row = quantize_fp8_current(w, f, {.power_2_scale = r.use_power_2_scales});
    if (columnwise) out.fp8_col = quantize_fp8_with_scale(w.transposed(), f, out.fp8_row.scale(), quantized_axis::columnwise);
  }
  /// Per-tensor and block FP8 (current, delayed, block scaling).
  static void pack_fp8_fprop_operand(weight_operands& w) { w.fp8_row_packed = fp8_packed_weight<fp8_tensor>(std::move(w.fp8_row)); }
  static void pack_fprop_operand(const float8_current_scaling&, weight_operands& w) { pack_fp8_fprop_operand(w); }
  void fprop(const float8_current_scaling& r, matrix_view<const float> x, const weight_operands& w, matrix_view<float> y, bool training, bool) {
    const fp8_format f = forward_format(r.fp8_format);
    const fp8_tensor x8 = quantize_fp8_current(x, f, {.power_2_scale = r.use_power_2_scales});
    fp8_fprop_gemm(x8, w, y, r.fp8_gemm_fprop);
    if (training) saved_.x_fp8 = quantize_fp8_with_scale(x.transposed(), f, x8.scale(), quantized_axis::columnwise);
  }
  void bprop(const float8_current_scaling& r, matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) {
    const fp8_format f = backward_format(r.fp8_format);
    const fp8_tensor g8 = quantize_fp8_current(dy, f, {.power_2_scale = r.use_power_2_scales});
    const fp8_tensor g8t = quantize_fp8_with_scale(dy.transposed(), f, g8.scale(), quantized_axis::columnwise);
    fp8_gemm(g8, saved_.weight->fp8_col, dx, fp8_options(r.fp8_gemm_dgrad));
    fp8_gemm(g8t, saved_.x_fp8, dw, fp8_options(r.fp8_gemm_wgrad));
  }

  // ---- FP8 delayed scaling (per_call: forward() steps the input and weight states after fprop) ----
  void quantize_weight_operands(const delayed_scaling&, matrix_view<const float> w, bool columnwise, bool record, weight_operands& out) {
    delayed_scaling_state& state = states_[static_cast<std::size_t>(nvfp4::tensor_role::weight)];
    out.fp8_row = quantize_fp8_with_scale(w, state.format(), state.scale());
    if (record) state.record(out.fp8_row.amax());
    if (columnwise) out.fp8_col = quantize_fp8_with_scale(w.transposed(), state.format(), state.scale(), quantized_axis::columnwise);
  }
  static void pack_fprop_operand(const delayed_scaling&, weight_operands& w) { pack_fp8_fprop_operand(w); }
  void fprop(const delayed_scaling& r, matrix_view<const float> x, const weight_operands& w, matrix_view<float> y, bool training, bool record) {
    delayed_scaling_state& state = states_[static_cast<std::size_t>(nvfp4::tensor_role::input)];
    const fp8_tensor x8 = quantize_fp8_with_scale(x, state.format(), state.scale());
    fp8_fprop_gemm(x8, w, y, r.fp8_gemm_fprop);
    if (record) state.record(x8.amax());
    if (!training) return;
    saved_.x_fp8 = quantize_fp8_with_scale(x.transposed(), x8.format(), state.scale(), quantized_axis::columnwise);
  }
  void bprop(const delayed_scaling& r, matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) {
    delayed_scaling_state& state = states_[static_cast<std::size_t>(nvfp4::tensor_role::grad_output)];
    const float g_scale = state.scale();
    const fp8_tensor g8 = quantize_fp8_with_scale(dy, state.format(), g_scale);
    state.record(g8.amax());
    const fp8_tensor g8t = quantize_fp8_with_scale(dy.transposed(), g8.format(), g_scale, quantized_axis::columnwise);
    fp8_gemm(g8, saved_.weight->fp8_col, dx, fp8_options(r.fp8_gemm_dgrad));
    fp8_gemm(g8t, saved_.x_fp8, dw, fp8_options(r.fp8_gemm_wgrad));
    if (options_.delayed_update == scaling_update::per_call) state.update();
  }

  // ---- FP8 block scaling ----
  static fp8_tensor block_copy(const float8_block_scaling& r, nvfp4::tensor_role role, matrix_view<const float> v, bool columnwise) {
    const fp8_format f = role_format(r.fp8_format, role);
    return columnwise ? quantize_fp8_blockwise(v.transposed(), f, r.block_shape(role), r.scale_options(role), quantized_axis::columnwise)
                      : quantize_fp8_blockwise(v, f, r.block_shape(role), r.scale_options(role));
  }
  void quantize_weight_operands(const float8_block_scaling& r, matrix_view<const float> w, bool columnwise, bool,
                                weight_operands& out) const {
    out.fp8_row = block_copy(r, nvfp4::tensor_role::weight, w, false);
    if (columnwise) out.fp8_col = block_copy(r, nvfp4::tensor_role::weight, w, true);
  }
  static void pack_fprop_operand(const float8_block_scaling&, weight_operands& w) { pack_fp8_fprop_operand(w); }
  void fprop(const float8_block_scaling& r, matrix_view<const float> x, const weight_operands& w, matrix_view<float> y, bool training, bool) {
    fp8_fprop_gemm(block_copy(r, nvfp4::tensor_role::input, x, false), w, y, r.fp8_gemm_fprop);
    if (training) saved_.x_fp8 = block_copy(r, nvfp4::tensor_role::input, x, true);
  }
  void bprop(const float8_block_scaling& r, matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) {
    fp8_gemm(block_copy(r, nvfp4::tensor_role::grad_output, dy, false), saved_.weight->fp8_col, dx, fp8_options(r.fp8_gemm_dgrad));
    fp8_gemm(block_copy(r, nvfp4::tensor_role::grad_output, dy, true), saved_.x_fp8, dw, fp8_options(r.fp8_gemm_wgrad));
  }

  // ---- MXFP8 (forward tensors are E4M3 for both allowed formats, E4M3 and HYBRID) ----
  fp8_gemm_options mx_options(std::span<const float> bias = {}) const {
    return {.core = mma8::tensor_core::blackwell, .mode = options_.mode, .promotion_interval = 0, .bias = bias};
  }
  void quantize_weight_operands(const mxfp8_block_scaling&, matrix_view<const float> w, bool columnwise, bool, weight_operands& out) const {
    out.mx_row = quantize_mxfp8_te<mxfp8>(w);
    if (columnwise) out.mx_col = quantize_mxfp8_te<mxfp8>(w.transposed(), quantized_axis::columnwise);
  }
  static void pack_fprop_operand(const mxfp8_block_scaling&, weight_operands& w) {
    w.mx_row_packed = fp8_packed_weight<quantized_tensor<mxfp8>>(std::move(w.mx_row));
  }
  void fprop(const mxfp8_block_scaling&, matrix_view<const float> x, const weight_operands& w, matrix_view<float> y, bool training, bool) {
    const auto x8 = quantize_mxfp8_te<mxfp8>(x);
    on_fprop_operand(w.mx_row_packed, w.mx_row, [&](const auto& b) { mxfp8_gemm(x8, b, y, mx_options(bias_span())); });
    if (training) saved_.x_mx = quantize_mxfp8_te<mxfp8>(x.transposed(), quantized_axis::columnwise);
  }
  template <class Format>
  void mx_bprop(matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) {
    const auto g8 = quantize_mxfp8_te<Format>(dy);
    const auto g8t = quantize_mxfp8_te<Format>(dy.transposed(), quantized_axis::columnwise);
    mxfp8_gemm(g8, saved_.weight->mx_col, dx, mx_options());
    mxfp8_gemm(g8t, saved_.x_mx, dw, mx_options());
  }
  void bprop(const mxfp8_block_scaling& r, matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) {
    if (backward_format(r.fp8_format) == fp8_format::e4m3) {
      mx_bprop<mxfp8>(dy, dx, dw);
    } else {
      mx_bprop<mxfp8_e5m2>(dy, dx, dw);
    }
  }

  index_t in_ = 0, out_ = 0;
  nvfp4::recipe recipe_;
  linear_options options_;
  std::vector<float> weight_, bias_, weight_grad_, bias_grad_;
  std::array<delayed_scaling_state, 3> states_{};
  saved_state saved_;
  std::shared_ptr<const weight_operands> kept_weight_;  // weight_cache::refresh's
  linear_parameters params_;                            // the parameters of the call in progress
  std::uint64_t steps_ = 0;
  std::vector<float> bias_scratch_;  // the bias in bf16 for a quantized recipe's GEMMs
  std::vector<float> x_scratch_, w_scratch_, y_scratch_, g_scratch_, dx_scratch_, infer_x_scratch_, infer_y_scratch_;
};

}  // namespace nvfp4::nn
