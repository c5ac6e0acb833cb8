// nvfp4/io/gguf_format.hpp: the GGUF container's vocabulary (ggml / llama.cpp, v2-3, little-endian):
// value types, the ggml tensor type table, gguf_file, the reader's limits, a tensor's byte count.
// Reader: gguf_reader.hpp; writer: gguf_writer.hpp; checkpoints and 4-bit blocks: gguf.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/error.hpp"

namespace nvfp4::io {

/// Value types of GGUF metadata (gguf.h gguf_type).
enum class gguf_type : std::uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

/// The ggml tensor type ids (ggml.h enum ggml_type) this library maps to its own formats.
struct ggml_type {
  static constexpr std::uint32_t f32 = 0, f16 = 1, i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, bf16 = 30, mxfp4 = 39, nvfp4 = 40;
};

/// What every ggml tensor type is: its name, elements per block and bytes per block (ggml.c
/// type_traits at ggml d99724f). Types removed from GGUF files have block 0.
struct ggml_type_info {
  const char* name;
  std::uint32_t block;
  std::uint32_t bytes;
};

inline constexpr std::array<ggml_type_info, 43> ggml_types = {{
    {"f32", 1, 4},
    {"f16", 1, 2},
    {"q4_0", 32, 18},
    {"q4_1", 32, 20},
    {"q4_2 (removed)", 0, 0},
    {"q4_3 (removed)", 0, 0},
    {"q5_0", 32, 22},
    {"q5_1", 32, 24},
    {"q8_0", 32, 34},
    {"q8_1", 32, 36},
    {"q2_K", 256, 84},
    {"q3_K", 256, 110},
    {"q4_K", 256, 144},
    {"q5_K", 256, 176},
    {"q6_K", 256, 210},
    {"q8_K", 256, 292},
    {"iq2_xxs", 256, 66},
    {"iq2_xs", 256, 74},
    {"iq3_xxs", 256, 98},
    {"iq1_s", 256, 50},
    {"iq4_nl", 32, 18},
    {"iq3_s", 256, 110},
    {"iq2_s", 256, 82},
    {"iq4_xs", 256, 136},
    {"i8", 1, 1},
    {"i16", 1, 2},
    {"i32", 1, 4},
    {"i64", 1, 8},
    {"f64", 1, 8},
    {"iq1_m", 256, 56},
    {"bf16", 1, 2},
    {"q4_0_4_4 (removed)", 0, 0},
    {"q4_0_4_8 (removed)", 0, 0},
    {"q4_0_8_8 (removed)", 0, 0},
    {"tq1_0", 256, 54},
    {"tq2_0", 256, 66},
    {"iq4_nl_4_4 (removed)", 0, 0},
    {"iq4_nl_4_8 (removed)", 0, 0},
    {"iq4_nl_8_8 (removed)", 0, 0},
    {"mxfp4", 32, 17},
    {"nvfp4", 64, 36},
    {"q1_0", 128, 18},
    {"q2_0", 64, 18},
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

}  // namespace nvfp4::io
