// nvfp4/nn/transformer.hpp: a tiny decoder-only transformer language model over bytes: token and
// position embeddings, pre-norm blocks (RMSNorm, causal multi-head attention, RMSNorm, GELU MLP),
// a final RMSNorm and an LM head. Embeddings, norms, attention and softmax run in FP32; every
// dense layer (QKV, attention output, MLP up and down, head) runs through its engine.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "nvfp4/nn/functional.hpp"
#include "nvfp4/nn/init.hpp"
#include "nvfp4/nn/model.hpp"

namespace nvfp4::nn {

struct transformer_config {
  index_t vocab = 256;  ///< byte-level
  index_t width = 64;
  int depth = 2;  ///< blocks
  index_t heads = 4;
  index_t seq_len = 64;  ///< the longest sequence (positions)
  index_t mlp_ratio = 4;
  float init_std = 0.02f;
  std::uint64_t seed = 1;
};

/// GPT-style decoder. Model layer i < depth is block i (its four dense layers); layer `depth` is
/// the LM head, so layer_count() = depth + 1.
class transformer_lm final : public model {
 public:
  transformer_lm(const transformer_config& config, const engine_factory& engines)
      : config_(config),
        token_embedding_("tok_emb", parameter_kind::embedding, config.vocab, config.width),
        position_embedding_("pos_emb", parameter_kind::embedding, config.seq_len, config.width),
        final_norm_("ln_f.gain", config.width) {
    nvfp4::detail::require(config.vocab > 1 && config.width > 0 && config.depth >= 1 && config.seq_len > 0 && config.mlp_ratio > 0,
                           errc::invalid_argument, "transformer: vocab > 1, width > 0, depth >= 1, seq_len > 0 needed");
    nvfp4::detail::require(
        config.heads > 0 && config.width % config.heads == 0, errc::invalid_argument,
        "transformer: width " + std::to_string(config.width) + " is not a multiple of heads " + std::to_string(config.heads));
    std::uint64_t stream = 0;
    fill_normal(token_embedding_.value, config.init_std, config.seed, stream++);
    fill_normal(position_embedding_.value, config.init_std, config.seed, stream++);
    const index_t w = config.width, hidden = config.width * config.mlp_ratio;
    // GPT-2: the projections into the residual stream start smaller by 1/√(2·depth).
    const float residual_std = config.init_std / std::sqrt(2.0f * static_cast<float>(config.depth));
    for (int l = 0; l < config.depth; ++l) {
      const std::string p = "blk" + std::to_string(l) + ".";
      auto make = [&](const std::string& name, index_t in, index_t out, float stddev) {
        auto d = std::make_unique<dense>(p + name, l, in, out, parameter_kind::matrix, engines);
        fill_normal(d->weight().value, stddev, config.seed, stream++);
        return d;
      };
      block b{rms_norm(p + "ln1.gain", w),           make("qkv", w, 3 * w, config.init_std),
              causal_attention(w, config.heads),     make("proj", w, w, residual_std),
              rms_norm(p + "ln2.gain", w),           make("up", w, hidden, config.init_std),
              make("down", hidden, w, residual_std), {}};
      blocks_.push_back(std::move(b));
    }
    head_ = std::make_unique<dense>("head", config.depth, w, config.vocab, parameter_kind::head, engines);
    fill_normal(head_->weight().value, config.init_std, config.seed, stream++);
  }

  std::string name() const override { return "transformer"; }
  const transformer_config& config() const { return config_; }

  std::vector<parameter*> parameters() override {
    std::vector<parameter*> out{&token_embedding_, &position_embedding_};
    for (block& b : blocks_) {
      out.insert(out.end(), {&b.norm1.gain(), &b.qkv->weight(), &b.proj->weight(), &b.norm2.gain(), &b.up->weight(), &b.down->weight()});
    }
    out.push_back(&final_norm_.gain());
    out.push_back(&head_->weight());
    return out;
  }
  std::vector<dense*> dense_layers() override {
    std::vector<dense*> out;
    for (block& b : blocks_) out.insert(out.end(), {b.qkv.get(), b.proj.get(), b.up.get(), b.down.get()});
    out.push_back(head_.get());
    return out;
  }
  int layer_count() const override { return config_.depth + 1; }

  float forward_backward(const batch& b, float loss_scale) override {
    std::vector<float> grad;
    const float loss = run_forward(b, true, loss_scale, &grad);
    const index_t rows = nvfp4::detail::checked_element_count(b.rows, b.seq_len, errc::shape_mismatch, "transformer batch"),
                  w = config_.width;
    std::vector<float> dx, dh, tmp;
    head_->backward(grad, dh);
    final_norm_.backward(dh, dx);  // dx: gradient of the residual stream
    for (int l = config_.depth - 1; l >= 0; --l) {
      block& blk = blocks_[static_cast<std::size_t>(l)];
      // x_out = x_mid + down(gelu(up(ln2(x_mid))))
      blk.down->backward(dx, dh);
      gelu_backward(blk.up_out, dh, tmp);
      blk.up->backward(tmp, dh);
      blk.norm2.backward(dh, tmp);
      for (std::size_t i = 0; i < dx.size(); ++i) dx[i] += tmp[i];
      // x_mid = x_in + proj(attn(qkv(ln1(x_in))))
      blk.proj->backward(dx, dh);
      blk.attention.backward(dh, tmp);
      blk.qkv->backward(tmp, dh);
      blk.norm1.backward(dh, tmp);
      for (std::size_t i = 0; i < dx.size(); ++i) dx[i] += tmp[i];
    }
    // Embedding gradients: rows in order, so the sums never depend on threads.
    token_embedding_.zero_grad();
    position_embedding_.zero_grad();
    for (index_t r = 0; r < rows; ++r) {
      const float* g = dx.data() + r * w;
      float* te = token_embedding_.grad.data() + b.inputs[static_cast<std::size_t>(r)] * w;
      float* pe = position_embedding_.grad.data() + (r % b.seq_len) * w;
      for (index_t j = 0; j < w; ++j) {
        te[j] += g[j];
        pe[j] += g[j];
      }
    }
    return loss;
  }
  float evaluate(const batch& b) override { return run_forward(b, false, 1.0f, nullptr); }

 private:
  struct block {
    rms_norm norm1;
    std::unique_ptr<dense> qkv;
    causal_attention attention;
    std::unique_ptr<dense> proj;
    rms_norm norm2;
    std::unique_ptr<dense> up;
    std::unique_ptr<dense> down;
    std::vector<float> up_out;  // pre-GELU, for backward
  };

  float run_forward(const batch& b, bool training, float loss_scale, std::vector<float>* d_logits) {
    const index_t rows = nvfp4::detail::checked_element_count(b.rows, b.seq_len, errc::shape_mismatch, "transformer batch"),
                  w = config_.width;
    nvfp4::detail::require(
        b.seq_len >= 1 && b.seq_len <= config_.seq_len, errc::invalid_argument,
        "transformer: sequence length " + std::to_string(b.seq_len) + " is outside [1, " + std::to_string(config_.seq_len) + "]");
    nvfp4::detail::require(static_cast<index_t>(b.inputs.size()) == rows && b.predictions() == rows, errc::shape_mismatch,
                           "transformer: batch needs rows*seq_len input tokens and as many targets");
    std::vector<float> x(
        static_cast<std::size_t>(nvfp4::detail::checked_element_count(rows, w, errc::shape_mismatch, "transformer activations")));
    for (index_t r = 0; r < rows; ++r) {
      const std::int32_t token = b.inputs[static_cast<std::size_t>(r)];
      nvfp4::detail::require(token >= 0 && token < config_.vocab, errc::invalid_argument,
                             "transformer: token " + std::to_string(token) + " at " + std::to_string(r) + " is outside the vocabulary");
      const float* te = token_embedding_.value.data() + token * w;
      const float* pe = position_embedding_.value.data() + (r % b.seq_len) * w;
      for (index_t j = 0; j < w; ++j) x[static_cast<std::size_t>(r * w + j)] = te[j] + pe[j];
    }
    std::vector<float> h, y, a, g;
    for (block& blk : blocks_) {
      blk.norm1.forward(x, rows, h);
      blk.qkv->forward(h, rows, y, training);
      blk.attention.forward(y, b.rows, b.seq_len, a);
      blk.proj->forward(a, rows, y, training);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i];
      blk.norm2.forward(x, rows, h);
      blk.up->forward(h, rows, blk.up_out, training);
      gelu_forward(blk.up_out, g);
      blk.down->forward(g, rows, y, training);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    }
    final_norm_.forward(x, rows, h);
    head_->forward(h, rows, logits_, training);
    return softmax_cross_entropy(logits_, config_.vocab, b.targets, loss_scale, d_logits);
  }

  transformer_config config_;
  parameter token_embedding_, position_embedding_;
  std::vector<block> blocks_;
  rms_norm final_norm_;
  std::unique_ptr<dense> head_;
  std::vector<float> logits_;
};

}  // namespace nvfp4::nn
