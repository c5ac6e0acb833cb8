// nvfp4/training/trainer.hpp: the training loop: precision controls per step, forward + backward
// with loss scaling, NaN/Inf monitoring (a bad step is skipped, never applied), gradient clipping
// by global norm, the optimizer step under a warmup + cosine schedule, periodic validation, and a
// record of everything (loss curve, throughput, memory, NaN events, per-layer logs). Delayed
// scaling runs in TE's regions (nn/autocast.hpp): one forward region and one backward pass per
// step, and validation in a region without grad.
#pragma once

#include <chrono>
#include <cmath>
#include <functional>
#include <numbers>
#include <string>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/nn/autocast.hpp"
#include "nvfp4/nn/model.hpp"
#include "nvfp4/training/controls.hpp"
#include "nvfp4/training/dataset.hpp"
#include "nvfp4/training/monitor.hpp"
#include "nvfp4/training/optimizer.hpp"

namespace nvfp4::training {

/// Loss scaling: gradients are computed for loss · scale and divided by scale before the update.
struct loss_scaling {
  enum class mode { none, fixed, dynamic };
  mode kind = mode::none;
  float initial_scale = 65536.0f;  ///< the fixed scale, or the dynamic one's start
  float factor = 2.0f;             ///< dynamic: divide by it after an overflow, multiply after `growth_interval` good steps
  int growth_interval = 100;
};

/// One training step's record.
struct step_record {
  long long step = 0;
  float loss = NAN;       ///< mean training loss of the step's batch
  float grad_norm = NAN;  ///< global gradient norm before clipping
  float lr_scale = 1.0f;
  float loss_scale = 1.0f;
  bool skipped = false;  ///< a NaN/Inf kept the update from being applied
  double seconds = 0.0;  ///< wall time of forward + backward + update
};

struct eval_record {
  long long step = 0;  ///< after this many steps
  float loss = NAN;
};

struct progress_report {
  long long step = 0, total_steps = 0;
  float loss = NAN;      ///< mean of the training losses since the last report
  float val_loss = NAN;  ///< the latest validation loss (NaN before the first)
  double tokens_per_second = 0.0;
};

struct train_options {
  long long steps = 200;
  long long warmup_steps = 0;    ///< linear warmup from 0
  float min_lr_fraction = 0.1f;  ///< cosine decay from 1 to this after warmup (1: constant)
  float grad_clip = 1.0f;        ///< max global gradient norm; 0 turns clipping off
  loss_scaling scaling{};
  precision_controls controls{};
  int eval_every = 50;  ///< validation every n steps (and after the last); 0: only at the end
  int eval_batches = 4;
  int log_every = 0;  ///< per-layer amax / gradient-norm logs every n steps (0: none)
  int progress_every = 25;
  int max_skipped_steps = 20;  ///< stop (diverged) after this many skipped steps
  std::function<void(const progress_report&)> on_progress{};
  /// Called before each step's forward pass (tests use it to inject faults).
  std::function<void(long long step, nn::model& model)> before_step{};
  /// Validation passes run as TE's evaluation under torch.no_grad() inside the autocast region:
  /// delayed-scaling amaxes recorded and merged into the next training update (record_as_te),
  /// or the library's evaluation that records nothing (record_nothing).
  nn::eval_amaxes evaluation = nn::eval_amaxes::record_as_te;

  void validate(int layer_count) const {
    nvfp4::detail::require(steps > 0 && warmup_steps >= 0 && warmup_steps <= steps, errc::invalid_argument,
                           "train: steps must be > 0 and warmup_steps in [0, steps]");
    nvfp4::detail::require(min_lr_fraction >= 0.0f && min_lr_fraction <= 1.0f, errc::invalid_argument,
                           "train: min_lr_fraction must be in [0, 1], got " + std::to_string(min_lr_fraction));
    nvfp4::detail::require(grad_clip >= 0.0f && eval_every >= 0 && eval_batches > 0 && log_every >= 0 && progress_every >= 0,
                           errc::invalid_argument, "train: grad_clip, eval_every, log_every >= 0 and eval_batches > 0 needed");
    nvfp4::detail::require(
        scaling.initial_scale > 0.0f && std::isfinite(scaling.initial_scale) && scaling.factor > 1.0f && scaling.growth_interval > 0,
        errc::invalid_argument, "train: loss scale must be finite and > 0, factor > 1, growth_interval > 0");
    controls.validate(layer_count);
  }
};

struct train_result {
  std::vector<step_record> steps;
  std::vector<eval_record> evals;
  std::vector<nan_event> nan_events;
  std::vector<layer_stats> layer_log;
  double tokens_per_second = 0.0;   ///< predictions (tokens or examples) per second of training steps
  std::size_t weight_bytes = 0;     ///< FP32 master weights
  std::size_t optimizer_bytes = 0;  ///< optimizer states (codes + scales)
  bool diverged = false;            ///< stopped early: too many skipped steps

  /// Mean training loss of the last `fraction` of the applied steps.
  float final_train_loss(double fraction = 0.1) const {
    std::vector<float> applied;
    for (const auto& s : steps)
      if (!s.skipped && std::isfinite(s.loss)) applied.push_back(s.loss);
    if (applied.empty()) return NAN;
    const std::size_t n = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(applied.size()) * fraction));
    double sum = 0;
    for (std::size_t i = applied.size() - n; i < applied.size(); ++i) sum += applied[i];
    return static_cast<float>(sum / static_cast<double>(n));
  }
  float final_val_loss() const { return evals.empty() ? NAN : evals.back().loss; }
};

/// The learning-rate multiplier at `step`: linear warmup over warmup_steps, then cosine from 1 to
/// min_lr_fraction at the last step.
inline float learning_rate_scale(const train_options& o, long long step) {
  if (step < o.warmup_steps) return static_cast<float>(step + 1) / static_cast<float>(o.warmup_steps);
  const long long decay = o.steps - o.warmup_steps;
  if (decay <= 1) return 1.0f;
  const double t = static_cast<double>(step - o.warmup_steps) / static_cast<double>(decay - 1);
  return static_cast<float>(o.min_lr_fraction + (1.0 - o.min_lr_fraction) * 0.5 * (1.0 + std::cos(std::numbers::pi * t)));
}

/// Mean loss over the first `batches` validation batches; NaN when a pass meets a NaN/Inf.
inline float validation_loss(nn::model& model, const dataset& data, int batches) {
  double sum = 0;
  for (int i = 0; i < batches; ++i) {
    try {
      sum += model.evaluate(data.validation_batch(i));
    } catch (const error& e) {
      if (e.code() != errc::non_finite_input) throw;
      return NAN;
    }
  }
  return static_cast<float>(sum / batches);
}

/// Trains `model` on `data` with `opt` for options.steps steps. The optimizer must have been built
/// over model.parameters(). Throws invalid_argument for bad options (before any step).
inline train_result train(nn::model& model, const dataset& data, optimizer& opt, const train_options& options) {
  options.validate(model.layer_count());
  using clock = std::chrono::steady_clock;
  train_result result;
  training_monitor monitor(options.log_every);
  model.set_observer(&monitor);
  const std::vector<nn::parameter*> params = model.parameters();
  float scale = options.scaling.kind == loss_scaling::mode::none ? 1.0f : options.scaling.initial_scale;
  int good_steps = 0, skipped = 0;
  double train_seconds = 0, predictions = 0, window_loss = 0;
  int window_steps = 0;
  float last_val = NAN;

  auto evaluate = [&](long long after) {
    monitor.begin_step(after, false);
    const nn::autocast region({.grad_enabled = false, .evaluation = options.evaluation});
    last_val = validation_loss(model, data, options.eval_batches);
    result.evals.push_back({after, last_val});
  };

  for (long long step = 0; step < options.steps; ++step) {
    const nn::batch b = data.train_batch(step);
    options.controls.apply(model, step, options.steps);
    for (nn::dense* d : model.dense_layers()) d->begin_step(step);
    if (options.before_step) options.before_step(step, model);
    monitor.begin_step(step, true);
    step_record rec{step, NAN, NAN, learning_rate_scale(options, step), scale, false, 0.0};
    const auto start = clock::now();
    try {
      // TE updates the forward roles when the autocast region exits, before backward; here the
      // region ends after forward_backward, which gives the same bits: backward reads no forward
      // role's scale (it runs on the operands the forward quantized).
      const nn::backward_pass backward;
      const nn::autocast region;
      rec.loss = model.forward_backward(b, scale);
    } catch (const nn::non_finite_tensor&) {
      rec.skipped = true;  // the monitor recorded where
    } catch (const error& e) {
      if (e.code() != errc::non_finite_input) throw;
      monitor.record({step, "(inside a GEMM engine)", -1, "quantizer input"});
      rec.skipped = true;
    }
    if (!rec.skipped && !std::isfinite(rec.loss)) {
      monitor.record({step, "loss", -1, "loss"});
      rec.skipped = true;
    }
    if (!rec.skipped) {
      // Unscale, and catch what the dense layers do not see (embeddings, norm gains).
      const float inv = 1.0f / scale;
      double squares = 0;
      for (nn::parameter* p : params) {
        for (float& g : p->grad) {
          g *= inv;
          squares += static_cast<double>(g) * static_cast<double>(g);
        }
        if (!std::isfinite(squares) && !monitor.event_this_step()) {
          monitor.record({step, p->name, -1, "weight_gradient"});
        }
      }
      rec.grad_norm = static_cast<float>(std::sqrt(squares));
      if (!std::isfinite(squares)) {
        rec.skipped = true;
      } else {
        if (options.grad_clip > 0.0f && rec.grad_norm > options.grad_clip) {
          const float c = options.grad_clip / rec.grad_norm;
          for (nn::parameter* p : params)
            for (float& g : p->grad) g *= c;
        }
        opt.step(rec.lr_scale);
      }
    }
    rec.seconds = std::chrono::duration<double>(clock::now() - start).count();
    // Dynamic loss scaling: back off after an overflow, grow after a run of good steps.
    if (options.scaling.kind == loss_scaling::mode::dynamic) {
      if (rec.skipped) {
        scale = std::max(1.0f, scale / options.scaling.factor);
        good_steps = 0;
      } else if (++good_steps >= options.scaling.growth_interval) {
        scale = std::min(scale * options.scaling.factor, 1e30f);
        good_steps = 0;
      }
    }
    skipped += rec.skipped ? 1 : 0;
    train_seconds += rec.seconds;
    predictions += static_cast<double>(b.predictions());
    if (std::isfinite(rec.loss)) {
      window_loss += rec.loss;
      ++window_steps;
    }
    result.steps.push_back(rec);
    const bool last = step + 1 == options.steps;
    if ((options.eval_every > 0 && (step + 1) % options.eval_every == 0) || last) evaluate(step + 1);
    if (options.on_progress && ((options.progress_every > 0 && (step + 1) % options.progress_every == 0) || last)) {
      options.on_progress({step + 1, options.steps, window_steps > 0 ? static_cast<float>(window_loss / window_steps) : NAN, last_val,
                           train_seconds > 0 ? predictions / train_seconds : 0.0});
      window_loss = 0;
      window_steps = 0;
    }
    if (skipped > options.max_skipped_steps) {
      result.diverged = true;
      if (!last) evaluate(step + 1);
      break;
    }
  }
  model.set_observer(nullptr);
  result.nan_events = monitor.events();
  result.layer_log = monitor.stats();
  result.tokens_per_second = train_seconds > 0 ? predictions / train_seconds : 0.0;
  result.weight_bytes = model.weight_bytes();
  result.optimizer_bytes = opt.state_bytes();
  return result;
}

}  // namespace nvfp4::training
