// nvfp4/io/file_format.hpp: what a path holds, told from its first bytes and (for safetensors and
// directories) its header and configs, without reading the tensors: an .npy array, a checkpoint
// in one of the formats the readers take (ModelOpt file or sharded directory, compressed-tensors,
// GGUF, torchao), or a known format they do not take (a PyTorch pickle or zip, HDF5, ...), which
// gets a message naming it and the supported ones instead of a parse error deep in a reader.
// Every reader (the CLI's inspect / dequantize / stats / diff / convert, Python's
// load_checkpoint) starts here.
#pragma once

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/io/checkpoint.hpp"
#include "nvfp4/io/npy.hpp"
#include "nvfp4/io/safetensors.hpp"
#include "nvfp4/io/sharded_safetensors.hpp"

namespace nvfp4::io {

/// What a path holds.
enum class file_kind {
  npy,          ///< a NumPy .npy array
  checkpoint,   ///< a safetensors file, a GGUF file or a checkpoint directory (see detected_file::format)
  unsupported,  ///< a format the readers do not take (detected_file::description names it)
};

/// What detect_file found.
struct detected_file {
  file_kind kind = file_kind::unsupported;
  checkpoint_format format = checkpoint_format::modelopt;  ///< for kind == checkpoint
  bool directory = false;                                  ///< a Hugging Face directory
  bool sharded = false;                                    ///< a directory with an index and shards
  std::string description;                                 ///< "ModelOpt (sharded directory)", "a PyTorch zip checkpoint", ...
  bool foreign = false;                                    ///< kind unsupported: a known format of other tools (else: no known format)
};

/// The formats the readers take, for messages.
inline constexpr const char* supported_file_formats =
    "supported: .npy arrays; safetensors files and Hugging Face directories (single file or sharded) in the "
    "ModelOpt layout (what nvfp4 quantize writes), compressed-tensors (nvfp4-pack-quantized), torchao "
    "(NVFP4Tensor); GGUF files (NVFP4 / MXFP4 tensors)";

/// "<path>: this is <what>; supported: ..." as an error: unsupported for a valid file of another
/// format (`code`), malformed_file for one of no known format.
[[noreturn]] inline void refuse_unsupported_file(const std::string& path, const std::string& what, errc code = errc::unsupported) {
  throw error(code, path + ": this is " + what + "; " + supported_file_formats);
}

namespace detail_file_format {

/// Up to `count` bytes from `offset` of a file (fewer at its end). io_error when it cannot be read.
inline std::vector<std::uint8_t> read_prefix(const std::filesystem::path& path, std::uint64_t offset, std::uint64_t count) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int reason = errno;  // the system's reason ("Permission denied"), issue 34
    throw error(errc::io_error, "cannot open " + path.string() + (reason != 0 ? std::string(": ") + std::strerror(reason) : std::string()));
  }
  in.seekg(static_cast<std::streamoff>(offset));
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(count));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(count));
  bytes.resize(static_cast<std::size_t>(in.gcount()));
  return bytes;
}

/// What a file that is neither .npy, safetensors nor GGUF is, by its magic; nothing if unknown.
inline std::optional<std::string> foreign_format(const std::vector<std::uint8_t>& head) {
  auto starts = [&](const char* magic, std::size_t n) { return head.size() >= n && std::memcmp(head.data(), magic, n) == 0; };
  if (starts("PK\x03\x04", 4) || starts("PK\x05\x06", 4))
    return std::string(
        "a ZIP archive (a PyTorch torch.save checkpoint such as pytorch_model.bin / .pt, or a NumPy .npz): "
        "save the tensors with safetensors.torch.save_file or numpy.save first");
  if (head.size() >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5)
    return std::string("a Python pickle (a legacy PyTorch checkpoint): save the tensors with safetensors.torch.save_file first");
  if (starts("\x89HDF\r\n\x1a\n", 8)) return std::string("an HDF5 file (Keras / h5py)");
  if (starts("\x1f\x8b", 2)) return std::string("a gzip-compressed file (decompress it first)");
  if (starts("\xfd"
             "7zXZ",
             6))
    return std::string("an xz-compressed file (decompress it first)");
  if (starts("GGML", 4) || starts("GGJT", 4) || starts("GGLA", 4) || starts("lmgg", 4) || starts("tjgg", 4))
    return std::string("a legacy GGML file (before GGUF; convert it with llama.cpp first)");
  if (starts("\x7f"
             "ELF",
             4))
    return std::string("an executable (ELF)");
  std::size_t i = 0;
  while (i < head.size() && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) ++i;
  if (i < head.size() && (head[i] == '{' || head[i] == '['))
    return std::string("a JSON file (for a config or an index, give the directory that holds it)");
  return std::nullopt;
}

/// The checkpoint format a safetensors file's header says, read without its tensors: torchao by
/// its "tensor_names" metadata, compressed-tensors by a "*.weight_packed" tensor, ModelOpt (the
/// layout of every other file, quantized or not) otherwise. Nothing when the file does not look
/// like safetensors (too short, a header length past the file or the limit, or a header not
/// starting with '{'). Throws malformed_file when the header is not valid JSON (within
/// json_limits' bounds; a repeated key is left to the reader). Only its keys are looked at, in
/// one pass that builds nothing.
inline std::optional<checkpoint_format> safetensors_header_format(const std::filesystem::path& path, const std::vector<std::uint8_t>& head,
                                                                  std::uint64_t file_size) {
  if (head.size() < 9 || head[8] != '{') return std::nullopt;
  const std::uint64_t n = detail_safetensors::read_u64_le(head.data());
  if (n < 2 || n > safetensors_max_header_bytes || n > file_size - 8) return std::nullopt;
  const auto bytes = read_prefix(path, 8, n);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  bool torchao = false, packed = false;
  std::string member;  // the root member whose value is being read
  scan_json_bounded(text, path.string() + ": the safetensors header", [&](int depth, const std::string& key) {
    if (depth == 1) {
      member = key;
      packed = packed || (key != "__metadata__" && name_before_suffix(key, ".weight_packed").has_value());
    } else if (depth == 2 && member == "__metadata__" && key == "tensor_names") {
      torchao = true;
    }
  });
  if (torchao) return checkpoint_format::torchao;
  return packed ? checkpoint_format::compressed_tensors : checkpoint_format::modelopt;
}

inline std::string format_title(checkpoint_format f) {
  switch (f) {
    case checkpoint_format::modelopt:
      return "ModelOpt";
    case checkpoint_format::compressed_tensors:
      return "compressed-tensors";
    case checkpoint_format::gguf:
      return "GGUF";
    case checkpoint_format::torchao:
      return "torchao";
  }
  return "?";
}

/// detect_file for a regular file.
inline detected_file detect_regular_file(const std::filesystem::path& path) {
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw error(errc::io_error, "cannot read " + path.string() + ": " + ec.message());
  const auto head = read_prefix(path, 0, 64);
  detected_file d;
  if (looks_like_npy(head.data(), head.size())) {
    d.kind = file_kind::npy;
    d.description = "a NumPy .npy array";
    return d;
  }
  if (head.size() >= 4 && std::memcmp(head.data(), "GGUF", 4) == 0) {
    d.kind = file_kind::checkpoint;
    d.format = checkpoint_format::gguf;
    d.description = "GGUF";
    return d;
  }
  if (const auto format = safetensors_header_format(path, head, size)) {
    d.kind = file_kind::checkpoint;
    d.format = *format;
    d.description = format_title(d.format) + " (safetensors file)";
    return d;
  }
  if (const auto foreign = foreign_format(head)) {
    d.description = *foreign;
    d.foreign = true;
    return d;
  }
  if (size == 0)
    d.description = "an empty file";
  else if (size < 9)
    d.description = "a file of " + std::to_string(size) + " bytes, too short for any of these formats";
  else
    d.description = "a file of no format known here (no .npy, safetensors or GGUF header)";
  return d;
}

/// detect_file for a directory: its config.json's quantization_config or hf_quant_config.json
/// say the format; otherwise the header of its (first) safetensors file.
inline detected_file detect_directory(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  detected_file d;
  d.kind = file_kind::checkpoint;
  d.directory = true;
  d.sharded = fs::exists(path / safetensors_index_name, ec);
  std::optional<checkpoint_format> format;
  if (fs::exists(path / "config.json", ec)) {
    const auto config = read_json_file(path / "config.json");
    if (const auto q = config.find("quantization_config"); q != config.end() && q->is_object()) {
      const auto method = q->find("quant_method");
      const std::string m = method != q->end() && method->is_string() ? method->get<std::string>() : "";
      if (m == "compressed-tensors")
        format = checkpoint_format::compressed_tensors;
      else if (m == "modelopt")
        format = checkpoint_format::modelopt;
      else if (!m.empty())
        refuse_unsupported_file(path.string(), "a checkpoint directory quantized with quant_method \"" + m + "\"");
    }
  }
  if (!format && fs::exists(path / "hf_quant_config.json", ec)) format = checkpoint_format::modelopt;
  if (!format) {
    // The first safetensors file: model.safetensors, the index's first shard, or the only one.
    fs::path first;
    if (fs::exists(path / "model.safetensors", ec)) first = path / "model.safetensors";
    if (first.empty() && d.sharded) {
      const auto index = read_json_file(path / safetensors_index_name);
      if (const auto map = index.find("weight_map"); map != index.end() && map->is_object() && !map->empty() && map->begin()->is_string()) {
        const std::string shard = map->begin()->get<std::string>();
        if (shard.find('/') == std::string::npos && shard != ".." && shard != ".") first = path / shard;
      }
    }
    if (first.empty()) {
      std::vector<fs::path> found;
      for (const auto& entry : fs::directory_iterator(path, ec))
        if (entry.path().extension() == ".safetensors") found.push_back(entry.path());
      if (found.size() == 1) first = found[0];
    }
    if (first.empty())
      refuse_unsupported_file(
          path.string(),
          "a directory without model.safetensors, " + std::string(safetensors_index_name) + " or exactly one .safetensors file",
          errc::invalid_argument);
    const detected_file inner = detect_regular_file(first);
    if (inner.kind != file_kind::checkpoint || inner.format == checkpoint_format::gguf)
      refuse_unsupported_file(path.string(), "a directory whose " + first.filename().string() + " is " + inner.description,
                              inner.foreign ? errc::unsupported : errc::malformed_file);
    format = inner.format;
  }
  d.format = *format;
  d.description = format_title(d.format) + (d.sharded ? " (sharded directory)" : " (directory)");
  return d;
}

}  // namespace detail_file_format

/// What `path` holds, from its magic bytes, a safetensors header or a directory's configs (the
/// tensors are not read). Throws io_error when the path does not exist or cannot be read;
/// malformed_file for a config or header that is not valid JSON. A format the readers do not take
/// comes back as kind unsupported (require_checkpoint turns that into the error).
inline detected_file detect_file(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  // The system's reason: a loop of symbolic links, a name too long, a directory not searchable
  // are not "no such file".
  if (!fs::exists(status))
    throw error(errc::io_error,
                "cannot open " + clip_for_message(path.string()) + ": " +
                    (ec && ec != std::errc::no_such_file_or_directory ? ec.message() : std::string("no such file or directory")));
  if (fs::is_directory(status)) return detail_file_format::detect_directory(path);
  if (!fs::is_regular_file(status)) throw error(errc::io_error, "cannot read " + path.string() + ": it is not a regular file");
  return detail_file_format::detect_regular_file(path);
}

/// detect_file, requiring a checkpoint (`npy_too`: or an .npy array); otherwise "<path>: this is
/// <what>; supported: ...", unsupported for another tool's format (a PyTorch pickle, HDF5, ...),
/// malformed_file for a file of no known format or an .npy where a checkpoint is needed.
inline detected_file require_readable(const std::filesystem::path& path, bool npy_too) {
  const detected_file d = detect_file(path);
  if (d.kind == file_kind::checkpoint || (npy_too && d.kind == file_kind::npy)) return d;
  if (d.kind == file_kind::npy) refuse_unsupported_file(path.string(), "a NumPy .npy array, not a checkpoint", errc::malformed_file);
  refuse_unsupported_file(path.string(), d.description, d.foreign ? errc::unsupported : errc::malformed_file);
}

}  // namespace nvfp4::io
