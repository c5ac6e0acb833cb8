// nvfp4/io/file_bytes.hpp: whole-file reads and atomic writes (a temporary file in the target's
// directory, renamed over the target only once every byte is written), so a failed or interrupted
// write never leaves a partial output file. Used by the .npy and safetensors readers/writers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "nvfp4/error.hpp"

namespace nvfp4::io {

/// Reads a whole file into memory. Throws io_error when it cannot be opened or read.
inline std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw error(errc::io_error, "cannot read " + path.string() + ": it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(errc::io_error, "cannot open " + path.string());
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw error(errc::io_error, "cannot determine the size of " + path.string());
  in.seekg(0, std::ios::beg);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size))
    throw error(errc::io_error, "cannot read " + path.string());
  return bytes;
}

/// Writes `parts` (concatenated) to `path` atomically: into `path`'s directory as a uniquely
/// named temporary, then renamed over `path`. On any failure the temporary is removed, `path` is
/// left as it was, and io_error is thrown.
inline void write_file_atomically(const std::filesystem::path& path, std::span<const std::span<const std::uint8_t>> parts) {
  namespace fs = std::filesystem;
  const fs::path directory = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::random_device entropy;
  const fs::path temporary =
      directory / ("." + path.filename().string() + ".tmp" + std::to_string(entropy()) + std::to_string(entropy()));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw error(errc::io_error, "cannot create " + temporary.string() + " to write " + path.string());
    for (const auto part : parts)
      if (!part.empty()) out.write(reinterpret_cast<const char*>(part.data()), static_cast<std::streamsize>(part.size()));
    out.flush();
    if (!out) {
      out.close();
      std::error_code ignored;
      fs::remove(temporary, ignored);
      throw error(errc::io_error, "cannot write " + path.string() + " (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(temporary, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw error(errc::io_error, "cannot rename the finished file onto " + path.string() + ": " + ec.message());
  }
}

/// write_file_atomically for one buffer.
inline void write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  const std::span<const std::uint8_t> parts[] = {bytes};
  write_file_atomically(path, std::span<const std::span<const std::uint8_t>>(parts));
}

}  // namespace nvfp4::io
