// python/bind_support.hpp: what the binding files of the Python module share: the quantized tensor
// object (py_quantized, any format), numpy input and output (2-D float32 / float16 / float64 / bf16
// arrays as matrix views, float32 results filled with the GIL released), option parsers, and the
// messages for calls that match no signature. Internal to python/*.cpp.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "nvfp4/nvfp4.hpp"

namespace py = pybind11;

namespace nvfp4_python {

using namespace nvfp4;

static_assert(sizeof(e2m1x2) == 1 && sizeof(e4m3) == 1 && sizeof(ue4m3) == 1 && sizeof(e8m0) == 1 && sizeof(bf16) == 2,
              "the element, scale and bf16 types are their bytes");

// ---- the quantized tensor object -----------------------------------------------------------

using any_tensor = std::variant<nvfp4_tensor, nvfp4_tile_tensor, mxfp4_tensor, mxfp8_tensor, mxfp8_e5m2_tensor>;

template <class Format>
constexpr const char* format_name() {
  if constexpr (std::is_same_v<Format, nvfp4_1x16>)
    return "nvfp4_1x16";
  else if constexpr (std::is_same_v<Format, nvfp4_16x16>)
    return "nvfp4_16x16";
  else if constexpr (std::is_same_v<Format, mxfp4>)
    return "mxfp4";
  else if constexpr (std::is_same_v<Format, mxfp8>)
    return "mxfp8";
  else
    return "mxfp8_e5m2";
}

/// Calls f with a default-constructed Format tag for the format named `name`.
template <class F>
decltype(auto) with_format(const std::string& name, F&& f) {
  if (name == "nvfp4_1x16" || name == "nvfp4") return f(nvfp4_1x16{});
  if (name == "nvfp4_16x16") return f(nvfp4_16x16{});
  if (name == "mxfp4") return f(mxfp4{});
  if (name == "mxfp8") return f(mxfp8{});
  if (name == "mxfp8_e5m2") return f(mxfp8_e5m2{});
  throw error(errc::invalid_argument, "unknown format '" + name + "' (one of: nvfp4_1x16, nvfp4_16x16, mxfp4, mxfp8, mxfp8_e5m2)");
}

/// A quantized tensor of any format, with how it was made (recorded when saved to a checkpoint).
struct py_quantized {
  any_tensor tensor;
  quantize_options made_with{};
  bool rht = false;  ///< its rows went through TE's 16-point RHT before quantizing
};

template <class F>
decltype(auto) visit(const py_quantized& q, F&& f) {
  return std::visit(std::forward<F>(f), q.tensor);
}

/// A read-only numpy view of `count` bytes owned by `owner` (kept alive by the array).
inline py::array byte_view(const void* data, std::vector<py::ssize_t> shape, py::handle owner) {
  py::array out(py::dtype::of<std::uint8_t>(), shape, {}, data, owner);
  out.attr("setflags")(py::arg("write") = false);
  return out;
}

// ---- numpy input ---------------------------------------------------------------------------

inline std::string dtype_text(const py::dtype& dtype) { return py::str(static_cast<const py::object&>(dtype)); }

/// A 2-D float32 or bf16 (uint16 bits) numpy array as a matrix_view of its own memory, with its
/// strides; `keep` holds a C-order copy when the strides are not usable as they are.
struct input_matrix {
  py::array keep;
  bool is_bf16 = false;
  matrix_view<const float> f32;
  matrix_view<const bf16> b16;
  index_t rows() const { return is_bf16 ? b16.rows() : f32.rows(); }
  index_t cols() const { return is_bf16 ? b16.cols() : f32.cols(); }
};

/// The element types inputs may have, for messages.
inline constexpr const char* accepted_dtypes =
    "float32, float16, float64 (rounded to float32), or bfloat16: uint16 bits (x.view(numpy.uint16)), an ml_dtypes "
    "bfloat16 array, or input_dtype='bfloat16' for int16 / 2-byte void bits";

/// Throws invalid_argument unless x's shape is within nvfp4::max_element_count, before anything
/// reads or copies x: a numpy view may have far more elements than memory (np.broadcast_to has
/// zero strides), and a 2^41-element one got a whole conversion or amax pass (issue 39).
inline void check_array_size(const py::array& x, const char* what) {
  const std::vector<std::int64_t> shape(x.shape(), x.shape() + x.ndim());
  (void)detail::checked_element_count(shape, errc::invalid_argument, what);
}

/// `x` as an array of float32 or of bf16 bits (uint16): float16 converted exactly, float64 rounded
/// to nearest (a finite value beyond float32's range is an overflow error, not an Inf), ml_dtypes'
/// bfloat16 and (with input_dtype "bfloat16") any 2-byte array viewed as its bits.
inline py::array normalized_input(py::array x, const char* what, const std::string& input_dtype = "") {
  check_array_size(x, what);
  const py::dtype dtype = x.dtype();
  if (!input_dtype.empty() && input_dtype != "bfloat16")
    throw py::value_error(std::string("input_dtype must be None or 'bfloat16', not '") + input_dtype + "'");
  const bool two_bytes = dtype.itemsize() == 2 && dtype.kind() != 'f';
  if (input_dtype == "bfloat16") {
    if (!two_bytes)
      throw py::type_error(std::string(what) + ": input_dtype='bfloat16' reads 2-byte integer or void elements as bfloat16 bits; got " +
                           dtype_text(dtype) + (dtype.kind() == 'f' ? " (float16 holds IEEE halves: drop input_dtype)" : ""));
    return x.attr("view")(py::dtype::of<std::uint16_t>());
  }
  if (dtype.is(py::dtype::of<float>()) || dtype.is(py::dtype::of<std::uint16_t>())) return x;
  if (dtype_text(dtype) == "bfloat16" && dtype.itemsize() == 2) return x.attr("view")(py::dtype::of<std::uint16_t>());
  if (dtype.kind() == 'f' && (dtype.itemsize() == 2 || dtype.itemsize() == 8)) {
    if (dtype.itemsize() == 8) {
      const auto values = py::array_t<double, py::array::c_style>::ensure(x);
      const double* p = values.data();
      for (py::ssize_t i = 0; i < values.size(); ++i)
        if (std::isfinite(p[i]) && std::fabs(p[i]) > static_cast<double>(std::numeric_limits<float>::max()))
          throw error(errc::overflow, std::string(what) + ": float64 element " + std::to_string(i) +
                                          " (C order) = " + detail::number_text(p[i]) + " is beyond float32's range (scale it down first)");
    }
    return py::array_t<float, py::array::forcecast>::ensure(x);
  }
  throw py::type_error(std::string(what) + " must be " + accepted_dtypes + "; got " + dtype_text(dtype) +
                       " (convert with .astype(numpy.float32))");
}

inline input_matrix as_input(py::array x, const char* what, const std::string& input_dtype = "") {
  input_matrix in;
  x = normalized_input(std::move(x), what, input_dtype);
  const py::dtype dtype = x.dtype();
  in.is_bf16 = dtype.is(py::dtype::of<std::uint16_t>());
  if (x.ndim() != 2)
    throw py::value_error(std::string(what) + " must be a 2-D array [rows, cols]; got " + std::to_string(x.ndim()) +
                          " dimensions (reshape it first)");
  const auto itemsize = static_cast<py::ssize_t>(dtype.itemsize());
  bool usable = x.strides(0) >= 0 && x.strides(1) >= 0 && x.strides(0) % itemsize == 0 && x.strides(1) % itemsize == 0;
  if (!usable) x = py::array::ensure(x, py::array::c_style);
  in.keep = x;
  const index_t rows = x.shape(0), cols = x.shape(1);
  const index_t row_stride = x.strides(0) / itemsize, col_stride = x.strides(1) / itemsize;
  if (in.is_bf16)
    in.b16 = matrix_view<const bf16>(static_cast<const bf16*>(x.data()), rows, cols, row_stride, col_stride);
  else
    in.f32 = matrix_view<const float>(static_cast<const float*>(x.data()), rows, cols, row_stride, col_stride);
  return in;
}

/// Calls f with the input's matrix_view (float or bf16).
template <class F>
decltype(auto) with_view(const input_matrix& in, F&& f) {
  return in.is_bf16 ? f(in.b16) : f(in.f32);
}

inline py::array_t<float> new_float_matrix(index_t rows, index_t cols) {
  return py::array_t<float>({static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(cols)});
}

inline matrix_view<float> view_of(py::array_t<float>& a) { return matrix_view<float>::row_major(a.mutable_data(), a.shape(0), a.shape(1)); }

/// A new float32 [m, n] array filled by run(matrix_view<float>) with the GIL released.
template <class Run>
py::array_t<float> float_output(index_t m, index_t n, Run&& run) {
  auto out = new_float_matrix(m, n);
  auto view = view_of(out);
  {
    py::gil_scoped_release unlocked;
    run(view);
  }
  return out;
}

/// A float32 array's elements in C order (a copy only when it is not C-contiguous float32).
inline py::array_t<float, py::array::c_style> float_values(const py::array& x, const char* what) {
  if (!x.dtype().is(py::dtype::of<float>())) throw py::type_error(std::string(what) + " must be float32; got " + dtype_text(x.dtype()));
  return py::array_t<float, py::array::c_style>::ensure(x);
}

// ---- options --------------------------------------------------------------------------------

inline quantize_options make_options(const std::string& rounding, std::uint64_t seed, const std::string& mx_rule, const std::string& axis) {
  quantize_options o;
  o.rounding = rounding == "nearest" ? rounding_mode::nearest_even : detail::parse_name<rounding_mode>(rounding, "rounding");
  o.seed = seed;
  o.mx_rule = detail::parse_name<mx_scale_rule>(mx_rule, "mx_rule");
  o.axis = detail::parse_name<quantized_axis>(axis, "axis");
  return o;
}

inline gemm_mode parse_mode(const std::string& mode) { return detail::parse_name<gemm_mode>(mode, "mode"); }

inline index_t rows_of(const py_quantized& q) {
  return visit(q, [](const auto& t) { return t.rows(); });
}

/// The optional C operand as an [m, n] view (empty when absent); `keep` holds its float32 copy.
inline matrix_view<const float> accumulator_view(const std::optional<py::array>& c, index_t m, index_t n,
                                                 py::array_t<float, py::array::c_style>& keep, const char* what) {
  if (!c) return {};
  keep = float_values(*c, "c");
  if (keep.ndim() != 2 || keep.shape(0) != m || keep.shape(1) != n)
    throw error(errc::shape_mismatch, std::string(what) + ": c must be [" + std::to_string(m) + ", " + std::to_string(n) + "]");
  return matrix_view<const float>::row_major(keep.data(), m, n);
}

/// A new [m, n] output of out_dtype ("float32", or "bfloat16" as uint16 bits) filled by run(view)
/// with the GIL released (run takes a matrix_view of either type).
template <class Run>
py::array gemm_output(const std::string& out_dtype, index_t m, index_t n, Run&& run) {
  if (out_dtype == "float32") return float_output(m, n, run);
  if (out_dtype == "bfloat16") {
    py::array_t<std::uint16_t> out({static_cast<py::ssize_t>(m), static_cast<py::ssize_t>(n)});
    const auto view = matrix_view<bf16>::row_major(reinterpret_cast<bf16*>(out.mutable_data()), m, n);
    {
      py::gil_scoped_release unlocked;
      run(view);
    }
    return out;
  }
  throw error(errc::invalid_argument, "out_dtype must be 'float32' or 'bfloat16', not '" + out_dtype + "'");
}

// ---- messages for calls pybind11 cannot match -----------------------------------------------

/// One argument of a binding: its name, what it takes (for the message) and a check.
struct arg_spec {
  const char* name;
  const char* takes;
  bool (*accepts)(py::handle);
  bool keyword_only = false;
};

inline bool is_array_like(py::handle h) {
  return py::isinstance<py::array>(h) || py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h) || py::hasattr(h, "__array__");
}
inline bool is_str(py::handle h) { return py::isinstance<py::str>(h); }
inline bool is_optional_str(py::handle h) { return h.is_none() || is_str(h); }
inline bool is_uint(py::handle h) {
  return py::isinstance<py::int_>(h) && !py::isinstance<py::bool_>(h) && py::cast<py::int_>(h) >= py::int_(0);
}
inline bool is_bool(py::handle h) { return py::isinstance<py::bool_>(h); }
inline bool is_optional_float(py::handle h) {
  return h.is_none() || ((py::isinstance<py::float_>(h) || py::isinstance<py::int_>(h)) && !is_bool(h));
}
inline bool is_quantized_or_fp8(py::handle h) { return py::isinstance<py_quantized>(h) || py::isinstance<fp8_tensor>(h); }

inline std::string type_text(py::handle h) {
  std::string text = py::str(py::type::of(h).attr("__name__"));
  if (is_str(h) || py::isinstance<py::int_>(h) || py::isinstance<py::float_>(h)) {
    std::string r = py::repr(h);
    if (r.size() > 40) r = r.substr(0, 40) + "...";
    text += " " + r;
  }
  return text;
}

/// For a call of `function` that matched no signature without conversions: raises TypeError for
/// the first argument that is not what it takes, an unknown keyword, too many positional
/// arguments, a missing required one; returns when every argument looks right (the caller then
/// calls the binding again, with conversions: a list for an array, an int for a float).
inline void check_call(const char* function, const std::vector<arg_spec>& specs, const py::args& args, const py::kwargs& kwargs) {
  std::string names;
  std::size_t positional = 0;
  for (const auto& s : specs) {
    names += (names.empty() ? "" : ", ") + std::string(s.name);
    positional += !s.keyword_only;
  }
  const std::string f = std::string(function) + "()";
  if (args.size() > positional) {
    const std::string extra = args.size() - 1 < specs.size() ? std::string(" ('") + specs[args.size() - 1].name +
                                                                   "' is keyword-only: write " + specs[args.size() - 1].name + "=...)"
                                                             : "";
    throw py::type_error(f + " takes " + std::to_string(positional) + " positional argument(s), got " + std::to_string(args.size()) +
                         extra + "; its arguments: " + names);
  }
  for (std::size_t i = 0; i < args.size(); ++i)
    if (!specs[i].accepts(args[i]))
      throw py::type_error(f + ": argument '" + specs[i].name + "' must be " + specs[i].takes + "; got " + type_text(args[i]));
  for (const auto& [key, value] : kwargs) {
    const std::string k = py::str(key);
    const auto it = std::find_if(specs.begin(), specs.end(), [&](const arg_spec& s) { return k == s.name; });
    if (it == specs.end()) throw py::type_error(f + " has no argument '" + k + "'; its arguments: " + names);
    if (static_cast<std::size_t>(it - specs.begin()) < args.size()) throw py::type_error(f + ": argument '" + k + "' given twice");
    if (!it->accepts(value)) throw py::type_error(f + ": argument '" + k + "' must be " + it->takes + "; got " + type_text(value));
  }
  for (std::size_t i = args.size(); i < specs.size(); ++i)
    if (std::string(specs[i].name) == "x" || std::string(specs[i].name) == "q" || std::string(specs[i].name) == "codes")
      if (!kwargs.contains(specs[i].name))
        throw py::type_error(f + ": argument '" + specs[i].name + "' is missing (" + specs[i].takes + ")");
}

/// Adds to `name` (already bound to the real function) an overload that pybind11 reaches when
/// no signature matches as given: check_call's message, or else `impl` (the same function as a
/// separate object, so the call gets pybind11's conversions without coming back here).
inline void add_argument_messages(py::module_& m, const char* name, std::vector<arg_spec> specs, py::cpp_function impl) {
  m.def(name, [name, specs = std::move(specs), impl = std::move(impl)](const py::args& args, const py::kwargs& kwargs) -> py::object {
    check_call(name, specs, args, kwargs);
    // Array arguments given as lists, tuples or objects with __array__ (a CPU torch tensor) become numpy arrays.
    const py::object asarray = py::module_::import("numpy").attr("asarray");
    const auto is_array_arg = [&](const std::string& n) {
      return std::any_of(specs.begin(), specs.end(), [&](const arg_spec& s) { return n == s.name && s.accepts == is_array_like; });
    };
    py::list positional;
    for (std::size_t i = 0; i < args.size(); ++i) positional.append(is_array_arg(specs[i].name) ? asarray(args[i]) : py::object(args[i]));
    py::dict named;
    for (const auto& [key, value] : kwargs)
      named[key] = is_array_arg(py::str(key)) ? asarray(value) : py::reinterpret_borrow<py::object>(value);
    return impl(*py::tuple(positional), **named);
  });
}

}  // namespace nvfp4_python
