// nvfp4/nn/dense.hpp: a dense (fully connected, bias-free) layer of a model, Y = X·Wᵀ, whose three
// GEMMs run through a pluggable engine: FP32, plain BF16, or an emulated low-precision recipe.
// The layer owns the FP32 master weight, lets an observer see every tensor before it is used
// (NaN/Inf monitoring, amax logs), and can switch to a high-precision engine step by step (the
// training controls: BF16 first/last layers, BF16 cooldown).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/nn/matmul.hpp"
#include "nvfp4/nn/parameter.hpp"

namespace nvfp4::nn {

/// A tensor of a dense layer, as an observer sees it.
enum class tensor_role {
  activation,       ///< X, the layer's input [M, K]
  weight,           ///< W, the FP32 master weight [N, K]
  output,           ///< Y, the layer's output [M, N]
  output_gradient,  ///< dY, the gradient arriving from above [M, N]
  weight_gradient   ///< dW, the weight's gradient [N, K]
};

constexpr const char* tensor_role_name(tensor_role role) {
  switch (role) {
    case tensor_role::activation: return "activation";
    case tensor_role::weight: return "weight";
    case tensor_role::output: return "output";
    case tensor_role::output_gradient: return "gradient";
    case tensor_role::weight_gradient: return "weight_gradient";
  }
  return "?";
}

class dense;

/// Sees each tensor of each dense layer before the layer uses it.
class tensor_observer {
 public:
  virtual ~tensor_observer() = default;
  /// Returns false when the tensor must not be used (it holds NaN/Inf): the layer then throws
  /// non_finite_tensor instead of handing it to a quantizer.
  virtual bool observe(const dense& layer, tensor_role role, std::span<const float> values) = 0;
};

/// Thrown by a dense layer whose observer rejected a tensor; says which layer and tensor.
class non_finite_tensor : public error {
 public:
  non_finite_tensor(const std::string& layer, tensor_role role)
      : error(errc::non_finite_input, "dense layer '" + layer + "': the " + tensor_role_name(role) + " holds NaN or Inf"),
        layer_(layer),
        role_(role) {}
  const std::string& layer() const noexcept { return layer_; }
  tensor_role role() const noexcept { return role_; }

 private:
  std::string layer_;
  tensor_role role_;
};

/// How a dense layer computes its GEMMs. An engine belongs to one layer and may keep state from
/// step to step (an FP8 amax history) and from forward to backward (quantized operands).
class gemm_engine {
 public:
  virtual ~gemm_engine() = default;
  /// A short name for reports ("fp32", "bf16", "nvfp4", ...).
  virtual std::string name() const = 0;
  /// Called once per training step before the forward pass (seeds of stochastic rounding, ...).
  virtual void begin_step(long long /*step*/) {}
  /// Y [M, N] = X [M, K] · Wᵀ with W [N, K]. `training` is false for evaluation passes, which must
  /// leave the engine's step-to-step state as it was.
  virtual void forward(matrix_view<const float> x, matrix_view<const float> w, matrix_view<float> y, bool training) = 0;
  /// dX [M, K] = dY · W and dW [N, K] = dYᵀ · X for the X and W of the last training forward.
  virtual void backward(matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) = 0;
};

/// FP32 GEMMs (nn::matmul): the reference every recipe is compared with.
class fp32_engine final : public gemm_engine {
 public:
  std::string name() const override { return "fp32"; }
  void forward(matrix_view<const float> x, matrix_view<const float> w, matrix_view<float> y, bool training) override {
    matmul(x, w.transposed(), y);
    if (training) keep(x, w);
  }
  void backward(matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) override {
    const auto x = matrix_view<const float>::row_major(x_.data(), rows_, k_);
    const auto w = matrix_view<const float>::row_major(w_.data(), n_, k_);
    matmul(dy, w, dx);
    matmul(dy.transposed(), x, dw);
  }

 protected:
  void keep(matrix_view<const float> x, matrix_view<const float> w) {
    rows_ = x.rows(), k_ = x.cols(), n_ = w.rows();
    x_.resize(static_cast<std::size_t>(rows_ * k_));
    w_.resize(static_cast<std::size_t>(n_ * k_));
    for (index_t i = 0; i < rows_; ++i)
      for (index_t j = 0; j < k_; ++j) x_[static_cast<std::size_t>(i * k_ + j)] = x(i, j);
    for (index_t i = 0; i < n_; ++i)
      for (index_t j = 0; j < k_; ++j) w_[static_cast<std::size_t>(i * k_ + j)] = w(i, j);
  }
  std::vector<float> x_, w_;
  index_t rows_ = 0, k_ = 0, n_ = 0;
};

/// Rounds every value to the nearest bf16 (ties to even) in place.
inline void round_to_bf16(std::span<float> values) {
  for (float& v : values) v = bf16::from_float(v).to_float();
}

/// A plain BF16 baseline: X, W and dY rounded to BF16, products summed in FP32 (as a tensor core
/// does for BF16), Y, dX and dW rounded to BF16 (TE's BF16 outputs).
class bf16_engine final : public gemm_engine {
 public:
  std::string name() const override { return "bf16"; }
  void forward(matrix_view<const float> x, matrix_view<const float> w, matrix_view<float> y, bool training) override {
    copy_rounded(x, x_);
    copy_rounded(w, w_);
    rows_ = x.rows(), k_ = x.cols(), n_ = w.rows();
    matmul(view(x_, rows_, k_), view(w_, n_, k_).transposed(), y);
    round_rows(y);
    (void)training;  // the rounded copies are all backward needs; no state across steps
  }
  void backward(matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) override {
    copy_rounded(dy, dy_);
    const auto dyv = view(dy_, dy.rows(), dy.cols());
    matmul(dyv, view(w_, n_, k_), dx);
    matmul(dyv.transposed(), view(x_, rows_, k_), dw);
    round_rows(dx);
    round_rows(dw);
  }

 private:
  static matrix_view<const float> view(const std::vector<float>& v, index_t rows, index_t cols) {
    return matrix_view<const float>::row_major(v.data(), rows, cols);
  }
  static void copy_rounded(matrix_view<const float> from, std::vector<float>& to) {
    to.resize(static_cast<std::size_t>(from.rows() * from.cols()));
    for (index_t i = 0; i < from.rows(); ++i)
      for (index_t j = 0; j < from.cols(); ++j) to[static_cast<std::size_t>(i * from.cols() + j)] = bf16::from_float(from(i, j)).to_float();
  }
  static void round_rows(matrix_view<float> m) {
    for (index_t i = 0; i < m.rows(); ++i) round_to_bf16(std::span<float>(m.row(i), static_cast<std::size_t>(m.cols())));
  }
  std::vector<float> x_, w_, dy_;
  index_t rows_ = 0, k_ = 0, n_ = 0;
};

/// A dense layer Y = X·Wᵀ, W [out, in] in FP32. `layer` is the index of the model layer it belongs
/// to (a transformer block, or the head), which the precision controls count.
class dense {
 public:
  dense(std::string name, int layer, index_t in, index_t out, parameter_kind kind, std::unique_ptr<gemm_engine> engine)
      : weight_(name, kind, out, in), name_(std::move(name)), layer_(layer), engine_(std::move(engine)),
        high_precision_(std::make_unique<bf16_engine>()) {
    nvfp4::detail::require(engine_ != nullptr, errc::null_pointer, "dense '" + name_ + "': null engine");
    nvfp4::detail::require(in > 0 && out > 0, errc::invalid_argument, "dense '" + name_ + "': in and out must be positive");
  }

  const std::string& name() const { return name_; }
  int layer() const { return layer_; }
  index_t in_features() const { return weight_.cols; }
  index_t out_features() const { return weight_.rows; }
  parameter& weight() { return weight_; }
  const parameter& weight() const { return weight_; }

  /// The recipe engine this layer was built with.
  gemm_engine& engine() { return *engine_; }
  /// Runs the next steps in BF16 (the high-precision engine) instead of the recipe, or back.
  void use_high_precision(bool on) { use_high_ = on; }
  bool uses_high_precision() const { return use_high_; }
  /// The engine the next forward runs.
  gemm_engine& active_engine() { return use_high_ ? *high_precision_ : *engine_; }
  const gemm_engine& active_engine() const { return use_high_ ? *high_precision_ : *engine_; }

  void set_observer(tensor_observer* observer) { observer_ = observer; }
  void begin_step(long long step) {
    engine_->begin_step(step);
    high_precision_->begin_step(step);
  }

  /// Y [M, out] for X [M, in] (row-major). Throws non_finite_tensor when the observer rejects X,
  /// W or Y, shape_mismatch for a wrong X.
  void forward(std::span<const float> x, index_t rows, std::vector<float>& y, bool training) {
    nvfp4::detail::require(rows >= 0 && static_cast<index_t>(x.size()) == rows * in_features(), errc::shape_mismatch,
                           "dense '" + name_ + "': input of " + std::to_string(x.size()) + " values is not [" + std::to_string(rows) +
                               ", " + std::to_string(in_features()) + "]");
    check(tensor_role::activation, x);
    check(tensor_role::weight, weight_.value);
    y.assign(static_cast<std::size_t>(rows * out_features()), 0.0f);
    active_ = &active_engine();
    active_->forward(matrix_view<const float>::row_major(x.data(), rows, in_features()),
                     matrix_view<const float>::row_major(weight_.value.data(), out_features(), in_features()),
                     matrix_view<float>::row_major(y.data(), rows, out_features()), training);
    rows_ = rows;
    check(tensor_role::output, y);
  }

  /// dX [M, in] for dY [M, out] of the last training forward; writes dW into weight().grad.
  void backward(std::span<const float> dy, std::vector<float>& dx) {
    nvfp4::detail::require(active_ != nullptr && static_cast<index_t>(dy.size()) == rows_ * out_features(), errc::shape_mismatch,
                           "dense '" + name_ + "': backward needs dY [" + std::to_string(rows_) + ", " +
                               std::to_string(out_features()) + "] after a training forward");
    check(tensor_role::output_gradient, dy);
    dx.assign(static_cast<std::size_t>(rows_ * in_features()), 0.0f);
    active_->backward(matrix_view<const float>::row_major(dy.data(), rows_, out_features()),
                      matrix_view<float>::row_major(dx.data(), rows_, in_features()),
                      matrix_view<float>::row_major(weight_.grad.data(), out_features(), in_features()));
    check(tensor_role::weight_gradient, weight_.grad);
  }

 private:
  void check(tensor_role role, std::span<const float> values) const {
    if (observer_ != nullptr && !observer_->observe(*this, role, values)) throw non_finite_tensor(name_, role);
  }

  parameter weight_;
  std::string name_;
  int layer_;
  std::unique_ptr<gemm_engine> engine_;
  std::unique_ptr<gemm_engine> high_precision_;
  gemm_engine* active_ = nullptr;
  bool use_high_ = false;
  tensor_observer* observer_ = nullptr;
  index_t rows_ = 0;
};

}  // namespace nvfp4::nn
