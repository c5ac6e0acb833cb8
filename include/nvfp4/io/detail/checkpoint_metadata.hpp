// nvfp4/io/detail/checkpoint_metadata.hpp: reading the metadata our quantized checkpoints record
// (exact JSON types, bounded integers, finite amax) and the checks every stored tensor passes
// before it is dequantized; used by io/quantized_checkpoint.hpp.
#pragma once

#include <nlohmann/json.hpp>

#include <cfloat>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/io/safetensors.hpp"

namespace nvfp4::io {

namespace detail_checkpoint {

/// Throws error(code, "tensor '<name>': <what>"): every refusal of a stored quantized tensor.
[[noreturn]] inline void fail(errc code, const std::string& name, const std::string& what) {
  throw error(code, "tensor '" + name + "': " + what);
}

/// Reads the fields of our metadata object with exact types: integers must be JSON integers in
/// range (32.5 or 1.9e19 are refused before any conversion), strings strings, amax a finite
/// number >= 0 within float's range.
class metadata_reader {
 public:
  metadata_reader(const nlohmann::json& meta, const std::string& name) : meta_(meta), name_(name) {}

  const nlohmann::json& field(const char* key) const {
    const auto it = meta_.find(key);
    if (it == meta_.end()) fail(errc::malformed_file, name_, std::string("its metadata lacks '") + key + "'");
    return *it;
  }
  std::string text(const char* key, const char* fallback = nullptr) const {
    if (fallback && !meta_.contains(key)) return fallback;
    const auto& v = field(key);
    if (!v.is_string())
      fail(errc::malformed_file, name_, std::string("metadata '") + key + "' is " + detail_safetensors::json_text(v) + ", not a string");
    return v.get<std::string>();
  }
  std::string choice(const char* key, const char* fallback, std::initializer_list<const char*> allowed) const {
    const std::string v = text(key, fallback);
    for (const char* a : allowed)
      if (v == a) return v;
    fail(errc::malformed_file, name_, std::string("metadata '") + key + "' is '" + v + "', which is not one of ours");
  }
  static std::optional<std::uint64_t> exact(const nlohmann::json& v, std::uint64_t max) {
    return detail_safetensors::exact_unsigned(v, max);
  }
  std::uint64_t integer(const nlohmann::json& v, const std::string& what, std::uint64_t max) const {
    const auto value = exact(v, max);
    if (!value)
      fail(errc::malformed_file, name_,
           "metadata " + what + " is " + detail_safetensors::json_text(v) + ", not an integer in [0, " + std::to_string(max) + "]");
    return *value;
  }
  index_t size(const char* key) const {
    return static_cast<index_t>(integer(field(key), std::string("'") + key + "'", static_cast<std::uint64_t>(max_element_count)));
  }
  std::vector<std::int64_t> sizes(const char* key) const {
    const auto& v = field(key);
    if (!v.is_array()) fail(errc::malformed_file, name_, std::string("metadata '") + key + "' is not an array");
    std::vector<std::int64_t> out;
    for (const auto& d : v)
      out.push_back(
          static_cast<std::int64_t>(integer(d, std::string("'") + key + "' entry", static_cast<std::uint64_t>(max_element_count))));
    return out;
  }
  std::uint64_t seed() const {
    return meta_.contains("seed") ? integer(field("seed"), "'seed'", std::numeric_limits<std::uint64_t>::max()) : 0;
  }
  float amax() const {
    const auto& v = field("amax");
    // The bound is checked on the double, so the conversion to float below is exact or rounds.
    if (!v.is_number() || !(v.get<double>() >= 0.0) || v.get<double>() > static_cast<double>(FLT_MAX))
      fail(errc::malformed_file, name_, "metadata 'amax' is " + detail_safetensors::json_text(v) + ", not a finite number >= 0");
    return static_cast<float>(v.get<double>());
  }

 private:
  const nlohmann::json& meta_;
  const std::string& name_;
};

/// The tensor `tensor_name` must be 2-D with dimensions within the library's limit.
inline void check_2d(const safetensors_tensor& t, const std::string& name) {
  if (t.shape.size() != 2) fail(errc::shape_mismatch, name, t.name + " is " + detail::shape_text(t.shape) + ", not 2-D");
  (void)detail::checked_element_count(t.shape, errc::malformed_file, "tensor '" + name + "': " + t.name);
}

/// The first invalid block scale code of `compact` (row-major [rows, scale_cols]), or nothing.
inline std::optional<std::size_t> first_invalid_scale(std::span<const std::uint8_t> compact, bool e8m0_scales) {
  for (std::size_t i = 0; i < compact.size(); ++i) {
    const std::uint8_t code = compact[i];
    if (e8m0_scales ? code == 0xFF : (code == 0x7F || (code & 0x80) != 0)) return i;
  }
  return std::nullopt;
}

}  // namespace detail_checkpoint

}  // namespace nvfp4::io
