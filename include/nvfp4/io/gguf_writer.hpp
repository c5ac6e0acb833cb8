// nvfp4/io/gguf_writer.hpp: the GGUF writer: a gguf_file as bytes (header, metadata, tensor infos,
// data aligned and padded as ggml does) and written atomically.
#pragma once

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/io/file_bytes.hpp"
#include "nvfp4/io/gguf_format.hpp"
#include "nvfp4/io/json_limits.hpp"

namespace nvfp4::io {

namespace detail_gguf {

inline void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void put_u64(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void put_string(std::vector<std::uint8_t>& out, const std::string& s) {
  put_u64(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

}  // namespace detail_gguf

/// The file as bytes: header, metadata, tensor infos, zero padding to the alignment, tensor data
/// each padded to the alignment (the last too), as ggml writes it. Throws invalid_argument for a
/// name over 63 bytes, a repeated name or key, a byte count that does not fit the shape.
inline std::vector<std::uint8_t> serialize_gguf(const gguf_file& file) {
  using namespace detail_gguf;
  const std::uint64_t alignment = file.alignment();
  detail::require(alignment > 0 && (alignment & (alignment - 1)) == 0, errc::invalid_argument, "gguf: alignment is not a power of two");
  std::vector<std::uint8_t> out = {'G', 'G', 'U', 'F'};
  put_u32(out, file.version);
  put_u64(out, file.tensors.size());
  put_u64(out, file.metadata.size());
  std::set<std::string> keys, names;
  for (const auto& kv : file.metadata) {
    detail::require(!kv.key.empty() && keys.insert(kv.key).second, errc::invalid_argument,
                    "gguf: key '" + clip_for_message(kv.key) + "' is empty or repeated");
    put_string(out, kv.key);
    put_u32(out, static_cast<std::uint32_t>(kv.type));
    if (kv.type == gguf_type::array) {
      put_u32(out, static_cast<std::uint32_t>(kv.array_type));
      put_u64(out, kv.count);
    }
    out.insert(out.end(), kv.raw.begin(), kv.raw.end());
  }
  std::uint64_t offset = 0;
  for (const auto& t : file.tensors) {
    detail::require(t.name.size() <= gguf_max_name_bytes, errc::invalid_argument,
                    "gguf: tensor name '" + t.name + "' is longer than 63 bytes (ggml's limit)");
    detail::require(names.insert(t.name).second, errc::invalid_argument, "gguf: tensor '" + t.name + "' is repeated");
    const auto bytes = tensor_bytes(t.ne, t.type, errc::invalid_argument, "gguf: tensor '" + t.name + "'");
    detail::require(bytes && *bytes == t.bytes.size() && t.ne.size() <= gguf_max_dims, errc::shape_mismatch,
                    "gguf: tensor '" + t.name + "' has " + std::to_string(t.bytes.size()) + " bytes, its shape and " +
                        ggml_type_text(t.type) + " need " + (bytes ? std::to_string(*bytes) : std::string("an invalid size")));
    put_string(out, t.name);
    put_u32(out, static_cast<std::uint32_t>(t.ne.size()));
    for (auto d : t.ne) put_u64(out, static_cast<std::uint64_t>(d));
    put_u32(out, t.type);
    put_u64(out, offset);
    offset = align_up(offset + t.bytes.size(), alignment);
  }
  if (!file.tensors.empty()) out.resize(static_cast<std::size_t>(align_up(out.size(), alignment)), 0);
  for (const auto& t : file.tensors) {
    out.insert(out.end(), t.bytes.begin(), t.bytes.end());
    out.resize(static_cast<std::size_t>(align_up(out.size(), alignment)), 0);
  }
  return out;
}

/// Writes a GGUF file atomically.
inline void write_gguf(const std::filesystem::path& path, const gguf_file& file) {
  const auto bytes = serialize_gguf(file);
  write_file_atomically(path, bytes);
}

}  // namespace nvfp4::io
