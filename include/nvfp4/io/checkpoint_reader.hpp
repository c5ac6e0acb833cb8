// nvfp4/io/checkpoint_reader.hpp: any checkpoint the readers take, seen as the tensors of one
// safetensors file in ModelOpt's layout (W.weight, W.weight_scale, W.weight_scale_2), which the
// quantized-tensor readers of io/quantized_checkpoint.hpp (describe, load, dequantize) understand.
// ModelOpt files and directories are read as they are (so `nvfp4 quantize`'s own metadata, 16x16
// tiles, MXFP8 and RHT survive); compressed-tensors, GGUF and torchao are read into the
// format-neutral checkpoint and laid out as ModelOpt would store it, every bit kept.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "nvfp4/io/checkpoint_formats.hpp"
#include "nvfp4/io/file_format.hpp"

namespace nvfp4::io {

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
