// python/bind_transforms.cpp: the Python module's Hadamard transforms: HadamardTransform, hadamard_rows,
// rht_columnwise and quantize_columnwise_rht (TE's columnwise copy with the RHT).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bind_support.hpp"

namespace nvfp4_python {
namespace {

hadamard_transform transform_or_default(const std::optional<hadamard_transform>& t) { return t ? *t : hadamard_transform::te_default(); }

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

}  // namespace
}  // namespace nvfp4_python

void bind_transforms(py::module_& m) {
  using namespace nvfp4_python;
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
}
