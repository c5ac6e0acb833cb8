// nvfp4/io/gguf.hpp: GGUF files (ggml / llama.cpp), version 2 and 3, little-endian: the container
// (magic "GGUF", version, tensor and key-value counts, typed key-value metadata, tensor infos, a
// data section aligned to general.alignment, default 32) read with every field checked and
// written back byte for byte, and the two 4-bit block types: NVFP4 (type 40: 64 elements in 36
// bytes, four UE4M3 sub-block scales then 32 bytes whose byte 8s+j holds element 16s+j in its low
// nibble and 16s+j+8 in its high one; the tensor scale is a separate F32 tensor "<W>.scale", the
// activation's "<W>.input_scale", as llama.cpp's converter writes them) and MXFP4 (type 39: 32
// elements in 17 bytes, an E8M0 byte then 16 bytes, byte j holding elements j and j+16).
// Layout and sources: docs/formats_and_layouts.md.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/io/checkpoint.hpp"
#include "nvfp4/io/file_bytes.hpp"
#include "nvfp4/io/json_limits.hpp"

namespace nvfp4::io {

/// Value types of GGUF metadata (gguf.h gguf_type).
enum class gguf_type : std::uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

/// The ggml tensor type ids (ggml.h enum ggml_type) this library maps to its own formats.
struct ggml_type {
  static constexpr std::uint32_t f32 = 0, f16 = 1, i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, bf16 = 30, mxfp4 = 39,
                                 nvfp4 = 40;
};

/// What every ggml tensor type is: its name, elements per block and bytes per block (ggml.c
/// type_traits at ggml d99724f). Types removed from GGUF files have block 0.
struct ggml_type_info {
  const char* name;
  std::uint32_t block;
  std::uint32_t bytes;
};

inline constexpr std::array<ggml_type_info, 43> ggml_types = {{
    {"f32", 1, 4},       {"f16", 1, 2},         {"q4_0", 32, 18},    {"q4_1", 32, 20},    {"q4_2 (removed)", 0, 0},
    {"q4_3 (removed)", 0, 0}, {"q5_0", 32, 22}, {"q5_1", 32, 24},    {"q8_0", 32, 34},    {"q8_1", 32, 36},
    {"q2_K", 256, 84},   {"q3_K", 256, 110},    {"q4_K", 256, 144},  {"q5_K", 256, 176},  {"q6_K", 256, 210},
    {"q8_K", 256, 292},  {"iq2_xxs", 256, 66},  {"iq2_xs", 256, 74}, {"iq3_xxs", 256, 98}, {"iq1_s", 256, 50},
    {"iq4_nl", 32, 18},  {"iq3_s", 256, 110},   {"iq2_s", 256, 82},  {"iq4_xs", 256, 136}, {"i8", 1, 1},
    {"i16", 1, 2},       {"i32", 1, 4},         {"i64", 1, 8},       {"f64", 1, 8},       {"iq1_m", 256, 56},
    {"bf16", 1, 2},      {"q4_0_4_4 (removed)", 0, 0}, {"q4_0_4_8 (removed)", 0, 0}, {"q4_0_8_8 (removed)", 0, 0},
    {"tq1_0", 256, 54},  {"tq2_0", 256, 66},    {"iq4_nl_4_4 (removed)", 0, 0}, {"iq4_nl_4_8 (removed)", 0, 0},
    {"iq4_nl_8_8 (removed)", 0, 0}, {"mxfp4", 32, 17}, {"nvfp4", 64, 36}, {"q1_0", 128, 18}, {"q2_0", 64, 18},
}};

/// "q4_K (12)" for a type id, "type 99" for one outside the table.
inline std::string ggml_type_text(std::uint32_t type) {
  if (type < ggml_types.size()) return std::string(ggml_types[type].name) + " (" + std::to_string(type) + ")";
  return "type " + std::to_string(type);
}

/// One metadata entry: the value kept as its serialized bytes (after the type, and for arrays
/// after the element type and count), so a file is written back exactly as read.
struct gguf_kv {
  std::string key;
  gguf_type type = gguf_type::u32;
  gguf_type array_type = gguf_type::u8;  ///< for type == array
  std::uint64_t count = 1;               ///< array length (1 for a scalar)
  std::vector<std::uint8_t> raw;

  /// The value as a string; invalid_argument when it is not one.
  std::string as_string() const {
    detail::require(type == gguf_type::string && raw.size() >= 8, errc::invalid_argument, "gguf: '" + key + "' is not a string");
    return std::string(raw.begin() + 8, raw.end());
  }
  std::uint32_t as_u32() const {
    detail::require(type == gguf_type::u32 && raw.size() == 4, errc::invalid_argument, "gguf: '" + key + "' is not a u32");
    std::uint32_t v;
    std::memcpy(&v, raw.data(), 4);
    return v;
  }
  static gguf_kv string_value(std::string key, const std::string& value) {
    gguf_kv kv;
    kv.key = std::move(key);
    kv.type = gguf_type::string;
    const std::uint64_t n = value.size();
    kv.raw.resize(8);
    for (int i = 0; i < 8; ++i) kv.raw[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(n >> (8 * i));
    kv.raw.insert(kv.raw.end(), value.begin(), value.end());
    return kv;
  }
  static gguf_kv u32_value(std::string key, std::uint32_t value) {
    gguf_kv kv;
    kv.key = std::move(key);
    kv.type = gguf_type::u32;
    kv.raw.resize(4);
    std::memcpy(kv.raw.data(), &value, 4);
    return kv;
  }
};

/// One tensor: its name, dimensions in ggml's order (ne[0] is the innermost: a row-major
/// [rows, cols] matrix has ne = {cols, rows}), type, and data bytes.
struct gguf_tensor {
  std::string name;
  std::vector<std::int64_t> ne;
  std::uint32_t type = ggml_type::f32;
  std::vector<std::uint8_t> bytes;
};

/// A whole GGUF file.
struct gguf_file {
  std::uint32_t version = 3;
  std::vector<gguf_kv> metadata;
  std::vector<gguf_tensor> tensors;  ///< in file order (their data in the same order)

  const gguf_kv* find_kv(const std::string& key) const {
    for (const auto& kv : metadata)
      if (kv.key == key) return &kv;
    return nullptr;
  }
  const gguf_tensor* find(const std::string& name) const {
    for (const auto& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
  /// general.alignment when present (checked on read), else 32.
  std::uint32_t alignment() const {
    const gguf_kv* a = find_kv("general.alignment");
    return a ? a->as_u32() : 32;
  }
};

/// Limits of the reader, as ggml's gguf.cpp has them.
inline constexpr std::uint64_t gguf_max_string_bytes = std::uint64_t{1} << 30;
inline constexpr std::uint64_t gguf_max_name_bytes = 63;  ///< GGML_MAX_NAME - 1
inline constexpr std::uint32_t gguf_max_dims = 4;

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
  void copy(std::vector<std::uint8_t>& out, std::size_t from, std::size_t to) const {
    out.insert(out.end(), data_ + from, data_ + to);
  }
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
    case gguf_type::u8: case gguf_type::i8: case gguf_type::boolean: return 1;
    case gguf_type::u16: case gguf_type::i16: return 2;
    case gguf_type::u32: case gguf_type::i32: case gguf_type::f32: return 4;
    case gguf_type::u64: case gguf_type::i64: case gguf_type::f64: return 8;
    default: return 0;
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

inline std::uint64_t align_up(std::uint64_t n, std::uint64_t a) { return (n + a - 1) / a * a; }

/// Bytes of a tensor with dims `ne` of `type`: the element count checked as every tensor's is
/// (detail::checked_element_count: throws `code` naming `what` above nvfp4::max_element_count);
/// nothing when the type is unknown or removed, or a row is not a whole number of blocks.
inline std::optional<std::uint64_t> tensor_bytes(const std::vector<std::int64_t>& ne, std::uint32_t type, errc code,
                                                 const std::string& what) {
  const auto elements = static_cast<std::uint64_t>(detail::checked_element_count(ne, code, what));
  if (type >= ggml_types.size() || ggml_types[type].block == 0) return std::nullopt;
  const auto& info = ggml_types[type];
  const std::uint64_t row = ne.empty() ? 1 : static_cast<std::uint64_t>(ne[0]);
  if (row % info.block != 0) return std::nullopt;
  return elements / info.block * info.bytes;
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
    throw error(errc::unsupported, name + ": GGUF version " + std::to_string(file.version) + " reads as a big-endian file, which is not supported");
  if (file.version == 1) throw error(errc::unsupported, name + ": GGUF version 1 is no longer supported (ggml reads 2 and 3)");
  if (file.version == 0 || file.version > 3) r.fail("GGUF version " + std::to_string(file.version) + " (2 and 3 are read)");
  const auto n_tensors = r.scalar<std::int64_t>("the tensor count");
  const auto n_kv = r.scalar<std::int64_t>("the key-value count");
  // Every entry takes at least 8 bytes (a string length): a count the file cannot hold is a lie.
  if (n_tensors < 0 || static_cast<std::uint64_t>(n_tensors) > r.remaining() / 8)
    r.fail("tensor count " + std::to_string(n_tensors) + " does not fit in the file");
  if (n_kv < 0 || static_cast<std::uint64_t>(n_kv) > r.remaining() / 8) r.fail("key-value count " + std::to_string(n_kv) + " does not fit in the file");
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
      if (kv.count > r.remaining() / smallest) r.fail("array '" + clip_for_message(kv.key) + "' of " + std::to_string(kv.count) + " elements does not fit in the file");
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
    detail::require(!kv.key.empty() && keys.insert(kv.key).second, errc::invalid_argument, "gguf: key '" + clip_for_message(kv.key) + "' is empty or repeated");
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

// --- The 4-bit blocks ----------------------------------------------------------------------------

/// NVFP4 weight [rows, cols] (canonical bytes: data [rows, cols/2] low nibble first, compact
/// UE4M3 scales [rows, cols/16]) -> GGUF type-40 blocks, row after row. cols % 64 == 0.
inline std::vector<std::uint8_t> encode_gguf_nvfp4(index_t rows, index_t cols, std::span<const std::uint8_t> data,
                                                   std::span<const std::uint8_t> scales) {
  detail::require(cols % 64 == 0 && rows >= 0, errc::shape_mismatch, "gguf: NVFP4 blocks hold 64 elements; " + std::to_string(cols) + " columns is not a multiple");
  detail::require(data.size() == static_cast<std::size_t>(rows * cols / 2) && scales.size() == static_cast<std::size_t>(rows * cols / 16),
                  errc::shape_mismatch, "gguf: NVFP4 byte counts do not fit the shape");
  std::vector<std::uint8_t> out(static_cast<std::size_t>(rows * (cols / 64) * 36));
  std::size_t o = 0;
  for (index_t r = 0; r < rows; ++r)
    for (index_t b = 0; b < cols / 64; ++b) {
      for (int s = 0; s < 4; ++s) out[o++] = scales[static_cast<std::size_t>(r * (cols / 16) + b * 4 + s)];
      for (int s = 0; s < 4; ++s)
        for (int j = 0; j < 8; ++j) {
          const index_t c0 = b * 64 + s * 16 + j;
          out[o++] = static_cast<std::uint8_t>(detail_checkpoint_model::packed_code(data, cols, r, c0) | (detail_checkpoint_model::packed_code(data, cols, r, c0 + 8) << 4));
        }
    }
  return out;
}

/// GGUF type-40 blocks -> canonical data and compact scales (the inverse of encode_gguf_nvfp4).
inline void decode_gguf_nvfp4(index_t rows, index_t cols, std::span<const std::uint8_t> blocks, std::vector<std::uint8_t>& data,
                              std::vector<std::uint8_t>& scales) {
  detail::require(cols % 64 == 0 && blocks.size() == static_cast<std::size_t>(rows * (cols / 64) * 36), errc::shape_mismatch,
                  "gguf: NVFP4 block bytes do not fit the shape");
  data.assign(static_cast<std::size_t>(rows * cols / 2), 0);
  scales.assign(static_cast<std::size_t>(rows * cols / 16), 0);
  std::size_t i = 0;
  for (index_t r = 0; r < rows; ++r)
    for (index_t b = 0; b < cols / 64; ++b) {
      for (int s = 0; s < 4; ++s) scales[static_cast<std::size_t>(r * (cols / 16) + b * 4 + s)] = blocks[i++];
      for (int s = 0; s < 4; ++s)
        for (int j = 0; j < 8; ++j) {
          const std::uint8_t byte = blocks[i++];
          const index_t c0 = b * 64 + s * 16 + j;
          detail_checkpoint_model::set_packed_code(data, cols, r, c0, byte & 0xF);
          detail_checkpoint_model::set_packed_code(data, cols, r, c0 + 8, byte >> 4);
        }
    }
}

/// MXFP4 weight (canonical data, compact E8M0 scales [rows, cols/32]) -> GGUF type-39 blocks.
inline std::vector<std::uint8_t> encode_gguf_mxfp4(index_t rows, index_t cols, std::span<const std::uint8_t> data,
                                                   std::span<const std::uint8_t> scales) {
  detail::require(cols % 32 == 0 && rows >= 0, errc::shape_mismatch, "gguf: MXFP4 blocks hold 32 elements; " + std::to_string(cols) + " columns is not a multiple");
  detail::require(data.size() == static_cast<std::size_t>(rows * cols / 2) && scales.size() == static_cast<std::size_t>(rows * cols / 32),
                  errc::shape_mismatch, "gguf: MXFP4 byte counts do not fit the shape");
  std::vector<std::uint8_t> out(static_cast<std::size_t>(rows * (cols / 32) * 17));
  std::size_t o = 0;
  for (index_t r = 0; r < rows; ++r)
    for (index_t b = 0; b < cols / 32; ++b) {
      out[o++] = scales[static_cast<std::size_t>(r * (cols / 32) + b)];
      for (int j = 0; j < 16; ++j) {
        out[o++] = static_cast<std::uint8_t>(detail_checkpoint_model::packed_code(data, cols, r, b * 32 + j) | (detail_checkpoint_model::packed_code(data, cols, r, b * 32 + j + 16) << 4));
      }
    }
  return out;
}

/// GGUF type-39 blocks -> canonical data and compact E8M0 scales.
inline void decode_gguf_mxfp4(index_t rows, index_t cols, std::span<const std::uint8_t> blocks, std::vector<std::uint8_t>& data,
                              std::vector<std::uint8_t>& scales) {
  detail::require(cols % 32 == 0 && blocks.size() == static_cast<std::size_t>(rows * (cols / 32) * 17), errc::shape_mismatch,
                  "gguf: MXFP4 block bytes do not fit the shape");
  data.assign(static_cast<std::size_t>(rows * cols / 2), 0);
  scales.assign(static_cast<std::size_t>(rows * cols / 32), 0);
  std::size_t i = 0;
  for (index_t r = 0; r < rows; ++r)
    for (index_t b = 0; b < cols / 32; ++b) {
      scales[static_cast<std::size_t>(r * (cols / 32) + b)] = blocks[i++];
      for (int j = 0; j < 16; ++j) {
        const std::uint8_t byte = blocks[i++];
        detail_checkpoint_model::set_packed_code(data, cols, r, b * 32 + j, byte & 0xF);
        detail_checkpoint_model::set_packed_code(data, cols, r, b * 32 + j + 16, byte >> 4);
      }
    }
}

// --- Checkpoints ---------------------------------------------------------------------------------

namespace detail_gguf {

struct dtype_pair {
  safetensors_dtype st;
  std::uint32_t ggml;
};
inline constexpr dtype_pair plain_types[] = {
    {safetensors_dtype::f32, ggml_type::f32}, {safetensors_dtype::f16, ggml_type::f16}, {safetensors_dtype::bf16, ggml_type::bf16},
    {safetensors_dtype::i8, ggml_type::i8},   {safetensors_dtype::i16, ggml_type::i16}, {safetensors_dtype::i32, ggml_type::i32},
    {safetensors_dtype::i64, ggml_type::i64}, {safetensors_dtype::f64, ggml_type::f64},
};

inline float f32_of(const gguf_tensor& t, const std::string& where) {
  if (t.type != ggml_type::f32 || t.bytes.size() != 4)
    throw error(errc::dtype_mismatch, where + ": tensor '" + t.name + "' (a tensor scale) is not one f32 value but " +
                                          ggml_type_text(t.type) + " of " + std::to_string(t.bytes.size()) + " bytes");
  float v;
  std::memcpy(&v, t.bytes.data(), 4);
  return v;
}

inline gguf_tensor f32_scalar(const std::string& name, float v) {
  gguf_tensor t;
  t.name = name;
  t.ne = {1};
  t.type = ggml_type::f32;
  t.bytes.resize(4);
  std::memcpy(t.bytes.data(), &v, 4);
  return t;
}

}  // namespace detail_gguf

/// The checkpoint a GGUF file holds. NVFP4 (40) and MXFP4 (39) tensors of two dimensions become
/// quantized weights: "<W>.weight" gives the module W; the F32 side tensors "<W>.scale" and
/// "<W>.input_scale" (one value each, as llama.cpp's converter writes them; a missing scale is
/// 1.0) are their tensor scales, decode sense. f32, f16, bf16, i8, i16, i32, i64 and f64 tensors
/// are kept (dimensions reversed into row-major order). Any other type is unsupported, naming the
/// tensor and its type; so are 3-D NVFP4 / MXFP4 tensors (expert stacks) and per-expert scales.
inline checkpoint checkpoint_from_gguf(const gguf_file& file, const std::string& where) {
  using namespace detail_gguf;
  checkpoint c;
  std::set<std::string> consumed;
  for (const auto& t : file.tensors) {
    if (t.type != ggml_type::nvfp4 && t.type != ggml_type::mxfp4) continue;
    if (t.ne.size() != 2)
      throw error(errc::unsupported, where + ": tensor '" + t.name + "' of " + ggml_type_text(t.type) + " has " +
                                         std::to_string(t.ne.size()) + " dimensions; 2-D weights are converted");
    quantized_weight w;
    w.name = name_before_suffix(t.name, ".weight").value_or(t.name);
    w.cols = t.ne[0];
    w.rows = t.ne[1];
    if (t.type == ggml_type::nvfp4) {
      w.format = weight_format::nvfp4;
      decode_gguf_nvfp4(w.rows, w.cols, t.bytes, w.data, w.scales);
      const gguf_tensor* scale = file.find(w.name + ".scale");
      w.weight_scale = scale_pair::from_decode(scale ? f32_of(*scale, where) : 1.0f);
      if (scale) consumed.insert(scale->name);
    } else {
      w.format = weight_format::mxfp4;
      decode_gguf_mxfp4(w.rows, w.cols, t.bytes, w.data, w.scales);
    }
    if (const gguf_tensor* input = file.find(w.name + ".input_scale")) {
      w.input_scale = scale_pair::from_decode(f32_of(*input, where));
      consumed.insert(input->name);
    }
    consumed.insert(t.name);
    check_weight_on_load(w, where, c.warnings);
    c.weights.push_back(std::move(w));
  }
  for (const auto& t : file.tensors) {
    if (consumed.contains(t.name)) continue;
    std::optional<safetensors_dtype> dtype;
    for (const auto& p : plain_types)
      if (p.ggml == t.type) dtype = p.st;
    if (!dtype)
      throw error(errc::unsupported, where + ": tensor '" + t.name + "' is " + ggml_type_text(t.type) +
                                         ", which this library cannot represent (it reads nvfp4, mxfp4, f32, f16, bf16 and integer tensors)");
    safetensors_tensor s;
    s.name = t.name;
    s.dtype = *dtype;
    s.shape.assign(t.ne.rbegin(), t.ne.rend());
    s.bytes = t.bytes;
    c.tensors.push_back(std::move(s));
  }
  if (const gguf_kv* a = file.find_kv(checkpoint_annotation_key)) apply_annotation(c, a->as_string(), /*stored_decode=*/true);
  check_fused_scales(c, c.warnings);
  return c;
}

/// Reads a GGUF file as a checkpoint.
inline checkpoint read_gguf_checkpoint(const std::filesystem::path& path) { return checkpoint_from_gguf(read_gguf(path), path.string()); }

/// A checkpoint as a GGUF file: each weight W as "W.weight" (type 40 or 39, ne = {cols, rows})
/// followed by its F32 side tensors "W.scale" and "W.input_scale" (NVFP4 has no room for the tensor
/// scale in its blocks), then the other tensors. The metadata holds general.alignment (32) and the
/// annotation with what GGUF cannot hold (safetensors metadata, configs, unstored scale senses).
/// Throws, before anything is written: shape_mismatch for cols not a multiple of 64 (NVFP4) or 32
/// (MXFP4), invalid_argument for a name over 63 bytes, unsupported for a tensor dtype GGUF has no
/// type for (U8, U16, U32, U64, BOOL, F8_*) or an RHT weight.
inline gguf_file checkpoint_to_gguf(const checkpoint& c) {
  using namespace detail_gguf;
  gguf_file file;
  std::vector<std::string> warnings;
  for (const auto& w : c.weights) {
    check_weight_on_load(w, "gguf writer", warnings);
    if (w.rht) throw error(errc::unsupported, "gguf writer: tensor '" + w.name + "' was quantized after TE's RHT; GGUF cannot say so");
    const index_t block = w.format == weight_format::nvfp4 ? 64 : 32;
    if (w.cols % block)
      throw error(errc::shape_mismatch, "gguf writer: tensor '" + w.name + "' has " + std::to_string(w.cols) + " columns; GGUF " +
                                            weight_format_name(w.format) + " blocks hold " + std::to_string(block) + " elements of a row");
    gguf_tensor t;
    t.name = w.name + ".weight";
    t.ne = {w.cols, w.rows};
    if (w.format == weight_format::nvfp4) {
      t.type = ggml_type::nvfp4;
      t.bytes = encode_gguf_nvfp4(w.rows, w.cols, w.data, w.scales);
    } else {
      t.type = ggml_type::mxfp4;
      t.bytes = encode_gguf_mxfp4(w.rows, w.cols, w.data, w.scales);
    }
    file.tensors.push_back(std::move(t));
    if (w.format == weight_format::nvfp4) file.tensors.push_back(f32_scalar(w.name + ".scale", w.weight_scale.decode));
    if (w.input_scale) file.tensors.push_back(f32_scalar(w.name + ".input_scale", w.input_scale->decode));
  }
  for (const auto& s : c.tensors) {
    std::optional<std::uint32_t> type;
    for (const auto& p : plain_types)
      if (p.st == s.dtype) type = p.ggml;
    if (!type)
      throw error(errc::unsupported, "gguf writer: tensor '" + s.name + "' is " + std::string(safetensors_dtype_name(s.dtype)) +
                                         ", which has no GGUF tensor type");
    if (s.shape.size() > gguf_max_dims)
      throw error(errc::unsupported, "gguf writer: tensor '" + s.name + "' has " + std::to_string(s.shape.size()) + " dimensions (GGUF: at most 4)");
    gguf_tensor t;
    t.name = s.name;
    t.type = *type;
    t.ne.assign(s.shape.rbegin(), s.shape.rend());
    t.bytes = s.bytes;
    file.tensors.push_back(std::move(t));
  }
  std::set<std::string> names;
  for (const auto& t : file.tensors) {
    if (t.name.size() > gguf_max_name_bytes)
      throw error(errc::invalid_argument, "gguf writer: tensor name '" + t.name + "' is " + std::to_string(t.name.size()) +
                                              " bytes; ggml allows 63 (rename it, e.g. to llama.cpp's blk.N names)");
    if (!names.insert(t.name).second) throw error(errc::invalid_argument, "gguf writer: two tensors would be named '" + t.name + "'");
  }
  file.metadata.push_back(gguf_kv::u32_value("general.alignment", 32));
  const auto annotation = make_annotation(c, /*stored_decode=*/true, /*with_metadata=*/true, /*with_configs=*/true);
  if (!annotation.empty()) file.metadata.push_back(gguf_kv::string_value(checkpoint_annotation_key, annotation.dump()));
  return file;
}

/// Writes a checkpoint as a GGUF file.
inline void write_gguf_checkpoint(const std::filesystem::path& path, const checkpoint& c) { write_gguf(path, checkpoint_to_gguf(c)); }

}  // namespace nvfp4::io
