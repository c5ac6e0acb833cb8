// python/bind_metrics.cpp: the Python module's error metrics: ErrorReport, compare, sqnr_db, mse,
// max_abs_error.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <span>

#include "bind_support.hpp"

namespace nvfp4_python {
namespace {

error_report compare_py(const py::array& reference, const py::array& approx) {
  const auto r = float_values(reference, "reference"), a = float_values(approx, "approx");
  if (r.ndim() != a.ndim() || !std::equal(r.shape(), r.shape() + r.ndim(), a.shape()))
    throw error(errc::shape_mismatch, "compare: reference and approx have different shapes");
  return nvfp4::compare(std::span<const float>(r.data(), static_cast<std::size_t>(r.size())),
                        std::span<const float>(a.data(), static_cast<std::size_t>(a.size())));
}

}  // namespace
}  // namespace nvfp4_python

void bind_metrics(py::module_& m) {
  using namespace nvfp4_python;
  py::class_<error_report>(m, "ErrorReport", "Error metrics of an approximation against a reference")
      .def_readonly("mse", &error_report::mse)
      .def_readonly("rmse", &error_report::rmse)
      .def_readonly("sqnr_db", &error_report::sqnr_db)
      .def_readonly("max_abs_error", &error_report::max_abs_error)
      .def_readonly("max_rel_error", &error_report::max_rel_error)
      .def_readonly("cosine_similarity", &error_report::cosine_similarity)
      .def("as_dict",
           [](const error_report& e) {
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
  m.def(
      "sqnr_db", [](const py::array& r, const py::array& a) { return compare_py(r, a).sqnr_db; }, py::arg("reference"), py::arg("approx"));
  m.def(
      "mse", [](const py::array& r, const py::array& a) { return compare_py(r, a).mse; }, py::arg("reference"), py::arg("approx"));
  m.def(
      "max_abs_error", [](const py::array& r, const py::array& a) { return compare_py(r, a).max_abs_error; }, py::arg("reference"),
      py::arg("approx"));
}
