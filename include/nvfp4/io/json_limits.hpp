// nvfp4/io/json_limits.hpp: the bounds every reader puts on what a file can make it do: JSON
// nested at most json_max_depth levels (checked before any tree is built, so no recursion in
// nlohmann's copy, compare or dump can run deep), JSON parsed in time linear in its size, and
// file contents echoed into an error message clipped to message_echo_max bytes, so that a message
// stays short whatever the input (docs/errors.md, "Limits").
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "nvfp4/error.hpp"

namespace nvfp4::io {

/// Deepest JSON nesting a reader accepts (arrays and objects together). Our own headers and
/// metadata nest 3 levels, Hugging Face configs about 4; 64 leaves room and bounds recursion.
inline constexpr int json_max_depth = 64;

/// Most bytes of file content (a name, a dtype, a JSON value) an error message repeats.
inline constexpr std::size_t message_echo_max = 200;

/// `text` as an error message shows file content: control bytes as '?', and when longer than
/// `max` bytes its first `max` bytes (cut at a UTF-8 character boundary) then "... (N bytes)".
inline std::string clip_for_message(std::string_view text, std::size_t max = message_echo_max) {
  std::size_t keep = text.size();
  if (keep > max) {
    keep = max;
    // Step back over UTF-8 continuation bytes so a character is never cut in two.
    while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  }
  std::string out(text.substr(0, keep));
  for (auto& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = '?';
  if (keep < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

/// A JSON value as an error message shows it: compact, non-ASCII escaped, never throwing, clipped
/// like clip_for_message. Only for values of a JSON parsed by parse_json_bounded (depth bounded).
template <class Json>
std::string json_for_message(const Json& value) {
  return clip_for_message(value.dump(-1, ' ', true, Json::error_handler_t::replace));
}

namespace detail_json {

/// A SAX pass over the text that builds nothing: it stops at the first level deeper than
/// json_max_depth and, when asked, at the first key repeated within one object (nlohmann's DOM
/// parser would keep the last one silently). Linear in the text's size.
struct bounds_checker {
  bool reject_duplicate_keys = true;
  int depth = 0;
  bool too_deep = false;
  std::string duplicate;
  std::vector<std::set<std::string>> keys;  // the keys seen in each open object (empty sets for arrays)

  bool open() {
    if (++depth > json_max_depth) {
      too_deep = true;
      return false;
    }
    keys.emplace_back();
    return true;
  }
  bool close() {
    --depth;
    keys.pop_back();
    return true;
  }
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(std::int64_t) { return true; }
  bool number_unsigned(std::uint64_t) { return true; }
  bool number_float(double, const std::string&) { return true; }
  bool string(std::string&) { return true; }
  bool binary(std::vector<std::uint8_t>&) { return true; }
  bool start_object(std::size_t) { return open(); }
  bool key(std::string& k) {
    if (reject_duplicate_keys && !keys.back().insert(k).second) {
      duplicate = k;
      return false;
    }
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }
};

}  // namespace detail_json

/// How parse_json_bounded treats a key repeated within one object.
enum class duplicate_keys { refuse, keep_last };

/// Parses `text` as JSON (a nlohmann::json or ordered_json) within the limits above, in time
/// linear in its size: malformed_file, starting with `what` ("x.safetensors: the safetensors
/// header"), for a NUL byte (which would end nlohmann's input early, hiding what follows), nesting
/// deeper than json_max_depth, invalid JSON, and (duplicate_keys::refuse) a key repeated in one
/// object. keep_last reads a repeated key as Python's json module does (configs written by hand).
template <class Json = nlohmann::json>
Json parse_json_bounded(std::string_view text, const std::string& what, duplicate_keys duplicates = duplicate_keys::refuse) {
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw error(errc::malformed_file, what + " holds a NUL byte at offset " + std::to_string(nul));
  // Checked first by a pass that builds nothing, then parsed without a callback: nlohmann's
  // callback parser scans the enclosing object at each object's end, quadratic in the number of
  // entries (issue 34: 40,000 tensors took 15 s).
  detail_json::bounds_checker checker;
  checker.reject_duplicate_keys = duplicates == duplicate_keys::refuse;
  const bool checked = Json::sax_parse(text.begin(), text.end(), &checker, nlohmann::json::input_format_t::json, /*strict=*/true);
  if (checker.too_deep)
    throw error(errc::malformed_file, what + " nests JSON deeper than " + std::to_string(json_max_depth) + " levels");
  if (!checker.duplicate.empty())
    throw error(errc::malformed_file, what + " has the key '" + clip_for_message(checker.duplicate) + "' twice in one object");
  if (!checked) throw error(errc::malformed_file, what + " is not valid JSON");
  Json parsed = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) throw error(errc::malformed_file, what + " is not valid JSON");
  return parsed;
}

}  // namespace nvfp4::io
