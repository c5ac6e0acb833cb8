// nvfp4/io/checkpoint_reader.hpp: any checkpoint the readers take, seen as the tensors of one
// safetensors file in ModelOpt's layout (W.weight, W.weight_scale, W.weight_scale_2), which the
// quantized-tensor readers of io/quantized_checkpoint.hpp (describe, load, dequantize) understand.
// ModelOpt files and directories are read as they are (so `nvfp4 quantize`'s own metadata, 16x16
// tiles, MXFP8 and RHT survive); compressed-tensors, GGUF and torchao are read into the
// format-neutral checkpoint and laid out as ModelOpt would store it, every bit kept. Per-tensor
// FP8 weights of ModelOpt's FP8 layout are read here too (dequantize_any).
#pragma once

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "nvfp4/io/checkpoint_formats.hpp"
#include "nvfp4/io/file_format.hpp"
#include "nvfp4/io/quantized_checkpoint.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"

namespace nvfp4::io {

/// The per-tensor FP8 weight W as an fp8_tensor (codes and its one decode scale, bit for bit).
/// Throws invalid_argument when W is not one (is_fp8_weight).
inline fp8_tensor load_fp8_weight(const safetensors_file& file, const std::string& name) {
  if (!is_fp8_weight(file, name)) throw error(errc::invalid_argument, "no per-tensor FP8 weight '" + name + "'");
  const auto& w = file.at(name + ".weight");
  fp8_tensor t(w.shape[0], w.shape[1], w.dtype == safetensors_dtype::f8_e5m2 ? fp8_format::e5m2 : fp8_format::e4m3);
  std::copy(w.bytes.begin(), w.bytes.end(), t.codes().begin());
  float decode;
  std::memcpy(&decode, file.at(name + ".weight_scale").bytes.data(), 4);
  t.scale_inv()[0] = decode;
  t.set_scale(1.0f / decode);
  return t;
}

/// The values of quantized weight W of a ModelOpt-layout file, in its source shape: a per-tensor
/// FP8 weight decoded, anything else as io/quantized_checkpoint.hpp's dequantize_tensor.
inline restored_tensor dequantize_any(const safetensors_file& file, const std::string& name, const load_options& options = {}) {
  if (!is_fp8_weight(file, name)) return dequantize_tensor(file, name, options);
  const fp8_tensor t = load_fp8_weight(file, name);
  restored_tensor out;
  out.shape = {t.rows(), t.cols()};
  out.values.resize(static_cast<std::size_t>(t.rows() * t.cols()));
  nvfp4::dequantize(t, matrix_view<float>::row_major(out.values.data(), t.rows(), t.cols()));
  return out;
}

/// A checkpoint's tensors in ModelOpt's layout, with what was found and the load-time warnings.
struct modelopt_view {
  detected_file found;
  safetensors_file file;
  std::vector<std::string> warnings;
};

/// Reads the checkpoint at `path` (detected as `found`) as ModelOpt tensors. Throws as the
/// format's reader does.
inline modelopt_view read_as_modelopt(const std::filesystem::path& path, const detected_file& found) {
  modelopt_view view;
  view.found = found;
  if (found.kind != file_kind::checkpoint)
    refuse_unsupported_file(path.string(), found.description, found.foreign ? errc::unsupported : errc::malformed_file);
  if (found.format == checkpoint_format::modelopt) {
    view.file = read_safetensors_checkpoint(path);
    return view;
  }
  checkpoint c = read_checkpoint(path, found.format);
  view.warnings = std::move(c.warnings);
  c.warnings.clear();
  view.file = modelopt_to_safetensors(c, /*annotate_configs=*/false);
  view.file.metadata.erase(checkpoint_annotation_key);  // the scales' other senses: not needed to read values
  return view;
}

/// read_as_modelopt after detecting the format (unsupported, naming it, for anything else).
inline modelopt_view read_as_modelopt(const std::filesystem::path& path) {
  return read_as_modelopt(path, require_readable(path, /*npy_too=*/false));
}

}  // namespace nvfp4::io
