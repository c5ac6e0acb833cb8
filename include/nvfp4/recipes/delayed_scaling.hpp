// nvfp4/recipes/delayed_scaling.hpp: TransformerEngine's DelayedScaling recipe (TE
// common/recipe/__init__.py) and the state it keeps per quantizer: an amax history and a scale
// that is updated from it after each step, so a tensor is quantized with a scale computed from
// earlier steps' amaxes (the delay). The update is TE's fused kernel, bit for bit (TE
// common/recipe/delayed_scaling.cu, kernel_bulk, the path TE's PyTorch modules take), or on request
// TE's unfused Python update (pytorch/quantization.py _amax_and_scale_update), which differs from
// the kernel for steps with a zero or NaN amax and can round the scale an ulp apart, evaluated as
// eager torch or as TE's torch.compile'd form on an H100. Its policy: quantize_fp8_with_scale with
// each role's state scale, the tensor's amax recorded into the role's history; fp8_gemm with the
// recipe's split-accumulator flags. The layer decides when the states update
// (update_forward_roles / update_backward_role: after each call, or once per autocast region,
// nn/autocast.hpp). The three states are shared by the policies of one chain of DelayedScaling
// recipes (switched_to): a forward saved under an earlier recipe of the chain records into, and
// reads, the live states. Every copy is written into storage kept from step to step.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "nvfp4/detail/enum_names.hpp"
#include "nvfp4/recipes/detail/div_full_reciprocal.hpp"
#include "nvfp4/recipes/fp8_operands.hpp"
#include "nvfp4/recipes/policy.hpp"
#include "nvfp4/recipes/recipe_common.hpp"
#include "nvfp4/recipes/recipe_fields.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"

namespace nvfp4 {

/// Which amax of the history the scale is computed from.
enum class amax_compute_algorithm {
  max,         ///< the largest amax in the window (NaN entries ignored, as fmaxf does)
  most_recent  ///< the amax of the step just finished
};
/// Its names (TE's amax_compute_algo values; one table: nvfp4/detail/enum_names.hpp).
namespace detail {
template <>
struct enum_table<amax_compute_algorithm> {
  static constexpr enum_entry<amax_compute_algorithm> entries[] = {{"max", amax_compute_algorithm::max},
                                                                   {"most_recent", amax_compute_algorithm::most_recent}};
};
}  // namespace detail

/// How TE's unfused (Python) update evaluates its scale, (fp8_max / amax) / 2^margin; each form is
/// named for what it reproduces bit for bit.
enum class unfused_update_form {
  /// Eager torch (NVTE_TORCH_COMPILE=0): fl(fl(fl(1 / amax) * fp8_max) * fl(1 / fl(2^margin))),
  /// IEEE division. Any GPU, any CPU.
  torch_eager,
  /// TE's default, `torch.compile` (Inductor + Triton) on an H100 (sm_90): 1 / amax is PTX
  /// div.full.f32, faithful but not correctly rounded, then fl(fl(r * fp8_max) * c) with c the
  /// float of 1 / 2^margin, folded to fl(r * fl(fp8_max * c)) when c is a power of two (torch
  /// 2.11, Triton 3.6). Other GPU generations were not measured.
  torch_compile_h100
};

/// Its names in Python (one table: nvfp4/detail/enum_names.hpp).
namespace detail {
template <>
struct enum_table<unfused_update_form> {
  static constexpr enum_entry<unfused_update_form> entries[] = {{"torch_eager", unfused_update_form::torch_eager},
                                                                {"torch_compile_h100", unfused_update_form::torch_compile_h100}};
};
}  // namespace detail

/// DelayedScaling with TE's field names and defaults. The GEMMs follow TE's Linear: fast
/// accumulation in fprop, split accumulator in dgrad and wgrad (TE module/base.py _2X_ACC_*).
struct delayed_scaling {
  float margin = 0.0f;  ///< scale = (fp8_max * 2^-margin) / amax (a float, as in TE)
  recipe_format fp8_format = recipe_format::hybrid;
  int amax_history_len = 1024;
  amax_compute_algorithm amax_compute_algo = amax_compute_algorithm::max;
  bool reduce_amax = true;  ///< across processes in TE; one process here, so it has no effect
  /// The update rule: false, TE's fused CUDA kernel (what TE runs by default); true, TE's Python
  /// update, which TE runs with NVTE_UNFUSED_FP8_UPDATE=1 or a callable amax_compute_algo /
  /// scaling_factor_compute_algo (see delayed_scaling_state::update), its scale evaluated as
  /// `unfused_form` says. Not a TE recipe field.
  bool unfused_update = false;
  /// How the unfused update's scale is evaluated (docs/recipes.md, "Eager and compiled unfused
  /// updates"); no effect on the fused update. Not a TE recipe field: TE picks it with
  /// NVTE_TORCH_COMPILE.
  unfused_update_form unfused_form = unfused_update_form::torch_eager;
  mm_params fp8_gemm_fprop{.use_split_accumulator = false};
  mm_params fp8_gemm_dgrad{.use_split_accumulator = true};
  mm_params fp8_gemm_wgrad{.use_split_accumulator = true};

  static constexpr auto fields() {
    using R = delayed_scaling;
    return std::tuple{
        field_row("margin", &R::margin, field_origin::te, "scale = (fp8_max / amax) / 2^margin"),
        field_row("fp8_format", &R::fp8_format, field_origin::te, "E4M3 forward; HYBRID: E4M3 forward, E5M2 gradients"),
        field_row("amax_history_len", &R::amax_history_len, field_origin::te, "steps of amaxes the scale is computed from (at most 2^20)"),
        field_row("amax_compute_algo", &R::amax_compute_algo, field_origin::te, "'max' of the window or 'most_recent'"),
        field_row("reduce_amax", &R::reduce_amax, field_origin::te, "across processes in TE; one process here: no effect"),
        field_row("unfused_update", &R::unfused_update, field_origin::library, "TE's Python update instead of its fused kernel"),
        field_row("unfused_form", &R::unfused_form, field_origin::library, "how the unfused update's scale is evaluated"),
        field_row("fp8_gemm_fprop", &R::fp8_gemm_fprop, field_origin::library, "fprop GEMM's MMParams (TE's module: fast accumulation)"),
        field_row("fp8_gemm_dgrad", &R::fp8_gemm_dgrad, field_origin::library, "dgrad GEMM's MMParams (TE's module: split accumulator)"),
        field_row("fp8_gemm_wgrad", &R::fp8_gemm_wgrad, field_origin::library, "wgrad GEMM's MMParams (TE's module: split accumulator)")};
  }

  /// The longest amax history accepted: 2^20 entries. TE keeps the history on the GPU as [len, n]
  /// float32 (n quantizers, 3 per Linear: 12 MiB per layer at this length, 12 GiB at 10^9) and every
  /// update scans the whole window, so a window longer than a training run's steps (10^6 is a
  /// long run) only costs memory and update time; checked before anything allocates.
  static constexpr int max_amax_history_len = 1 << 20;

  /// TE's checks (no pure E5M2) and ours: a history of 1 to max_amax_history_len entries, a finite
  /// margin whose 2^-margin is a normal float.
  void validate() const {
    detail::reject_pure_e5m2(fp8_format, "delayed_scaling");
    detail::require(amax_history_len >= 1, errc::invalid_argument,
                    "delayed_scaling: amax_history_len must be at least 1, got " + std::to_string(amax_history_len));
    detail::require(amax_history_len <= max_amax_history_len, errc::invalid_argument,
                    "delayed_scaling: amax_history_len must be at most " + std::to_string(max_amax_history_len) +
                        " (the window each update scans; TE keeps it on the GPU as [len, n] float32), got " +
                        std::to_string(amax_history_len));
    detail::require(std::isfinite(margin) && margin >= -127.0f && margin <= 126.0f, errc::invalid_argument,
                    "delayed_scaling: margin must be in [-127, 126] (2^-margin a normal float), got " + std::to_string(margin));
  }
};

/// The state of one delayed-scaling quantizer (one tensor role of one layer): the amax history
/// (entry 0 collects the amaxes of the step in progress) and the scale the next quantization uses.
/// Starts as TE does: scale 1, history all zero. After each step call update().
class delayed_scaling_state {
 public:
  delayed_scaling_state() = default;
  /// Throws invalid_argument when the recipe is invalid.
  delayed_scaling_state(const delayed_scaling& recipe, fp8_format format)
      : format_(format),
        algorithm_(recipe.amax_compute_algo),
        margin_(recipe.margin),
        unfused_(recipe.unfused_update),
        unfused_form_(recipe.unfused_form) {
    recipe.validate();
    history_.assign(static_cast<std::size_t>(recipe.amax_history_len), 0.0f);
  }

  fp8_format format() const { return format_; }
  /// The scale the next quantization uses (TE's `scale`).
  float scale() const { return scale_; }
  /// The history, entry 0 first (the step in progress), then the most recent finished step's
  /// amax at the end (entry L - 1), older ones before it.
  std::span<const float> amax_history() const { return history_; }
  /// fp8_max * 2^-margin, the value the amax is mapped to (TE's host code: fp8_dtype_max(dtype) *
  /// std::pow(2.f, -margin) in float, delayed_scaling.cu; exact for integer margins).
  float scaled_max() const { return fp8_max(format_) * std::pow(2.0f, -margin_); }
  float margin() const { return margin_; }
  amax_compute_algorithm algorithm() const { return algorithm_; }
  bool unfused() const { return unfused_; }
  unfused_update_form unfused_form() const { return unfused_form_; }

  /// A DelayedScaling -> DelayedScaling switch, as TE keeps the state (pytorch/module/base.py
  /// set_meta_tensor -> adjust_amax_history_length): scale and history kept, the history cut to
  /// its first `length` entries (history[:length]) or zero-padded at the end; the format, margin
  /// and amax algorithm stay those the state was made with. The update path (`unfused_update`,
  /// `unfused_form`) follows the new recipe (TE chooses it at each update, not per state). Throws
  /// invalid_argument for an amax_history_len out of [1, delayed_scaling::max_amax_history_len].
  void switch_to(const delayed_scaling& recipe) {
    detail::require(
        recipe.amax_history_len >= 1 && recipe.amax_history_len <= delayed_scaling::max_amax_history_len, errc::invalid_argument,
        "delayed_scaling_state: amax_history_len must be in [1, " + std::to_string(delayed_scaling::max_amax_history_len) + "]");
    history_.resize(static_cast<std::size_t>(recipe.amax_history_len), 0.0f);
    unfused_ = recipe.unfused_update;
    unfused_form_ = recipe.unfused_form;
  }

  /// Records the amax of a tensor just quantized with scale(): entry 0 keeps the largest seen in
  /// this step (TE's quantizer writes an atomic max into it). A NaN is kept.
  void record(float amax) {
    float& current = history_[0];
    if (std::isnan(amax) || amax > current) current = amax;
  }

  /// The end-of-step update. Let a = entry 0 and L the history length.
  /// Fused (TE's kernel, the default): if a != 0 the history rolls (entry i takes entry i + 1,
  /// entry L - 1 takes a, entry 0 becomes 0) and the amax is the max over the whole window before
  /// the roll (NaN ignored, as fmaxf does) for `max`, or a for `most_recent`; if a is 0 nothing
  /// rolls and the amax is 0. Then scale = scaled_max() / amax when that amax is finite and
  /// positive, else the old scale; an infinite scale becomes FLT_MAX.
  /// Unfused (TE's Python update): the amax is the max over the whole window (a NaN anywhere in it
  /// makes it NaN) for `max`, or a for `most_recent`; the history always rolls, even for a = 0.
  /// Then scale = (fp8_max * (1 / amax)) / 2^margin evaluated as `unfused_form` says (eager: 1 /
  /// amax and each product rounded to fp32, as torch evaluates `fp8_max / amax`), when the amax is
  /// finite and positive, else the old scale; an infinite scale becomes FLT_MAX. It can differ
  /// from the fused scale by an ulp (eager) or a few (compiled). Each form is the GPU's scale bit
  /// for bit on an H100, float margins included (tests/recipes/data/te_unfused_update).
  void update() {
    if (unfused_) return update_unfused();
    const float last = history_[0];
    float amax = 0.0f;
    if (last != 0.0f) {
      const std::size_t length = history_.size();
      for (std::size_t i = 0; i < length; ++i) {
        const float a = i + 1 < length ? history_[i + 1] : last;
        amax = std::fmax(amax, a);
        history_[i] = a;
      }
      history_[0] = 0.0f;
      if (algorithm_ == amax_compute_algorithm::most_recent) amax = last;
    }
    float scale = (std::isfinite(amax) && amax > 0.0f) ? scaled_max() / amax : scale_;
    if (std::isinf(scale)) scale = std::numeric_limits<float>::max();
    scale_ = scale;
  }

  /// Restores a saved state (e.g. from a checkpoint). Throws shape_mismatch when the history has
  /// another length, invalid_argument for a scale that is not positive and finite.
  void restore(std::span<const float> history, float scale) {
    detail::require(history.size() == history_.size(), errc::shape_mismatch,
                    "delayed_scaling_state::restore: history of " + std::to_string(history.size()) + " entries, expected " +
                        std::to_string(history_.size()));
    detail::require(std::isfinite(scale) && scale > 0.0f, errc::invalid_argument,
                    "delayed_scaling_state::restore: scale must be positive and finite");
    history_.assign(history.begin(), history.end());
    scale_ = scale;
  }

 private:
  void update_unfused() {
    const float last = history_[0];
    float amax = last;
    if (algorithm_ == amax_compute_algorithm::max)
      for (const float a : history_)
        amax = (std::isnan(amax) || std::isnan(a)) ? std::numeric_limits<float>::quiet_NaN() : std::max(amax, a);
    std::rotate(history_.begin(), history_.begin() + 1, history_.end());
    history_[0] = 0.0f;
    // (fp8_max / amax) / 2^margin as eager torch evaluates it: a Python number divided by a tensor
    // is the tensor's reciprocal times the number (two roundings); a tensor divided by a Python
    // number is a product with the number's float reciprocal (PyTorch's div_true kernel for a CPU
    // scalar), exact for integer margins.
    float scale = scale_;
    if (std::isfinite(amax) && amax > 0.0f)
      scale = unfused_form_ == unfused_update_form::torch_eager ? eager_scale(amax) : compiled_h100_scale(amax);
    if (std::isinf(scale)) scale = std::numeric_limits<float>::max();
    scale_ = scale;
  }

  float eager_scale(float amax) const {
    const float reciprocal = 1.0f / amax;
    const float inverse_step = 1.0f / static_cast<float>(std::pow(2.0, static_cast<double>(margin_)));
    return (reciprocal * fp8_max(format_)) * inverse_step;
  }

  // Inductor's kernel: the Python constant 1 / 2**margin (a double) becomes a float, and the
  // compiler multiplies by it separately unless it is a power of two, which it folds into fp8_max.
  float compiled_h100_scale(float amax) const {
    const float reciprocal = detail::div_full_reciprocal(amax);
    const float inverse_step = static_cast<float>(1.0 / std::pow(2.0, static_cast<double>(margin_)));
    int exponent = 0;
    if (std::frexp(inverse_step, &exponent) == 0.5f) return reciprocal * (fp8_max(format_) * inverse_step);
    return (reciprocal * fp8_max(format_)) * inverse_step;
  }

  fp8_format format_ = fp8_format::e4m3;
  amax_compute_algorithm algorithm_ = amax_compute_algorithm::max;
  float margin_ = 0.0f;
  bool unfused_ = false;
  unfused_update_form unfused_form_ = unfused_update_form::torch_eager;
  std::vector<float> history_ = std::vector<float>(1, 0.0f);
  float scale_ = 1.0f;
};

/// The policy of delayed_scaling (see the header comment): its role quantizers and scaling states;
/// the copies and GEMMs are fp8_family_policy's.
class delayed_scaling_policy : public fp8_family_policy<delayed_scaling, fp8_tensor, fp8_gemm_with_mm_params> {
 public:
  static constexpr const char* name = "DelayedScaling";
  static constexpr const char* short_name = "fp8_delayed";
  static constexpr bool quantized = true;
  static constexpr bool takes_amax_rule = false;
  /// TE runs a tensor holding NaN / Inf under DelayedScaling (its cast saturates, its amax keeps
  /// Inf and ignores NaN): the layer lets such a tensor through to this policy's quantizers.
  static constexpr bool runs_non_finite = true;

  /// Fresh states, as TE starts them: scale 1, zero history.
  explicit delayed_scaling_policy(const delayed_scaling& r) : fp8_family_policy(r), states_(std::make_shared<role_states>()) {
    for (const tensor_role role : {tensor_role::input, tensor_role::weight, tensor_role::grad_output})
      state(role) = delayed_scaling_state(r, role_format(r.fp8_format, role));
  }
  /// DelayedScaling -> DelayedScaling, as TE keeps the states (module/base.py set_meta_tensor): a
  /// policy of `r` over this policy's states, whose scales and histories stay, cut or zero-padded
  /// to the new length (delayed_scaling_state::switch_to). This policy keeps its own recipe (the
  /// GEMM flags of a backward of a forward it ran) and shares the states with the new one.
  delayed_scaling_policy switched_to(const delayed_scaling& r) const {
    r.validate();
    for (delayed_scaling_state& s : *states_) s.switch_to(r);
    return delayed_scaling_policy(r, states_);
  }

  delayed_scaling_state* scaling_state(tensor_role role) { return &state(role); }
  const delayed_scaling_state* scaling_state(tensor_role role) const { return &(*states_)[static_cast<std::size_t>(role)]; }
  void update_forward_roles() {
    state(tensor_role::input).update();
    state(tensor_role::weight).update();  // after a reuse nothing was recorded: TE's kernel then leaves it as it was
  }
  void update_backward_role() { state(tensor_role::grad_output).update(); }

  void quantize_weight(const linear_context&, matrix_view<const float> w, bool columnwise, bool record, weight_operands& out) {
    delayed_scaling_state& s = state(tensor_role::weight);
    quantize_fp8_with_scale_into(w, s.format(), s.scale(), out.row.plain, quantized_axis::rowwise, te_cast);
    if (record) s.record(out.row.plain.amax());
    if (columnwise) quantize_fp8_with_scale_into(w.transposed(), s.format(), s.scale(), out.col, quantized_axis::columnwise, te_cast);
  }
  const input_operand& quantize_input(const linear_context&, matrix_view<const float> x, saved_input* saved, bool record) {
    delayed_scaling_state& s = state(tensor_role::input);
    quantize_fp8_with_scale_into(x, s.format(), s.scale(), x_row_, quantized_axis::rowwise, te_cast);
    if (record) s.record(x_row_.amax());
    if (saved) quantize_fp8_with_scale_into(x.transposed(), x_row_.format(), s.scale(), saved->x_col, quantized_axis::columnwise, te_cast);
    return x_row_;
  }
  const gradient_operands& quantize_gradient(const linear_context&, matrix_view<const float> dy) {
    delayed_scaling_state& s = state(tensor_role::grad_output);
    const float g_scale = s.scale();
    quantize_fp8_with_scale_into(dy, s.format(), g_scale, g_.row, quantized_axis::rowwise, te_cast);
    s.record(g_.row.amax());
    quantize_fp8_with_scale_into(dy.transposed(), g_.row.format(), g_scale, g_.col, quantized_axis::columnwise, te_cast);
    return g_;
  }

 private:
  using role_states = std::array<delayed_scaling_state, 3>;
  delayed_scaling_policy(const delayed_scaling& r, std::shared_ptr<role_states> states)
      : fp8_family_policy(r), states_(std::move(states)) {}
  static constexpr fp8_non_finite te_cast = fp8_non_finite::te_satfinite;
  delayed_scaling_state& state(tensor_role role) { return (*states_)[static_cast<std::size_t>(role)]; }
  std::shared_ptr<role_states> states_;  // input, weight, grad_output; shared along a switched_to chain
  fp8_tensor x_row_;                     // X's rowwise copy (fprop): kept from step to step
  gradient_operands g_;                  // dY's two copies (dgrad, wgrad): kept from step to step
};

}  // namespace nvfp4
