// python/bind_nn.cpp: the recipes (TE's recipe classes) and the emulated Linear layer of the Python
// module: LinearCore, one layer's numerics over parameters the caller owns (what nvfp4.torch's
// Linear drives), and Linear, a LinearCore that owns numpy parameters; SavedForward, what one
// LinearCore.forward leaves for its backward (nn::saved_forward). Both layers serialize concurrent
// calls with a per-layer mutex (taken with the GIL released), so threads get the single-thread
// bits. A bf16 LinearCore also takes bf16 tensors as their bits (uint16 arrays) and returns Y and
// dX as bits for them: no fp32 copy on either side. Reference: docs/python.md; the C++ layer:
// include/nvfp4/nn/linear.hpp.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/detail/enum_names.hpp"
#include "nvfp4/nn/amax_percentile.hpp"
#include "nvfp4/nn/linear.hpp"
#include "nvfp4/nvfp4.hpp"

namespace py = pybind11;

namespace {

using namespace nvfp4;

// ---- small parsers (strings for TE's enums) ---------------------------------------------------

// Enum fields and arguments are spelled by the enums' name tables (nvfp4/detail/enum_names.hpp).
nn::weight_cache parse_weight_cache(const std::string& v) { return detail::parse_name<nn::weight_cache>(v, "weight_cache"); }
tensor_role parse_role(const std::string& role) { return detail::parse_name<tensor_role>(role, "role"); }

// ---- recipes ------------------------------------------------------------------------------------

/// A Python recipe object (one of the bound recipe classes, named as their policies name them in
/// recipes/recipe.hpp's list; None: no quantization) as the C++ variant.
recipe to_recipe(const py::object& o) {
  if (o.is_none()) return no_quantization{};
  std::optional<recipe> found;
  std::string known;
  recipe_policies::for_each([&]<class P>(std::type_identity<P>) {
    known += (known.empty() ? "nvfp4." : ", ") + std::string(P::name);
    if (!found && py::isinstance<typename P::recipe_type>(o)) found = py::cast<typename P::recipe_type>(o);
  });
  if (found) return *found;
  throw py::type_error("recipe must be one of " + known + " (or None); got " + std::string(py::str(py::type::of(o))));
}
py::object from_recipe(const recipe& r) {
  return std::visit([](const auto& v) { return py::cast(v); }, r);
}

/// An enum field's text: its name (nvfp4/detail/enum_names.hpp), TE's Format spelling for fp8_format.
template <class E>
std::string enum_text(E v) {
  if constexpr (std::is_same_v<E, recipe_format>)
    return recipe_format_name(v);
  else
    return detail::name_of(v);
}

/// One row of a recipe's field table (recipes/recipe_fields.hpp) as a property: enums as strings
/// (set by name), the others as the member itself (MMParams, QParams and HadamardTransform by
/// reference, so `r.fp8_gemm_fprop.use_split_accumulator = False` changes the recipe).
template <class Class, class T>
void bind_field(py::class_<Class>& c, const recipe_field<Class, T>& f) {
  const auto member = f.member;
  if constexpr (std::is_enum_v<T>) {
    c.def_property(
        f.name, [member](const Class& r) { return enum_text(r.*member); },
        [member, name = f.name](Class& r, const std::string& v) { r.*member = detail::parse_name<T>(v, name); }, f.what);
  } else {
    c.def_readwrite(f.name, member, f.what);
  }
}

/// One recipe class from its struct's field table: keyword construction (unknown names refused as
/// a dataclass refuses them), a property per row, validate(), fields() (the table: name, 'te' or
/// 'library', what) and a repr of every field.
template <class P>
void bind_recipe_class(py::module_& m) {
  using R = typename P::recipe_type;
  const std::string doc = field_count<R>() == 0 ? "No quantization: the GEMMs in the layer's precision (float_gemm)"
                                                : "TE's " + std::string(P::name) + " recipe; fields() lists its fields";
  py::class_<R> c(m, P::name, doc.c_str());
  c.def(py::init([](const py::kwargs& kwargs) {
          R r;
          py::object self = py::cast(r);
          for (const auto& [key, value] : kwargs) {
            const std::string name = py::str(key);
            bool known = false;
            for_each_field<R>([&](const auto& f) { known = known || name == f.name; });
            if (!known) throw py::type_error(std::string(P::name) + ".__init__() got an unexpected keyword argument '" + name + "'");
            self.attr(key) = value;
          }
          return self.cast<R>();
        }),
        "fields by keyword, TE's defaults otherwise");
  for_each_field<R>([&](const auto& f) { bind_field(c, f); });
  c.def("validate", &R::validate, "raises nvfp4.Error for a combination TE rejects");
  c.def_static(
      "fields",
      [] {
        py::list rows;
        for_each_field<R>(
            [&](const auto& f) { rows.append(py::make_tuple(f.name, f.origin == field_origin::te ? "te" : "library", f.what)); });
        return py::tuple(rows);
      },
      "the recipe's field table: (name, 'te' for TE's fields or 'library', what it does) per field");
  c.def("__repr__", [](const py::object& self) {
    std::string text = std::string(P::name) + "(";
    bool first = true;
    for_each_field<R>([&](const auto& f) {
      text += (first ? "" : ", ") + std::string(f.name) + "=" + std::string(py::repr(self.attr(f.name)));
      first = false;
    });
    return text + ")";
  });
}

void bind_recipes(py::module_& m) {
  py::class_<mm_params>(m, "MMParams", "TE's MMParams: use_split_accumulator promotes the tensor core's partial sums into fp32")
      .def(py::init([](bool split) { return mm_params{.use_split_accumulator = split}; }), py::arg("use_split_accumulator") = true)
      .def_readwrite("use_split_accumulator", &mm_params::use_split_accumulator)
      .def("__repr__", [](const mm_params& p) {
        return std::string("MMParams(use_split_accumulator=") + (p.use_split_accumulator ? "True" : "False") + ")";
      });
  py::class_<fp8_scale_options>(m, "QParams", "TE's QParams of an FP8 role: power_2_scale, amax_epsilon")
      .def(py::init([](bool power_2_scale, float amax_epsilon) {
             return fp8_scale_options{.power_2_scale = power_2_scale, .amax_epsilon = amax_epsilon};
           }),
           py::arg("power_2_scale") = false, py::arg("amax_epsilon") = 0.0f)
      .def_readwrite("power_2_scale", &fp8_scale_options::power_2_scale)
      .def_readwrite("amax_epsilon", &fp8_scale_options::amax_epsilon)
      .def("__repr__", [](const fp8_scale_options& q) {
        return std::string("QParams(power_2_scale=") + (q.power_2_scale ? "True" : "False") +
               ", amax_epsilon=" + std::string(py::repr(py::float_(q.amax_epsilon))) + ")";
      });
  recipe_policies::for_each([&]<class P>(std::type_identity<P>) { bind_recipe_class<P>(m); });
  m.def(
      "recipe_name", [](const py::object& r) { return std::string(recipe_name(to_recipe(r))); }, py::arg("recipe"),
      "TE's class name of a recipe");
}

// ---- numpy arrays in and out ----------------------------------------------------------------------

std::string dtype_text(const py::dtype& dtype) { return py::str(static_cast<const py::object&>(dtype)); }
std::string shape_text(const py::array& a) {
  std::string s = "[";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + "]";
}

/// Requires a float32 array of `ndim` dimensions (TypeError / ValueError with the fix otherwise).
void require_float32(const py::array& a, py::ssize_t ndim, const char* what, const char* expected) {
  if (!a.dtype().is(py::dtype::of<float>()))
    throw py::type_error(std::string(what) + " must be float32; got " + dtype_text(a.dtype()) + " (convert with .astype(numpy.float32))");
  if (a.ndim() != ndim) throw py::value_error(std::string(what) + " must be " + expected + "; got shape " + shape_text(a));
}

/// Whether `a` holds bf16 bits (uint16), which only a bf16 core takes (TypeError for an fp32 core).
bool is_bf16_bits(const py::array& a, bool bf16_core, const char* what) {
  if (!a.dtype().is(py::dtype::of<std::uint16_t>())) return false;
  if (!bf16_core)
    throw py::type_error(std::string(what) +
                         " is uint16 (bf16 bits), which only a core of dtype 'bf16' takes; this core is fp32 "
                         "(pass float32, or make the core with dtype='bf16')");
  return true;
}

/// A 2-D float32 array, or bf16 bits (uint16) for a bf16 core, as a row-major view of its own
/// memory when C-contiguous, else of a C-order copy kept in `keep` (inputs that are only read).
nn::input_matrix read_matrix(const py::array& a, py::array& keep, bool bf16_core, const char* what, const char* expected) {
  if (is_bf16_bits(a, bf16_core, what)) {
    if (a.ndim() != 2) throw py::value_error(std::string(what) + " must be " + expected + "; got shape " + shape_text(a));
    const auto bits = py::array_t<std::uint16_t, py::array::c_style>::ensure(a);
    keep = bits;
    return matrix_view<const bf16>::row_major(static_cast<const bf16*>(keep.data()), keep.shape(0), keep.shape(1));
  }
  require_float32(a, 2, what, expected);
  const auto values = py::array_t<float, py::array::c_style>::ensure(a);
  keep = values;
  return matrix_view<const float>::row_major(values.data(), values.shape(0), values.shape(1));
}

/// The caller's parameter array, read in place: float32 (or, for a bf16 core, bf16 bits as uint16),
/// C-contiguous, of exactly `shape` (never copied, so a framework's parameter is what the layer reads).
const void* parameter_data(const py::array& a, std::vector<py::ssize_t> shape, const char* what, bool bf16_core = false) {
  const char* expected = shape.size() == 2 ? "a 2-D array [out_features, in_features]" : "a 1-D array [out_features]";
  if (is_bf16_bits(a, bf16_core, what)) {
    if (a.ndim() != static_cast<py::ssize_t>(shape.size()))
      throw py::value_error(std::string(what) + " must be " + expected + "; got shape " + shape_text(a));
  } else {
    require_float32(a, static_cast<py::ssize_t>(shape.size()), what, expected);
  }
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (a.shape(static_cast<py::ssize_t>(i)) != shape[i])
      throw error(errc::shape_mismatch, std::string(what) + " has shape " + shape_text(a) + ", expected [" + std::to_string(shape[0]) +
                                            (shape.size() == 2 ? ", " + std::to_string(shape[1]) : std::string()) + "]");
  if (!(a.flags() & py::array::c_style))
    throw py::value_error(std::string(what) + " must be C-contiguous (it is read in place; pass numpy.ascontiguousarray(...))");
  return a.data();
}
/// A writable parameter-shaped output (dW, db): float32, or for a bf16 core also bf16 bits (uint16).
void* gradient_data(py::array& a, std::vector<py::ssize_t> shape, const char* what, bool bf16_core = false) {
  const void* data = parameter_data(a, std::move(shape), what, bf16_core);
  if (!a.writeable()) throw py::value_error(std::string(what) + " must be writable");
  return const_cast<void*>(data);
}

/// A new [rows, cols] array of float32, or of bf16 bits (uint16) where the input came as bf16 bits,
/// its size checked before allocating; `view` is where the layer writes it.
py::array new_matrix(index_t rows, index_t cols, bool bf16_bits, nn::output_matrix& view, const char* what) {
  detail::checked_element_count(rows, cols, errc::invalid_argument, what);
  const std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(cols)};
  if (bf16_bits) {
    py::array_t<std::uint16_t> out(shape);
    view = matrix_view<bf16>::row_major(static_cast<bf16*>(static_cast<void*>(out.mutable_data())), rows, cols);
    return out;
  }
  py::array_t<float> out(shape);
  view = matrix_view<float>::row_major(out.mutable_data(), rows, cols);
  return out;
}
bool holds_bf16(const nn::input_matrix& m) { return std::holds_alternative<matrix_view<const bf16>>(m); }
index_t rows_of(const nn::input_matrix& m) {
  return std::visit([](auto v) { return v.rows(); }, m);
}

// ---- LinearCore: one layer over the caller's parameters ---------------------------------------------

/// The layer's options from the Python keywords.
nn::linear_options layer_options(bool bias, const std::string& dtype, const std::string& mode, const std::string& fp8_tensor_core,
                                 index_t promotion_interval, std::uint64_t seed, std::optional<double> amax_quantile) {
  nn::linear_options o;
  o.bias = bias;
  o.dtype = detail::parse_name<high_precision>(dtype, "dtype");
  o.mode = detail::parse_name<gemm_mode>(mode, "mode");
  o.fp8_tensor_core = detail::parse_name<fp8::mma::tensor_core>(fp8_tensor_core, "fp8_tensor_core");
  o.promotion_interval = promotion_interval;
  o.seed = seed;
  if (amax_quantile) o.nvfp4_amax = nn::percentile_amax_rule(*amax_quantile);
  o.parameters = nn::parameter_storage::external;
  return o;
}

const char* const role_names[] = {"input", "weight", "grad_output"};

/// An nn::linear with external parameters and a mutex. Every method that touches the layer
/// releases the GIL, then takes the mutex (never the other way round, so no thread waits for the
/// mutex while holding the GIL).
class linear_core {
 public:
  linear_core(index_t in_features, index_t out_features, const py::object& recipe_object, nn::linear_options options)
      : layer_(in_features, out_features, to_recipe(recipe_object), options) {}

  index_t in_features() const { return layer_.in_features(); }  // fixed at construction: no lock
  index_t out_features() const { return layer_.out_features(); }
  bool has_bias() const { return layer_.options().bias; }

  template <class F>
  decltype(auto) locked(F&& f) {
    py::gil_scoped_release unlocked;
    const std::lock_guard<std::mutex> lock(mutex_);
    return f(layer_);
  }

  /// The training forward: Y and what its backward needs (TE's forward with grad enabled).
  std::pair<py::array, nn::saved_forward> forward(const py::array& x, const py::array& weight, const std::optional<py::array>& bias,
                                                  const std::string& weight_cache) {
    nn::saved_forward saved;
    auto y = call_forward(
        x, weight, bias, weight_cache,
        [&](nn::linear& l, const nn::linear_parameters& p, auto xv, auto yv, nn::weight_cache c) { saved = l.forward(p, xv, yv, c); });
    return {std::move(y), std::move(saved)};
  }
  /// The forward of evaluation (TE's forward under torch.no_grad()): the same Y, nothing saved.
  py::array infer(const py::array& x, const py::array& weight, const std::optional<py::array>& bias, const std::string& weight_cache,
                  nn::eval_amaxes amaxes) {
    return call_forward(
        x, weight, bias, weight_cache,
        [&](nn::linear& l, const nn::linear_parameters& p, auto xv, auto yv, nn::weight_cache c) { l.infer(p, xv, yv, c, amaxes); });
  }
  /// dX of the forward `saved`, dW and db into the caller's arrays.
  py::array backward(const nn::saved_forward& saved, const py::array& dy, py::array weight_grad, std::optional<py::array> bias_grad) {
    return call_backward(dy, weight_grad, bias_grad,
                         [&](nn::linear& l, auto dyv, auto dxv, const nn::linear_gradients& g) { l.backward(saved, dyv, dxv, g); });
  }

  /// The delayed-scaling state as {"<role>.scale": float32 [1], "<role>.amax_history": float32 [L]}
  /// (empty unless the recipe is DelayedScaling).
  py::dict scaling_state_dict() {
    struct saved {
      float scale;
      std::vector<float> history;
    };
    std::vector<saved> states = locked([](nn::linear& l) {
      std::vector<saved> out;
      for (const tensor_role role : {tensor_role::input, tensor_role::weight, tensor_role::grad_output})
        if (const delayed_scaling_state* s = l.scaling_state(role))
          out.push_back({s->scale(), {s->amax_history().begin(), s->amax_history().end()}});
      return out;
    });
    py::dict d;
    for (std::size_t i = 0; i < states.size(); ++i) {
      py::array_t<float> scale(1);
      scale.mutable_at(0) = states[i].scale;
      py::array_t<float> history(static_cast<py::ssize_t>(states[i].history.size()));
      std::copy(states[i].history.begin(), states[i].history.end(), history.mutable_data());
      d[py::str(std::string(role_names[i]) + ".scale")] = scale;
      d[py::str(std::string(role_names[i]) + ".amax_history")] = history;
    }
    return d;
  }

  /// Restores what scaling_state_dict returned. Every entry is checked before any state changes.
  void load_scaling_state_dict(const py::dict& d) {
    struct loaded {
      float scale;
      std::vector<float> history;
    };
    std::vector<loaded> states;
    for (const char* role : role_names) {
      if (d.size() == 0) break;  // an empty dict: the state of a recipe without scaling state
      const std::string scale_key = std::string(role) + ".scale", history_key = std::string(role) + ".amax_history";
      if (!d.contains(scale_key) || !d.contains(history_key)) {
        throw py::value_error("load_scaling_state_dict: '" + scale_key + "' and '" + history_key +
                              "' are required (pass what scaling_state_dict returned)");
      }
      const auto scale = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(d[py::str(scale_key)]);
      const auto history = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(d[py::str(history_key)]);
      if (!scale || scale.size() != 1) throw py::value_error("load_scaling_state_dict: '" + scale_key + "' must hold one float");
      if (!history || history.ndim() != 1)
        throw py::value_error("load_scaling_state_dict: '" + history_key + "' must be a 1-D float array");
      states.push_back({scale.data()[0], std::vector<float>(history.data(), history.data() + history.size())});
    }
    locked([&](nn::linear& l) {
      const bool delayed = l.scaling_state(tensor_role::input) != nullptr;
      if (!delayed) {
        detail::require(states.empty(), errc::invalid_argument,
                        "load_scaling_state_dict: the layer's recipe keeps no scaling state (set a DelayedScaling recipe first)");
        return;
      }
      detail::require(states.size() == 3, errc::invalid_argument,
                      "load_scaling_state_dict: a DelayedScaling layer needs the state of input, weight and grad_output");
      // Check all three against a copy first, so a bad entry changes nothing.
      const tensor_role roles[] = {tensor_role::input, tensor_role::weight, tensor_role::grad_output};
      std::array<delayed_scaling_state, 3> copies{*l.scaling_state(roles[0]), *l.scaling_state(roles[1]), *l.scaling_state(roles[2])};
      for (std::size_t i = 0; i < 3; ++i) copies[i].restore(states[i].history, states[i].scale);
      for (std::size_t i = 0; i < 3; ++i) *l.scaling_state(roles[i]) = copies[i];
    });
  }

 private:
  bool bf16_core() const { return layer_.options().dtype == high_precision::bf16; }  // fixed at construction: no lock
  template <class Run>
  py::array call_forward(const py::array& x, const py::array& weight, const std::optional<py::array>& bias, const std::string& weight_cache,
                         Run&& run) {
    const nn::weight_cache cache = parse_weight_cache(weight_cache);
    py::array x_keep;
    const nn::input_matrix xv = read_matrix(x, x_keep, bf16_core(), "x", "a 2-D array [tokens, in_features]");
    const nn::linear_parameters p = parameters(weight, bias);
    nn::output_matrix yv;
    py::array y = new_matrix(rows_of(xv), out_features(), holds_bf16(xv), yv, "Linear output");
    locked([&](nn::linear& l) { run(l, p, xv, yv, cache); });
    return y;
  }
  template <class Run>
  py::array call_backward(const py::array& dy, py::array& weight_grad, std::optional<py::array>& bias_grad, Run&& run) {
    py::array dy_keep;
    const nn::input_matrix dyv = read_matrix(dy, dy_keep, bf16_core(), "dy", "a 2-D array [tokens, out_features]");
    nn::linear_gradients g;
    void* const dw = gradient_data(weight_grad, {out_features(), in_features()}, "weight_grad", bf16_core());
    // dW as bf16 bits: the layer's fp32 dW into the core's kept scratch, rounded once into the
    // caller's array (bf16::from_float, as Y and dX), so a step allocates no fp32 dW.
    const bool dw_bits = weight_grad.dtype().is(py::dtype::of<std::uint16_t>());
    if (has_bias() && !bias_grad)
      throw py::value_error("bias_grad is required: the layer has a bias (pass a float32 array [out_features])");
    if (!has_bias() && bias_grad) throw py::value_error("bias_grad given, but the layer has no bias (pass None)");
    if (bias_grad)
      g.bias = std::span<float>(static_cast<float*>(gradient_data(*bias_grad, {out_features()}, "bias_grad")),
                                static_cast<std::size_t>(out_features()));
    nn::output_matrix dxv;
    py::array dx = new_matrix(rows_of(dyv), in_features(), holds_bf16(dyv), dxv, "Linear input gradient");
    locked([&](nn::linear& l) {
      if (!dw_bits) {
        g.weight = matrix_view<float>::row_major(static_cast<float*>(dw), out_features(), in_features());
        run(l, dyv, dxv, g);
        return;
      }
      weight_grad_scratch_.resize(static_cast<std::size_t>(out_features() * in_features()));  // kept: allocated once
      g.weight = matrix_view<float>::row_major(weight_grad_scratch_.data(), out_features(), in_features());
      run(l, dyv, dxv, g);
      nn::detail::write_in_dtype(matrix_view<const float>(g.weight),
                                 matrix_view<bf16>::row_major(static_cast<bf16*>(dw), out_features(), in_features()), high_precision::bf16);
    });
    return dx;
  }
  nn::linear_parameters parameters(const py::array& weight, const std::optional<py::array>& bias) {
    nn::linear_parameters p;
    const void* w = parameter_data(weight, {out_features(), in_features()}, "weight", bf16_core());
    if (weight.dtype().is(py::dtype::of<std::uint16_t>()))
      p.weight = matrix_view<const bf16>::row_major(static_cast<const bf16*>(w), out_features(), in_features());
    else
      p.weight = matrix_view<const float>::row_major(static_cast<const float*>(w), out_features(), in_features());
    if (has_bias() && !bias) throw py::value_error("bias is required: the layer has a bias (pass a float32 array [out_features])");
    if (!has_bias() && bias) throw py::value_error("bias given, but the layer was made with bias=False (pass None)");
    if (!bias) return p;
    const void* b = parameter_data(*bias, {out_features()}, "bias", bf16_core());
    const auto n = static_cast<std::size_t>(out_features());
    if (bias->dtype().is(py::dtype::of<std::uint16_t>()))
      p.bias = std::span<const bf16>(static_cast<const bf16*>(b), n);
    else
      p.bias = std::span<const float>(static_cast<const float*>(b), n);
    return p;
  }

  nn::linear layer_;
  std::mutex mutex_;
  std::vector<float> weight_grad_scratch_;  // a bf16 dW's fp32 values (backward with uint16 weight_grad), under mutex_
};

/// The Python Linear: a LinearCore with its own parameters (numpy arrays, zero-filled by the
/// allocator, so pages are touched only when used) and the library's per-call scaling updates.
class owning_linear : public linear_core {
 public:
  owning_linear(index_t in_features, index_t out_features, const py::object& recipe_object, nn::linear_options options)
      : linear_core(in_features, out_features, recipe_object, options) {
    const py::object zeros = py::module_::import("numpy").attr("zeros");
    const auto matrix = py::make_tuple(out_features, in_features);
    weight = zeros(matrix, "float32");
    weight_grad = zeros(matrix, "float32");
    bias = zeros(py::make_tuple(options.bias ? out_features : 0), "float32");
    bias_grad = zeros(py::make_tuple(options.bias ? out_features : 0), "float32");
  }
  std::optional<py::array> bias_arg() const { return has_bias() ? std::optional<py::array>(bias) : std::nullopt; }
  std::optional<py::array> bias_grad_arg() const { return has_bias() ? std::optional<py::array>(bias_grad) : std::nullopt; }

  /// The training forward, kept for the calling thread's next backward.
  py::array forward_for_this_thread(const py::array& x, const std::string& weight_cache) {
    auto [y, saved] = forward(x, weight, bias_arg(), weight_cache);
    const std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_[std::this_thread::get_id()] = std::move(saved);
    return std::move(y);
  }
  /// dX of the calling thread's last training forward, which is then no longer kept (kept when
  /// the backward refuses its arguments). Threads sharing the layer each differentiate their own
  /// forward, so each gets the single-thread dX; the layer's weight_grad / bias_grad hold the dW /
  /// db of the latest backward, whichever thread ran it.
  py::array backward_of_this_thread(const py::array& dy) {
    const std::thread::id thread = std::this_thread::get_id();
    nn::saved_forward saved;
    {
      const std::lock_guard<std::mutex> lock(pending_mutex_);
      const auto it = pending_.find(thread);
      if (it == pending_.end())
        throw error(errc::invalid_argument,
                    "Linear.backward: this thread has no forward to differentiate (call forward first, in the "
                    "same thread: each thread's backward differentiates its own last forward)");
      saved = it->second;
    }
    py::array dx = backward(saved, dy, weight_grad, bias_grad_arg());
    const std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.erase(thread);
    return dx;
  }

  py::array weight, bias, weight_grad, bias_grad;

 private:
  std::mutex pending_mutex_;  // taken with the GIL held, never around a call that waits for it
  std::unordered_map<std::thread::id, nn::saved_forward> pending_;
};

template <class Class>
void bind_common(py::class_<Class>& c) {
  c.def_property_readonly("in_features", &Class::in_features)
      .def_property_readonly("out_features", &Class::out_features)
      .def_property(
          "steps", [](Class& l) { return l.locked([](nn::linear& n) { return n.steps(); }); },
          [](Class& l, std::uint64_t s) { l.locked([s](nn::linear& n) { n.set_steps(s); }); },
          "backward passes so far (NVFP4 gradients' seeds derive from it); settable for checkpoints")
      .def(
          "scaling_state",
          [](Class& l, const std::string& role) -> py::object {
            const tensor_role r = parse_role(role);
            std::optional<std::pair<float, std::vector<float>>> s = l.locked([r](nn::linear& n) {
              std::optional<std::pair<float, std::vector<float>>> out;
              if (const delayed_scaling_state* st = n.scaling_state(r))
                out.emplace(st->scale(), std::vector<float>(st->amax_history().begin(), st->amax_history().end()));
              return out;
            });
            if (!s) return py::none();
            py::dict d;
            d["scale"] = s->first;
            d["amax_history"] = s->second;
            return py::object(d);
          },
          py::arg("role"), "delayed scaling: {'scale', 'amax_history'} of 'input', 'weight' or 'grad_output' (None otherwise)");
}

}  // namespace

/// Binds the recipes, LinearCore and Linear into the module.
void bind_nn(py::module_& m) {
  bind_recipes(m);

  py::class_<nn::saved_forward>(m, "SavedForward",
                                "What one LinearCore.forward call leaves for its backward (TE's ctx.save_for_backward): the "
                                "recipe that ran it, W's and X's copies as that call quantized them. Made by forward only; "
                                "may be kept, passed to another thread and dropped freely; backward(saved, ...) may run more "
                                "than once.")
      .def_property_readonly("rows", &nn::saved_forward::rows, "M, the rows of the forward's X (and of dY, dX)")
      .def_property_readonly(
          "dtype", [](const nn::saved_forward& s) { return std::string(high_precision_name(s.dtype())); },
          "the core's dtype when the forward ran: 'fp32' or 'bf16'")
      .def_property_readonly(
          "recipe", [](const nn::saved_forward& s) { return from_recipe(s.recipe()); },
          "the recipe the forward ran under (a copy; NoQuantization() for none)")
      .def("__repr__", [](const nn::saved_forward& s) {
        return "SavedForward(rows=" + std::to_string(s.rows()) + ", dtype='" + high_precision_name(s.dtype()) +
               "', recipe=" + recipe_name(s.recipe()) + ")";
      });

  py::class_<linear_core> core(m, "LinearCore",
                               "One emulated TransformerEngine Linear layer, Y = X W^T (+ b), over parameters the caller owns (read "
                               "in place, never copied). Delayed scaling follows TE's regions: amaxes are recorded by every call, "
                               "and scales update only at end_forward_region / end_backward_region. Calls from several threads are "
                               "serialized (a lock per layer).");
  core.def(py::init([](index_t in_features, index_t out_features, const py::object& recipe_object, bool bias, const std::string& dtype,
                       const std::string& mode, const std::string& fp8_tensor_core, index_t promotion_interval, std::uint64_t seed,
                       std::optional<double> amax_quantile) {
             nn::linear_options o = layer_options(bias, dtype, mode, fp8_tensor_core, promotion_interval, seed, amax_quantile);
             o.delayed_update = nn::scaling_update::per_region;
             return std::make_unique<linear_core>(in_features, out_features, recipe_object, o);
           }),
           py::arg("in_features"), py::arg("out_features"), py::arg("recipe") = py::none(), py::kw_only(), py::arg("bias") = false,
           py::arg("dtype") = "fp32", py::arg("mode") = "exact", py::arg("fp8_tensor_core") = "hopper", py::arg("promotion_interval") = 128,
           py::arg("seed") = 0, py::arg("amax_quantile") = py::none())
      .def("forward", &linear_core::forward, py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(), py::kw_only(),
           py::arg("weight_cache") = "off",
           "The training forward (TE's forward with grad enabled): returns (Y, saved), Y [M, out_features] for X [M, in_features], "
           "and `saved`, a SavedForward holding what this call's backward needs (its recipe, W's and X's quantized copies). "
           "weight [out_features, in_features] and bias [out_features] (or None) are read in place during the call, never kept "
           "(C-contiguous). Each of x, weight, bias is float32, or, for a core of dtype 'bf16', bf16 bits as uint16 "
           "(tensor.view(torch.int16).numpy().view(numpy.uint16)), read as they are; Y is uint16 bf16 bits when x is, else "
           "float32. Delayed scaling: the amaxes are recorded. weight_cache: 'off', 'refresh', 'reuse' (TE's "
           "is_first_microbatch None / True / False).")
      .def(
          "infer",
          [](linear_core& l, const py::array& x, const py::array& weight, const std::optional<py::array>& bias,
             const std::string& weight_cache, bool record_amaxes) {
            return l.infer(x, weight, bias, weight_cache, record_amaxes ? nn::eval_amaxes::record_as_te : nn::eval_amaxes::record_nothing);
          },
          py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(), py::kw_only(), py::arg("weight_cache") = "off",
          py::arg("record_amaxes") = true,
          "TE's forward under torch.no_grad(): the training forward's Y (arrays as forward takes them), nothing saved; "
          "record_amaxes=True records delayed scaling's amaxes as TE's quantizers do there (they merge into the next update), "
          "False records nothing.")
      .def("backward", &linear_core::backward, py::arg("saved"), py::arg("dy"), py::arg("weight_grad"), py::arg("bias_grad") = py::none(),
           "dX [M, in_features] for dY [M, out_features] of the forward that returned `saved` (under the recipe it ran, "
           "whatever the core's is now; any order of forwards and backwards, and more than once on one saved forward); "
           "dy float32 or (bf16 core) uint16 bf16 bits, dX in the same kind. Writes dW into weight_grad (float32 "
           "[out_features, in_features], C-contiguous; a bf16 core also takes uint16, dW rounded once to bf16 bits) and db into "
           "bias_grad (float32 [out_features]), overwriting them. A second backward "
           "on one saved forward gives the first's bits except where "
           "the recipe's state moved on: NVFP4's gradient seed (the core's backward count) and, after end_backward_region, "
           "delayed scaling's grad_output scale.")
      .def(
          "set_recipe",
          [](linear_core& l, const py::object& r) {
            const recipe next = to_recipe(r);
            l.locked([&](nn::linear& n) { n.set_recipe(next); });
          },
          py::arg("recipe"), "switches the recipe (checked first; a saved forward keeps the recipe it ran under)")
      .def_property(
          "recipe", [](linear_core& l) { return from_recipe(l.locked([](nn::linear& n) { return n.current_recipe(); })); },
          [](linear_core& l, const py::object& r) {
            const recipe next = to_recipe(r);
            l.locked([&](nn::linear& n) { n.set_recipe(next); });
          },
          "the recipe (a copy); assigning one is set_recipe")
      .def(
          "end_forward_region",
          [](linear_core& l, bool grad_enabled) { l.locked([&](nn::linear& n) { n.end_forward_region(grad_enabled); }); },
          py::arg("grad_enabled"),
          "TE's outermost autocast exit for this layer: with grad enabled, delayed scaling's input and weight scales update once "
          "from the region's max-merged amaxes; without, the amaxes wait for the next update")
      .def(
          "end_backward_region", [](linear_core& l) { l.locked([](nn::linear& n) { n.end_backward_region(); }); },
          "the end of a backward pass for this layer: delayed scaling's grad_output scale updates once")
      .def("scaling_state_dict", &linear_core::scaling_state_dict,
           "delayed scaling: {'input.scale', 'input.amax_history', 'weight.*', 'grad_output.*'} as float32 arrays (empty otherwise)")
      .def("load_scaling_state_dict", &linear_core::load_scaling_state_dict, py::arg("state"),
           "restores scaling_state_dict's result (checked whole before anything changes)");
  bind_common(core);

  // The emulated TE Linear layer owning its parameters (per-call delayed-scaling updates, as before).
  py::class_<owning_linear> linear(
      m, "Linear",
      "An emulated TransformerEngine Linear layer Y = X W^T (+ b), forward and backward under a recipe, "
      "fp32 master weights (numpy arrays); results depend on the seed only. Thread-safe (a lock per layer); each "
      "thread's backward differentiates that thread's last forward.");
  linear
      .def(py::init([](index_t in_features, index_t out_features, const py::object& recipe_object, bool bias, const std::string& dtype,
                       const std::string& mode, const std::string& fp8_tensor_core, index_t promotion_interval, std::uint64_t seed,
                       std::optional<double> amax_quantile) {
             return std::make_unique<owning_linear>(
                 in_features, out_features, recipe_object,
                 layer_options(bias, dtype, mode, fp8_tensor_core, promotion_interval, seed, amax_quantile));
           }),
           py::arg("in_features"), py::arg("out_features"), py::arg("recipe") = py::none(), py::kw_only(), py::arg("bias") = false,
           py::arg("dtype") = "fp32", py::arg("mode") = "exact", py::arg("fp8_tensor_core") = "hopper", py::arg("promotion_interval") = 128,
           py::arg("seed") = 0, py::arg("amax_quantile") = py::none())
      .def_readonly("weight", &owning_linear::weight, "W [out_features, in_features], float32, writable (the layer's own memory)")
      .def_readonly("bias", &owning_linear::bias, "b [out_features] (empty without a bias)")
      .def_readonly("weight_grad", &owning_linear::weight_grad, "dW of the last backward, float32")
      .def_readonly("bias_grad", &owning_linear::bias_grad, "db of the last backward, float32")
      .def_property(
          "recipe", [](owning_linear& l) { return from_recipe(l.locked([](nn::linear& n) { return n.current_recipe(); })); },
          [](owning_linear& l, const py::object& r) {
            const recipe next = to_recipe(r);
            l.locked([&](nn::linear& n) { n.set_recipe(next); });
          },
          "the recipe (a copy); assigning one switches it (e.g. a BF16 cooldown)")
      .def(
          "forward",
          [](owning_linear& l, const py::array& x, const std::string& weight_cache) { return l.forward_for_this_thread(x, weight_cache); },
          py::arg("x"), py::kw_only(), py::arg("weight_cache") = "off",
          "Y = X W^T (+ b) for X [M, in_features]; keeps what backward needs. weight_cache: 'off', 'refresh' (keep the "
          "quantized W), 'reuse' (run on the kept W): TE's is_first_microbatch None / True / False")
      .def(
          "infer",
          [](owning_linear& l, const py::array& x, const std::string& weight_cache) {
            return l.infer(x, l.weight, l.bias_arg(), weight_cache, nn::eval_amaxes::record_nothing);
          },
          py::arg("x"), py::kw_only(), py::arg("weight_cache") = "off",
          "the forward's Y without saving for backward or touching delayed-scaling state (evaluation, inference)")
      .def(
          "backward", [](owning_linear& l, const py::array& dy) { return l.backward_of_this_thread(dy); }, py::arg("dy"),
          "dX for dY [M, out_features] of this thread's last forward (threads sharing the layer each differentiate their own); dW "
          "and db into weight_grad / bias_grad");
  bind_common(linear);
}
