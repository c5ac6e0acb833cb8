// nvfp4/recipes/policies/delayed_scaling.hpp: the policy of delayed_scaling (TE's DelayedScaling):
// quantize_fp8_with_scale with each role's delayed_scaling_state scale, the tensor's amax recorded
// into the role's history; fp8_gemm with the recipe's split-accumulator flags. The layer decides
// when the states update (update_forward_roles / update_backward_role: after each call, or once
// per autocast region, nn/autocast.hpp). Every copy is written into storage kept from step to step.
// The three states are shared by the policies of one chain of DelayedScaling recipes (switched_to):
// a forward saved under an earlier recipe of the chain records into, and reads, the live states.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <utility>

#include "nvfp4/recipes/delayed_scaling.hpp"
#include "nvfp4/recipes/policies/fp8_operands.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"

namespace nvfp4 {

class delayed_scaling_policy {
 public:
  using recipe_type = delayed_scaling;
  static constexpr const char* name = "DelayedScaling";
  static constexpr const char* short_name = "fp8_delayed";
  static constexpr bool quantized = true;
  static constexpr bool takes_amax_rule = false;
  /// TE runs a tensor holding NaN / Inf under DelayedScaling (its cast saturates, its amax keeps
  /// Inf and ignores NaN): the layer lets such a tensor through to this policy's quantizers.
  static constexpr bool runs_non_finite = true;
  using weight_operands = fp8_weight_operands;
  using saved_input = fp8_saved_input;

  /// Fresh states, as TE starts them: scale 1, zero history.
  explicit delayed_scaling_policy(const delayed_scaling& r) : recipe_(r), states_(std::make_shared<role_states>()) {
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
  const delayed_scaling& recipe() const { return recipe_; }

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
  void pack_fprop_operand(const linear_context&, weight_operands& w) const { w.row.pack(); }
  void fprop(const linear_context& c, matrix_view<const float> x, const weight_operands& w, matrix_view<float> y, saved_input* saved,
             bool record) {
    delayed_scaling_state& s = state(tensor_role::input);
    quantize_fp8_with_scale_into(x, s.format(), s.scale(), row_, quantized_axis::rowwise, te_cast);
    detail::fp8_fprop(c, row_, w, y, recipe_.fp8_gemm_fprop);
    if (record) s.record(row_.amax());
    if (saved) quantize_fp8_with_scale_into(x.transposed(), row_.format(), s.scale(), saved->x_col, quantized_axis::columnwise, te_cast);
  }
  void bprop(const linear_context& c, matrix_view<const float> dy, const weight_operands& w, const saved_input& saved,
             matrix_view<float> dx, matrix_view<float> dw) {
    delayed_scaling_state& s = state(tensor_role::grad_output);
    const float g_scale = s.scale();
    quantize_fp8_with_scale_into(dy, s.format(), g_scale, row_, quantized_axis::rowwise, te_cast);
    s.record(row_.amax());
    quantize_fp8_with_scale_into(dy.transposed(), row_.format(), g_scale, col_, quantized_axis::columnwise, te_cast);
    detail::fp8_bprop(c, recipe_, row_, col_, w, saved, dx, dw);
  }

 private:
  using role_states = std::array<delayed_scaling_state, 3>;
  delayed_scaling_policy(const delayed_scaling& r, std::shared_ptr<role_states> states) : recipe_(r), states_(std::move(states)) {}
  static constexpr fp8_non_finite te_cast = fp8_non_finite::te_satfinite;
  delayed_scaling_state& state(tensor_role role) { return (*states_)[static_cast<std::size_t>(role)]; }
  delayed_scaling recipe_;
  std::shared_ptr<role_states> states_;  // input, weight, grad_output; shared along a switched_to chain
  fp8_tensor row_, col_;  // X's rowwise copy (fprop), dY's two (dgrad, wgrad): kept from step to step
};

}  // namespace nvfp4
