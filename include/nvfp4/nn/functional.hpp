// nvfp4/nn/functional.hpp: the FP32 pieces of the models between their dense layers: RMSNorm, the
// tanh GELU, causal multi-head attention and softmax cross-entropy, each with its backward pass.
// Work is split so each output value has one writer and every sum runs in a fixed order: results
// never depend on the thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/nn/parameter.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4::nn {

/// RMSNorm over the last dimension with a learned gain: y = x / √(mean(x²) + ε) · g.
class rms_norm {
 public:
  rms_norm(std::string name, index_t width, float eps = 1e-5f) : gain_(std::move(name), parameter_kind::vector, 1, width), eps_(eps) {
    std::fill(gain_.value.begin(), gain_.value.end(), 1.0f);
  }
  parameter& gain() { return gain_; }

  /// y [rows, width] for x [rows, width]; keeps x and 1/rms for backward.
  void forward(std::span<const float> x, index_t rows, std::vector<float>& y) {
    const index_t width = gain_.cols;
    nvfp4::detail::require(
        static_cast<index_t>(x.size()) == nvfp4::detail::checked_element_count(rows, width, errc::shape_mismatch, "rms_norm input"),
        errc::shape_mismatch, "rms_norm: input is not [rows, width]");
    x_.assign(x.begin(), x.end());
    inv_rms_.resize(static_cast<std::size_t>(rows));
    y.resize(x.size());
    simd::parallel_ranges(rows, simd::worth_parallel(rows * width), [&](index_t begin, index_t end) {
      for (index_t r = begin; r < end; ++r) {
        const float* in = x.data() + r * width;
        float sum = 0.0f;
        for (index_t j = 0; j < width; ++j) sum += in[j] * in[j];
        const float inv = 1.0f / std::sqrt(sum / static_cast<float>(width) + eps_);
        inv_rms_[static_cast<std::size_t>(r)] = inv;
        for (index_t j = 0; j < width; ++j)
          y[static_cast<std::size_t>(r * width + j)] = in[j] * inv * gain_.value[static_cast<std::size_t>(j)];
      }
    });
  }

  /// dx for dy; writes the gain's gradient.
  void backward(std::span<const float> dy, std::vector<float>& dx) {
    const index_t width = gain_.cols;
    const index_t rows = static_cast<index_t>(inv_rms_.size());
    nvfp4::detail::require(
        static_cast<index_t>(dy.size()) == nvfp4::detail::checked_element_count(rows, width, errc::shape_mismatch, "rms_norm gradient"),
        errc::shape_mismatch, "rms_norm: gradient is not [rows, width]");
    dx.resize(dy.size());
    simd::parallel_ranges(rows, simd::worth_parallel(rows * width), [&](index_t begin, index_t end) {
      for (index_t r = begin; r < end; ++r) {
        const float inv = inv_rms_[static_cast<std::size_t>(r)];
        const float* in = x_.data() + r * width;
        const float* g = dy.data() + r * width;
        float dot = 0.0f;  // Σ (dy·gain)·x̂
        for (index_t j = 0; j < width; ++j) dot += g[j] * gain_.value[static_cast<std::size_t>(j)] * in[j] * inv;
        const float mean_dot = dot / static_cast<float>(width);
        for (index_t j = 0; j < width; ++j) {
          const float xhat = in[j] * inv;
          dx[static_cast<std::size_t>(r * width + j)] = inv * (g[j] * gain_.value[static_cast<std::size_t>(j)] - xhat * mean_dot);
        }
      }
    });
    // The gain's gradient sums over rows: one writer per column, rows in order.
    simd::parallel_ranges(width, simd::worth_parallel(rows * width), [&](index_t begin, index_t end) {
      for (index_t j = begin; j < end; ++j) {
        float sum = 0.0f;
        for (index_t r = 0; r < rows; ++r)
          sum += dy[static_cast<std::size_t>(r * width + j)] * x_[static_cast<std::size_t>(r * width + j)] *
                 inv_rms_[static_cast<std::size_t>(r)];
        gain_.grad[static_cast<std::size_t>(j)] = sum;
      }
    });
  }

 private:
  parameter gain_;
  float eps_;
  std::vector<float> x_, inv_rms_;
};

/// GELU with the tanh approximation (GPT-2's): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
inline void gelu_forward(std::span<const float> x, std::vector<float>& y) {
  constexpr float c = 0.7978845608028654f;  // √(2/π)
  y.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(c * (v + 0.044715f * v * v * v)));
  }
}

/// dx = dy · GELU'(x).
inline void gelu_backward(std::span<const float> x, std::span<const float> dy, std::vector<float>& dx) {
  constexpr float c = 0.7978845608028654f;
  dx.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    const float t = std::tanh(c * (v + 0.044715f * v * v * v));
    const float dt = (1.0f - t * t) * c * (1.0f + 3.0f * 0.044715f * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * dt);
  }
}

/// Causal multi-head self-attention over a packed QKV tensor [batch·seq, 3·width] (Q, K, V side by
/// side, head h in columns [h·d, (h+1)·d) of each), in FP32: softmax(Q·Kᵀ/√d + causal mask)·V.
class causal_attention {
 public:
  causal_attention(index_t width, index_t heads) : width_(width), heads_(heads) {
    nvfp4::detail::require(width > 0 && heads > 0 && width % heads == 0, errc::invalid_argument,
                           "attention: width " + std::to_string(width) + " is not a multiple of heads " + std::to_string(heads));
  }

  /// out [batch·seq, width]; keeps QKV and the probabilities for backward.
  void forward(std::span<const float> qkv, index_t batch, index_t seq, std::vector<float>& out) {
    nvfp4::detail::require(static_cast<index_t>(qkv.size()) == batch * seq * 3 * width_, errc::shape_mismatch,
                           "attention: QKV is not [batch*seq, 3*width]");
    batch_ = batch, seq_ = seq;
    qkv_.assign(qkv.begin(), qkv.end());
    probs_.assign(static_cast<std::size_t>(batch * heads_ * seq * seq), 0.0f);
    out.assign(static_cast<std::size_t>(batch * seq * width_), 0.0f);
    const index_t d = width_ / heads_;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const index_t stride = 3 * width_;
    simd::parallel_ranges(batch * heads_, simd::worth_parallel(batch * heads_ * seq * seq * d), [&](index_t begin, index_t end) {
      for (index_t bh = begin; bh < end; ++bh) {
        const index_t b = bh / heads_, h = bh % heads_;
        const float* base = qkv_.data() + b * seq * stride;
        float* p = probs_.data() + bh * seq * seq;
        for (index_t t = 0; t < seq; ++t) {
          const float* q = base + t * stride + h * d;
          float max = -INFINITY;
          for (index_t s = 0; s <= t; ++s) {
            const float* k = base + s * stride + width_ + h * d;
            float dot = 0.0f;
            for (index_t i = 0; i < d; ++i) dot += q[i] * k[i];
            p[t * seq + s] = dot * scale;
            max = std::max(max, dot * scale);
          }
          float sum = 0.0f;
          for (index_t s = 0; s <= t; ++s) {
            const float e = std::exp(p[t * seq + s] - max);
            p[t * seq + s] = e;
            sum += e;
          }
          const float inv = 1.0f / sum;
          float* o = out.data() + (b * seq + t) * width_ + h * d;
          for (index_t s = 0; s <= t; ++s) {
            p[t * seq + s] *= inv;
            const float* v = base + s * stride + 2 * width_ + h * d;
            for (index_t i = 0; i < d; ++i) o[i] += p[t * seq + s] * v[i];
          }
        }
      }
    });
  }

  /// dQKV [batch·seq, 3·width] for d_out [batch·seq, width].
  void backward(std::span<const float> d_out, std::vector<float>& d_qkv) {
    const index_t batch = batch_, seq = seq_, d = width_ / heads_, stride = 3 * width_;
    nvfp4::detail::require(static_cast<index_t>(d_out.size()) == batch * seq * width_, errc::shape_mismatch,
                           "attention: gradient is not [batch*seq, width]");
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    d_qkv.assign(static_cast<std::size_t>(batch * seq * stride), 0.0f);
    simd::parallel_ranges(batch * heads_, simd::worth_parallel(batch * heads_ * seq * seq * d), [&](index_t begin, index_t end) {
      for (index_t bh = begin; bh < end; ++bh) {
        const index_t b = bh / heads_, h = bh % heads_;
        const float* base = qkv_.data() + b * seq * stride;
        float* dbase = d_qkv.data() + b * seq * stride;
        const float* p = probs_.data() + bh * seq * seq;
        std::vector<float> dp(static_cast<std::size_t>(seq));
        for (index_t t = 0; t < seq; ++t) {
          const float* go = d_out.data() + (b * seq + t) * width_ + h * d;
          // dP[t, s] = dO[t]·V[s]; dS = P ⊙ (dP − Σ_s P·dP)
          float row_dot = 0.0f;
          for (index_t s = 0; s <= t; ++s) {
            const float* v = base + s * stride + 2 * width_ + h * d;
            float dot = 0.0f;
            for (index_t i = 0; i < d; ++i) dot += go[i] * v[i];
            dp[static_cast<std::size_t>(s)] = dot;
            row_dot += p[t * seq + s] * dot;
          }
          const float* q = base + t * stride + h * d;
          float* dq = dbase + t * stride + h * d;
          for (index_t s = 0; s <= t; ++s) {
            const float ds = p[t * seq + s] * (dp[static_cast<std::size_t>(s)] - row_dot) * scale;
            const float* k = base + s * stride + width_ + h * d;
            float* dk = dbase + s * stride + width_ + h * d;
            float* dv = dbase + s * stride + 2 * width_ + h * d;
            for (index_t i = 0; i < d; ++i) {
              dq[i] += ds * k[i];
              dk[i] += ds * q[i];
              dv[i] += p[t * seq + s] * go[i];
            }
          }
        }
      }
    });
  }

 private:
  index_t width_, heads_;
  index_t batch_ = 0, seq_ = 0;
  std::vector<float> qkv_, probs_;
};

/// Mean softmax cross-entropy of logits [rows, classes] against targets, and its gradient
/// (softmax − one-hot) · scale / rows. Throws invalid_argument for a target outside [0, classes).
inline float softmax_cross_entropy(std::span<const float> logits, index_t classes, std::span<const std::int32_t> targets,
                                   float gradient_scale, std::vector<float>* d_logits) {
  const index_t rows = static_cast<index_t>(targets.size());
  nvfp4::detail::require(
      classes > 0 && static_cast<index_t>(logits.size()) ==
                         nvfp4::detail::checked_element_count(rows, classes, errc::shape_mismatch, "cross_entropy logits"),
      errc::shape_mismatch, "cross_entropy: logits are not [targets, classes]");
  for (index_t r = 0; r < rows; ++r) {
    const std::int32_t t = targets[static_cast<std::size_t>(r)];
    nvfp4::detail::require(
        t >= 0 && t < classes, errc::invalid_argument,
        "cross_entropy: target " + std::to_string(t) + " at row " + std::to_string(r) + " is outside [0, " + std::to_string(classes) + ")");
  }
  std::vector<float> row_loss(static_cast<std::size_t>(rows));
  if (d_logits != nullptr) d_logits->resize(logits.size());
  const float g = rows > 0 ? gradient_scale / static_cast<float>(rows) : 0.0f;
  simd::parallel_ranges(rows, simd::worth_parallel(rows * classes), [&](index_t begin, index_t end) {
    for (index_t r = begin; r < end; ++r) {
      const float* z = logits.data() + r * classes;
      float max = z[0];
      for (index_t c = 1; c < classes; ++c) max = std::max(max, z[c]);
      float sum = 0.0f;
      for (index_t c = 0; c < classes; ++c) sum += std::exp(z[c] - max);
      const float log_sum = std::log(sum) + max;
      const std::int32_t t = targets[static_cast<std::size_t>(r)];
      row_loss[static_cast<std::size_t>(r)] = log_sum - z[t];
      if (d_logits != nullptr) {
        float* dz = d_logits->data() + r * classes;
        for (index_t c = 0; c < classes; ++c) dz[c] = std::exp(z[c] - log_sum) * g;
        dz[t] -= g;
      }
    }
  });
  double total = 0.0;  // in row order: the same sum for any thread count
  for (float l : row_loss) total += l;
  return rows > 0 ? static_cast<float>(total / static_cast<double>(rows)) : 0.0f;
}

}  // namespace nvfp4::nn
