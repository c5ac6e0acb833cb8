// nvfp4/nn/detail/owned_parameters.hpp: a Linear layer's own W, b and their gradients
// (parameter_storage::owned), and the calls on them: forward(x), infer(x), backward(dy) on the
// last forward. A base of nn::basic_linear (CRTP), which computes each through its calls on views.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "nvfp4/nn/detail/linear_checks.hpp"
#include "nvfp4/nn/linear_options.hpp"

namespace nvfp4::nn::detail {

template <class Layer>
class owned_parameters {
 public:
  /// The FP32 master weight W [out, in], row-major, and the bias (empty for external storage).
  std::span<float> weight() { return weight_; }
  std::span<const float> weight() const { return weight_; }
  matrix_view<const float> weight_view() const { return matrix_view<const float>::row_major(weight_.data(), out(), in()); }
  std::span<float> bias() { return bias_; }
  std::span<const float> bias() const { return bias_; }
  /// dW and db of the last backward(dy), fp32.
  std::span<float> weight_grad() { return weight_grad_; }
  std::span<const float> weight_grad() const { return weight_grad_; }
  std::span<float> bias_grad() { return bias_grad_; }
  std::span<const float> bias_grad() const { return bias_grad_; }

  /// forward / infer on the layer's own W and b (Layer::forward(parameters, x, y, cache)).
  void forward(matrix_view<const float> x, matrix_view<float> y, weight_cache cache = weight_cache::off) {
    (void)layer().forward(parameters("forward"), x, y, cache);
  }
  std::vector<float> forward(matrix_view<const float> x, weight_cache cache = weight_cache::off) {
    std::vector<float> y(output_size(x.rows(), out()));
    forward(x, matrix_view<float>::row_major(y.data(), x.rows(), out()), cache);
    return y;
  }
  void infer(matrix_view<const float> x, matrix_view<float> y, weight_cache cache = weight_cache::off) {
    layer().infer(parameters("infer"), x, y, cache);
  }
  std::vector<float> infer(matrix_view<const float> x, weight_cache cache = weight_cache::off) {
    std::vector<float> y(output_size(x.rows(), out()));
    infer(x, matrix_view<float>::row_major(y.data(), x.rows(), out()), cache);
    return y;
  }
  /// backward on the last training forward, dW and db into weight_grad() and bias_grad().
  void backward(matrix_view<const float> dy, matrix_view<float> dx) {
    require(layer().options().parameters == parameter_storage::owned, errc::invalid_argument,
            "linear::backward: this layer's parameters are external; pass where dW (and db) go: backward(dy, dx, gradients)");
    layer().backward(dy, dx, linear_gradients{matrix_view<float>::row_major(weight_grad_.data(), out(), in()), bias_grad_});
  }
  std::vector<float> backward(matrix_view<const float> dy) {
    std::vector<float> dx(output_size(dy.rows(), in()));
    backward(dy, matrix_view<float>::row_major(dx.data(), dy.rows(), in()));
    return dx;
  }

 protected:
  /// Zero-filled W, dW, and b, db with a bias (owned storage only).
  void allocate(std::size_t weight_count, index_t out_features, const linear_options& o) {
    if (o.parameters != parameter_storage::owned) return;
    weight_.assign(weight_count, 0.0f);
    weight_grad_.assign(weight_count, 0.0f);
    bias_.assign(o.bias ? static_cast<std::size_t>(out_features) : 0, 0.0f);
    bias_grad_.assign(bias_.size(), 0.0f);
  }

 private:
  Layer& layer() { return static_cast<Layer&>(*this); }
  const Layer& layer() const { return static_cast<const Layer&>(*this); }
  index_t in() const { return layer().in_features(); }
  index_t out() const { return layer().out_features(); }
  linear_parameters parameters(const char* who) const {
    require(layer().options().parameters == parameter_storage::owned, errc::invalid_argument,
            std::string("linear::") + who + ": this layer's parameters are external; pass them: " + who + "(parameters, x, y)");
    return {weight_view(), std::span<const float>(bias_)};
  }

  std::vector<float> weight_, bias_, weight_grad_, bias_grad_;
};

}  // namespace nvfp4::nn::detail
