// nvfp4/io/safetensors.hpp: safetensors files (8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and byte range, then the data buffer), read with every field
// validated and written atomically. The header is parsed by nlohmann-json, never by hand.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/io/file_bytes.hpp"
#include "nvfp4/io/json_limits.hpp"

namespace nvfp4::io {

/// Element types of a safetensors tensor (the header's "dtype" names).
enum class safetensors_dtype { boolean, u8, i8, u16, i16, f16, bf16, u32, i32, f32, u64, i64, f64, f8_e4m3, f8_e5m2, f8_e8m0 };

struct safetensors_dtype_info {
  safetensors_dtype dtype;
  std::string_view name;
  std::size_t size;
};

inline constexpr safetensors_dtype_info safetensors_dtypes[] = {
    {safetensors_dtype::boolean, "BOOL", 1},    {safetensors_dtype::u8, "U8", 1},           {safetensors_dtype::i8, "I8", 1},
    {safetensors_dtype::u16, "U16", 2},         {safetensors_dtype::i16, "I16", 2},         {safetensors_dtype::f16, "F16", 2},
    {safetensors_dtype::bf16, "BF16", 2},       {safetensors_dtype::u32, "U32", 4},         {safetensors_dtype::i32, "I32", 4},
    {safetensors_dtype::f32, "F32", 4},         {safetensors_dtype::u64, "U64", 8},         {safetensors_dtype::i64, "I64", 8},
    {safetensors_dtype::f64, "F64", 8},         {safetensors_dtype::f8_e4m3, "F8_E4M3", 1}, {safetensors_dtype::f8_e5m2, "F8_E5M2", 1},
    {safetensors_dtype::f8_e8m0, "F8_E8M0", 1},
};

/// The header name of a dtype ("F32", "F8_E4M3", ...).
constexpr std::string_view safetensors_dtype_name(safetensors_dtype t) {
  for (const auto& info : safetensors_dtypes)
    if (info.dtype == t) return info.name;
  return "?";
}

/// Bytes per element.
constexpr std::size_t safetensors_dtype_size(safetensors_dtype t) {
  for (const auto& info : safetensors_dtypes)
    if (info.dtype == t) return info.size;
  return 0;
}

/// The dtype a header name stands for, or nothing for an unknown name.
constexpr std::optional<safetensors_dtype> parse_safetensors_dtype(std::string_view name) {
  for (const auto& info : safetensors_dtypes)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

/// The module a tensor name belongs to: `name` without `suffix` ("model.layers.0.mlp" for
/// "model.layers.0.mlp.weight" and ".weight"), or nothing when name does not end in suffix or is
/// the suffix alone.
inline std::optional<std::string> name_before_suffix(std::string_view name, std::string_view suffix) {
  if (name.size() <= suffix.size() || !name.ends_with(suffix)) return std::nullopt;
  return std::string(name.substr(0, name.size() - suffix.size()));
}

/// One tensor: its name, dtype, shape and raw little-endian bytes (row-major).
struct safetensors_tensor {
  std::string name;
  safetensors_dtype dtype = safetensors_dtype::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;

  /// The product of the shape; invalid_argument for a shape above nvfp4::max_element_count.
  std::int64_t element_count() const {
    return detail::checked_element_count(shape, errc::invalid_argument, "safetensors tensor '" + name + "'");
  }
};

namespace detail_safetensors {

/// safetensors_file::find's name index: built on first use, extended when tensors were appended,
/// rebuilt when the vector was shrunk or reallocated (or an entry found no longer carries the
/// name); guarded by a mutex
/// so that const lookups from several threads are safe. A copy starts empty.
class name_index {
 public:
  name_index() = default;
  name_index(const name_index&) {}
  name_index& operator=(const name_index&) { return *this; }

  template <class Tensors>
  const typename Tensors::value_type* find(const Tensors& tensors, std::string_view name) const {
    const std::lock_guard lock(mutex_);
    if (data_ != static_cast<const void*>(tensors.data()) || size_ > tensors.size()) rebuild(tensors);
    // Tensors appended since (add() in a loop): indexed in turn, so building a file stays linear
    // (a reallocation rebuilds, which geometric growth amortizes).
    for (; size_ < tensors.size(); ++size_) positions_.emplace(tensors[size_].name, size_);
    const std::string key(name);
    auto it = positions_.find(key);
    if (it != positions_.end() && (it->second >= tensors.size() || tensors[it->second].name != name)) {  // renamed in place since
      rebuild(tensors);
      it = positions_.find(key);
    }
    return it == positions_.end() ? nullptr : &tensors[it->second];
  }

 private:
  template <class Tensors>
  void rebuild(const Tensors& tensors) const {
    positions_.clear();
    positions_.reserve(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) positions_.emplace(tensors[i].name, i);  // the first of a name wins
    data_ = tensors.data();
    size_ = tensors.size();
  }
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, std::size_t> positions_;  // (copies: a view would dangle after a rename)
  mutable const void* data_ = nullptr;
  mutable std::size_t size_ = 0;
};

}  // namespace detail_safetensors

/// A whole file: tensors in data-buffer order (empty tensors at one offset by name) and the
/// string-to-string "__metadata__".
struct safetensors_file {
  std::vector<safetensors_tensor> tensors;
  std::map<std::string, std::string> metadata;

  /// The tensor named `name`, or nullptr. Constant time: a name index (built on first use, in
  /// time linear in the tensor count) replaces a scan per lookup, which made readers quadratic
  /// (issue 34: 10,000 quantized weights took 17 s to inspect). The index follows tensors appended
  /// or removed; a tensor renamed in place (nothing in the library does so) is found under its new
  /// name only once the vector shrinks or reallocates: look such a file up through a copy.
  const safetensors_tensor* find(std::string_view name) const {
    if (tensors.size() <= 16) {  // (a scan is as fast, and needs no index)
      for (const auto& t : tensors)
        if (t.name == name) return &t;
      return nullptr;
    }
    return name_index_.find(tensors, name);
  }
  /// The tensor named `name`; throws invalid_argument naming the tensors there are otherwise.
  const safetensors_tensor& at(std::string_view name) const {
    if (const auto* t = find(name)) return *t;
    // The first few names only: a file may hold a million.
    std::string known;
    std::size_t listed = 0;
    for (const auto& t : tensors) {
      if (listed == 8) {
        known += ", ... " + std::to_string(tensors.size() - listed) + " more";
        break;
      }
      known += (known.empty() ? "" : ", ") + clip_for_message(t.name);
      ++listed;
    }
    throw error(errc::invalid_argument, "safetensors: no tensor named '" + clip_for_message(name) +
                                            "' (the file has: " + (known.empty() ? std::string("none") : known) + ")");
  }
  /// Appends a tensor after checking its name is new and its byte count matches shape x dtype.
  void add(safetensors_tensor tensor);

  detail_safetensors::name_index name_index_;  ///< find's index (internal; copies start empty)
};

/// Largest header accepted (the reference implementation's limit is also 100 MB).
inline constexpr std::uint64_t safetensors_max_header_bytes = 100'000'000;

namespace detail_safetensors {

/// shape -> element count * element size (at most 8 * 2^40); throws `code` with `what` for a
/// negative shape or one above nvfp4::max_element_count.
inline std::uint64_t byte_size(std::span<const std::int64_t> shape, std::size_t element_size, errc code, const std::string& what) {
  return static_cast<std::uint64_t>(detail::checked_element_count(shape, code, what)) * element_size;
}

using detail::shape_text;

/// A JSON value that must be an integer in [0, max]: checked on the parsed JSON number, before
/// any conversion (a double such as 32.5 or 1.9e19 is refused, never truncated or cast).
inline std::optional<std::uint64_t> exact_unsigned(const nlohmann::json& value, std::uint64_t max) {
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<std::int64_t>() >= 0)) return std::nullopt;
  const std::uint64_t v = value.is_number_unsigned() ? value.get<std::uint64_t>() : static_cast<std::uint64_t>(value.get<std::int64_t>());
  if (v > max) return std::nullopt;
  return v;
}

/// A JSON value as text for messages (non-ASCII escaped, never throwing, clipped to
/// message_echo_max bytes).
inline std::string json_text(const nlohmann::json& value) { return json_for_message(value); }

/// Parses `text` as JSON more strictly than nlohmann does by default, within io/json_limits.hpp's
/// bounds: a NUL byte, nesting deeper than json_max_depth, a key repeated within one object (where
/// nlohmann keeps the last silently) and invalid JSON are malformed_file. `what` starts the
/// messages ("x.safetensors: the safetensors header"). Linear in the text's size.
inline nlohmann::json parse_strict_json(std::string_view text, const std::string& what) {
  return parse_json_bounded<nlohmann::json>(text, what, duplicate_keys::refuse);
}

inline std::uint64_t read_u64_le(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

struct header_entry {
  std::string name;
  safetensors_dtype dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin;
  std::uint64_t end;
};

/// One member of the header checked: "__metadata__" into `metadata`, a tensor's description into
/// an entry appended to `entries` (every field typed and in range, its byte range inside the
/// buffer and of the size its shape and dtype need). Throws malformed_file (unsupported for an
/// unknown dtype) naming the tensor.
inline void check_header_member(const std::string& key, const nlohmann::json& value, std::uint64_t buffer_size,
                                std::vector<header_entry>& entries, std::map<std::string, std::string>& metadata, const std::string& file) {
  auto fail = [&](const std::string& what) -> void { throw error(errc::malformed_file, file + ": " + what); };
  if (key == "__metadata__") {
    if (!value.is_object()) fail("__metadata__ is not an object");
    for (const auto& [meta_key, meta_value] : value.items()) {
      if (!meta_value.is_string()) fail("__metadata__ value of '" + clip_for_message(meta_key) + "' is not a string");
      metadata[meta_key] = meta_value.get<std::string>();
    }
    return;
  }
  const std::string where = "tensor '" + clip_for_message(key) + "'";
  if (!value.is_object()) fail(where + " is not described by an object");
  const auto dtype_it = value.find("dtype");
  const auto shape_it = value.find("shape");
  const auto offsets_it = value.find("data_offsets");
  if (dtype_it == value.end() || !dtype_it->is_string()) fail(where + " has no string 'dtype'");
  if (shape_it == value.end() || !shape_it->is_array()) fail(where + " has no 'shape' array");
  if (offsets_it == value.end() || !offsets_it->is_array() || offsets_it->size() != 2) fail(where + " has no 'data_offsets' pair");
  header_entry entry;
  entry.name = key;
  const auto dtype_name = dtype_it->get<std::string>();
  const auto dtype = parse_safetensors_dtype(dtype_name);
  if (!dtype)
    throw error(errc::unsupported, file + ": " + where + " has dtype '" + clip_for_message(dtype_name) + "', which is not supported");
  entry.dtype = *dtype;
  for (const auto& d : *shape_it) {
    const auto dimension = exact_unsigned(d, static_cast<std::uint64_t>(max_element_count));
    if (!dimension) fail(where + " has shape entry " + json_text(d) + ", not an integer in [0, " + std::to_string(max_element_count) + "]");
    entry.shape.push_back(static_cast<std::int64_t>(*dimension));
  }
  std::uint64_t offsets[2];
  for (int i = 0; i < 2; ++i) {
    const auto offset = exact_unsigned((*offsets_it)[static_cast<std::size_t>(i)], std::numeric_limits<std::uint64_t>::max());
    if (!offset) fail(where + " has data offset " + json_text((*offsets_it)[static_cast<std::size_t>(i)]) + ", not a non-negative integer");
    offsets[i] = *offset;
  }
  entry.begin = offsets[0];
  entry.end = offsets[1];
  if (entry.begin > entry.end)
    fail(where + " has data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) + "] that run backwards");
  if (entry.end > buffer_size)
    fail(where + " ends at byte " + std::to_string(entry.end) + " of a " + std::to_string(buffer_size) +
         "-byte data buffer (truncated file?)");
  const std::uint64_t expected = byte_size(entry.shape, safetensors_dtype_size(entry.dtype), errc::malformed_file, file + ": " + where);
  if (expected != entry.end - entry.begin)
    fail(where + ": shape " + shape_text(entry.shape) + " of " + dtype_name + " needs " + std::to_string(expected) +
         " bytes, data_offsets span " + std::to_string(entry.end - entry.begin));
  entries.push_back(std::move(entry));
}

/// Parses and checks a safetensors header (`text`, the JSON after the length prefix) against a
/// data buffer of `buffer_size` bytes; returns the entries sorted by offset (empty tensors at the
/// same offset by name) and fills `metadata`.
/// The JSON is parsed once, each member checked as the parser hands it over and then dropped, so
/// the header's document is never held whole (a 10^6-tensor header held about 1 GB as one);
/// when several members are wrong, the error is that of the first in key order, as a check of
/// the whole parsed object (a std::map) in its order gives; invalid JSON is reported before any.
inline std::vector<header_entry> parse_header(std::string_view text, std::uint64_t buffer_size,
                                              std::map<std::string, std::string>& metadata, const std::string& file) {
  std::vector<header_entry> entries;
  std::string first_bad_key;
  std::exception_ptr first_bad;
  const auto check_member = [&](std::string&& key, nlohmann::json&& value) {
    if (first_bad && key >= first_bad_key) return;  // (the error stands; the rest of the text is still parsed)
    try {
      check_header_member(key, value, buffer_size, entries, metadata, file);
    } catch (const error&) {
      first_bad_key = std::move(key);
      first_bad = std::current_exception();
    }
  };
  const nlohmann::json rest =
      parse_json_bounded<nlohmann::json>(text, file + ": the safetensors header", duplicate_keys::refuse, check_member);
  if (!rest.is_object()) throw error(errc::malformed_file, file + ": the safetensors header is not a JSON object");
  if (first_bad) std::rethrow_exception(first_bad);
  // Buffer order; empty tensors at one offset (the only ties) by name, whatever the header's order.
  std::sort(entries.begin(), entries.end(), [](const header_entry& a, const header_entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end != b.end ? a.end < b.end : a.name < b.name;
  });
  // The tensors must tile the buffer exactly: no overlap, no gap, nothing left over.
  auto fail = [&](const std::string& what) -> void { throw error(errc::malformed_file, file + ": " + what); };
  std::uint64_t covered = 0;
  for (const auto& e : entries) {
    if (e.begin < covered) fail("tensor '" + clip_for_message(e.name) + "' overlaps the tensor before it in the data buffer");
    if (e.begin > covered)
      fail("bytes " + std::to_string(covered) + ".." + std::to_string(e.begin) + " of the data buffer belong to no tensor");
    covered = e.end;
  }
  if (covered != buffer_size)
    fail("the data buffer has " + std::to_string(buffer_size - covered) + " trailing bytes that belong to no tensor");
  return entries;
}

/// The header length of a safetensors image of `size` bytes whose first min(size, 8) bytes are
/// `prefix`, checked: malformed_file for an .npy image (saying so), a short file, a length above
/// safetensors_max_header_bytes or past the end of the file.
inline std::uint64_t header_length(const std::uint8_t* prefix, std::uint64_t size, const std::string& name) {
  if (size >= 6 && std::memcmp(prefix, "\x93NUMPY", 6) == 0)
    throw error(errc::malformed_file, name + ": this is an .npy file, not a safetensors file");
  if (size < 8) throw error(errc::malformed_file, name + ": " + std::to_string(size) + " bytes is too short for a safetensors file");
  const std::uint64_t header_size = read_u64_le(prefix);
  if (header_size > safetensors_max_header_bytes)
    throw error(errc::malformed_file, name + ": safetensors header of " + std::to_string(header_size) + " bytes exceeds the limit of " +
                                          std::to_string(safetensors_max_header_bytes));
  if (header_size > size - 8)
    throw error(errc::malformed_file, name + ": safetensors header of " + std::to_string(header_size) + " bytes runs past the end of the " +
                                          std::to_string(size) + "-byte file");
  return header_size;
}

}  // namespace detail_safetensors

inline void safetensors_file::add(safetensors_tensor tensor) {
  detail::require(!tensor.name.empty() && tensor.name != "__metadata__", errc::invalid_argument,
                  "safetensors: '" + tensor.name + "' is not a usable tensor name");
  detail::require(find(tensor.name) == nullptr, errc::invalid_argument,
                  "safetensors: a tensor named '" + tensor.name + "' is already in the file");
  const auto expected = detail_safetensors::byte_size(tensor.shape, safetensors_dtype_size(tensor.dtype), errc::invalid_argument,
                                                      "safetensors: tensor '" + tensor.name + "'");
  detail::require(expected == tensor.bytes.size(), errc::shape_mismatch,
                  "safetensors: tensor '" + tensor.name + "' has " + std::to_string(tensor.bytes.size()) + " bytes for shape " +
                      detail_safetensors::shape_text(tensor.shape) + " of " + std::string(safetensors_dtype_name(tensor.dtype)));
  tensors.push_back(std::move(tensor));
}

/// Parses a safetensors image held in memory. `name` is used in error messages. Throws
/// malformed_file for an .npy image (saying so), a short file, a header length past the file or
/// above safetensors_max_header_bytes, invalid JSON, a NUL byte in the header, a key repeated in
/// one object (a tensor name, "__metadata__", a field), missing or mistyped fields, a shape entry
/// that is not an integer in [0, 2^40] or a shape above nvfp4::max_element_count, a shape whose
/// byte size differs from its data_offsets span, offsets outside the buffer, overlapping tensors
/// or bytes no tensor covers; unsupported for an unknown dtype.
inline safetensors_file parse_safetensors(const std::uint8_t* image, std::size_t size, const std::string& name = "<memory>") {
  const std::uint64_t header_size = detail_safetensors::header_length(image, size, name);
  const std::string_view header_text(reinterpret_cast<const char*>(image + 8), header_size);
  safetensors_file file;
  const std::uint64_t buffer_size = size - 8 - header_size;
  const auto entries = detail_safetensors::parse_header(header_text, buffer_size, file.metadata, name);
  const std::uint8_t* buffer = image + 8 + header_size;
  file.tensors.reserve(entries.size());
  for (const auto& e : entries) {
    safetensors_tensor t;
    t.name = e.name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    t.bytes.assign(buffer + e.begin, buffer + e.end);
    file.tensors.push_back(std::move(t));
  }
  return file;
}

/// Reads a safetensors file; throws io_error when it cannot be read, else as parse_safetensors.
inline safetensors_file read_safetensors(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> image = read_file_bytes(path);
  return parse_safetensors(image.data(), image.size(), path.string());
}

/// A tensor as a safetensors header describes it (its byte count follows from dtype and shape):
/// what a header is written from before the data exists (write_safetensors_streamed).
struct safetensors_description {
  std::string name;
  safetensors_dtype dtype = safetensors_dtype::f32;
  std::vector<std::int64_t> shape;
};

/// The header JSON and its 8-byte length prefix for tensors laid out in the given order, with
/// `metadata` as "__metadata__" (left out when empty). The header is padded with spaces to a
/// multiple of 8 bytes so the buffer starts aligned. Throws invalid_argument for a name that is
/// empty, "__metadata__", used twice or not valid UTF-8, or a shape above max_element_count.
inline std::vector<std::uint8_t> serialize_safetensors_header(std::span<const safetensors_description> tensors,
                                                              const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  // Entries are appended to the ordered map's vector directly, uniqueness kept by a hash set:
  // ordered_json's own insert scans the map, quadratic in the tensor count.
  auto& entries = header.get_ref<nlohmann::ordered_json::object_t&>();
  entries.reserve(tensors.size() + 1);
  std::unordered_set<std::string_view> names;
  names.reserve(tensors.size());
  if (!metadata.empty()) entries.emplace_back("__metadata__", metadata);
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    const auto bytes = detail_safetensors::byte_size(t.shape, safetensors_dtype_size(t.dtype), errc::invalid_argument,
                                                     "safetensors: tensor '" + t.name + "'");
    detail::require(!t.name.empty() && t.name != "__metadata__", errc::invalid_argument,
                    "safetensors: '" + t.name + "' is not a usable tensor name (empty, or the header's own key)");
    detail::require(names.insert(t.name).second, errc::invalid_argument,
                    "safetensors: tensor name '" + clip_for_message(t.name) + "' is used twice");
    entries.emplace_back(t.name, nlohmann::ordered_json{{"dtype", std::string(safetensors_dtype_name(t.dtype))},
                                                        {"shape", t.shape},
                                                        {"data_offsets", {offset, offset + bytes}}});
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception&) {
    throw error(errc::invalid_argument, "safetensors: a tensor name or metadata string is not valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::uint8_t> out(8 + text.size());
  const std::uint64_t length = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(length >> (8 * i));
  std::copy(text.begin(), text.end(), out.begin() + 8);
  return out;
}

/// The header JSON and its 8-byte length prefix for `file`, tensors laid out in their order.
/// Throws shape_mismatch for a tensor whose bytes do not fit its shape, and as above.
inline std::vector<std::uint8_t> serialize_safetensors_header(const safetensors_file& file) {
  std::vector<safetensors_description> tensors;
  tensors.reserve(file.tensors.size());
  for (const auto& t : file.tensors) {
    const auto expected = detail_safetensors::byte_size(t.shape, safetensors_dtype_size(t.dtype), errc::invalid_argument,
                                                        "safetensors: tensor '" + t.name + "'");
    detail::require(expected == t.bytes.size(), errc::shape_mismatch,
                    "safetensors: tensor '" + t.name + "' has " + std::to_string(t.bytes.size()) + " bytes for shape " +
                        detail_safetensors::shape_text(t.shape));
    tensors.push_back({t.name, t.dtype, t.shape});
  }
  return serialize_safetensors_header(tensors, file.metadata);
}

/// The whole file as bytes.
inline std::vector<std::uint8_t> serialize_safetensors(const safetensors_file& file) {
  std::vector<std::uint8_t> out = serialize_safetensors_header(file);
  for (const auto& t : file.tensors) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

/// Writes a safetensors file of the described tensors, their bytes handed by `produce` to its
/// sink in the same order, atomically (write_file_atomically's streamed form): a file of any size
/// is written holding one piece at a time. Throws as serialize_safetensors_header (before
/// anything is written), shape_mismatch when the bytes handed over are not exactly what the
/// shapes need, and what `produce` throws; nothing is written then.
inline void write_safetensors_streamed(const std::filesystem::path& path, std::span<const safetensors_description> tensors,
                                       const std::map<std::string, std::string>& metadata,
                                       const std::function<void(const byte_sink&)>& produce) {
  const std::vector<std::uint8_t> header = serialize_safetensors_header(tensors, metadata);
  std::uint64_t expected = 0;
  for (const auto& t : tensors)
    expected += detail_safetensors::byte_size(t.shape, safetensors_dtype_size(t.dtype), errc::invalid_argument, t.name);
  write_file_atomically(path, [&](const byte_sink& sink) {
    sink(header);
    std::uint64_t written = 0;
    produce([&](std::span<const std::uint8_t> bytes) {
      written += bytes.size();
      detail::require(written <= expected, errc::shape_mismatch, "write_safetensors_streamed: more bytes than the tensors hold");
      sink(bytes);
    });
    detail::require(written == expected, errc::shape_mismatch,
                    "write_safetensors_streamed: " + std::to_string(written) + " bytes for tensors of " + std::to_string(expected));
  });
}

/// Writes a safetensors file atomically (temporary file + rename): either the whole file appears
/// or `path` is left as it was. Throws shape_mismatch / invalid_argument for an inconsistent
/// tensor (before anything is written), io_error when writing fails.
inline void write_safetensors(const std::filesystem::path& path, const safetensors_file& file) {
  const std::vector<std::uint8_t> header = serialize_safetensors_header(file);
  std::vector<std::span<const std::uint8_t>> parts;
  parts.emplace_back(header);
  for (const auto& t : file.tensors) parts.emplace_back(t.bytes);
  write_file_atomically(path, std::span<const std::span<const std::uint8_t>>(parts));
}

}  // namespace nvfp4::io
