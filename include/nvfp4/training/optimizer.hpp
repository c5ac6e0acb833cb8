// nvfp4/training/optimizer.hpp: AdamW, SGD with momentum and Muon over FP32 master weights. The
// update math runs in FP32; each state tensor is stored in the format its parameter's plan names
// (optimizer_state.hpp), so the memory of weights + states is known to the byte.
#pragma once

#include <cmath>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/gemm/float_gemm.hpp"
#include "nvfp4/nn/parameter.hpp"
#include "nvfp4/training/optimizer_state.hpp"

namespace nvfp4::training {

/// Storage of a parameter's two state tensors (Adam: first and second moment; SGD and Muon: the
/// momentum buffer is `first`).
struct state_formats {
  state_format first = state_format::fp32;
  state_format second = state_format::fp32;
};

/// Which storage each parameter's states get: a default, and overrides by parameter name.
struct state_plan {
  state_formats default_formats{};
  std::map<std::string, state_formats> by_name{};

  state_formats for_parameter(const nn::parameter& p) const {
    const auto it = by_name.find(p.name);
    return it == by_name.end() ? default_formats : it->second;
  }
};

/// The interface the trainer steps.
class optimizer {
 public:
  virtual ~optimizer() = default;
  /// One update of every parameter from its gradient, with learning-rate multiplier `lr_scale`
  /// (a schedule's factor, 1 for the configured rate). Throws non_finite_input, before anything
  /// is updated, if a gradient holds NaN or Inf.
  virtual void step(float lr_scale = 1.0f) = 0;
  /// Bytes of all state tensors (codes + scales), exact.
  virtual std::size_t state_bytes() const = 0;
  /// Steps taken so far.
  virtual long long steps() const = 0;
  virtual std::string name() const = 0;
};

namespace detail {

inline void require_finite_gradients(std::span<nn::parameter* const> params, const char* who) {
  for (const nn::parameter* p : params) {
    for (std::size_t i = 0; i < p->grad.size(); ++i) {
      if (!std::isfinite(p->grad[i])) {
        throw error(errc::non_finite_input, std::string(who) + ": the gradient of '" + p->name + "' holds " +
                                                (std::isnan(p->grad[i]) ? "NaN" : "Inf") + " at index " + std::to_string(i) +
                                                "; skip the step (the trainer's NaN monitor does) or lower the loss scale");
      }
    }
  }
}

inline void require_unit_interval(float value, bool closed_right, const char* what) {
  const bool ok = value >= 0.0f && (closed_right ? value <= 1.0f : value < 1.0f);
  nvfp4::detail::require(ok, errc::invalid_argument,
                         std::string(what) + " must be in [0, 1" + (closed_right ? "]" : ")") + ", got " + std::to_string(value));
}

/// Weight decay applies to matrices (dense, head, embedding), never to gains and biases.
inline bool decays(const nn::parameter& p) { return p.kind != nn::parameter_kind::vector; }

}  // namespace detail

/// AdamW options (PyTorch's defaults, decoupled weight decay).
struct adamw_options {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
  state_plan states{};
};

/// AdamW (Loshchilov & Hutter), in FP32 per element, as PyTorch's torch.optim.AdamW orders it:
///   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;
///   p ← p − (lr / (1−β1^t)) · m / (√v / √(1−β2^t) + ε)
/// with t the step count from 1 (the bias corrections are computed in double, then rounded).
class adamw final : public optimizer {
 public:
  adamw(std::vector<nn::parameter*> params, adamw_options options) : params_(std::move(params)), options_(std::move(options)) {
    detail::require_unit_interval(options_.beta1, false, "adamw: beta1");
    detail::require_unit_interval(options_.beta2, false, "adamw: beta2");
    nvfp4::detail::require(options_.lr >= 0.0f && options_.eps >= 0.0f && options_.weight_decay >= 0.0f, errc::invalid_argument,
                           "adamw: lr, eps and weight_decay must be >= 0");
    for (const nn::parameter* p : params_) {
      nvfp4::detail::require(p != nullptr, errc::null_pointer, "adamw: null parameter");
      const state_formats f = options_.states.for_parameter(*p);
      first_.emplace_back(f.first, p->size());
      second_.emplace_back(f.second, p->size());
    }
  }

  void step(float lr_scale = 1.0f) override {
    detail::require_finite_gradients(params_, "adamw");
    ++steps_;
    const float lr = options_.lr * lr_scale;
    const float b1 = options_.beta1, b2 = options_.beta2;
    const float bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(b1), static_cast<double>(steps_)));
    const float bias2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(b2), static_cast<double>(steps_))));
    const float step_size = lr / bias1;
    for (std::size_t t = 0; t < params_.size(); ++t) {
      nn::parameter& p = *params_[t];
      const std::size_t n = p.value.size();
      m_.resize(n);
      v_.resize(n);
      first_[t].load(m_);
      second_[t].load(v_);
      const float decay = detail::decays(p) ? 1.0f - lr * options_.weight_decay : 1.0f;
      for (std::size_t i = 0; i < n; ++i) {
        const float g = p.grad[i];
        const float m = b1 * m_[i] + (1.0f - b1) * g;
        const float v = b2 * v_[i] + (1.0f - b2) * (g * g);
        m_[i] = m;
        v_[i] = v;
        const float denom = std::sqrt(v) / bias2_sqrt + options_.eps;
        p.value[i] = p.value[i] * decay - step_size * (m / denom);
      }
      first_[t].store(m_);
      second_[t].store(v_);
    }
  }

  std::size_t state_bytes() const override {
    std::size_t total = 0;
    for (const auto& s : first_) total += s.bytes();
    for (const auto& s : second_) total += s.bytes();
    return total;
  }
  long long steps() const override { return steps_; }
  std::string name() const override { return "adamw"; }
  const adamw_options& options() const { return options_; }
  /// The state tensors of parameter `index` (in the order given to the constructor).
  const state_tensor& first_moment(std::size_t index) const { return first_.at(index); }
  const state_tensor& second_moment(std::size_t index) const { return second_.at(index); }

 private:
  std::vector<nn::parameter*> params_;
  adamw_options options_;
  std::vector<state_tensor> first_, second_;
  std::vector<float> m_, v_;
  long long steps_ = 0;
};

/// SGD options (PyTorch's torch.optim.SGD without dampening).
struct sgd_options {
  float lr = 0.1f;
  float momentum = 0.9f;
  bool nesterov = false;
  float weight_decay = 0.0f;  ///< L2, added to the gradient as PyTorch's SGD does
  state_plan states{};        ///< the momentum buffer is `first`
};

/// SGD with momentum, in FP32 per element, as PyTorch orders it:
///   g ← g + wd·p;  b ← μ·b + g (b = g on the first step);  d ← nesterov ? g + μ·b : b;  p ← p − lr·d
class sgd_momentum final : public optimizer {
 public:
  sgd_momentum(std::vector<nn::parameter*> params, sgd_options options) : params_(std::move(params)), options_(std::move(options)) {
    detail::require_unit_interval(options_.momentum, false, "sgd: momentum");
    nvfp4::detail::require(options_.lr >= 0.0f && options_.weight_decay >= 0.0f, errc::invalid_argument,
                           "sgd: lr and weight_decay must be >= 0");
    for (const nn::parameter* p : params_) {
      nvfp4::detail::require(p != nullptr, errc::null_pointer, "sgd: null parameter");
      buffers_.emplace_back(options_.states.for_parameter(*p).first, p->size());
    }
  }

  void step(float lr_scale = 1.0f) override {
    detail::require_finite_gradients(params_, "sgd");
    const float lr = options_.lr * lr_scale;
    const float mu = options_.momentum;
    for (std::size_t t = 0; t < params_.size(); ++t) {
      nn::parameter& p = *params_[t];
      const std::size_t n = p.value.size();
      b_.resize(n);
      buffers_[t].load(b_);
      const float wd = detail::decays(p) ? options_.weight_decay : 0.0f;
      for (std::size_t i = 0; i < n; ++i) {
        const float g = p.grad[i] + wd * p.value[i];
        const float b = steps_ == 0 ? g : mu * b_[i] + g;
        b_[i] = b;
        const float d = options_.nesterov ? g + mu * b : b;
        p.value[i] -= lr * d;
      }
      buffers_[t].store(b_);
    }
    ++steps_;
  }

  std::size_t state_bytes() const override {
    std::size_t total = 0;
    for (const auto& s : buffers_) total += s.bytes();
    return total;
  }
  long long steps() const override { return steps_; }
  std::string name() const override { return "sgd"; }

 private:
  std::vector<nn::parameter*> params_;
  sgd_options options_;
  std::vector<state_tensor> buffers_;
  std::vector<float> b_;
  long long steps_ = 0;
};

/// Muon options (Keller Jordan's reference defaults). Parameters that are not hidden matrices go
/// to an AdamW with `adamw`'s options.
struct muon_options {
  float lr = 0.02f;
  float momentum = 0.95f;
  bool nesterov = true;
  int newton_schulz_steps = 5;
  float weight_decay = 0.0f;
  state_plan states{};  ///< the momentum buffer is `first`
  adamw_options adamw{};
};

/// The quintic Newton-Schulz iteration of Muon in FP32: returns an approximately orthogonal
/// matrix U·Vᵀ-like of g [rows, cols] (row-major): X = g / (‖g‖_F + 1e-7), transposed when
/// rows > cols, then `steps` times A = X·Xᵀ, B = b·A + c·A·A, X = a·X + B·X with
/// (a, b, c) = (3.4445, −4.7750, 2.0315). The norm is summed in double, in order.
inline std::vector<float> newton_schulz_orthogonalize(std::span<const float> g, index_t rows, index_t cols, int steps) {
  nvfp4::detail::require(rows >= 0 && cols >= 0 && static_cast<index_t>(g.size()) == rows * cols, errc::shape_mismatch,
                         "newton_schulz_orthogonalize: size does not match the shape");
  constexpr float a = 3.4445f, b = -4.7750f, c = 2.0315f;
  double sum = 0.0;
  for (float v : g) sum += static_cast<double>(v) * static_cast<double>(v);
  const float inv = 1.0f / (static_cast<float>(std::sqrt(sum)) + 1e-7f);
  const bool transpose = rows > cols;
  const index_t r = transpose ? cols : rows, k = transpose ? rows : cols;
  std::vector<float> x(g.size()), gram(static_cast<std::size_t>(r * r)), gram2(gram.size()), poly(gram.size()), next(g.size());
  for (index_t i = 0; i < rows; ++i)
    for (index_t j = 0; j < cols; ++j) {
      const float v = g[static_cast<std::size_t>(i * cols + j)] * inv;
      x[static_cast<std::size_t>(transpose ? j * rows + i : i * cols + j)] = v;
    }
  using view = matrix_view<float>;
  using cview = matrix_view<const float>;
  // float_gemm computes A·Bᵀ: X·Xᵀ directly, A·A as A·Aᵀ (A is symmetric), B·X as B·(Xᵀ)ᵀ.
  for (int s = 0; s < steps; ++s) {
    const cview xv = cview::row_major(x.data(), r, k), gv = cview::row_major(gram.data(), r, r);
    float_gemm(xv, xv, {}, view::row_major(gram.data(), r, r));
    float_gemm(gv, gv, {}, view::row_major(gram2.data(), r, r));
    for (std::size_t i = 0; i < gram.size(); ++i) poly[i] = b * gram[i] + c * gram2[i];
    float_gemm(cview::row_major(poly.data(), r, r), xv.transposed(), {}, view::row_major(next.data(), r, k));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = a * x[i] + next[i];
  }
  if (!transpose) return x;
  std::vector<float> out(g.size());
  for (index_t i = 0; i < rows; ++i)
    for (index_t j = 0; j < cols; ++j) out[static_cast<std::size_t>(i * cols + j)] = x[static_cast<std::size_t>(j * rows + i)];
  return out;
}

/// Muon (MomentUm Orthogonalized by Newton-Schulz) for hidden matrices, AdamW for the rest:
///   b ← b + (1−μ)·(g − b);  u ← nesterov ? g + μ·(b − g) : b;  O = NS(u);
///   p ← p·(1 − lr·wd) − lr·√max(1, rows/cols)·O
/// Matrices (parameter_kind::matrix) get Muon; heads, embeddings and vectors get AdamW.
class muon final : public optimizer {
 public:
  muon(std::vector<nn::parameter*> params, muon_options options) : options_(std::move(options)) {
    detail::require_unit_interval(options_.momentum, false, "muon: momentum");
    nvfp4::detail::require(options_.lr >= 0.0f && options_.weight_decay >= 0.0f && options_.newton_schulz_steps >= 0,
                           errc::invalid_argument, "muon: lr, weight_decay and newton_schulz_steps must be >= 0");
    std::vector<nn::parameter*> rest;
    for (nn::parameter* p : params) {
      nvfp4::detail::require(p != nullptr, errc::null_pointer, "muon: null parameter");
      if (p->kind == nn::parameter_kind::matrix) {
        matrices_.push_back(p);
        buffers_.emplace_back(options_.states.for_parameter(*p).first, p->size());
      } else {
        rest.push_back(p);
      }
    }
    fallback_ = std::make_unique<adamw>(std::move(rest), options_.adamw);
  }

  void step(float lr_scale = 1.0f) override {
    detail::require_finite_gradients(matrices_, "muon");
    const float lr = options_.lr * lr_scale;
    const float mu = options_.momentum;
    fallback_->step(lr_scale);  // checks its own gradients before touching anything
    for (std::size_t t = 0; t < matrices_.size(); ++t) {
      nn::parameter& p = *matrices_[t];
      const std::size_t n = p.value.size();
      b_.resize(n);
      u_.resize(n);
      buffers_[t].load(b_);
      for (std::size_t i = 0; i < n; ++i) {
        const float g = p.grad[i];
        const float b = b_[i] + (1.0f - mu) * (g - b_[i]);
        b_[i] = b;
        u_[i] = options_.nesterov ? g + mu * (b - g) : b;
      }
      buffers_[t].store(b_);
      const std::vector<float> o = newton_schulz_orthogonalize(u_, p.rows, p.cols, options_.newton_schulz_steps);
      const float shape_scale = std::sqrt(std::max(1.0f, static_cast<float>(p.rows) / static_cast<float>(p.cols)));
      const float decay = 1.0f - lr * options_.weight_decay;
      for (std::size_t i = 0; i < n; ++i) p.value[i] = p.value[i] * decay - lr * shape_scale * o[i];
    }
    ++steps_;
  }

  std::size_t state_bytes() const override {
    std::size_t total = fallback_->state_bytes();
    for (const auto& s : buffers_) total += s.bytes();
    return total;
  }
  long long steps() const override { return steps_; }
  std::string name() const override { return "muon"; }

 private:
  muon_options options_;
  std::vector<nn::parameter*> matrices_;
  std::vector<state_tensor> buffers_;
  std::unique_ptr<adamw> fallback_;
  std::vector<float> b_, u_;
  long long steps_ = 0;
};

}  // namespace nvfp4::training
