// python/nvfp4_module.cpp: the Python module `nvfp4` (pybind11). numpy arrays in and out; every
// call goes to the C++ API (nvfp4::quantize, dequantize, gemm, the RHT, the error metrics, the
// checkpoint files, the FP8 quantizers and GEMMs), so the bytes are the C++ library's. Each area is
// bound by its own file (python/bind_<area>.cpp; their shared helpers: bind_support.hpp), in the
// order below (pybind11 tries overloads in the order they were added). Reference: docs/python.md.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bind_support.hpp"

void bind_quantize(py::module_& m);    // python/bind_quantize.cpp
void bind_transforms(py::module_& m);  // python/bind_transforms.cpp
void bind_gemm(py::module_& m);        // python/bind_gemm.cpp
void bind_fp8(py::module_& m);         // python/bind_fp8.cpp
void bind_metrics(py::module_& m);     // python/bind_metrics.cpp
void bind_io(py::module_& m);          // python/bind_io.cpp
void bind_nn(py::module_& m);          // python/bind_nn.cpp

using namespace nvfp4;

PYBIND11_MODULE(_nvfp4, m) {  // nvfp4._nvfp4, re-exported by python/nvfp4/__init__.py
  m.doc() =
      "nvfp4: NVIDIA's NVFP4 / MXFP4 / MXFP8 block-scaled quantization and the Blackwell FP4 GEMM on the CPU, "
      "bit for bit with the GPU stack (numpy arrays in and out). Reference: docs/python.md.";
  m.attr("__version__") = NVFP4_PYTHON_VERSION;
  // The pybind11 that wrote the signatures the type stub is made from (nvfp4._stubgen records it).
  m.attr("_pybind11_version") =
      std::to_string(PYBIND11_VERSION_MAJOR) + "." + std::to_string(PYBIND11_VERSION_MINOR) + "." + std::to_string(PYBIND11_VERSION_PATCH);
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

  bind_quantize(m);    // QuantizedTensor, quantize, dequantize, the code decoders, amax
  bind_transforms(m);  // HadamardTransform and the RHT
  bind_gemm(m);        // the FP4 GEMMs
  bind_fp8(m);         // Fp8Tensor, its quantizers and GEMMs, the MXFP8 GEMMs (after bind_quantize: dequantize's overloads)
  bind_metrics(m);     // ErrorReport and the error metrics
  bind_io(m);          // the checkpoints
  bind_nn(m);          // the recipes, LinearCore and Linear
}
