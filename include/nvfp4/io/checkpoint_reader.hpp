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
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nvfp4/io/checkpoint_formats.hpp"
#include "nvfp4/io/file_format.hpp"
#include "nvfp4/io/quantized_checkpoint.hpp"
#include "nvfp4/io/safetensors_source.hpp"
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

/// The values of quantized weight W of a ModelOpt-layout file, handed to `consume` piece by piece
/// in C order, as dequantize_tensor_in_pieces hands them: a per-tensor FP8 weight decoded, anything
/// else as io/quantized_checkpoint.hpp's dequantize_tensor. Returns the source shape.
inline std::vector<std::int64_t> dequantize_any_in_pieces(const safetensors_file& file, const std::string& name,
                                                          const load_options& options, const value_consumer& consume,
                                                          index_t piece_elements = dequantize_piece_elements) {
  if (!is_fp8_weight(file, name)) return dequantize_tensor_in_pieces(file, name, options, consume, piece_elements).shape;
  const auto& w = file.at(name + ".weight");
  const fp8_format format = w.dtype == safetensors_dtype::f8_e5m2 ? fp8_format::e5m2 : fp8_format::e4m3;
  float decode;
  std::memcpy(&decode, file.at(name + ".weight_scale").bytes.data(), 4);
  const index_t rows = w.shape[0], cols = w.shape[1];
  std::vector<float> values;
  detail_checkpoint::for_each_piece(rows, cols, piece_elements, [&](index_t r0, index_t r1, index_t c0, index_t c1) {
    fp8_tensor piece(r1 - r0, c1 - c0, format);
    for (index_t r = r0; r < r1; ++r)
      std::copy_n(w.bytes.begin() + static_cast<std::ptrdiff_t>(r * cols + c0), c1 - c0,
                  piece.codes().begin() + static_cast<std::ptrdiff_t>((r - r0) * (c1 - c0)));
    piece.scale_inv()[0] = decode;
    piece.set_scale(1.0f / decode);
    values.resize(static_cast<std::size_t>((r1 - r0) * (c1 - c0)));
    nvfp4::dequantize(piece, matrix_view<float>::row_major(values.data(), r1 - r0, c1 - c0));
    consume(values);
  });
  return {rows, cols};
}

/// The source shape dequantize_any gives weight W, from the file's descriptions (no data read).
/// Throws as describe_quantized_tensor does.
inline std::vector<std::int64_t> dequantized_shape(const safetensors_file& file, const std::string& name,
                                                   const load_options& options = {}) {
  if (is_fp8_weight(file, name)) return file.at(name + ".weight").shape;
  return describe_quantized_tensor(file, name, options).shape;
}

/// The values of quantized weight W of a ModelOpt-layout file, in its source shape: a per-tensor
/// FP8 weight decoded, anything else as io/quantized_checkpoint.hpp's dequantize_tensor.
inline restored_tensor dequantize_any(const safetensors_file& file, const std::string& name, const load_options& options = {}) {
  if (!is_fp8_weight(file, name)) return dequantize_tensor(file, name, options);
  restored_tensor out;
  out.shape = dequantize_any_in_pieces(
      file, name, options, [&](std::span<const float> piece) { out.values.insert(out.values.end(), piece.begin(), piece.end()); });
  return out;
}

/// The names W of the quantized weights of `source` (as quantized_tensor_names finds them in a file).
inline std::vector<std::string> quantized_tensor_names(const safetensors_source& source) {
  return detail_checkpoint::quantized_names(source.metadata(), source.entries(),
                                            [&](const std::string& n) { return source.find(n) != nullptr; });
}

/// Quantized weight W of `source` as a small file the quantized-tensor readers take: W.weight,
/// W.weight_scale, W.weight_scale_2 and W.input_scale (those there) and its "nvfp4.W" metadata,
/// read now; nothing else of the checkpoint.
inline safetensors_file load_quantized_weight_file(const safetensors_source& source, const std::string& name) {
  const std::string names[] = {name + ".weight", name + ".weight_scale", name + ".weight_scale_2", name + ".input_scale"};
  const std::string keys[] = {"nvfp4." + name};
  return source.load(names, keys);
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

/// A checkpoint's tensors in ModelOpt's layout, read on demand (io/safetensors_source.hpp): a
/// ModelOpt file or directory straight from its files, one tensor at a time; another format read
/// whole and laid out as ModelOpt's (kept in `converted`, which the source reads).
struct modelopt_source {
  detected_file found;
  std::vector<std::string> warnings;
  std::unique_ptr<safetensors_file> converted;  ///< other formats only
  safetensors_source source;
};

/// Opens the checkpoint at `path` (detected as `found`) as a modelopt_source. Throws as the
/// format's reader does (a ModelOpt checkpoint: as read_safetensors_checkpoint, its data unread).
inline modelopt_source open_as_modelopt(const std::filesystem::path& path, const detected_file& found) {
  if (found.kind != file_kind::checkpoint)
    refuse_unsupported_file(path.string(), found.description, found.foreign ? errc::unsupported : errc::malformed_file);
  if (found.format == checkpoint_format::modelopt) return {found, {}, nullptr, safetensors_source::open(path)};
  modelopt_view view = read_as_modelopt(path, found);
  auto converted = std::make_unique<safetensors_file>(std::move(view.file));
  safetensors_source source = safetensors_source::of_file(*converted);
  return {found, std::move(view.warnings), std::move(converted), std::move(source)};
}

/// read_as_modelopt after detecting the format (unsupported, naming it, for anything else).
inline modelopt_view read_as_modelopt(const std::filesystem::path& path) {
  return read_as_modelopt(path, require_readable(path, /*npy_too=*/false));
}

}  // namespace nvfp4::io
