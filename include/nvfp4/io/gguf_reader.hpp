// nvfp4/io/gguf_reader.hpp: the GGUF reader: a file image parsed with every field checked as ggml's
// gguf.cpp checks it (magic, version, counts, typed metadata, tensor infos, the aligned data
// section); what it reads, gguf_writer.hpp writes back byte for byte.
#pragma once

#include <cstdint>
#include <cstring>
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

/// A bounds-checked little-endian reader over a file image.
class reader {
 public:
  reader(const std::uint8_t* data, std::size_t size, const std::string& name) : data_(data), size_(size), name_(name) {}
  std::size_t position() const { return pos_; }
  std::size_t remaining() const { return size_ - pos_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw error(errc::malformed_file, name_ + ": " + what + " (at byte " + std::to_string(pos_) + ")");
  }
  void need(std::uint64_t n, const char* what) const {
    if (n > remaining())
      fail(std::string(what) + " needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) + " are left (truncated file?)");
  }
  template <class T>
  T scalar(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const char* what, std::uint64_t limit = gguf_max_string_bytes) {
    const auto n = scalar<std::uint64_t>(what);
    if (n > limit) fail(std::string(what) + " of " + std::to_string(n) + " bytes exceeds the limit of " + std::to_string(limit));
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }
  void copy(std::vector<std::uint8_t>& out, std::size_t from, std::size_t to) const { out.insert(out.end(), data_ + from, data_ + to); }
  void skip(std::uint64_t n, const char* what) {
    need(n, what);
    pos_ += static_cast<std::size_t>(n);
  }
  const std::string& name() const { return name_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::string name_;
};

inline std::size_t scalar_size(gguf_type t) {
  switch (t) {
    case gguf_type::u8:
    case gguf_type::i8:
    case gguf_type::boolean:
      return 1;
    case gguf_type::u16:
    case gguf_type::i16:
      return 2;
    case gguf_type::u32:
    case gguf_type::i32:
    case gguf_type::f32:
      return 4;
    case gguf_type::u64:
    case gguf_type::i64:
    case gguf_type::f64:
      return 8;
    default:
      return 0;
  }
}

inline bool valid_type(std::uint32_t t) { return t <= static_cast<std::uint32_t>(gguf_type::f64); }

/// Skips one value of type t (not an array), checking it.
inline void skip_value(reader& r, gguf_type t, const std::string& key) {
  if (t == gguf_type::string) {
    r.string(("the string value of '" + key + "'").c_str());
  } else if (t == gguf_type::boolean) {
    const auto b = r.scalar<std::uint8_t>("a bool value");
    if (b > 1) r.fail("key '" + key + "' has a bool value of " + std::to_string(b));
  } else {
    r.skip(scalar_size(t), "a value");
  }
}

}  // namespace detail_gguf

/// Parses a GGUF image held in memory. Throws malformed_file for a bad magic, version 0 / 1 / above
/// 3 (or one that reads as big-endian), counts that the file cannot hold, an empty or duplicate
/// key, an unknown value type, an array of arrays, a string past the end or over 1 GiB,
/// general.alignment not a u32 power of two, a tensor name over 63 bytes or repeated, more than 4
/// dimensions, a negative dimension, an unknown or removed tensor type, a row that is not a whole
/// number of blocks, a data offset that is not where the previous tensor's aligned end puts it
/// (the layout gguf.cpp requires, so tensors cannot overlap), or data past the end of the file.
inline gguf_file parse_gguf(const std::uint8_t* image, std::size_t size, const std::string& name = "<memory>") {
  using namespace detail_gguf;
  reader r(image, size, name);
  r.need(4, "the magic");
  if (std::memcmp(image, "GGUF", 4) != 0) r.fail("not a GGUF file (the magic is not \"GGUF\")");
  r.skip(4, "the magic");
  gguf_file file;
  file.version = r.scalar<std::uint32_t>("the version");
  if (file.version != 0 && (file.version & 0xFFFF) == 0)
    throw error(errc::unsupported,
                name + ": GGUF version " + std::to_string(file.version) + " reads as a big-endian file, which is not supported");
  if (file.version == 1) throw error(errc::unsupported, name + ": GGUF version 1 is no longer supported (ggml reads 2 and 3)");
  if (file.version == 0 || file.version > 3) r.fail("GGUF version " + std::to_string(file.version) + " (2 and 3 are read)");
  const auto n_tensors = r.scalar<std::int64_t>("the tensor count");
  const auto n_kv = r.scalar<std::int64_t>("the key-value count");
  // Every entry takes at least 8 bytes (a string length): a count the file cannot hold is a lie.
  if (n_tensors < 0 || static_cast<std::uint64_t>(n_tensors) > r.remaining() / 8)
    r.fail("tensor count " + std::to_string(n_tensors) + " does not fit in the file");
  if (n_kv < 0 || static_cast<std::uint64_t>(n_kv) > r.remaining() / 8)
    r.fail("key-value count " + std::to_string(n_kv) + " does not fit in the file");
  std::set<std::string> keys;
  for (std::int64_t i = 0; i < n_kv; ++i) {
    gguf_kv kv;
    kv.key = r.string("a key");
    if (kv.key.empty()) r.fail("key " + std::to_string(i) + " is empty");
    if (!keys.insert(kv.key).second) r.fail("key '" + clip_for_message(kv.key) + "' appears twice");
    const auto type = r.scalar<std::uint32_t>("a value type");
    if (!valid_type(type)) r.fail("key '" + clip_for_message(kv.key) + "' has value type " + std::to_string(type));
    kv.type = static_cast<gguf_type>(type);
    const std::size_t begin = r.position();
    if (kv.type == gguf_type::array) {
      const auto element = r.scalar<std::uint32_t>("an array type");
      if (!valid_type(element) || element == static_cast<std::uint32_t>(gguf_type::array))
        r.fail("key '" + clip_for_message(kv.key) + "' is an array of type " + std::to_string(element));
      kv.array_type = static_cast<gguf_type>(element);
      kv.count = r.scalar<std::uint64_t>("an array length");
      const std::size_t smallest = kv.array_type == gguf_type::string ? 8 : scalar_size(kv.array_type);
      if (kv.count > r.remaining() / smallest)
        r.fail("array '" + clip_for_message(kv.key) + "' of " + std::to_string(kv.count) + " elements does not fit in the file");
      const std::size_t values = r.position();
      for (std::uint64_t k = 0; k < kv.count; ++k) skip_value(r, kv.array_type, kv.key);
      r.copy(kv.raw, values, r.position());
    } else {
      skip_value(r, kv.type, kv.key);
      r.copy(kv.raw, begin, r.position());
    }
    file.metadata.push_back(std::move(kv));
  }
  if (const gguf_kv* a = file.find_kv("general.alignment")) {
    if (a->type != gguf_type::u32) r.fail("general.alignment is not a u32");
    const std::uint32_t align = a->as_u32();
    if (align == 0 || (align & (align - 1)) != 0) r.fail("general.alignment " + std::to_string(align) + " is not a power of two");
  }
  struct info {
    std::uint64_t offset;
    std::uint64_t bytes;
  };
  std::vector<info> infos;
  std::set<std::string> names;
  for (std::int64_t i = 0; i < n_tensors; ++i) {
    gguf_tensor t;
    t.name = r.string("a tensor name");
    if (t.name.size() > gguf_max_name_bytes) r.fail("tensor name '" + t.name.substr(0, 80) + "' is longer than 63 bytes");
    if (!names.insert(t.name).second) r.fail("tensor '" + t.name + "' appears twice");
    const auto n_dims = r.scalar<std::uint32_t>("a dimension count");
    if (n_dims > gguf_max_dims) r.fail("tensor '" + t.name + "' has " + std::to_string(n_dims) + " dimensions (at most 4)");
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto extent = r.scalar<std::int64_t>("a dimension");
      if (extent < 0) r.fail("tensor '" + t.name + "' has a negative dimension");
      t.ne.push_back(extent);
    }
    t.type = r.scalar<std::uint32_t>("a tensor type");
    if (t.type >= ggml_types.size() || ggml_types[t.type].block == 0)
      r.fail("tensor '" + t.name + "' has " + ggml_type_text(t.type) + ", which is not a GGUF tensor type");
    const auto bytes = tensor_bytes(t.ne, t.type, errc::malformed_file, name + ": tensor '" + t.name + "'");
    if (!bytes)
      r.fail("tensor '" + t.name + "' of " + ggml_type_text(t.type) + " has a shape that is not a whole number of " +
             std::to_string(ggml_types[t.type].block) + "-element blocks per row");
    const auto offset = r.scalar<std::uint64_t>("a tensor offset");
    infos.push_back({offset, *bytes});
    file.tensors.push_back(std::move(t));
  }
  const std::uint64_t alignment = file.alignment();
  std::uint64_t data_start = r.position();
  if (n_tensors > 0) data_start = align_up(data_start, alignment);
  if (data_start > size) r.fail("the data section would start past the end of the file");
  const std::uint64_t data_size = size - data_start;
  std::uint64_t expected = 0;
  for (std::size_t i = 0; i < infos.size(); ++i) {
    auto& t = file.tensors[i];
    if (infos[i].offset != expected)
      r.fail("tensor '" + t.name + "' has data offset " + std::to_string(infos[i].offset) + ", expected " + std::to_string(expected) +
             " (tensors must follow each other, each aligned to " + std::to_string(alignment) + ")");
    if (infos[i].bytes > data_size || infos[i].offset > data_size - infos[i].bytes)
      r.fail("tensor '" + t.name + "' ends at byte " + std::to_string(data_start + infos[i].offset + infos[i].bytes) + " of a " +
             std::to_string(size) + "-byte file (truncated?)");
    const std::size_t from = static_cast<std::size_t>(data_start + infos[i].offset);
    t.bytes.assign(image + from, image + from + infos[i].bytes);
    expected = align_up(infos[i].offset + infos[i].bytes, alignment);
  }
  return file;
}

/// Reads a GGUF file; io_error when it cannot be read, else as parse_gguf.
inline gguf_file read_gguf(const std::filesystem::path& path) {
  const auto image = read_file_bytes(path);
  return parse_gguf(image.data(), image.size(), path.string());
}

}  // namespace nvfp4::io
