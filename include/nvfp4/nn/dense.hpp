// nvfp4/nn/dense.hpp: a dense (fully connected, bias-free) layer of a model, Y = X·Wᵀ, whose three
// GEMMs run through a pluggable engine: by default the emulated TE Linear layer (nn/linear.hpp)
// with any recipe, FP32 and BF16 included.
// The layer owns the FP32 master weight, lets an observer see every tensor before it is used
// (NaN/Inf monitoring, amax logs), and can switch to a high-precision engine step by step (the
// training controls: BF16 first/last layers, BF16 cooldown).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/nn/autocast.hpp"
#include "nvfp4/nn/linear.hpp"
#include "nvfp4/nn/parameter.hpp"

namespace nvfp4::nn {

/// A tensor of a dense layer, as an observer sees it.
enum class dense_tensor {
  activation,       ///< X, the layer's input [M, K]
  weight,           ///< W, the FP32 master weight [N, K]
  output,           ///< Y, the layer's output [M, N]
  output_gradient,  ///< dY, the gradient arriving from above [M, N]
  weight_gradient   ///< dW, the weight's gradient [N, K]
};

constexpr const char* dense_tensor_name(dense_tensor role) {
  switch (role) {
    case dense_tensor::activation:
      return "activation";
    case dense_tensor::weight:
      return "weight";
    case dense_tensor::output:
      return "output";
    case dense_tensor::output_gradient:
      return "gradient";
    case dense_tensor::weight_gradient:
      return "weight_gradient";
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
  virtual bool observe(const dense& layer, dense_tensor role, std::span<const float> values) = 0;
};

/// Thrown by a dense layer whose observer rejected a tensor; says which layer and tensor.
class non_finite_tensor : public error {
 public:
  non_finite_tensor(const std::string& layer, dense_tensor role)
      : error(errc::non_finite_input, "dense layer '" + layer + "': the " + dense_tensor_name(role) + " holds NaN or Inf"),
        layer_(layer),
        role_(role) {}
  const std::string& layer() const noexcept { return layer_; }
  dense_tensor role() const noexcept { return role_; }

 private:
  std::string layer_;
  dense_tensor role_;
};

/// How a dense layer computes its GEMMs. An engine belongs to one layer and may keep state from
/// step to step (an FP8 amax history) and from forward to backward (quantized operands); such an
/// engine updates that state at region ends (nn/autocast.hpp).
class gemm_engine : public region_member {
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

/// FNV-1a of a layer's name: a per-layer seed that does not depend on construction order
/// (derived_seed(seed, name_hash(name)) seeds a model layer's engine).
constexpr std::uint64_t name_hash(std::string_view name) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return h;
}

/// A short name of a recipe for reports, its policy's short_name: nvfp4, fp8_current,
/// fp8_delayed, fp8_block, mxfp8; fp32 / bf16 for no quantization (the dtype).
inline std::string recipe_short_name(const recipe& r, high_precision dtype) {
  const std::string name = std::visit([](const auto& value) { return recipe_policy_t<decltype(value)>::short_name; }, r);
  return name.empty() ? high_precision_name(dtype) : name;
}

/// The emulated TE Linear layer (nn/linear.hpp) as a dense layer's engine: any recipe, exact or
/// relaxed GEMMs, FP32 or BF16 high precision. The dense layer owns the master weight, which the
/// Linear reads in place (parameter_storage::external), and dW is written straight into the dense
/// layer's gradient. Delayed scaling follows TE's regions (nn/autocast.hpp): inside an autocast
/// the scales update at its end; outside any, a training call updates at once and an evaluation
/// forward (the layer's infer) records nothing.
class linear_engine final : public gemm_engine {
 public:
  linear_engine(index_t in, index_t out, recipe r, linear_options options)
      : linear_(in, out, std::move(r), external(options)), name_(recipe_short_name(linear_.current_recipe(), options.dtype)) {}
  std::string name() const override { return name_; }
  linear& layer() { return linear_; }

  void forward(matrix_view<const float> x, matrix_view<const float> w, matrix_view<float> y, bool training) override {
    if (training) {
      linear_.forward({w}, x, y);
    } else {
      linear_.infer({w}, x, y, weight_cache::off, evaluation_amaxes());
    }
    after_forward(*this, training);
  }

  void backward(matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) override {
    linear_.backward(dy, dx, {dw});
    after_backward(*this);
  }

  void end_forward_region(bool grad_enabled) override { linear_.end_forward_region(grad_enabled); }
  void end_backward_region() override { linear_.end_backward_region(); }

 private:
  static linear_options external(linear_options o) {
    nvfp4::detail::require(!o.bias, errc::invalid_argument,
                           "linear_engine: a dense layer has no bias (linear_options::bias must be false)");
    o.parameters = parameter_storage::external;
    o.delayed_update = scaling_update::per_region;
    return o;
  }

  linear linear_;
  std::string name_;
};

/// Makes the engine of the dense layer `name` [out, in] in model layer `layer`: how a model's
/// layers get their recipe.
using engine_factory = std::function<std::unique_ptr<gemm_engine>(const std::string& name, int layer, index_t in, index_t out)>;

/// Every layer a linear_engine with this recipe and options; each layer's seed (NVFP4 stochastic
/// rounding) is derived from options.seed and the layer's name.
inline engine_factory linear_engines(recipe r, linear_options options = {}) {
  return [r, options](const std::string& name, int, index_t in, index_t out) -> std::unique_ptr<gemm_engine> {
    linear_options o = options;
    o.seed = nvfp4::derived_seed(options.seed, name_hash(name));
    return std::make_unique<linear_engine>(in, out, r, o);
  };
}

/// FP32 everywhere (no quantization), the reference every recipe is compared with.
inline engine_factory fp32_engines() { return linear_engines(no_quantization{}, {.dtype = high_precision::fp32}); }
/// BF16 everywhere (no quantization in BF16).
inline engine_factory bf16_engines() { return linear_engines(no_quantization{}, {.dtype = high_precision::bf16}); }

/// A dense layer Y = X·Wᵀ, W [out, in] in FP32. `layer` is the index of the model layer it belongs
/// to (a transformer block, or the head), which the precision controls count.
class dense {
 public:
  /// A layer whose engine comes from `engines`, and whose high-precision engine (the controls'
  /// BF16) is the Linear layer without quantization in BF16.
  dense(std::string name, int layer, index_t in, index_t out, parameter_kind kind, const engine_factory& engines)
      : weight_(name, kind, out, in), name_(std::move(name)), layer_(layer) {
    nvfp4::detail::require(in > 0 && out > 0, errc::invalid_argument, "dense '" + name_ + "': in and out must be positive");
    nvfp4::detail::require(static_cast<bool>(engines), errc::null_pointer, "dense '" + name_ + "': no engine factory");
    engine_ = engines(name_, layer, in, out);
    nvfp4::detail::require(engine_ != nullptr, errc::null_pointer, "dense '" + name_ + "': the factory made no engine");
    high_precision_ = bf16_engines()(name_, layer, in, out);
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
    check(dense_tensor::activation, x);
    check(dense_tensor::weight, weight_.value);
    y.assign(static_cast<std::size_t>(rows * out_features()), 0.0f);
    active_ = &active_engine();
    active_->forward(matrix_view<const float>::row_major(x.data(), rows, in_features()),
                     matrix_view<const float>::row_major(weight_.value.data(), out_features(), in_features()),
                     matrix_view<float>::row_major(y.data(), rows, out_features()), training);
    rows_ = rows;
    check(dense_tensor::output, y);
  }

  /// dX [M, in] for dY [M, out] of the last training forward; writes dW into weight().grad.
  void backward(std::span<const float> dy, std::vector<float>& dx) {
    nvfp4::detail::require(active_ != nullptr && static_cast<index_t>(dy.size()) == rows_ * out_features(), errc::shape_mismatch,
                           "dense '" + name_ + "': backward needs dY [" + std::to_string(rows_) + ", " + std::to_string(out_features()) +
                               "] after a training forward");
    check(dense_tensor::output_gradient, dy);
    dx.assign(static_cast<std::size_t>(rows_ * in_features()), 0.0f);
    active_->backward(matrix_view<const float>::row_major(dy.data(), rows_, out_features()),
                      matrix_view<float>::row_major(dx.data(), rows_, in_features()),
                      matrix_view<float>::row_major(weight_.grad.data(), out_features(), in_features()));
    check(dense_tensor::weight_gradient, weight_.grad);
  }

 private:
  void check(dense_tensor role, std::span<const float> values) const {
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
