// python/bind_quantize.cpp: the Python module's quantized tensor (QuantizedTensor: properties, pickling,
// from_bytes), quantize / quantize_rowwise_and_columnwise / dequantize, the code decoders and amax.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <span>

#include "bind_support.hpp"

namespace nvfp4_python {
namespace {

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
  auto out = visit(
      q, [](const auto& t) { return float_output(t.rows(), t.cols(), [&](matrix_view<float> view) { nvfp4::dequantize(t, view); }); });
  if (!q.rht || rotated) return out;
  const index_t rows = out.shape(0), cols = out.shape(1);
  const auto transform = hadamard_transform::te_default();
  if (cols % transform.size() != 0)
    throw error(errc::shape_mismatch, "dequantize: rht is set but cols = " + std::to_string(cols) +
                                          " is not a multiple of 16 (pass rotated=True for the values as stored)");
  std::vector<bf16> back(static_cast<std::size_t>(rows * cols));
  {
    py::gil_scoped_release unlocked;
    hadamard_rows(matrix_view<const float>::row_major(out.data(), rows, cols), transform,
                  matrix_view<bf16>::row_major(back.data(), rows, cols), hadamard_direction::inverse);
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
    return py::make_tuple(1, format_name<Format>(), t.rows(), t.cols(), detail::name_of(t.axis()), py::bytes(d, t.data().size()),
                          py::bytes(s, t.scales().size()), t.amax(), t.encode_scale(), t.decode_scale(), q.rht, detail::name_of(o.rounding),
                          o.seed, detail::name_of(o.mx_rule));
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
  const auto bytes = [](const std::string& b) {
    return std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(b.data()), b.size());
  };
  with_format(format, [&](auto tag) {
    using Format = decltype(tag);
    auto q = quantized_tensor<Format>::from_bytes(rows, cols, bytes(d), bytes(s), out.made_with.axis);
    q.set_tensor_scale(py::cast<float>(state[7]), py::cast<float>(state[8]), py::cast<float>(state[9]));
    out.tensor = std::move(q);
  });
  return out;
}

/// decode_e2m1 / decode_ue4m3 / decode_e8m0: bytes (any shape, uint8 or int8) to float32 values.
py::array_t<std::uint8_t, py::array::c_style> code_bytes(const py::array& codes, const char* what) {
  check_array_size(codes, what);  // before any copy of a view
  const char kind = codes.dtype().kind();
  if (kind != 'u' && kind != 'i')
    throw py::type_error(std::string(what) + ": codes must be a uint8 array (e.g. QuantizedTensor.data / .scales); got " +
                         dtype_text(codes.dtype()));
  if (codes.dtype().itemsize() == 1)
    return py::array_t<std::uint8_t, py::array::c_style>::ensure(codes.attr("view")(py::dtype::of<std::uint8_t>()));
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
        throw error(errc::invalid_argument,
                    "decode_e2m1: code " + std::to_string(in.data()[i]) + " at " + std::to_string(i) +
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
    check_array_size(a, what);  // before the copy of a view
    if (a.dtype().itemsize() != 1) throw py::type_error(std::string(what) + " must hold bytes (uint8); got " + dtype_text(a.dtype()));
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

}  // namespace
}  // namespace nvfp4_python

void bind_quantize(py::module_& m) {
  using namespace nvfp4_python;
  py::class_<py_quantized>(m, "QuantizedTensor", "A block-scaled quantized matrix: packed elements, block scales, amax and tensor scale.")
      .def_property_readonly(
          "format",
          [](const py_quantized& q) {
            return visit(q, [](const auto& t) { return format_name<typename std::decay_t<decltype(t)>::format>(); });
          },
          "'nvfp4_1x16', 'nvfp4_16x16', 'mxfp4', 'mxfp8' (E4M3) or 'mxfp8_e5m2'")
      .def_property_readonly(
          "shape", [](const py_quantized& q) { return visit(q, [](const auto& t) { return py::make_tuple(t.rows(), t.cols()); }); },
          "(rows, cols) of the matrix it holds (for a columnwise copy of an M x N source: (N, M))")
      .def_property_readonly("rows", [](const py_quantized& q) { return rows_of(q); })
      .def_property_readonly("cols", [](const py_quantized& q) { return visit(q, [](const auto& t) { return t.cols(); }); })
      .def_property_readonly("axis",
                             [](const py_quantized& q) { return visit(q, [](const auto& t) { return detail::name_of(t.axis()); }); })
      .def_property_readonly("block_shape",
                             [](const py_quantized& q) {
                               return visit(q, [](const auto& t) {
                                 using F = typename std::decay_t<decltype(t)>::format;
                                 return py::make_tuple(F::block_rows, F::block_cols);
                               });
                             })
      .def_property_readonly(
          "data",
          [](py::object self) {
            const auto& q = self.cast<const py_quantized&>();
            return visit(q, [&](const auto& t) { return byte_view(t.data().data(), {t.rows(), t.data_row_stride()}, self); });
          },
          "uint8 [rows, ceil(cols/2)] packed E2M1 (element 2i in the low nibble), or uint8 [rows, cols] E4M3 / E5M2 codes for mxfp8 / "
          "mxfp8_e5m2; read-only view")
      .def_property_readonly(
          "scales",
          [](py::object self) {
            const auto& q = self.cast<const py_quantized&>();
            return visit(q, [&](const auto& t) { return byte_view(t.scales().data(), {t.rows(), t.scale_cols()}, self); });
          },
          "uint8 [rows, ceil(cols/16)] UE4M3 scale bytes (NVFP4; a 16x16 tile's scale on each of its rows) or [rows, ceil(cols/32)] E8M0 "
          "bytes (MX); read-only view")
      .def_property_readonly("amax", [](const py_quantized& q) { return visit(q, [](const auto& t) { return t.amax(); }); })
      .def_property_readonly(
          "encode_scale", [](const py_quantized& q) { return visit(q, [](const auto& t) { return t.encode_scale(); }); },
          "S_enc = 2688 / amax (NVFP4; 1 for MX)")
      .def_property_readonly(
          "decode_scale", [](const py_quantized& q) { return visit(q, [](const auto& t) { return t.decode_scale(); }); },
          "S_dec = 1 / S_enc, the FP32 tensor scale (ModelOpt's weight_scale_2)")
      .def_readwrite("rht", &py_quantized::rht,
                     "True when its rows went through TE's 16-point RHT (recorded in checkpoints; dequantize_checkpoint_tensor inverts it)")
      .def(
          "swizzled_scales",
          [](const py_quantized& q) {
            const swizzled_scales s = visit(q, [](const auto& t) { return swizzle_128x4(t); });
            py::array_t<std::uint8_t> out({static_cast<py::ssize_t>(s.padded_rows()), static_cast<py::ssize_t>(s.padded_cols())});
            std::memcpy(out.mutable_data(), s.bytes().data(), s.bytes().size());
            return out;
          },
          "The scale bytes in cuBLAS's 128x4 layout: uint8 [rows padded to 128, scale cols padded to 4]")
      .def("dequantize", &dequantize_py, py::kw_only(), py::arg("rotated") = false,
           "float32 [rows, cols]: element x block scale x S_dec; for a tensor quantized after TE's RHT (rht=True) the "
           "inverse RHT of those (x's space, rounded to bf16 as the forward transform was); rotated=True keeps the "
           "transformed values")
      .def(py::pickle([](const py_quantized& q) { return quantized_state(q); },
                      [](const py::tuple& state) { return quantized_from_state(state); }))
      .def("__copy__", [](const py_quantized& q) { return q; })
      .def(
          "__deepcopy__", [](const py_quantized& q, const py::object&) { return q; }, py::arg("memo"))
      .def(
          "__eq__",
          [](const py_quantized& a, const py::object& other) {
            if (!py::isinstance<py_quantized>(other)) return false;
            return quantized_state(a).equal(quantized_state(other.cast<const py_quantized&>()));
          },
          "True for the same format, shape, bytes, tensor scale and recorded options")
      .def_static("from_bytes", &from_bytes_py, py::arg("format"), py::arg("rows"), py::arg("cols"), py::arg("data"), py::arg("scales"),
                  py::arg("amax") = py::none(), py::arg("axis") = "rowwise",
                  "A tensor from raw bytes laid out as .data and .scales are; for NVFP4 the tensor scale is set from amax")
      .def("__repr__", [](const py_quantized& q) {
        return visit(q, [](const auto& t) {
          return "<nvfp4.QuantizedTensor " + std::string(format_name<typename std::decay_t<decltype(t)>::format>()) + " " +
                 std::to_string(t.rows()) + "x" + std::to_string(t.cols()) + " " + detail::name_of(t.axis()) +
                 " amax=" + std::to_string(t.amax()) + ">";
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
    return bind(
        [](const py::array& codes) {
          return decode_bytes(codes, "decode_ue4m3", [](std::uint8_t b) { return ue4m3::from_bits(b).to_float(); });
        },
        py::arg("codes"), "float32 values of UE4M3 scale bytes (NVFP4's block scales; 0x7F is NaN; the sign bit as the library reads it).");
  };
  const auto decode_e8m0_binding = [](auto&& bind) {
    return bind(
        [](const py::array& codes) {
          return decode_bytes(codes, "decode_e8m0", [](std::uint8_t b) { return e8m0::from_bits(b).to_float(); });
        },
        py::arg("codes"), "float32 values of E8M0 scale bytes (MX block scales): 2^(byte - 127), 0xFF is NaN.");
  };
  const auto separate = [](auto&&... a) { return py::cpp_function(a...); };
  const auto& qa = quantize_args();
  const arg_spec codes_arg{"codes", "a uint8 numpy array (e.g. QuantizedTensor.data or .scales)", is_array_like};
  quantize_binding([&](auto&&... a) {
    m.def("quantize", a...);
    return 0;
  });
  add_argument_messages(m, "quantize", qa, quantize_binding(separate));
  both_binding([&](auto&&... a) {
    m.def("quantize_rowwise_and_columnwise", a...);
    return 0;
  });
  add_argument_messages(m, "quantize_rowwise_and_columnwise", {qa[0], qa[1], qa[2], qa[3], qa[4], qa[8]}, both_binding(separate));
  dequantize_binding([&](auto&&... a) {
    m.def("dequantize", a...);
    return 0;
  });
  decode_e2m1_binding([&](auto&&... a) {
    m.def("decode_e2m1", a...);
    return 0;
  });
  add_argument_messages(m, "decode_e2m1", {codes_arg, {"packed", "a bool", is_bool, true}}, decode_e2m1_binding(separate));
  decode_ue4m3_binding([&](auto&&... a) {
    m.def("decode_ue4m3", a...);
    return 0;
  });
  add_argument_messages(m, "decode_ue4m3", {codes_arg}, decode_ue4m3_binding(separate));
  decode_e8m0_binding([&](auto&&... a) {
    m.def("decode_e8m0", a...);
    return 0;
  });
  add_argument_messages(m, "decode_e8m0", {codes_arg}, decode_e8m0_binding(separate));
  m.def(
      "amax",
      [](py::array x) {
        const input_matrix in = as_input(std::move(x), "x");
        return with_view(in, [](auto v) { return nvfp4::amax(v); });
      },
      py::arg("x"), "max |x| (raises nvfp4.Error on NaN/Inf).");
}
