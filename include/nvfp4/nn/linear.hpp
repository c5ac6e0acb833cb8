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
// - nvfp4_block_scaling: quantize_activation(X), quantize_weight(W), quantize_gradient(dY) with
//   the recipe's seed replaced by gradient_seed(step); fprop nvfp4_gemm(X rowwise, W rowwise),
//   dgrad nvfp4_gemm(dY rowwise, W columnwise), wgrad nvfp4_gemm(dY columnwise, X columnwise).
// - float8_current_scaling: quantize_fp8_current per tensor (X, W in the forward format, dY in the
//   backward one); the columnwise copy is quantize_fp8_with_scale of the transpose with the same
//   scale; fp8_gemm with the recipe's split-accumulator flags.
// - delayed_scaling: quantize_fp8_with_scale with scaling_state(role)->scale(), the tensor's amax
//   recorded; the input and weight states update() after forward, grad_output after backward.
// - float8_block_scaling: quantize_fp8_blockwise of each tensor and its transpose with the role's
//   block shape and scale options; fp8_gemm.
// - mxfp8_block_scaling: quantize_mxfp8_te of each tensor and its transpose; mxfp8_gemm.
// Y and dX are written in the layer's dtype (bf16: rounded once from the fp32 epilogue, bias
// included); dW and db are fp32 (TE's main_grad); db is the fp32 sum of dY's rows in row order.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "nvfp4/gemm/float_gemm.hpp"
#include "nvfp4/gemm/fp8_gemm.hpp"
#include "nvfp4/recipes/recipe.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"
#include "nvfp4/scaling/mxfp8_quantize.hpp"

namespace nvfp4::nn {

/// How a linear layer computes, beside its recipe.
struct linear_options {
  bool bias = false;                                    ///< a bias b [out_features], fp32
  high_precision dtype = high_precision::fp32;          ///< X, W, dY rounded to it; Y, dX written in it
  gemm_mode mode = gemm_mode::exact;                    ///< quantized GEMMs: tensor-core exact, or relaxed
  mma8::tensor_core fp8_tensor_core = mma8::tensor_core::hopper;  ///< per-tensor and block FP8 GEMMs
  index_t promotion_interval = 128;                     ///< FP8 split accumulator: elements of K per promotion
  std::uint64_t seed = 0;                               ///< the only source of randomness (NVFP4 SR)
};

/// An emulated TE Linear layer (see the header comment for what each recipe computes).
class linear {
 public:
  /// A layer with zero weights (set them through weight()). Throws invalid_argument for negative
  /// sizes or a recipe TE rejects (nvfp4::validate).
  linear(index_t in_features, index_t out_features, recipe r = no_quantization{}, linear_options options = {})
      : in_(in_features), out_(out_features), options_(options) {
    nvfp4::detail::require(in_features >= 0 && out_features >= 0, errc::invalid_argument, "linear: negative feature count");
    nvfp4::detail::require(options.promotion_interval >= 0 && options.promotion_interval % mma8::step_k == 0, errc::invalid_argument,
                    "linear: promotion_interval must be 0 or a multiple of 32");
    weight_.assign(static_cast<std::size_t>(in_ * out_), 0.0f);
    weight_grad_.assign(weight_.size(), 0.0f);
    if (options.bias) {
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
  /// recipe TE rejects, before changing anything. Delayed-scaling states start afresh (scale 1,
  /// empty history) whenever a delayed_scaling recipe is set. A forward saved for backward is
  /// dropped: call set_recipe between steps.
  void set_recipe(nvfp4::recipe r) {
    validate(r);
    recipe_ = std::move(r);
    if (const auto* d = std::get_if<delayed_scaling>(&recipe_)) {
      for (nvfp4::tensor_role role : {nvfp4::tensor_role::input, nvfp4::tensor_role::weight, nvfp4::tensor_role::grad_output})
        states_[static_cast<std::size_t>(role)] = delayed_scaling_state(*d, role_format(d->fp8_format, role));
    }
    saved_ = {};
  }

  /// The FP32 master weight W [out_features, in_features], row-major.
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

  /// Y = X Wᵀ (+ b), X [M, in_features], Y [M, out_features]; keeps what backward needs. Throws
  /// shape_mismatch / null_pointer / non_finite_error (NaN or Inf in X or W) before writing Y.
  void forward(matrix_view<const float> x, matrix_view<float> y) {
    x.validate("linear input");
    y.validate("linear output");
    nvfp4::detail::require(x.cols() == in_, errc::shape_mismatch,
                    "linear::forward: X has " + std::to_string(x.cols()) + " columns, the layer " + std::to_string(in_) + " inputs");
    nvfp4::detail::require(y.rows() == x.rows() && y.cols() == out_, errc::shape_mismatch,
                    "linear::forward: Y is " + shape(y.rows(), y.cols()) + ", expected " + shape(x.rows(), out_));
    saved_.valid = false;
    const auto xv = to_dtype(x, "input", x_scratch_);
    const auto wv = to_dtype(weight_view(), "weight", w_scratch_);
    const auto rv = scratch(x.rows(), out_, y_scratch_);
    std::visit([&](const auto& r) { fprop(r, xv, wv, rv); }, recipe_);
    write_output(rv, y);
    saved_.rows = x.rows();
    saved_.valid = true;
  }
  std::vector<float> forward(matrix_view<const float> x) {
    std::vector<float> y(static_cast<std::size_t>(std::max<index_t>(x.rows(), 0) * out_));
    forward(x, matrix_view<float>::row_major(y.data(), x.rows(), out_));
    return y;
  }

  /// dX = dY W, dW = dYᵀ X, db = Σ_rows dY for the last forward's X; dY [M, out_features], dX [M,
  /// in_features]. Throws invalid_argument without a forward since the last backward or recipe
  /// change, shape_mismatch / non_finite_error before writing anything.
  void backward(matrix_view<const float> dy, matrix_view<float> dx) {
    dy.validate("linear output gradient");
    dx.validate("linear input gradient");
    nvfp4::detail::require(saved_.valid, errc::invalid_argument, "linear::backward: no forward to differentiate (call forward first)");
    nvfp4::detail::require(dy.rows() == saved_.rows && dy.cols() == out_, errc::shape_mismatch,
                    "linear::backward: dY is " + shape(dy.rows(), dy.cols()) + ", expected " + shape(saved_.rows, out_));
    nvfp4::detail::require(dx.rows() == saved_.rows && dx.cols() == in_, errc::shape_mismatch,
                    "linear::backward: dX is " + shape(dx.rows(), dx.cols()) + ", expected " + shape(saved_.rows, in_));
    const auto gv = to_dtype(dy, "output gradient", g_scratch_);
    const auto dxv = scratch(dy.rows(), in_, dx_scratch_);
    const auto dwv = matrix_view<float>::row_major(weight_grad_.data(), out_, in_);
    std::visit([&](const auto& r) { bprop(r, gv, dxv, dwv); }, recipe_);
    if (!bias_grad_.empty()) {
      std::fill(bias_grad_.begin(), bias_grad_.end(), 0.0f);
      for (index_t i = 0; i < gv.rows(); ++i)
        for (index_t j = 0; j < out_; ++j) bias_grad_[static_cast<std::size_t>(j)] += gv(i, j);
    }
    write_output(dxv, dx);
    saved_.valid = false;
    ++steps_;
  }
  std::vector<float> backward(matrix_view<const float> dy) {
    std::vector<float> dx(static_cast<std::size_t>(std::max<index_t>(dy.rows(), 0) * in_));
    backward(dy, matrix_view<float>::row_major(dx.data(), dy.rows(), in_));
    return dx;
  }

 private:
  /// What backward needs from forward, per recipe family.
  struct saved_state {
    bool valid = false;
    index_t rows = 0;
    nvfp4_operand x_nvfp4, w_nvfp4;             // NVFP4: the columnwise copies
    fp8_tensor x_fp8, w_fp8;                    // FP8 recipes: the columnwise copies
    quantized_tensor<mxfp8> x_mx, w_mx;         // MXFP8: the columnwise copies (forward tensors are E4M3)
  };

  static std::string shape(index_t r, index_t c) { return std::to_string(r) + "x" + std::to_string(c); }

  /// A row-major [rows, cols] view of `buffer`, grown as needed (layer buffers are reused from
  /// step to step: touching fresh memory costs more than the copies).
  static matrix_view<float> scratch(index_t rows, index_t cols, std::vector<float>& buffer) {
    const auto size = static_cast<std::size_t>(rows * cols);
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
  void write_output(matrix_view<const float> from, matrix_view<float> to) const {
    for (index_t r = 0; r < from.rows(); ++r)
      for (index_t c = 0; c < from.cols(); ++c)
        to(r, c) = options_.dtype == high_precision::bf16 ? bf16::from_float(from(r, c)).to_float() : from(r, c);
  }
  std::span<const float> bias_span() const { return bias_; }
  fp8_gemm_options fp8_options(const mm_params& params, std::span<const float> bias = {}) const {
    return {.core = options_.fp8_tensor_core, .mode = options_.mode,
            .promotion_interval = params.use_split_accumulator ? options_.promotion_interval : 0, .bias = bias};
  }
  static matrix_view<const float> transposed(matrix_view<const float> v) { return v.transposed(); }

  // ---- no quantization ----
  void fprop(const no_quantization&, matrix_view<const float> x, matrix_view<const float> w, matrix_view<float> y) {
    float_gemm(x, w, {}, y);
    add_bias(y);  // X and W in the dtype stay in their scratch buffers for backward
  }
  void bprop(const no_quantization&, matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) {
    const auto x = matrix_view<const float>::row_major(x_scratch_.data(), saved_.rows, in_);
    const auto w = matrix_view<const float>::row_major(w_scratch_.data(), out_, in_);
    float_gemm(dy, w.transposed(), {}, dx);
    float_gemm(dy.transposed(), x.transposed(), {}, dw);
  }
  void add_bias(matrix_view<float> y) const {
    if (bias_.empty()) return;
    for (index_t i = 0; i < y.rows(); ++i)
      for (index_t j = 0; j < y.cols(); ++j) y(i, j) += bias_[static_cast<std::size_t>(j)];
  }

  // ---- NVFP4 ----
  void fprop(const nvfp4_block_scaling& r, matrix_view<const float> x, matrix_view<const float> w, matrix_view<float> y) {
    operand_pair xs = quantize_activation(x, r);
    operand_pair ws = quantize_weight(w, r);
    nvfp4_gemm(xs.rowwise, ws.rowwise, y, options_.mode, bias_span());
    saved_.x_nvfp4 = std::move(xs.columnwise);
    saved_.w_nvfp4 = std::move(ws.columnwise);
  }
  void bprop(const nvfp4_block_scaling& r, matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) {
    nvfp4_block_scaling step_recipe = r;
    step_recipe.seed = gradient_seed(steps_);
    const operand_pair gs = quantize_gradient(dy, step_recipe);
    nvfp4_gemm(gs.rowwise, saved_.w_nvfp4, dx, options_.mode);
    nvfp4_gemm(gs.columnwise, saved_.x_nvfp4, dw, options_.mode);
  }

  // ---- FP8 current scaling ----
  void fprop(const float8_current_scaling& r, matrix_view<const float> x, matrix_view<const float> w, matrix_view<float> y) {
    const fp8_scale_options scale{.power_2_scale = r.use_power_2_scales};
    const fp8_format f = forward_format(r.fp8_format);
    const fp8_tensor x8 = quantize_fp8_current(x, f, scale), w8 = quantize_fp8_current(w, f, scale);
    fp8_gemm(x8, w8, y, fp8_options(r.fp8_gemm_fprop, bias_span()));
    saved_.x_fp8 = quantize_fp8_with_scale(x.transposed(), f, x8.scale(), quantized_axis::columnwise);
    saved_.w_fp8 = quantize_fp8_with_scale(w.transposed(), f, w8.scale(), quantized_axis::columnwise);
  }
  void bprop(const float8_current_scaling& r, matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) {
    const fp8_format f = backward_format(r.fp8_format);
    const fp8_tensor g8 = quantize_fp8_current(dy, f, {.power_2_scale = r.use_power_2_scales});
    const fp8_tensor g8t = quantize_fp8_with_scale(dy.transposed(), f, g8.scale(), quantized_axis::columnwise);
    fp8_gemm(g8, saved_.w_fp8, dx, fp8_options(r.fp8_gemm_dgrad));
    fp8_gemm(g8t, saved_.x_fp8, dw, fp8_options(r.fp8_gemm_wgrad));
  }

  // ---- FP8 delayed scaling ----
  fp8_tensor delayed_quantize(nvfp4::tensor_role role, matrix_view<const float> v) {
    delayed_scaling_state& state = states_[static_cast<std::size_t>(role)];
    fp8_tensor q = quantize_fp8_with_scale(v, state.format(), state.scale());
    state.record(q.amax());
    return q;
  }
  void fprop(const delayed_scaling& r, matrix_view<const float> x, matrix_view<const float> w, matrix_view<float> y) {
    const float x_scale = states_[0].scale(), w_scale = states_[1].scale();
    const fp8_tensor x8 = delayed_quantize(nvfp4::tensor_role::input, x), w8 = delayed_quantize(nvfp4::tensor_role::weight, w);
    fp8_gemm(x8, w8, y, fp8_options(r.fp8_gemm_fprop, bias_span()));
    saved_.x_fp8 = quantize_fp8_with_scale(x.transposed(), x8.format(), x_scale, quantized_axis::columnwise);
    saved_.w_fp8 = quantize_fp8_with_scale(w.transposed(), w8.format(), w_scale, quantized_axis::columnwise);
    states_[0].update();
    states_[1].update();
  }
  void bprop(const delayed_scaling& r, matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) {
    const float g_scale = states_[2].scale();
    const fp8_tensor g8 = delayed_quantize(nvfp4::tensor_role::grad_output, dy);
    const fp8_tensor g8t = quantize_fp8_with_scale(dy.transposed(), g8.format(), g_scale, quantized_axis::columnwise);
    fp8_gemm(g8, saved_.w_fp8, dx, fp8_options(r.fp8_gemm_dgrad));
    fp8_gemm(g8t, saved_.x_fp8, dw, fp8_options(r.fp8_gemm_wgrad));
    states_[2].update();
  }

  // ---- FP8 block scaling ----
  static std::pair<fp8_tensor, fp8_tensor> block_pair(const float8_block_scaling& r, nvfp4::tensor_role role, matrix_view<const float> v) {
    const fp8_format f = role_format(r.fp8_format, role);
    return {quantize_fp8_blockwise(v, f, r.block_shape(role), r.scale_options(role)),
            quantize_fp8_blockwise(v.transposed(), f, r.block_shape(role), r.scale_options(role), quantized_axis::columnwise)};
  }
  void fprop(const float8_block_scaling& r, matrix_view<const float> x, matrix_view<const float> w, matrix_view<float> y) {
    auto [x8, x8t] = block_pair(r, nvfp4::tensor_role::input, x);
    auto [w8, w8t] = block_pair(r, nvfp4::tensor_role::weight, w);
    fp8_gemm(x8, w8, y, fp8_options(r.fp8_gemm_fprop, bias_span()));
    saved_.x_fp8 = std::move(x8t);
    saved_.w_fp8 = std::move(w8t);
  }
  void bprop(const float8_block_scaling& r, matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) {
    const auto [g8, g8t] = block_pair(r, nvfp4::tensor_role::grad_output, dy);
    fp8_gemm(g8, saved_.w_fp8, dx, fp8_options(r.fp8_gemm_dgrad));
    fp8_gemm(g8t, saved_.x_fp8, dw, fp8_options(r.fp8_gemm_wgrad));
  }

  // ---- MXFP8 ----
  fp8_gemm_options mx_options(std::span<const float> bias = {}) const {
    return {.core = mma8::tensor_core::blackwell, .mode = options_.mode, .promotion_interval = 0, .bias = bias};
  }
  void fprop(const mxfp8_block_scaling&, matrix_view<const float> x, matrix_view<const float> w, matrix_view<float> y) {
    // Forward tensors are E4M3 for both allowed formats (E4M3, HYBRID).
    const auto x8 = quantize_mxfp8_te<mxfp8>(x), w8 = quantize_mxfp8_te<mxfp8>(w);
    mxfp8_gemm(x8, w8, y, mx_options(bias_span()));
    saved_.x_mx = quantize_mxfp8_te<mxfp8>(x.transposed(), quantized_axis::columnwise);
    saved_.w_mx = quantize_mxfp8_te<mxfp8>(w.transposed(), quantized_axis::columnwise);
  }
  template <class Format>
  void mx_bprop(matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) {
    const auto g8 = quantize_mxfp8_te<Format>(dy);
    const auto g8t = quantize_mxfp8_te<Format>(dy.transposed(), quantized_axis::columnwise);
    mxfp8_gemm(g8, saved_.w_mx, dx, mx_options());
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
  std::uint64_t steps_ = 0;
  std::vector<float> x_scratch_, w_scratch_, y_scratch_, g_scratch_, dx_scratch_;
};

}  // namespace nvfp4::nn
