// python/nvfp4_module.cpp: the Python module `nvfp4` (pybind11). numpy arrays in and out; every
// call goes to the C++ API (nvfp4::quantize, dequantize, gemm, the RHT, the error metrics, the
// checkpoint files, the FP8 quantizers and GEMMs), so the bytes are the C++ library's. Reference:
// docs/python.md.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "nvfp4/gemm/fp8_gemm.hpp"
#include "nvfp4/gemm/gemm.hpp"
#include "nvfp4/io/checkpoint_reader.hpp"
#include "nvfp4/io/quantized_checkpoint.hpp"
#include "nvfp4/nvfp4.hpp"

namespace py = pybind11;

namespace {

using namespace nvfp4;

static_assert(sizeof(e2m1x2) == 1 && sizeof(e4m3) == 1 && sizeof(ue4m3) == 1 && sizeof(e8m0) == 1 && sizeof(bf16) == 2,
              "the element, scale and bf16 types are their bytes");

// ---- the quantized tensor object -----------------------------------------------------------

using any_tensor = std::variant<nvfp4_tensor, nvfp4_tile_tensor, mxfp4_tensor, mxfp8_tensor, mxfp8_e5m2_tensor>;

template <class Format>
constexpr const char* format_name() {
  if constexpr (std::is_same_v<Format, nvfp4_1x16>) return "nvfp4_1x16";
  else if constexpr (std::is_same_v<Format, nvfp4_16x16>) return "nvfp4_16x16";
  else if constexpr (std::is_same_v<Format, mxfp4>) return "mxfp4";
  else if constexpr (std::is_same_v<Format, mxfp8>) return "mxfp8";
  else return "mxfp8_e5m2";
}

/// Calls f with a default-constructed Format tag for the format named `name`.
template <class F>
decltype(auto) with_format(const std::string& name, F&& f) {
  if (name == "nvfp4_1x16" || name == "nvfp4") return f(nvfp4_1x16{});
  if (name == "nvfp4_16x16") return f(nvfp4_16x16{});
  if (name == "mxfp4") return f(mxfp4{});
  if (name == "mxfp8") return f(mxfp8{});
  if (name == "mxfp8_e5m2") return f(mxfp8_e5m2{});
  throw error(errc::invalid_argument,
              "unknown format '" + name + "' (one of: nvfp4_1x16, nvfp4_16x16, mxfp4, mxfp8, mxfp8_e5m2)");
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
py::array byte_view(const void* data, std::vector<py::ssize_t> shape, py::handle owner) {
  py::array out(py::dtype::of<std::uint8_t>(), shape, {}, data, owner);
  out.attr("setflags")(py::arg("write") = false);
  return out;
}

// ---- numpy input ---------------------------------------------------------------------------

std::string dtype_text(const py::dtype& dtype) { return py::str(static_cast<const py::object&>(dtype)); }

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
constexpr const char* accepted_dtypes =
    "float32, float16, float64 (rounded to float32), or bfloat16: uint16 bits (x.view(numpy.uint16)), an ml_dtypes "
    "bfloat16 array, or input_dtype='bfloat16' for int16 / 2-byte void bits";

/// `x` as an array of float32 or of bf16 bits (uint16): float16 converted exactly, float64 rounded
/// to nearest (a finite value beyond float32's range is an overflow error, not an Inf), ml_dtypes'
/// bfloat16 and (with input_dtype "bfloat16") any 2-byte array viewed as its bits.
py::array normalized_input(py::array x, const char* what, const std::string& input_dtype = "") {
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
          throw error(errc::overflow, std::string(what) + ": float64 element " + std::to_string(i) + " (C order) = " +
                                          detail::number_text(p[i]) + " is beyond float32's range (scale it down first)");
    }
    return py::array_t<float, py::array::forcecast>::ensure(x);
  }
  throw py::type_error(std::string(what) + " must be " + accepted_dtypes + "; got " + dtype_text(dtype) +
                       " (convert with .astype(numpy.float32))");
}

input_matrix as_input(py::array x, const char* what, const std::string& input_dtype = "") {
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

py::array_t<float> new_float_matrix(index_t rows, index_t cols) {
  return py::array_t<float>({static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(cols)});
}

matrix_view<float> view_of(py::array_t<float>& a) {
  return matrix_view<float>::row_major(a.mutable_data(), a.shape(0), a.shape(1));
}

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
py::array_t<float, py::array::c_style> float_values(const py::array& x, const char* what) {
  if (!x.dtype().is(py::dtype::of<float>()))
    throw py::type_error(std::string(what) + " must be float32; got " + dtype_text(x.dtype()));
  return py::array_t<float, py::array::c_style>::ensure(x);
}

// ---- options --------------------------------------------------------------------------------

quantize_options make_options(const std::string& rounding, std::uint64_t seed, const std::string& mx_rule,
                              const std::string& axis) {
  quantize_options o;
  if (rounding == "nearest_even" || rounding == "nearest") o.rounding = rounding_mode::nearest_even;
  else if (rounding == "stochastic") o.rounding = rounding_mode::stochastic;
  else throw error(errc::invalid_argument, "rounding must be 'nearest_even' or 'stochastic', not '" + rounding + "'");
  o.seed = seed;
  if (mx_rule == "ocp_floor") o.mx_rule = mx_scale_rule::ocp_floor;
  else if (mx_rule == "te_ceil") o.mx_rule = mx_scale_rule::te_ceil;
  else throw error(errc::invalid_argument, "mx_rule must be 'ocp_floor' or 'te_ceil', not '" + mx_rule + "'");
  if (axis == "rowwise") o.axis = quantized_axis::rowwise;
  else if (axis == "columnwise") o.axis = quantized_axis::columnwise;
  else throw error(errc::invalid_argument, "axis must be 'rowwise' or 'columnwise', not '" + axis + "'");
  return o;
}

gemm_mode parse_mode(const std::string& mode) {
  if (mode == "exact") return gemm_mode::exact;
  if (mode == "relaxed") return gemm_mode::relaxed;
  throw error(errc::invalid_argument, "mode must be 'exact' or 'relaxed', not '" + mode + "'");
}

hadamard_transform transform_or_default(const std::optional<hadamard_transform>& t) {
  return t ? *t : hadamard_transform::te_default();
}

// ---- quantize / dequantize -----------------------------------------------------------------

py_quantized quantize_py(py::array x, const std::string& format, const std::string& rounding, std::uint64_t seed,
                         const std::string& mx_rule, const std::string& axis, std::optional<float> amax, bool rht,
                         const std::optional<std::string>& input_dtype) {
  const input_matrix in = as_input(std::move(x), "x", input_dtype.value_or(""));
  py_quantized out;
  out.made_with = make_options(rounding, seed, mx_rule, axis);
  out.rht = rht;
  const index_t rows = in.rows(), cols = in.cols();
  std::vector<bf16> rotated;
  matrix_view<const bf16> rotated_view;
  py::gil_scoped_release unlocked;
  if (rht) {  // TE's 16-point RHT along each row, in bf16, then quantize that
    rotated.resize(static_cast<std::size_t>(rows * cols));
    const auto target = matrix_view<bf16>::row_major(rotated.data(), rows, cols);
    with_view(in, [&](auto v) { hadamard_rows(v, hadamard_transform::te_default(), target); });
    rotated_view = target;
  }
  with_format(format, [&](auto tag) {
    using Format = decltype(tag);
    auto run = [&](auto v) {
      return amax ? quantize_with_amax<Format>(v, *amax, out.made_with) : nvfp4::quantize<Format>(v, out.made_with);
    };
    out.tensor = rht ? run(rotated_view) : with_view(in, run);
  });
  return out;
}

py::tuple quantize_both_py(py::array x, const std::string& format, const std::string& rounding, std::uint64_t seed,
                           const std::string& mx_rule, const std::optional<std::string>& input_dtype) {
  const input_matrix in = as_input(std::move(x), "x", input_dtype.value_or(""));
  py_quantized row, col;
  row.made_with = make_options(rounding, seed, mx_rule, "rowwise");
  col.made_with = row.made_with;
  col.made_with.axis = quantized_axis::columnwise;
  {
    py::gil_scoped_release unlocked;
    with_format(format, [&](auto tag) {
      using Format = decltype(tag);
      auto pair = with_view(in, [&](auto v) { return quantize_rowwise_and_columnwise<Format>(v, row.made_with); });
      row.tensor = std::move(pair.rowwise);
      col.tensor = std::move(pair.columnwise);
    });
  }
  return py::make_tuple(std::move(row), std::move(col));
}

/// The values q holds: element x block scale x S_dec, and for a tensor quantized after TE's RHT
/// (q.rht) the inverse RHT of those along each row, rounded to bf16 as the forward transform was
/// (x's space, what dequantize_checkpoint_tensor gives); `rotated` keeps the transformed values.
py::array_t<float> dequantize_py(const py_quantized& q, bool rotated) {
  auto out = visit(q, [](const auto& t) { return float_output(t.rows(), t.cols(), [&](matrix_view<float> view) { nvfp4::dequantize(t, view); }); });
  if (!q.rht || rotated) return out;
  const index_t rows = out.shape(0), cols = out.shape(1);
  const auto transform = hadamard_transform::te_default();
  if (cols % transform.size() != 0)
    throw error(errc::shape_mismatch, "dequantize: rht is set but cols = " + std::to_string(cols) +
                                          " is not a multiple of 16 (pass rotated=True for the values as stored)");
  std::vector<bf16> back(static_cast<std::size_t>(rows * cols));
  {
    py::gil_scoped_release unlocked;
    hadamard_rows(matrix_view<const float>::row_major(out.data(), rows, cols), transform, matrix_view<bf16>::row_major(back.data(), rows, cols),
                  hadamard_direction::inverse);
  }
  float* p = out.mutable_data();
  for (std::size_t i = 0; i < back.size(); ++i) p[i] = back[i].to_float();
  return out;
}

/// Pickle state of a QuantizedTensor: format, shape, axis, bytes, tensor scale and how it was made.
py::tuple quantized_state(const py_quantized& q) {
  return visit(q, [&](const auto& t) {
    using Format = typename std::decay_t<decltype(t)>::format;
    const auto* d = reinterpret_cast<const char*>(t.data().data());
    const auto* s = reinterpret_cast<const char*>(t.scales().data());
    const quantize_options& o = q.made_with;
    return py::make_tuple(1, format_name<Format>(), t.rows(), t.cols(), t.axis() == quantized_axis::rowwise ? "rowwise" : "columnwise",
                          py::bytes(d, t.data().size()), py::bytes(s, t.scales().size()), t.amax(), t.encode_scale(), t.decode_scale(),
                          q.rht, o.rounding == rounding_mode::stochastic ? "stochastic" : "nearest_even", o.seed,
                          o.mx_rule == mx_scale_rule::te_ceil ? "te_ceil" : "ocp_floor");
  });
}

py_quantized quantized_from_state(const py::tuple& state) {
  if (state.size() != 14 || py::cast<int>(state[0]) != 1)
    throw py::value_error("QuantizedTensor: not a pickle state this version wrote (expected version 1 with 14 fields)");
  const auto format = py::cast<std::string>(state[1]);
  const auto rows = py::cast<index_t>(state[2]), cols = py::cast<index_t>(state[3]);
  py_quantized out;
  out.made_with = make_options(py::cast<std::string>(state[11]), py::cast<std::uint64_t>(state[12]), py::cast<std::string>(state[13]),
                               py::cast<std::string>(state[4]));
  out.rht = py::cast<bool>(state[10]);
  const std::string d = py::cast<std::string>(state[5]), s = py::cast<std::string>(state[6]);
  const auto bytes = [](const std::string& b) { return std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(b.data()), b.size()); };
  with_format(format, [&](auto tag) {
    using Format = decltype(tag);
    auto q = quantized_tensor<Format>::from_bytes(rows, cols, bytes(d), bytes(s), out.made_with.axis);
    q.set_tensor_scale(py::cast<float>(state[7]), py::cast<float>(state[8]), py::cast<float>(state[9]));
    out.tensor = std::move(q);
  });
  return out;
}

/// Pickle state of an Fp8Tensor.
py::tuple fp8_state(const fp8_tensor& t) {
  return py::make_tuple(1, std::string(fp8_format_name(t.format())), t.rows(), t.cols(), t.per_tensor() ? 0 : t.block_rows(),
                        t.per_tensor() ? 0 : t.block_cols(), t.axis() == quantized_axis::rowwise ? "rowwise" : "columnwise",
                        py::bytes(reinterpret_cast<const char*>(t.codes().data()), t.codes().size()),
                        py::bytes(reinterpret_cast<const char*>(t.scale_inv().data()), t.scale_inv().size() * sizeof(float)), t.amax(),
                        t.scale());
}

fp8_tensor fp8_from_state(const py::tuple& state) {
  if (state.size() != 11 || py::cast<int>(state[0]) != 1)
    throw py::value_error("Fp8Tensor: not a pickle state this version wrote (expected version 1 with 11 fields)");
  const std::string f = py::cast<std::string>(state[1]);
  const fp8_format format = f == "e5m2" ? fp8_format::e5m2 : fp8_format::e4m3;
  const std::string axis = py::cast<std::string>(state[6]);
  fp8_tensor t(py::cast<index_t>(state[2]), py::cast<index_t>(state[3]), format, py::cast<index_t>(state[4]), py::cast<index_t>(state[5]),
               axis == "columnwise" ? quantized_axis::columnwise : quantized_axis::rowwise);
  const std::string codes = py::cast<std::string>(state[7]), scales = py::cast<std::string>(state[8]);
  if (codes.size() != t.codes().size() || scales.size() != t.scale_inv().size() * sizeof(float))
    throw py::value_error("Fp8Tensor: the pickled bytes do not fit the pickled shape");
  std::memcpy(t.codes().data(), codes.data(), codes.size());
  std::memcpy(t.scale_inv().data(), scales.data(), scales.size());
  t.set_amax(py::cast<float>(state[9]));
  t.set_scale(py::cast<float>(state[10]));
  return t;
}

/// decode_e2m1 / decode_ue4m3 / decode_e8m0: bytes (any shape, uint8 or int8) to float32 values.
py::array_t<std::uint8_t, py::array::c_style> code_bytes(const py::array& codes, const char* what) {
  const char kind = codes.dtype().kind();
  if (kind != 'u' && kind != 'i')
    throw py::type_error(std::string(what) + ": codes must be a uint8 array (e.g. QuantizedTensor.data / .scales); got " + dtype_text(codes.dtype()));
  if (codes.dtype().itemsize() == 1) return py::array_t<std::uint8_t, py::array::c_style>::ensure(codes.attr("view")(py::dtype::of<std::uint8_t>()));
  // Wider integers (a list of Python ints): each must be a byte value.
  const auto wide = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(codes);
  for (py::ssize_t i = 0; i < wide.size(); ++i)
    if (wide.data()[i] < 0 || wide.data()[i] > 255)
      throw error(errc::invalid_argument, std::string(what) + ": code " + std::to_string(wide.data()[i]) + " at " + std::to_string(i) +
                                              " (C order) is not a byte value 0-255");
  return py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast>::ensure(codes);
}

template <class Decode>
py::array_t<float> decode_bytes(const py::array& codes, const char* what, Decode&& decode) {
  const auto in = code_bytes(codes, what);
  std::vector<py::ssize_t> shape(in.shape(), in.shape() + in.ndim());
  py::array_t<float> out(shape);
  float* p = out.mutable_data();
  for (py::ssize_t i = 0; i < in.size(); ++i) p[i] = decode(in.data()[i]);
  return out;
}

py::array_t<float> decode_e2m1_py(const py::array& codes, bool packed) {
  const auto in = code_bytes(codes, "decode_e2m1");
  if (!packed) {
    for (py::ssize_t i = 0; i < in.size(); ++i)
      if (in.data()[i] > 15)
        throw error(errc::invalid_argument, "decode_e2m1: code " + std::to_string(in.data()[i]) + " at " + std::to_string(i) +
                                                " is not a 4-bit code (packed=False wants one code 0-15 per byte; packed bytes: packed=True)");
    return decode_bytes(codes, "decode_e2m1", [](std::uint8_t b) { return e2m1::from_bits(b).to_float(); });
  }
  std::vector<py::ssize_t> shape(in.shape(), in.shape() + in.ndim());
  if (shape.empty()) shape.push_back(1);
  shape.back() *= 2;
  py::array_t<float> out(shape);
  float* p = out.mutable_data();
  for (py::ssize_t i = 0; i < in.size(); ++i) {
    const auto pair = e2m1x2::from_bits(in.data()[i]);
    p[2 * i] = pair[0].to_float();
    p[2 * i + 1] = pair[1].to_float();
  }
  return out;
}

// ---- messages for calls pybind11 cannot match -----------------------------------------------

/// One argument of a binding: its name, what it takes (for the message) and a check.
struct arg_spec {
  const char* name;
  const char* takes;
  bool (*accepts)(py::handle);
  bool keyword_only = false;
};

bool is_array_like(py::handle h) { return py::isinstance<py::array>(h) || py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h) || py::hasattr(h, "__array__"); }
bool is_str(py::handle h) { return py::isinstance<py::str>(h); }
bool is_optional_str(py::handle h) { return h.is_none() || is_str(h); }
bool is_uint(py::handle h) { return py::isinstance<py::int_>(h) && !py::isinstance<py::bool_>(h) && py::cast<py::int_>(h) >= py::int_(0); }
bool is_bool(py::handle h) { return py::isinstance<py::bool_>(h); }
bool is_optional_float(py::handle h) { return h.is_none() || ((py::isinstance<py::float_>(h) || py::isinstance<py::int_>(h)) && !is_bool(h)); }
bool is_quantized_or_fp8(py::handle h) { return py::isinstance<py_quantized>(h) || py::isinstance<fp8_tensor>(h); }

std::string type_text(py::handle h) {
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
void check_call(const char* function, const std::vector<arg_spec>& specs, const py::args& args, const py::kwargs& kwargs) {
  std::string names;
  std::size_t positional = 0;
  for (const auto& s : specs) {
    names += (names.empty() ? "" : ", ") + std::string(s.name);
    positional += !s.keyword_only;
  }
  const std::string f = std::string(function) + "()";
  if (args.size() > positional) {
    const std::string extra = args.size() - 1 < specs.size() ? std::string(" ('") + specs[args.size() - 1].name + "' is keyword-only: write " +
                                                                   specs[args.size() - 1].name + "=...)"
                                                             : "";
    throw py::type_error(f + " takes " + std::to_string(positional) + " positional argument(s), got " + std::to_string(args.size()) + extra +
                         "; its arguments: " + names);
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
      if (!kwargs.contains(specs[i].name)) throw py::type_error(f + ": argument '" + specs[i].name + "' is missing (" + specs[i].takes + ")");
}

/// Adds to `name` (already bound to the real function) an overload that pybind11 reaches when
/// no signature matches as given: check_call's message, or else `impl` (the same function as a
/// separate object, so the call gets pybind11's conversions without coming back here).
void add_argument_messages(py::module_& m, const char* name, std::vector<arg_spec> specs, py::cpp_function impl) {
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
    for (const auto& [key, value] : kwargs) named[key] = is_array_arg(py::str(key)) ? asarray(value) : py::reinterpret_borrow<py::object>(value);
    return impl(*py::tuple(positional), **named);
  });
}

const std::vector<arg_spec>& quantize_args() {
  static const std::vector<arg_spec> specs = {
      {"x", "a 2-D numpy array (float32, float16, float64, or bfloat16 bits as uint16)", is_array_like},
      {"format", "a format name: 'nvfp4_1x16', 'nvfp4_16x16', 'mxfp4', 'mxfp8' or 'mxfp8_e5m2'", is_str},
      {"rounding", "'nearest_even' or 'stochastic'", is_str, true},
      {"seed", "a non-negative int (e.g. seed=1)", is_uint, true},
      {"mx_rule", "'ocp_floor' or 'te_ceil'", is_str, true},
      {"axis", "'rowwise' or 'columnwise'", is_str, true},
      {"amax", "a float or None (e.g. amax=4.0)", is_optional_float, true},
      {"rht", "a bool", is_bool, true},
      {"input_dtype", "None or 'bfloat16'", is_optional_str, true}};
  return specs;
}


py_quantized from_bytes_py(const std::string& format, index_t rows, index_t cols, py::array data, py::array scales,
                           std::optional<float> amax, const std::string& axis) {
  auto bytes_of = [](const py::array& a, const char* what) {
    if (a.dtype().itemsize() != 1)
      throw py::type_error(std::string(what) + " must hold bytes (uint8); got " + dtype_text(a.dtype()));
    const auto c = py::array::ensure(a, py::array::c_style);
    const auto* p = static_cast<const std::uint8_t*>(c.data());
    return std::vector<std::uint8_t>(p, p + c.size());
  };
  const std::vector<std::uint8_t> d = bytes_of(data, "data"), s = bytes_of(scales, "scales");
  py_quantized out;
  out.made_with = make_options("nearest_even", 0, "ocp_floor", axis);
  with_format(format, [&](auto tag) {
    using Format = decltype(tag);
    auto q = quantized_tensor<Format>::from_bytes(rows, cols, d, s, out.made_with.axis);
    if constexpr (Format::has_tensor_scale) {
      const float a = amax.value_or(0.0f);
      const tensor_scale ts = nvfp4_tensor_scale(a);
      q.set_tensor_scale(a, ts.encode, ts.decode);
    } else {
      q.set_tensor_scale(amax.value_or(0.0f), 1.0f, 1.0f);
    }
    out.tensor = std::move(q);
  });
  return out;
}

// ---- transforms ----------------------------------------------------------------------------

py::array_t<float> hadamard_rows_py(py::array x, const std::optional<hadamard_transform>& transform, bool inverse) {
  const input_matrix in = as_input(std::move(x), "x");
  const hadamard_transform t = transform_or_default(transform);
  const index_t rows = in.rows(), cols = in.cols();
  std::vector<bf16> out(static_cast<std::size_t>(rows * cols));
  {
    py::gil_scoped_release unlocked;
    with_view(in, [&](auto v) {
      hadamard_rows(v, t, matrix_view<bf16>::row_major(out.data(), rows, cols),
                    inverse ? hadamard_direction::inverse : hadamard_direction::forward);
    });
  }
  auto result = new_float_matrix(rows, cols);
  float* p = result.mutable_data();
  for (std::size_t i = 0; i < out.size(); ++i) p[i] = out[i].to_float();
  return result;
}

py::tuple rht_columnwise_py(py::array x, const std::optional<hadamard_transform>& transform) {
  const input_matrix in = as_input(std::move(x), "x");
  const hadamard_transform t = transform_or_default(transform);
  columnwise_rht r;
  {
    py::gil_scoped_release unlocked;
    r = with_view(in, [&](auto v) { return rht_columnwise(v, t); });
  }
  auto values = new_float_matrix(r.rows, r.cols);
  float* p = values.mutable_data();
  for (std::size_t i = 0; i < r.values.size(); ++i) p[i] = r.values[i].to_float();
  return py::make_tuple(values, r.amax);
}

py_quantized quantize_columnwise_rht_py(py::array x, const std::string& format, const std::optional<hadamard_transform>& transform,
                                        const std::string& rounding, std::uint64_t seed, const std::string& mx_rule) {
  const input_matrix in = as_input(std::move(x), "x");
  const hadamard_transform t = transform_or_default(transform);
  py_quantized out;
  out.made_with = make_options(rounding, seed, mx_rule, "columnwise");
  out.rht = t.size() == 16 && t.signs() == hadamard_transform::te_default().signs();
  py::gil_scoped_release unlocked;
  with_format(format, [&](auto tag) {
    using Format = decltype(tag);
    out.tensor = with_view(in, [&](auto v) { return quantize_columnwise_rht<Format>(v, t, out.made_with); });
  });
  return out;
}

// ---- GEMM ------------------------------------------------------------------------------------

/// Calls f(a, b) with both operands' concrete types when they form a GEMM pair (NVFP4 with NVFP4,
/// MXFP4 with MXFP4); otherwise throws dtype_mismatch.
template <class F>
void with_gemm_pair(const py_quantized& a, const py_quantized& b, F&& f) {
  std::visit(
      [&](const auto& ta, const auto& tb) {
        using A = typename std::decay_t<decltype(ta)>::format;
        using B = typename std::decay_t<decltype(tb)>::format;
        if constexpr (fp4_gemm_pair<A, B>) {
          f(ta, tb);
        } else {
          throw error(errc::dtype_mismatch, std::string("gemm: ") + format_name<A>() + " x " + format_name<B>() +
                                                " is not a block-scaled FP4 GEMM (NVFP4 x NVFP4 or MXFP4 x MXFP4)");
        }
      },
      a.tensor, b.tensor);
}

index_t rows_of(const py_quantized& q) {
  return visit(q, [](const auto& t) { return t.rows(); });
}

/// The optional C operand as an [m, n] view (empty when absent); `keep` holds its float32 copy.
matrix_view<const float> accumulator_view(const std::optional<py::array>& c, index_t m, index_t n,
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

py::array gemm_py(const py_quantized& a, const py_quantized& b, const std::string& mode, bool apply_alpha, float beta,
                  std::optional<py::array> c, const std::string& out_dtype) {
  gemm_options options;
  options.mode = parse_mode(mode);
  options.apply_alpha = apply_alpha;
  options.beta = beta;
  const index_t m = rows_of(a), n = rows_of(b);
  py::array_t<float, py::array::c_style> c_values;
  const matrix_view<const float> c_view = accumulator_view(c, m, n, c_values, "gemm");
  return gemm_output(out_dtype, m, n, [&](auto view) {
    with_gemm_pair(a, b, [&](const auto& ta, const auto& tb) { nvfp4::gemm(ta, tb, view, options, c_view); });
  });
}

py::array_t<float> block_scaled_mma_py(const py_quantized& a, const py_quantized& b, std::optional<py::array> c,
                                       const std::string& mode) {
  const gemm_mode parsed = parse_mode(mode);
  const index_t m = rows_of(a), n = rows_of(b);
  py::array_t<float, py::array::c_style> c_values;
  const matrix_view<const float> c_view = accumulator_view(c, m, n, c_values, "block_scaled_mma");
  return float_output(m, n, [&](matrix_view<float> view) {
    with_gemm_pair(a, b, [&](const auto& ta, const auto& tb) { nvfp4::block_scaled_mma(ta, tb, c_view, view, parsed); });
  });
}

float gemm_alpha_py(const py_quantized& a, const py_quantized& b) {
  float alpha = 0.0f;
  with_gemm_pair(a, b, [&](const auto& ta, const auto& tb) { alpha = nvfp4::gemm_alpha(ta, tb); });
  return alpha;
}

// ---- metrics ---------------------------------------------------------------------------------

error_report compare_py(const py::array& reference, const py::array& approx) {
  const auto r = float_values(reference, "reference"), a = float_values(approx, "approx");
  if (r.ndim() != a.ndim() || !std::equal(r.shape(), r.shape() + r.ndim(), a.shape()))
    throw error(errc::shape_mismatch, "compare: reference and approx have different shapes");
  return nvfp4::compare(std::span<const float>(r.data(), static_cast<std::size_t>(r.size())),
                        std::span<const float>(a.data(), static_cast<std::size_t>(a.size())));
}

// ---- checkpoints -----------------------------------------------------------------------------

void save_checkpoint_py(const std::string& path, const py::dict& tensors, bool swizzle) {
  io::safetensors_file file;
  for (const auto& [key, value] : tensors) {
    const std::string name = py::cast<std::string>(key);
    const auto& q = py::cast<const py_quantized&>(value);
    io::store_options options;
    options.swizzle = swizzle;
    options.rht = q.rht;
    options.quantize = q.made_with;
    visit(q, [&](const auto& t) {
      if constexpr (std::is_same_v<typename std::decay_t<decltype(t)>::format, mxfp8_e5m2>)
        throw error(errc::unsupported, "save_checkpoint: '" + name +
                                           "' is mxfp8_e5m2, which has no stored layout (checkpoints hold weights: nvfp4_1x16, "
                                           "nvfp4_16x16, mxfp4, mxfp8)");
      else
        io::add_quantized_tensor(file, name, t, options);
    });
  }
  io::write_safetensors(path, file);
}

py_quantized load_one(const io::safetensors_file& file, const std::string& name) {
  const io::stored_tensor_info info = io::describe_quantized_tensor(file, name);
  py_quantized out;
  out.rht = info.rht;
  out.made_with = make_options(info.rounding, info.seed, info.mx_rule, "rowwise");
  switch (info.format) {
    case io::stored_format::nvfp4_1x16: out.tensor = io::load_quantized_tensor<nvfp4_1x16>(file, name); break;
    case io::stored_format::nvfp4_16x16: out.tensor = io::load_quantized_tensor<nvfp4_16x16>(file, name); break;
    case io::stored_format::mxfp4: out.tensor = io::load_quantized_tensor<mxfp4>(file, name); break;
    case io::stored_format::mxfp8: out.tensor = io::load_quantized_tensor<mxfp8>(file, name); break;
  }
  out.made_with.axis = visit(out, [](const auto& t) { return t.axis(); });
  return out;
}

/// Any checkpoint the readers take (detected: ModelOpt file or directory, compressed-tensors,
/// GGUF, torchao), as ModelOpt tensors; another file is refused naming its format.
io::safetensors_file read_any_checkpoint(const std::string& path) {
  return io::read_as_modelopt(path).file;
}

py::dict load_checkpoint_py(const std::string& path) {
  const io::safetensors_file file = read_any_checkpoint(path);
  py::dict out;
  for (const std::string& name : io::quantized_tensor_names(file)) {
    if (io::is_fp8_weight(file, name)) out[py::str(name)] = io::load_fp8_weight(file, name);  // an Fp8Tensor
    else out[py::str(name)] = load_one(file, name);
  }
  return out;
}

py::dict describe_py(const std::string& path, const std::string& name) {
  const io::stored_tensor_info info = io::describe_quantized_tensor(read_any_checkpoint(path), name);
  py::dict d;
  d["name"] = info.name;
  d["format"] = info.format == io::stored_format::nvfp4_16x16 ? "nvfp4_16x16"
                : info.format == io::stored_format::nvfp4_1x16 ? "nvfp4_1x16"
                                                                : io::stored_format_name(info.format);
  d["rows"] = info.rows;
  d["cols"] = info.cols;
  d["shape"] = info.shape;
  d["swizzled"] = info.swizzled;
  d["rht"] = info.rht;
  d["rounding"] = info.rounding;
  d["seed"] = info.seed;
  d["mx_rule"] = info.mx_rule;
  d["amax"] = info.amax;
  d["has_metadata"] = info.has_metadata;
  return d;
}

py::array_t<float> dequantize_checkpoint_tensor_py(const std::string& path, const std::string& name) {
  io::restored_tensor r = io::dequantize_any(read_any_checkpoint(path), name);
  std::vector<py::ssize_t> shape(r.shape.begin(), r.shape.end());
  py::array_t<float> out(shape);
  std::memcpy(out.mutable_data(), r.values.data(), r.values.size() * sizeof(float));
  return out;
}


// ---- enum values from strings (the recipe and Linear bindings are in bind_nn.cpp) ------------

template <class Enum>
Enum parse_enum(const std::string& text, std::initializer_list<std::pair<const char*, Enum>> values, const char* what) {
  std::string names;
  for (const auto& [name, value] : values) {
    if (text == name) return value;
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  throw error(errc::invalid_argument, std::string(what) + " must be one of " + names + ", not '" + text + "'");
}
// ---- FP8: fp8_tensor, its quantizers, the FP8 and MXFP8 GEMMs --------------------------------

fp8_format parse_fp8_format(const std::string& f) {
  return parse_enum<fp8_format>(f, {{"e4m3", fp8_format::e4m3}, {"e5m2", fp8_format::e5m2}}, "format");
}
/// "hopper" or "blackwell"; `what` names the argument in the error.
mma8::tensor_core parse_core(const std::string& c, const char* what = "core") {
  return parse_enum<mma8::tensor_core>(c, {{"hopper", mma8::tensor_core::hopper}, {"blackwell", mma8::tensor_core::blackwell}}, what);
}
quantized_axis parse_axis(const std::string& axis) { return make_options("nearest_even", 0, "ocp_floor", axis).axis; }
fp8_block_shape parse_block(const std::string& b) {
  return parse_enum<fp8_block_shape>(b, {{"1x128", fp8_block_shape::block_1x128}, {"128x128", fp8_block_shape::block_128x128}}, "block");
}
const char* axis_name(quantized_axis a) { return a == quantized_axis::rowwise ? "rowwise" : "columnwise"; }

/// A block given as "1x128" / "128x128" or (block_rows, block_cols); None is per-tensor (0, 0).
using fp8_block_arg = std::optional<std::variant<std::string, std::pair<index_t, index_t>>>;
std::pair<index_t, index_t> block_dims(const fp8_block_arg& block) {
  if (!block) return {0, 0};
  if (const auto* name = std::get_if<std::string>(&*block)) return {fp8_block_rows(parse_block(*name)), fp8_block_size};
  return std::get<std::pair<index_t, index_t>>(*block);
}

/// Fp8Tensor.from_bytes: codes uint8 [rows, cols] and the decode scales (one float, or
/// [scale_rows, scale_cols] float32 for blocks), checked against the tensor's shape first.
fp8_tensor fp8_from_bytes_py(const std::string& format, const py::array& codes, const py::object& scale_inv,
                             const fp8_block_arg& block, const std::string& axis, std::optional<float> amax,
                             std::optional<float> scale) {
  const fp8_format f = parse_fp8_format(format);
  const quantized_axis ax = parse_axis(axis);
  const auto [block_rows, block_cols] = block_dims(block);
  if (codes.dtype().itemsize() != 1)
    throw py::type_error("codes must hold bytes (uint8); got " + dtype_text(codes.dtype()));
  if (codes.ndim() != 2)
    throw error(errc::shape_mismatch, "Fp8Tensor.from_bytes: codes must be a 2-D array [rows, cols], got " +
                                          std::to_string(codes.ndim()) + " dimensions");
  fp8_tensor t(codes.shape(0), codes.shape(1), f, block_rows, block_cols, ax);
  const auto c = py::array::ensure(codes, py::array::c_style);
  std::memcpy(t.codes().data(), c.data(), t.codes().size());
  const std::string expected = "[" + std::to_string(t.scale_rows()) + ", " + std::to_string(t.scale_cols()) + "]";
  if (py::isinstance<py::array>(scale_inv)) {
    const auto values = float_values(scale_inv, "scale_inv");
    const bool fits = values.ndim() == 2 ? values.shape(0) == t.scale_rows() && values.shape(1) == t.scale_cols()
                                         : values.ndim() <= 1 && static_cast<std::size_t>(values.size()) == t.scale_inv().size();
    if (!fits)
      throw error(errc::shape_mismatch, "Fp8Tensor.from_bytes: scale_inv must hold " + expected +
                                            " values (scale rows x scale cols of its blocks), got " + std::to_string(values.size()));
    std::memcpy(t.scale_inv().data(), values.data(), t.scale_inv().size() * sizeof(float));
  } else {
    if (!PyNumber_Check(scale_inv.ptr()))
      throw py::type_error("scale_inv must be a float or a float32 numpy array; got " + std::string(py::str(py::type::of(scale_inv))));
    const float value = py::float_(scale_inv).cast<float>();
    if (t.scale_inv().size() != 1)
      throw error(errc::shape_mismatch,
                  "Fp8Tensor.from_bytes: a block-scaled tensor needs an array of " + expected + " scale_inv values, not one float");
    t.scale_inv()[0] = value;
  }
  if (amax) t.set_amax(*amax);
  if (scale) t.set_scale(*scale);
  return t;
}

fp8_tensor quantize_fp8_current_py(py::array x, const std::string& format, bool power_2_scale, float amax_epsilon,
                                   const std::string& axis) {
  const input_matrix in = as_input(std::move(x), "x");
  const fp8_format f = parse_fp8_format(format);
  const quantized_axis ax = parse_axis(axis);
  const fp8_scale_options options{.power_2_scale = power_2_scale, .amax_epsilon = amax_epsilon};
  py::gil_scoped_release unlocked;
  return with_view(in, [&](auto v) { return quantize_fp8_current(v, f, options, ax); });
}

fp8_tensor quantize_fp8_with_scale_py(py::array x, const std::string& format, float scale, const std::string& axis) {
  const input_matrix in = as_input(std::move(x), "x");
  const fp8_format f = parse_fp8_format(format);
  const quantized_axis ax = parse_axis(axis);
  py::gil_scoped_release unlocked;
  return with_view(in, [&](auto v) { return quantize_fp8_with_scale(v, f, scale, ax); });
}

fp8_tensor quantize_fp8_blockwise_py(py::array x, const std::string& format, const std::string& block, bool power_2_scale,
                                     float amax_epsilon, const std::string& axis) {
  const input_matrix in = as_input(std::move(x), "x");
  const fp8_format f = parse_fp8_format(format);
  const fp8_block_shape shape = parse_block(block);
  const quantized_axis ax = parse_axis(axis);
  const fp8_scale_options options{.power_2_scale = power_2_scale, .amax_epsilon = amax_epsilon};
  py::gil_scoped_release unlocked;
  return with_view(in, [&](auto v) { return quantize_fp8_blockwise(v, f, shape, options, ax); });
}

py::array_t<float> dequantize_fp8_py(const fp8_tensor& q) {
  return float_output(q.rows(), q.cols(), [&](matrix_view<float> view) { nvfp4::dequantize(q, view); });
}

/// The options of the FP8 GEMMs; `keep` holds the bias's float32 values.
fp8_gemm_options fp8_options(const std::string& mode, const std::string& core, index_t promotion_interval,
                             const std::optional<py::array>& bias, py::array_t<float, py::array::c_style>& keep) {
  fp8_gemm_options o;
  o.mode = parse_mode(mode);
  o.core = parse_core(core);
  o.promotion_interval = promotion_interval;
  if (bias) {
    keep = float_values(*bias, "bias");
    if (keep.ndim() != 1) throw error(errc::shape_mismatch, "bias must be a 1-D float32 array of N values");
    o.bias = std::span<const float>(keep.data(), static_cast<std::size_t>(keep.size()));
  }
  return o;
}

py::array fp8_gemm_py(const fp8_tensor& a, const fp8_tensor& b, const std::string& mode, const std::string& core,
                      index_t promotion_interval, std::optional<py::array> bias, const std::string& out_dtype) {
  py::array_t<float, py::array::c_style> bias_values;
  const fp8_gemm_options options = fp8_options(mode, core, promotion_interval, bias, bias_values);
  return gemm_output(out_dtype, a.rows(), b.rows(), [&](auto view) { nvfp4::fp8_gemm(a, b, view, options); });
}

py::array_t<float> fp8_mma_py(const fp8_tensor& a, const fp8_tensor& b, std::optional<py::array> c, const std::string& core,
                              const std::string& mode, index_t promotion_interval) {
  py::array_t<float, py::array::c_style> unused, c_values;
  const fp8_gemm_options options = fp8_options(mode, core, promotion_interval, std::nullopt, unused);
  const matrix_view<const float> c_view = accumulator_view(c, a.rows(), b.rows(), c_values, "fp8_mma");
  return float_output(a.rows(), b.rows(), [&](matrix_view<float> view) { nvfp4::fp8_mma(a, b, c_view, view, options); });
}

/// Calls f(a, b) when both are MXFP8 tensors; otherwise throws dtype_mismatch.
template <class F>
void with_mxfp8_pair(const py_quantized& a, const py_quantized& b, const char* what, F&& f) {
  std::visit(
      [&](const auto& ta, const auto& tb) {
        using A = typename std::decay_t<decltype(ta)>::format;
        using B = typename std::decay_t<decltype(tb)>::format;
        if constexpr (mxfp8_format<A> && mxfp8_format<B>) {
          f(ta, tb);
        } else {
          throw error(errc::dtype_mismatch, std::string(what) + ": " + format_name<A>() + " x " + format_name<B>() +
                                                " is not an MXFP8 GEMM (mxfp8 or mxfp8_e5m2, both sides)");
        }
      },
      a.tensor, b.tensor);
}

py::array mxfp8_gemm_py(const py_quantized& a, const py_quantized& b, const std::string& mode, index_t promotion_interval,
                        std::optional<py::array> bias, const std::string& out_dtype) {
  py::array_t<float, py::array::c_style> bias_values;
  const fp8_gemm_options options = fp8_options(mode, "blackwell", promotion_interval, bias, bias_values);
  return gemm_output(out_dtype, rows_of(a), rows_of(b), [&](auto view) {
    with_mxfp8_pair(a, b, "mxfp8_gemm", [&](const auto& ta, const auto& tb) { nvfp4::mxfp8_gemm(ta, tb, view, options); });
  });
}

py::array_t<float> mxfp8_mma_py(const py_quantized& a, const py_quantized& b, std::optional<py::array> c, const std::string& mode,
                                index_t promotion_interval) {
  py::array_t<float, py::array::c_style> unused, c_values;
  const fp8_gemm_options options = fp8_options(mode, "blackwell", promotion_interval, std::nullopt, unused);
  const index_t m = rows_of(a), n = rows_of(b);
  const matrix_view<const float> c_view = accumulator_view(c, m, n, c_values, "mxfp8_mma");
  return float_output(m, n, [&](matrix_view<float> view) {
    with_mxfp8_pair(a, b, "mxfp8_mma", [&](const auto& ta, const auto& tb) { nvfp4::mxfp8_mma(ta, tb, c_view, view, options); });
  });
}
}  // namespace

void bind_nn(py::module_& m);  // python/bind_nn.cpp

PYBIND11_MODULE(_nvfp4, m) {  // nvfp4._nvfp4, re-exported by python/nvfp4/__init__.py
  m.doc() =
      "nvfp4: NVIDIA's NVFP4 / MXFP4 / MXFP8 block-scaled quantization and the Blackwell FP4 GEMM on the CPU, "
      "bit for bit with the GPU stack (numpy arrays in and out). Reference: docs/python.md.";
  m.attr("__version__") = NVFP4_PYTHON_VERSION;
  m.attr("compiled_isa") = isa_name(compiled_isa);
  m.attr("formats") = py::make_tuple("nvfp4_1x16", "nvfp4_16x16", "mxfp4", "mxfp8", "mxfp8_e5m2");

  // nvfp4.Error (a ValueError) with .code, the errc name ("shape_mismatch", ...).
  static py::exception<nvfp4::error> error_type(m, "Error", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const nvfp4::error& e) {
      py::object instance = py::reinterpret_borrow<py::object>(error_type.ptr())(e.what());
      instance.attr("code") = errc_name(e.code());
      PyErr_SetObject(error_type.ptr(), instance.ptr());
    }
  });

  py::class_<py_quantized>(m, "QuantizedTensor",
                           "A block-scaled quantized matrix: packed elements, block scales, amax and tensor scale.")
      .def_property_readonly("format", [](const py_quantized& q) {
        return visit(q, [](const auto& t) { return format_name<typename std::decay_t<decltype(t)>::format>(); });
      }, "'nvfp4_1x16', 'nvfp4_16x16', 'mxfp4', 'mxfp8' (E4M3) or 'mxfp8_e5m2'")
      .def_property_readonly("shape", [](const py_quantized& q) {
        return visit(q, [](const auto& t) { return py::make_tuple(t.rows(), t.cols()); });
      }, "(rows, cols) of the matrix it holds (for a columnwise copy of an M x N source: (N, M))")
      .def_property_readonly("rows", [](const py_quantized& q) { return rows_of(q); })
      .def_property_readonly("cols", [](const py_quantized& q) { return visit(q, [](const auto& t) { return t.cols(); }); })
      .def_property_readonly("axis", [](const py_quantized& q) {
        return visit(q, [](const auto& t) { return t.axis() == quantized_axis::rowwise ? "rowwise" : "columnwise"; });
      })
      .def_property_readonly("block_shape", [](const py_quantized& q) {
        return visit(q, [](const auto& t) {
          using F = typename std::decay_t<decltype(t)>::format;
          return py::make_tuple(F::block_rows, F::block_cols);
        });
      })
      .def_property_readonly("data", [](py::object self) {
        const auto& q = self.cast<const py_quantized&>();
        return visit(q, [&](const auto& t) {
          return byte_view(t.data().data(), {t.rows(), t.data_row_stride()}, self);
        });
      }, "uint8 [rows, ceil(cols/2)] packed E2M1 (element 2i in the low nibble), or uint8 [rows, cols] E4M3 / E5M2 codes for mxfp8 / mxfp8_e5m2; read-only view")
      .def_property_readonly("scales", [](py::object self) {
        const auto& q = self.cast<const py_quantized&>();
        return visit(q, [&](const auto& t) { return byte_view(t.scales().data(), {t.rows(), t.scale_cols()}, self); });
      }, "uint8 [rows, ceil(cols/16)] UE4M3 scale bytes (NVFP4; a 16x16 tile's scale on each of its rows) or [rows, ceil(cols/32)] E8M0 bytes (MX); read-only view")
      .def_property_readonly("amax", [](const py_quantized& q) { return visit(q, [](const auto& t) { return t.amax(); }); })
      .def_property_readonly("encode_scale", [](const py_quantized& q) { return visit(q, [](const auto& t) { return t.encode_scale(); }); },
                             "S_enc = 2688 / amax (NVFP4; 1 for MX)")
      .def_property_readonly("decode_scale", [](const py_quantized& q) { return visit(q, [](const auto& t) { return t.decode_scale(); }); },
                             "S_dec = 1 / S_enc, the FP32 tensor scale (ModelOpt's weight_scale_2)")
      .def_readwrite("rht", &py_quantized::rht, "True when its rows went through TE's 16-point RHT (recorded in checkpoints; dequantize_checkpoint_tensor inverts it)")
      .def("swizzled_scales", [](const py_quantized& q) {
        const swizzled_scales s = visit(q, [](const auto& t) { return swizzle_128x4(t); });
        py::array_t<std::uint8_t> out({static_cast<py::ssize_t>(s.padded_rows()), static_cast<py::ssize_t>(s.padded_cols())});
        std::memcpy(out.mutable_data(), s.bytes().data(), s.bytes().size());
        return out;
      }, "The scale bytes in cuBLAS's 128x4 layout: uint8 [rows padded to 128, scale cols padded to 4]")
      .def("dequantize", &dequantize_py, py::kw_only(), py::arg("rotated") = false,
           "float32 [rows, cols]: element x block scale x S_dec; for a tensor quantized after TE's RHT (rht=True) the "
           "inverse RHT of those (x's space, rounded to bf16 as the forward transform was); rotated=True keeps the "
           "transformed values")
      .def(py::pickle([](const py_quantized& q) { return quantized_state(q); }, [](const py::tuple& state) { return quantized_from_state(state); }))
      .def("__copy__", [](const py_quantized& q) { return q; })
      .def("__deepcopy__", [](const py_quantized& q, const py::object&) { return q; }, py::arg("memo"))
      .def("__eq__", [](const py_quantized& a, const py::object& other) {
        if (!py::isinstance<py_quantized>(other)) return false;
        return quantized_state(a).equal(quantized_state(other.cast<const py_quantized&>()));
      }, "True for the same format, shape, bytes, tensor scale and recorded options")
      .def_static("from_bytes", &from_bytes_py, py::arg("format"), py::arg("rows"), py::arg("cols"), py::arg("data"),
                  py::arg("scales"), py::arg("amax") = py::none(), py::arg("axis") = "rowwise",
                  "A tensor from raw bytes laid out as .data and .scales are; for NVFP4 the tensor scale is set from amax")
      .def("__repr__", [](const py_quantized& q) {
        return visit(q, [](const auto& t) {
          return "<nvfp4.QuantizedTensor " + std::string(format_name<typename std::decay_t<decltype(t)>::format>()) + " " +
                 std::to_string(t.rows()) + "x" + std::to_string(t.cols()) + " " +
                 (t.axis() == quantized_axis::rowwise ? "rowwise" : "columnwise") + " amax=" + std::to_string(t.amax()) + ">";
        });
      });

  // Each binding below is also a separate cpp_function (`impl`) behind an overload that explains
  // a call no signature matches (add_argument_messages).
  const auto quantize_binding = [](auto&& bind) {
    return bind(&quantize_py, py::arg("x"), py::arg("format") = "nvfp4_1x16", py::kw_only(), py::arg("rounding") = "nearest_even",
                py::arg("seed") = 0, py::arg("mx_rule") = "ocp_floor", py::arg("axis") = "rowwise", py::arg("amax") = py::none(),
                py::arg("rht") = false, py::arg("input_dtype") = py::none(),
                "Quantizes a 2-D array, blocks along its rows. x: float32, float16 (exact), float64 (rounded to float32), or "
                "bfloat16 as uint16 bits / an ml_dtypes bfloat16 array / 2-byte bits with input_dtype='bfloat16'. rounding: "
                "'nearest_even' or 'stochastic' (with seed); mx_rule: 'ocp_floor' or 'te_ceil' (MX formats); amax: use this "
                "tensor amax instead of the array's own; rht: apply TE's 16-point RHT to each row first (values rounded to "
                "bf16; dequantize() undoes it).");
  };
  const auto both_binding = [](auto&& bind) {
    return bind(&quantize_both_py, py::arg("x"), py::arg("format") = "nvfp4_1x16", py::kw_only(), py::arg("rounding") = "nearest_even",
                py::arg("seed") = 0, py::arg("mx_rule") = "ocp_floor", py::arg("input_dtype") = py::none(),
                "(rowwise, columnwise): x and x.T quantized with one shared tensor amax, as TransformerEngine does.");
  };
  const auto dequantize_binding = [](auto&& bind) {
    return bind(&dequantize_py, py::arg("q"), py::kw_only(), py::arg("rotated") = false,
                "float32 [rows, cols]: element * block scale * S_dec, in x's space for a tensor quantized after the RHT "
                "(rotated=True: the transformed values).");
  };
  const auto decode_e2m1_binding = [](auto&& bind) {
    return bind(&decode_e2m1_py, py::arg("codes"), py::kw_only(), py::arg("packed") = true,
                "float32 values of E2M1 codes: packed=True reads two per byte, element 2i in the low nibble "
                "(QuantizedTensor.data; the last axis doubles), packed=False one code 0-15 per byte.");
  };
  const auto decode_ue4m3_binding = [](auto&& bind) {
    return bind([](const py::array& codes) {
      return decode_bytes(codes, "decode_ue4m3", [](std::uint8_t b) { return ue4m3::from_bits(b).to_float(); });
    }, py::arg("codes"), "float32 values of UE4M3 scale bytes (NVFP4's block scales; 0x7F is NaN; the sign bit as the library reads it).");
  };
  const auto decode_e8m0_binding = [](auto&& bind) {
    return bind([](const py::array& codes) {
      return decode_bytes(codes, "decode_e8m0", [](std::uint8_t b) { return e8m0::from_bits(b).to_float(); });
    }, py::arg("codes"), "float32 values of E8M0 scale bytes (MX block scales): 2^(byte - 127), 0xFF is NaN.");
  };
  const auto separate = [](auto&&... a) { return py::cpp_function(a...); };
  const auto& qa = quantize_args();
  const arg_spec codes_arg{"codes", "a uint8 numpy array (e.g. QuantizedTensor.data or .scales)", is_array_like};
  quantize_binding([&](auto&&... a) { m.def("quantize", a...); return 0; });
  add_argument_messages(m, "quantize", qa, quantize_binding(separate));
  both_binding([&](auto&&... a) { m.def("quantize_rowwise_and_columnwise", a...); return 0; });
  add_argument_messages(m, "quantize_rowwise_and_columnwise", {qa[0], qa[1], qa[2], qa[3], qa[4], qa[8]}, both_binding(separate));
  dequantize_binding([&](auto&&... a) { m.def("dequantize", a...); return 0; });
  decode_e2m1_binding([&](auto&&... a) { m.def("decode_e2m1", a...); return 0; });
  add_argument_messages(m, "decode_e2m1", {codes_arg, {"packed", "a bool", is_bool, true}}, decode_e2m1_binding(separate));
  decode_ue4m3_binding([&](auto&&... a) { m.def("decode_ue4m3", a...); return 0; });
  add_argument_messages(m, "decode_ue4m3", {codes_arg}, decode_ue4m3_binding(separate));
  decode_e8m0_binding([&](auto&&... a) { m.def("decode_e8m0", a...); return 0; });
  add_argument_messages(m, "decode_e8m0", {codes_arg}, decode_e8m0_binding(separate));
  m.def("amax", [](py::array x) {
    const input_matrix in = as_input(std::move(x), "x");
    return with_view(in, [](auto v) { return nvfp4::amax(v); });
  }, py::arg("x"), "max |x| (raises nvfp4.Error on NaN/Inf).");

  py::class_<hadamard_transform>(m, "HadamardTransform", "T = diag(signs) * H_n / sqrt(n), n a power of two in 16..256")
      .def_static("te_default", &hadamard_transform::te_default, "TransformerEngine's 16-point transform")
      .def_static("random", &hadamard_transform::random, py::arg("size"), py::arg("seed"))
      .def_static("with_signs", &hadamard_transform::with_signs, py::arg("signs"))
      .def_property_readonly("size", &hadamard_transform::size)
      .def_property_readonly("signs", &hadamard_transform::signs)
      .def("__repr__", [](const hadamard_transform& t) { return "<nvfp4.HadamardTransform size=" + std::to_string(t.size()) + ">"; });
  m.def("hadamard_rows", &hadamard_rows_py, py::arg("x"), py::arg("transform") = py::none(), py::arg("inverse") = false,
        "The transform on every block of n elements of each row; float32 array of the bf16 results (exact).");
  m.def("rht_columnwise", &rht_columnwise_py, py::arg("x"), py::arg("transform") = py::none(),
        "(RHT(x.T) as float32 [N, M] holding bf16 values, its amax): the input of TE's columnwise RHT copy.");
  m.def("quantize_columnwise_rht", &quantize_columnwise_rht_py, py::arg("x"), py::arg("format") = "nvfp4_1x16",
        py::arg("transform") = py::none(), py::kw_only(), py::arg("rounding") = "nearest_even", py::arg("seed") = 0,
        py::arg("mx_rule") = "ocp_floor", "TE's columnwise copy with RHT: RHT(x.T) in bf16, quantized along M.");

  m.def("gemm", &gemm_py, py::arg("a"), py::arg("b"), py::kw_only(), py::arg("mode") = "exact",
        py::arg("apply_alpha") = true, py::arg("beta") = 1.0f, py::arg("c") = py::none(), py::arg("out_dtype") = "float32",
        "alpha * a @ b.T (+ beta * c): a [M, K], b [N, K] quantized along K. mode 'exact' is the Blackwell tensor "
        "core bit for bit, 'relaxed' an fp32 FMA chain. out_dtype 'bfloat16' returns uint16 bf16 bits.");
  m.def("block_scaled_mma", &block_scaled_mma_py, py::arg("a"), py::arg("b"), py::arg("c") = py::none(),
        py::kw_only(), py::arg("mode") = "exact", "c + a @ b.T in the scaled domain (no tensor scales), as the MMA computes it.");
  m.def("gemm_alpha", &gemm_alpha_py, py::arg("a"), py::arg("b"), "TE's alpha: amax_a * amax_b / (6*6*448*448), 1 for MXFP4.");

  // FP8 (TE's Float8CurrentScaling / DelayedScaling / Float8BlockScaling tensors and GEMMs, MXFP8 GEMMs).
  py::class_<fp8_tensor>(m, "Fp8Tensor",
                         "FP8 codes (E4M3 or E5M2) [rows, cols] with fp32 decode scales (TE's scale_inv): one for the "
                         "tensor, or one per 1x128 / 128x128 block.")
      .def_property_readonly("format", [](const fp8_tensor& t) { return std::string(fp8_format_name(t.format())); }, "'e4m3' or 'e5m2'")
      .def(py::pickle([](const fp8_tensor& t) { return fp8_state(t); }, [](const py::tuple& state) { return fp8_from_state(state); }))
      .def("__copy__", [](const fp8_tensor& t) { return t; })
      .def("__deepcopy__", [](const fp8_tensor& t, const py::object&) { return t; }, py::arg("memo"))
      .def("__eq__", [](const fp8_tensor& a, const py::object& other) {
        return py::isinstance<fp8_tensor>(other) && fp8_state(a).equal(fp8_state(other.cast<const fp8_tensor&>()));
      }, "True for the same format, shape, blocks, codes, scales, amax and scale")
      .def_property_readonly("shape", [](const fp8_tensor& t) { return py::make_tuple(t.rows(), t.cols()); },
                             "(rows, cols) (for a columnwise copy of an M x N source: (N, M))")
      .def_property_readonly("rows", &fp8_tensor::rows)
      .def_property_readonly("cols", &fp8_tensor::cols)
      .def_property_readonly("axis", [](const fp8_tensor& t) { return std::string(axis_name(t.axis())); })
      .def_property_readonly("per_tensor", &fp8_tensor::per_tensor, "True for one scale over the whole tensor")
      .def_property_readonly("block_shape", [](const fp8_tensor& t) { return py::make_tuple(t.block_rows(), t.block_cols()); },
                             "(block_rows, block_cols) of one scale: (1, 128), (128, 128), or the whole tensor when per_tensor")
      .def_property_readonly("codes", [](py::object self) {
        const auto& t = self.cast<const fp8_tensor&>();
        return byte_view(t.codes().data(), {t.rows(), t.cols()}, self);
      }, "uint8 [rows, cols] FP8 codes; a read-only view")
      .def_property_readonly("scale_inv", [](py::object self) {
        const auto& t = self.cast<const fp8_tensor&>();
        py::array out(py::dtype::of<float>(), std::vector<py::ssize_t>{t.scale_rows(), t.scale_cols()}, {}, t.scale_inv().data(), self);
        out.attr("setflags")(py::arg("write") = false);
        return out;
      }, "float32 [scale_rows, scale_cols] decode scales ([1, 1] when per_tensor); a read-only view")
      .def_property_readonly("amax", &fp8_tensor::amax, "amax of the tensor that was quantized")
      .def_property_readonly("scale", &fp8_tensor::scale, "per-tensor: the encode scale used (TE's scale; scale_inv = 1 / scale); 1 for blocks")
      .def("dequantize", &dequantize_fp8_py, "float32 [rows, cols]: decode(code) * scale_inv of its block")
      .def_static("from_bytes", &fp8_from_bytes_py, py::arg("format"), py::arg("codes"), py::arg("scale_inv") = 1.0f,
                  py::kw_only(), py::arg("block") = py::none(), py::arg("axis") = "rowwise", py::arg("amax") = py::none(),
                  py::arg("scale") = py::none(),
                  "A tensor from raw bytes (e.g. a GPU kernel's): codes uint8 [rows, cols]; scale_inv one float (per-tensor) or "
                  "float32 [scale_rows, scale_cols] for block='1x128' / '128x128' / (block_rows, block_cols)")
      .def("__repr__", [](const fp8_tensor& t) {
        return "<nvfp4.Fp8Tensor " + std::string(fp8_format_name(t.format())) + " " + std::to_string(t.rows()) + "x" +
               std::to_string(t.cols()) + " " + axis_name(t.axis()) + " " +
               (t.per_tensor() ? std::string("per-tensor") : std::to_string(t.block_rows()) + "x" + std::to_string(t.block_cols())) +
               " amax=" + std::to_string(t.amax()) + ">";
      });
  m.def("dequantize", &dequantize_fp8_py, py::arg("q"), "float32 [rows, cols]: decode(code) * scale_inv of its block.");
  m.def("dequantize", [](const py::args& args, const py::kwargs& kwargs) -> py::object {
    check_call("dequantize", {{"q", "a QuantizedTensor or an Fp8Tensor (from nvfp4.quantize / quantize_fp8_*)", is_quantized_or_fp8},
                              {"rotated", "a bool", is_bool, true}}, args, kwargs);
    throw py::type_error("dequantize(): rotated= applies to a QuantizedTensor; an Fp8Tensor takes q alone");
  });
  m.def("quantize_fp8_current", &quantize_fp8_current_py, py::arg("x"), py::arg("format") = "e4m3", py::kw_only(),
        py::arg("power_2_scale") = false, py::arg("amax_epsilon") = 0.0f, py::arg("axis") = "rowwise",
        "Per-tensor current scaling (TE's Float8CurrentScaling): scale = fp8_max / amax(x), codes = fp8(x * scale).");
  m.def("quantize_fp8_with_scale", &quantize_fp8_with_scale_py, py::arg("x"), py::arg("format") = "e4m3", py::kw_only(),
        py::arg("scale"), py::arg("axis") = "rowwise",
        "Per-tensor FP8 with a given encode scale (TE's DelayedScaling): codes = fp8(x * scale), scale_inv = 1 / scale.");
  m.def("quantize_fp8_blockwise", &quantize_fp8_blockwise_py, py::arg("x"), py::arg("format") = "e4m3", py::arg("block") = "1x128",
        py::kw_only(), py::arg("power_2_scale") = true, py::arg("amax_epsilon") = 0.0f, py::arg("axis") = "rowwise",
        "FP8 block scaling (TE's Float8BlockScaling): '1x128' or '128x128' blocks along the rows, each scaled by its own amax.");
  m.def("fp8_gemm", &fp8_gemm_py, py::arg("a"), py::arg("b"), py::kw_only(), py::arg("mode") = "exact", py::arg("core") = "hopper",
        py::arg("promotion_interval") = 128, py::arg("bias") = py::none(), py::arg("out_dtype") = "float32",
        "a @ b.T for Fp8Tensors a [M, K], b [N, K] as TE's FP8 GEMM: the tensor-core chain ('hopper' or 'blackwell'), "
        "promoted into fp32 every promotion_interval elements of K (0: never), scaled by scale_inv (per tensor or per "
        "128-block of K), + bias [N]; out_dtype 'bfloat16' returns uint16 bf16 bits.");
  m.def("fp8_mma", &fp8_mma_py, py::arg("a"), py::arg("b"), py::arg("c") = py::none(), py::kw_only(), py::arg("core") = "hopper",
        py::arg("mode") = "exact", py::arg("promotion_interval") = 128,
        "c + a @ b.T over the FP8 codes (scales not applied): the tensor core's K=32 chain; promotion_interval=0 is the "
        "plain chain MMA-Sim models.");
  m.def("mxfp8_gemm", &mxfp8_gemm_py, py::arg("a"), py::arg("b"), py::kw_only(), py::arg("mode") = "exact",
        py::arg("promotion_interval") = 128, py::arg("bias") = py::none(), py::arg("out_dtype") = "float32",
        "a @ b.T for 'mxfp8' / 'mxfp8_e5m2' QuantizedTensors (any mix) as Blackwell's kind::mxf8f6f4 (E8M0 scales inside the MMA), + bias [N].");
  m.def("mxfp8_mma", &mxfp8_mma_py, py::arg("a"), py::arg("b"), py::arg("c") = py::none(), py::kw_only(), py::arg("mode") = "exact",
        py::arg("promotion_interval") = 128, "c + a @ b.T for 'mxfp8' / 'mxfp8_e5m2' QuantizedTensors (any mix): the kind::mxf8f6f4 chain.");

  py::class_<error_report>(m, "ErrorReport", "Error metrics of an approximation against a reference")
      .def_readonly("mse", &error_report::mse)
      .def_readonly("rmse", &error_report::rmse)
      .def_readonly("sqnr_db", &error_report::sqnr_db)
      .def_readonly("max_abs_error", &error_report::max_abs_error)
      .def_readonly("max_rel_error", &error_report::max_rel_error)
      .def_readonly("cosine_similarity", &error_report::cosine_similarity)
      .def("as_dict", [](const error_report& e) {
        py::dict d;
        d["mse"] = e.mse;
        d["rmse"] = e.rmse;
        d["sqnr_db"] = e.sqnr_db;
        d["max_abs_error"] = e.max_abs_error;
        d["max_rel_error"] = e.max_rel_error;
        d["cosine_similarity"] = e.cosine_similarity;
        return d;
      })
      .def("__repr__", [](const error_report& e) {
        return "<nvfp4.ErrorReport sqnr_db=" + std::to_string(e.sqnr_db) + " mse=" + std::to_string(e.mse) +
               " max_abs_error=" + std::to_string(e.max_abs_error) + ">";
      });
  m.def("compare", &compare_py, py::arg("reference"), py::arg("approx"),
        "All error metrics of approx against reference (float32 arrays of one shape), sums in double.");
  m.def("sqnr_db", [](const py::array& r, const py::array& a) { return compare_py(r, a).sqnr_db; }, py::arg("reference"), py::arg("approx"));
  m.def("mse", [](const py::array& r, const py::array& a) { return compare_py(r, a).mse; }, py::arg("reference"), py::arg("approx"));
  m.def("max_abs_error", [](const py::array& r, const py::array& a) { return compare_py(r, a).max_abs_error; },
        py::arg("reference"), py::arg("approx"));

  m.def("save_checkpoint", &save_checkpoint_py, py::arg("path"), py::arg("tensors"), py::kw_only(), py::arg("swizzle") = false,
        "Writes {name: QuantizedTensor} to a safetensors file in ModelOpt's layout (name.weight, name.weight_scale, "
        "name.weight_scale_2) with nvfp4 metadata; swizzle=True stores the scales in the 128x4 layout. Atomic.");
  m.def("load_checkpoint", &load_checkpoint_py, py::arg("path"),
        "{name: QuantizedTensor} of every quantized tensor of a checkpoint: a safetensors file (ours, ModelOpt / MX "
        "layouts), a ModelOpt directory (single or sharded), compressed-tensors, GGUF or torchao (detected; "
        "checkpoint_format(path) says which).");
  m.def("checkpoint_format", [](const std::string& path) {
    const io::detected_file d = io::detect_file(path);
    py::dict out;
    out["kind"] = d.kind == io::file_kind::npy ? "npy" : d.kind == io::file_kind::checkpoint ? "checkpoint" : "unsupported";
    out["format"] = d.kind == io::file_kind::checkpoint ? py::object(py::str(io::checkpoint_format_name(d.format))) : py::object(py::none());
    out["description"] = d.description;
    out["directory"] = d.directory;
    out["sharded"] = d.sharded;
    return out;
  }, py::arg("path"), "What a path holds, from its header (the tensors are not read): {'kind': 'checkpoint' | 'npy' | "
                      "'unsupported', 'format': 'modelopt' | 'compressed-tensors' | 'gguf' | 'torchao' | None, 'description', "
                      "'directory', 'sharded'}.");
  m.def("describe_checkpoint_tensor", &describe_py, py::arg("path"), py::arg("name"),
        "What the file records about one quantized tensor (format, shape, layout, RHT, rounding, amax).");
  m.def("dequantize_checkpoint_tensor", &dequantize_checkpoint_tensor_py, py::arg("path"), py::arg("name"),
        "One stored tensor dequantized into its source shape (the RHT undone when it was recorded).");

  bind_nn(m);  // the recipes, LinearCore and Linear (python/bind_nn.cpp)
}
