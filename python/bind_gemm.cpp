// python/bind_gemm.cpp: the Python module's FP4 GEMMs: gemm, block_scaled_mma and gemm_alpha over
// QuantizedTensors (NVFP4 x NVFP4, MXFP4 x MXFP4).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bind_support.hpp"
#include "nvfp4/gemm/fp4/gemm.hpp"

namespace nvfp4_python {
namespace {

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

py::array_t<float> block_scaled_mma_py(const py_quantized& a, const py_quantized& b, std::optional<py::array> c, const std::string& mode) {
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

}  // namespace
}  // namespace nvfp4_python

void bind_gemm(py::module_& m) {
  using namespace nvfp4_python;
  m.def("gemm", &gemm_py, py::arg("a"), py::arg("b"), py::kw_only(), py::arg("mode") = "exact", py::arg("apply_alpha") = true,
        py::arg("beta") = 1.0f, py::arg("c") = py::none(), py::arg("out_dtype") = "float32",
        "alpha * a @ b.T (+ beta * c): a [M, K], b [N, K] quantized along K. mode 'exact' is the Blackwell tensor "
        "core bit for bit, 'relaxed' an fp32 FMA chain. out_dtype 'bfloat16' returns uint16 bf16 bits.");
  m.def("block_scaled_mma", &block_scaled_mma_py, py::arg("a"), py::arg("b"), py::arg("c") = py::none(), py::kw_only(),
        py::arg("mode") = "exact", "c + a @ b.T in the scaled domain (no tensor scales), as the MMA computes it.");
  m.def("gemm_alpha", &gemm_alpha_py, py::arg("a"), py::arg("b"), "TE's alpha: amax_a * amax_b / (6*6*448*448), 1 for MXFP4.");
}
