// python/bind_io.cpp: the Python module's checkpoints: save_checkpoint (ModelOpt's layout),
// load_checkpoint / checkpoint_format / describe_checkpoint_tensor / dequantize_checkpoint_tensor
// over every checkpoint the readers take.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <span>

#include "bind_support.hpp"
#include "nvfp4/io/checkpoint_reader.hpp"
#include "nvfp4/io/quantized_checkpoint.hpp"

namespace nvfp4_python {
namespace {

/// Raises KeyboardInterrupt (or what a signal handler raised) when a signal came since the last
/// check. The loops over tensors call it between tensors: a call over many tensors answers Ctrl-C
/// within one tensor's work, not after the whole call. (One tensor's work, a kernel running on
/// OpenMP threads, has no point where it could stop and leave its output whole, so a single
/// quantize, dequantize or GEMM runs to its end first.)
void check_signals() {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

void save_checkpoint_py(const std::string& path, const py::dict& tensors, bool swizzle) {
  io::safetensors_file file;
  for (const auto& [key, value] : tensors) {
    check_signals();
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
    case io::stored_format::nvfp4_1x16:
      out.tensor = io::load_quantized_tensor<nvfp4_1x16>(file, name);
      break;
    case io::stored_format::nvfp4_16x16:
      out.tensor = io::load_quantized_tensor<nvfp4_16x16>(file, name);
      break;
    case io::stored_format::mxfp4:
      out.tensor = io::load_quantized_tensor<mxfp4>(file, name);
      break;
    case io::stored_format::mxfp8:
      out.tensor = io::load_quantized_tensor<mxfp8>(file, name);
      break;
  }
  out.made_with.axis = visit(out, [](const auto& t) { return t.axis(); });
  return out;
}

py::dict load_checkpoint_py(const std::string& path) {
  // A ModelOpt checkpoint is read a weight at a time (its other formats whole first).
  const io::modelopt_source opened = io::open_as_modelopt(path, io::require_readable(path, /*npy_too=*/false));
  py::dict out;
  for (const std::string& name : io::quantized_tensor_names(opened.source)) {
    check_signals();
    const io::safetensors_file file = io::load_quantized_weight_file(opened.source, name);
    if (io::is_fp8_weight(file, name))
      out[py::str(name)] = io::load_fp8_weight(file, name);  // an Fp8Tensor
    else
      out[py::str(name)] = load_one(file, name);
  }
  return out;
}

/// Quantized weight `name` of the checkpoint at `path`: its tensors alone (a ModelOpt checkpoint
/// reads nothing else).
io::safetensors_file read_weight(const std::string& path, const std::string& name) {
  const io::modelopt_source opened = io::open_as_modelopt(path, io::require_readable(path, /*npy_too=*/false));
  io::safetensors_file file = io::load_quantized_weight_file(opened.source, name);
  if (file.tensors.empty()) (void)io::describe_quantized_tensor(file, name);  // (throws: "no quantized tensor 'name'")
  return file;
}

py::dict describe_py(const std::string& path, const std::string& name) {
  const io::stored_tensor_info info = io::describe_quantized_tensor(read_weight(path, name), name);
  py::dict d;
  d["name"] = info.name;
  d["format"] = info.format == io::stored_format::nvfp4_16x16  ? "nvfp4_16x16"
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
  const io::safetensors_file file = read_weight(path, name);
  const std::vector<std::int64_t> dims = io::dequantized_shape(file, name);
  py::array_t<float> out(std::vector<py::ssize_t>(dims.begin(), dims.end()));
  float* at = out.mutable_data();
  (void)io::dequantize_any_in_pieces(file, name, {}, [&](std::span<const float> piece) {  // straight into the array
    check_signals();
    std::memcpy(at, piece.data(), piece.size_bytes());
    at += piece.size();
  });
  return out;
}

}  // namespace
}  // namespace nvfp4_python

void bind_io(py::module_& m) {
  using namespace nvfp4_python;
  m.def("save_checkpoint", &save_checkpoint_py, py::arg("path"), py::arg("tensors"), py::kw_only(), py::arg("swizzle") = false,
        "Writes {name: QuantizedTensor} to a safetensors file in ModelOpt's layout (name.weight, name.weight_scale, "
        "name.weight_scale_2) with nvfp4 metadata; swizzle=True stores the scales in the 128x4 layout. Atomic.");
  m.def("load_checkpoint", &load_checkpoint_py, py::arg("path"),
        "{name: QuantizedTensor} of every quantized tensor of a checkpoint: a safetensors file (ours, ModelOpt / MX "
        "layouts), a ModelOpt directory (single or sharded), compressed-tensors, GGUF or torchao (detected; "
        "checkpoint_format(path) says which).");
  m.def(
      "checkpoint_format",
      [](const std::string& path) {
        const io::detected_file d = io::detect_file(path);
        py::dict out;
        out["kind"] = d.kind == io::file_kind::npy ? "npy" : d.kind == io::file_kind::checkpoint ? "checkpoint" : "unsupported";
        out["format"] =
            d.kind == io::file_kind::checkpoint ? py::object(py::str(io::checkpoint_format_name(d.format))) : py::object(py::none());
        out["description"] = d.description;
        out["directory"] = d.directory;
        out["sharded"] = d.sharded;
        return out;
      },
      py::arg("path"),
      "What a path holds, from its header (the tensors are not read): {'kind': 'checkpoint' | 'npy' | "
      "'unsupported', 'format': 'modelopt' | 'compressed-tensors' | 'gguf' | 'torchao' | None, 'description', "
      "'directory', 'sharded'}.");
  m.def("describe_checkpoint_tensor", &describe_py, py::arg("path"), py::arg("name"),
        "What the file records about one quantized tensor (format, shape, layout, RHT, rounding, amax).");
  m.def("dequantize_checkpoint_tensor", &dequantize_checkpoint_tensor_py, py::arg("path"), py::arg("name"),
        "One stored tensor dequantized into its source shape (the RHT undone when it was recorded).");
}
