// nvfp4/io/checkpoint_formats.hpp: one entry point over every checkpoint format: tell which format
// a file or directory is, read it, write a checkpoint in any format (what `nvfp4 convert` does).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "nvfp4/io/compressed_tensors.hpp"
#include "nvfp4/io/file_format.hpp"
#include "nvfp4/io/gguf.hpp"
#include "nvfp4/io/modelopt.hpp"
#include "nvfp4/io/torchao.hpp"

namespace nvfp4::io {

/// The format named `name` ("modelopt", "compressed-tensors" or "compressed_tensors", "gguf",
/// "torchao"), or nothing.
inline std::optional<checkpoint_format> parse_checkpoint_format(const std::string& name) {
  if (name == "compressed_tensors") return checkpoint_format::compressed_tensors;  // the CLI's flavor spelling
  return nvfp4::detail::value_of<checkpoint_format>(name);
}

/// Which format a path holds (io/file_format.hpp's detect_file: GGUF by its magic; a directory by
/// its config, quant_method "compressed-tensors" or "modelopt", or an hf_quant_config.json;
/// otherwise by the safetensors header: "*.weight_packed" means compressed-tensors, a
/// "tensor_names" metadata entry torchao, anything else ModelOpt). Throws io_error /
/// malformed_file when the path cannot be read, unsupported ("this is a <format> file;
/// supported: ...") for anything else.
inline checkpoint_format detect_checkpoint_format(const std::filesystem::path& path) {
  return require_readable(path, /*npy_too=*/false).format;
}

/// Reads a checkpoint of the given format (detected when not given).
inline checkpoint read_checkpoint(const std::filesystem::path& path, std::optional<checkpoint_format> format = std::nullopt) {
  switch (format ? *format : detect_checkpoint_format(path)) {
    case checkpoint_format::modelopt:
      return read_modelopt(path);
    case checkpoint_format::compressed_tensors:
      return read_compressed_tensors(path);
    case checkpoint_format::gguf:
      return read_gguf_checkpoint(path);
    case checkpoint_format::torchao:
      return read_torchao(path);
  }
  throw error(errc::invalid_argument, "unknown checkpoint format");
}

/// Options of write_checkpoint.
struct checkpoint_write_options {
  std::uint64_t max_shard_bytes = std::uint64_t{5} << 30;  ///< directory outputs: shard above this
  bool torchao_swizzled_scales = true;                     ///< torchao: is_swizzled_scales
  bool hf_quant_config_beside_file = false;                ///< ModelOpt file output: write hf_quant_config.json beside it
};

/// Writes `c` in `format` at `path` (a .safetensors / .gguf file, or a directory for ModelOpt and
/// compressed-tensors). A weight the format cannot hold is refused, naming it and the reason, before
/// anything is written.
inline void write_checkpoint(const std::filesystem::path& path, checkpoint_format format, const checkpoint& c,
                             const checkpoint_write_options& options = {}) {
  switch (format) {
    case checkpoint_format::modelopt:
      write_modelopt(path, c,
                     {.max_shard_bytes = options.max_shard_bytes, .hf_quant_config_beside_file = options.hf_quant_config_beside_file});
      return;
    case checkpoint_format::compressed_tensors:
      write_compressed_tensors(path, c, options.max_shard_bytes);
      return;
    case checkpoint_format::gguf:
      write_gguf_checkpoint(path, c);
      return;
    case checkpoint_format::torchao:
      write_torchao(path, c, {.swizzled_scales = options.torchao_swizzled_scales});
      return;
  }
}

}  // namespace nvfp4::io
