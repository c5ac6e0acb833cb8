// nvfp4/nn/autocast.hpp: TransformerEngine's autocast region for delayed scaling, as objects.
// In TE (pytorch/quantization.py, FP8GlobalStateManager.autocast_enter / autocast_exit and
// reduce_and_update_fp8_tensors) a layer's quantizers only record amaxes; the forward roles'
// scales update once, when the outermost region exits with grad enabled, and the backward role's
// once per backward pass. So a layer called twice in one region uses one scale for both calls and
// their amaxes are max-merged into one history entry; an evaluation under torch.no_grad() records
// its amaxes but skips the update, leaving them for the next training update.
//
//   {
//     nn::backward_pass bwd;                 // layers whose backward runs here update at its end
//     nn::autocast region;                   // grad enabled: forward roles update at its end
//     loss = model.forward_backward(batch);  // (ends before bwd: the forward update comes first)
//   }
//   { nn::autocast eval({.grad_enabled = false}); model.evaluate(batch); }  // amaxes recorded only
//
// Regions are per thread and nest (layers join the outermost). A layer used outside any region
// is a region of its own: training calls update at once, evaluation records nothing (the
// library's inference forward).
#pragma once

#include <algorithm>
#include <vector>

#include "nvfp4/nn/linear.hpp"

namespace nvfp4::nn {

/// What a region ends: a layer's delayed-scaling updates (a gemm_engine, an nn::linear user).
class region_member {
 public:
  virtual ~region_member() = default;
  /// The outermost forward region ended (grad_enabled: torch.is_grad_enabled() there).
  virtual void end_forward_region(bool /*grad_enabled*/) {}
  /// A backward pass ended.
  virtual void end_backward_region() {}
};

struct autocast_options {
  bool grad_enabled = true;                            ///< TE updates at the exit only with grad enabled
  eval_amaxes evaluation = eval_amaxes::record_as_te;  ///< what evaluation forwards inside do with amaxes
};

/// A forward region (TE's fp8_autocast / autocast). The outermost one updates its members at its
/// end, also when it ends by an exception (TE's exit runs in a `finally`).
class autocast {
 public:
  explicit autocast(autocast_options options = {}) : options_(options), outer_(current_) { current_ = this; }
  ~autocast() {
    current_ = outer_;
    for (region_member* m : members_) m->end_forward_region(options_.grad_enabled);
  }
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

  /// The innermost region open on this thread, or nullptr.
  static autocast* current() { return current_; }
  const autocast_options& options() const { return options_; }
  /// Registers a layer run in this region with the outermost region (once per layer).
  void join(region_member& m) {
    autocast* outermost = this;
    while (outermost->outer_ != nullptr) outermost = outermost->outer_;
    if (std::find(outermost->members_.begin(), outermost->members_.end(), &m) == outermost->members_.end())
      outermost->members_.push_back(&m);
  }

 private:
  autocast_options options_;
  autocast* outer_;
  std::vector<region_member*> members_;
  inline static thread_local autocast* current_ = nullptr;
};

/// A backward pass: the layers whose backward runs in it update their backward role once, at its
/// end (TE: reduce_and_update_fp8_tensors(forward=False) once per backward).
class backward_pass {
 public:
  backward_pass() : outer_(current_) { current_ = this; }
  ~backward_pass() {
    current_ = outer_;
    for (region_member* m : members_) m->end_backward_region();
  }
  backward_pass(const backward_pass&) = delete;
  backward_pass& operator=(const backward_pass&) = delete;

  static backward_pass* current() { return current_; }
  void join(region_member& m) {
    if (std::find(members_.begin(), members_.end(), &m) == members_.end()) members_.push_back(&m);
  }

 private:
  backward_pass* outer_;
  std::vector<region_member*> members_;
  inline static thread_local backward_pass* current_ = nullptr;
};

/// After a layer's forward: joins the current region, or, outside any, ends its own one-call region.
inline void after_forward(region_member& m, bool training) {
  if (autocast* region = autocast::current()) {
    region->join(m);
  } else {
    m.end_forward_region(training);
  }
}
/// After a layer's backward: joins the current backward pass, or ends its own.
inline void after_backward(region_member& m) {
  if (backward_pass* pass = backward_pass::current()) {
    pass->join(m);
  } else {
    m.end_backward_region();
  }
}
/// What an evaluation forward does with amaxes here: the region's choice; outside any region,
/// record nothing.
inline eval_amaxes evaluation_amaxes() {
  const autocast* region = autocast::current();
  return region != nullptr ? region->options().evaluation : eval_amaxes::record_nothing;
}

}  // namespace nvfp4::nn
