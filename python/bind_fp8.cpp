// python/bind_fp8.cpp: the Python module's FP8: Fp8Tensor (TE's Float8 tensors), its quantizers
// (current, delayed, block scaling), the FP8 GEMM / MMA and the MXFP8 GEMM / MMA.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <span>

#include "bind_support.hpp"
#include "nvfp4/gemm/fp8/gemm.hpp"

namespace nvfp4_python {
namespace {

fp8_format parse_fp8_format(const std::string& f) { return detail::parse_name<fp8_format>(f, "format"); }
/// "hopper" or "blackwell"; `what` names the argument in the error.
fp8::mma::tensor_core parse_core(const std::string& c, const char* what = "core") {
  return detail::parse_name<fp8::mma::tensor_core>(c, what);
}
quantized_axis parse_axis(const std::string& axis) { return detail::parse_name<quantized_axis>(axis, "axis"); }
fp8_block_shape parse_block(const std::string& b) { return detail::parse_name<fp8_block_shape>(b, "block"); }
const char* axis_name(quantized_axis a) { return detail::name_of(a); }

/// Pickle state of an Fp8Tensor.
py::tuple fp8_state(const fp8_tensor& t) {
  return py::make_tuple(1, std::string(fp8_format_name(t.format())), t.rows(), t.cols(), t.per_tensor() ? 0 : t.block_rows(),
                        t.per_tensor() ? 0 : t.block_cols(), detail::name_of(t.axis()),
                        py::bytes(reinterpret_cast<const char*>(t.codes().data()), t.codes().size()),
                        py::bytes(reinterpret_cast<const char*>(t.scale_inv().data()), t.scale_inv().size() * sizeof(float)), t.amax(),
                        t.scale());
}

fp8_tensor fp8_from_state(const py::tuple& state) {
  if (state.size() != 11 || py::cast<int>(state[0]) != 1)
    throw py::value_error("Fp8Tensor: not a pickle state this version wrote (expected version 1 with 11 fields)");
  const fp8_format format = parse_fp8_format(py::cast<std::string>(state[1]));
  const quantized_axis axis = parse_axis(py::cast<std::string>(state[6]));
  fp8_tensor t(py::cast<index_t>(state[2]), py::cast<index_t>(state[3]), format, py::cast<index_t>(state[4]), py::cast<index_t>(state[5]),
               axis);
  const std::string codes = py::cast<std::string>(state[7]), scales = py::cast<std::string>(state[8]);
  if (codes.size() != t.codes().size() || scales.size() != t.scale_inv().size() * sizeof(float))
    throw py::value_error("Fp8Tensor: the pickled bytes do not fit the pickled shape");
  std::memcpy(t.codes().data(), codes.data(), codes.size());
  std::memcpy(t.scale_inv().data(), scales.data(), scales.size());
  t.set_amax(py::cast<float>(state[9]));
  t.set_scale(py::cast<float>(state[10]));
  return t;
}

/// A block given as "1x128" / "128x128" or (block_rows, block_cols); None is per-tensor (0, 0).
using fp8_block_arg = std::optional<std::variant<std::string, std::pair<index_t, index_t>>>;
std::pair<index_t, index_t> block_dims(const fp8_block_arg& block) {
  if (!block) return {0, 0};
  if (const auto* name = std::get_if<std::string>(&*block)) return {fp8_block_rows(parse_block(*name)), fp8_block_size};
  return std::get<std::pair<index_t, index_t>>(*block);
}

/// Fp8Tensor.from_bytes: codes uint8 [rows, cols] and the decode scales (one float, or
/// [scale_rows, scale_cols] float32 for blocks), checked against the tensor's shape first.
fp8_tensor fp8_from_bytes_py(const std::string& format, const py::array& codes, const py::object& scale_inv, const fp8_block_arg& block,
                             const std::string& axis, std::optional<float> amax, std::optional<float> scale) {
  const fp8_format f = parse_fp8_format(format);
  const quantized_axis ax = parse_axis(axis);
  const auto [block_rows, block_cols] = block_dims(block);
  check_array_size(codes, "codes");
  if (codes.dtype().itemsize() != 1) throw py::type_error("codes must hold bytes (uint8); got " + dtype_text(codes.dtype()));
  if (codes.ndim() != 2)
    throw error(errc::shape_mismatch,
                "Fp8Tensor.from_bytes: codes must be a 2-D array [rows, cols], got " + std::to_string(codes.ndim()) + " dimensions");
  fp8_tensor t(codes.shape(0), codes.shape(1), f, block_rows, block_cols, ax);
  const auto c = py::array::ensure(codes, py::array::c_style);
  std::memcpy(t.codes().data(), c.data(), t.codes().size());
  const std::string expected = "[" + std::to_string(t.scale_rows()) + ", " + std::to_string(t.scale_cols()) + "]";
  if (py::isinstance<py::array>(scale_inv)) {
    check_array_size(py::reinterpret_borrow<py::array>(scale_inv), "scale_inv");  // before the copy of a view
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
}  // namespace nvfp4_python

void bind_fp8(py::module_& m) {
  using namespace nvfp4_python;
  // FP8 (TE's Float8CurrentScaling / DelayedScaling / Float8BlockScaling tensors and GEMMs, MXFP8 GEMMs).
  py::class_<fp8_tensor>(m, "Fp8Tensor",
                         "FP8 codes (E4M3 or E5M2) [rows, cols] with fp32 decode scales (TE's scale_inv): one for the "
                         "tensor, or one per 1x128 / 128x128 block.")
      .def_property_readonly(
          "format", [](const fp8_tensor& t) { return std::string(fp8_format_name(t.format())); }, "'e4m3' or 'e5m2'")
      .def(py::pickle([](const fp8_tensor& t) { return fp8_state(t); }, [](const py::tuple& state) { return fp8_from_state(state); }))
      .def("__copy__", [](const fp8_tensor& t) { return t; })
      .def(
          "__deepcopy__", [](const fp8_tensor& t, const py::object&) { return t; }, py::arg("memo"))
      .def(
          "__eq__",
          [](const fp8_tensor& a, const py::object& other) {
            return py::isinstance<fp8_tensor>(other) && fp8_state(a).equal(fp8_state(other.cast<const fp8_tensor&>()));
          },
          "True for the same format, shape, blocks, codes, scales, amax and scale")
      .def_property_readonly(
          "shape", [](const fp8_tensor& t) { return py::make_tuple(t.rows(), t.cols()); },
          "(rows, cols) (for a columnwise copy of an M x N source: (N, M))")
      .def_property_readonly("rows", &fp8_tensor::rows)
      .def_property_readonly("cols", &fp8_tensor::cols)
      .def_property_readonly("axis", [](const fp8_tensor& t) { return std::string(axis_name(t.axis())); })
      .def_property_readonly("per_tensor", &fp8_tensor::per_tensor, "True for one scale over the whole tensor")
      .def_property_readonly(
          "block_shape", [](const fp8_tensor& t) { return py::make_tuple(t.block_rows(), t.block_cols()); },
          "(block_rows, block_cols) of one scale: (1, 128), (128, 128), or the whole tensor when per_tensor")
      .def_property_readonly(
          "codes",
          [](py::object self) {
            const auto& t = self.cast<const fp8_tensor&>();
            return byte_view(t.codes().data(), {t.rows(), t.cols()}, self);
          },
          "uint8 [rows, cols] FP8 codes; a read-only view")
      .def_property_readonly(
          "scale_inv",
          [](py::object self) {
            const auto& t = self.cast<const fp8_tensor&>();
            py::array out(py::dtype::of<float>(), std::vector<py::ssize_t>{t.scale_rows(), t.scale_cols()}, {}, t.scale_inv().data(), self);
            out.attr("setflags")(py::arg("write") = false);
            return out;
          },
          "float32 [scale_rows, scale_cols] decode scales ([1, 1] when per_tensor); a read-only view")
      .def_property_readonly("amax", &fp8_tensor::amax, "amax of the tensor that was quantized")
      .def_property_readonly("scale", &fp8_tensor::scale,
                             "per-tensor: the encode scale used (TE's scale; scale_inv = 1 / scale); 1 for blocks")
      .def("dequantize", &dequantize_fp8_py, "float32 [rows, cols]: decode(code) * scale_inv of its block")
      .def_static("from_bytes", &fp8_from_bytes_py, py::arg("format"), py::arg("codes"), py::arg("scale_inv") = 1.0f, py::kw_only(),
                  py::arg("block") = py::none(), py::arg("axis") = "rowwise", py::arg("amax") = py::none(), py::arg("scale") = py::none(),
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
    check_call("dequantize",
               {{"q", "a QuantizedTensor or an Fp8Tensor (from nvfp4.quantize / quantize_fp8_*)", is_quantized_or_fp8},
                {"rotated", "a bool", is_bool, true}},
               args, kwargs);
    throw py::type_error("dequantize(): rotated= applies to a QuantizedTensor; an Fp8Tensor takes q alone");
  });
  m.def("quantize_fp8_current", &quantize_fp8_current_py, py::arg("x"), py::arg("format") = "e4m3", py::kw_only(),
        py::arg("power_2_scale") = false, py::arg("amax_epsilon") = 0.0f, py::arg("axis") = "rowwise",
        "Per-tensor current scaling (TE's Float8CurrentScaling): scale = fp8_max / amax(x), codes = fp8(x * scale).");
  m.def("quantize_fp8_with_scale", &quantize_fp8_with_scale_py, py::arg("x"), py::arg("format") = "e4m3", py::kw_only(), py::arg("scale"),
        py::arg("axis") = "rowwise",
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
        "a @ b.T for 'mxfp8' / 'mxfp8_e5m2' QuantizedTensors (any mix) as Blackwell's kind::mxf8f6f4 (E8M0 scales inside the MMA), + bias "
        "[N].");
  m.def("mxfp8_mma", &mxfp8_mma_py, py::arg("a"), py::arg("b"), py::arg("c") = py::none(), py::kw_only(), py::arg("mode") = "exact",
        py::arg("promotion_interval") = 128,
        "c + a @ b.T for 'mxfp8' / 'mxfp8_e5m2' QuantizedTensors (any mix): the kind::mxf8f6f4 chain.");
}
