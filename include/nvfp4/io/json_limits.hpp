// nvfp4/io/json_limits.hpp: the bounds every reader puts on what a file can make it do: JSON
// nested at most json_max_depth levels (the parse stops at the first level deeper, so no tree that
// deep is ever built and no recursion in nlohmann's copy, compare or dump can run deep), JSON
// parsed in one pass in time linear in its size, and
// file contents echoed into an error message clipped to message_echo_max bytes, so that a message
// stays short whatever the input (docs/errors.md, "Limits").
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
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

/// How parse_json_bounded treats a key repeated within one object.
enum class duplicate_keys { refuse, keep_last };

namespace detail_json {

/// The SAX handler behind parse_json_bounded: builds the document in one pass over the text, in
/// time linear in its size, and stops at the first level deeper than json_max_depth or (refuse)
/// the first key repeated within one object. nlohmann's own DOM parser inserts each key through
/// the object's operator[], which for ordered_json scans the object: quadratic in its entries
/// (issue 39: an index of 80,000 entries took 117 s). Here a key goes to the end of the ordered
/// object's vector, repeats found through a hash index of that object's keys; for nlohmann::json
/// (a std::map) through the map itself. With `on_root_member` set, each member of a root object
/// is handed over as soon as it is complete instead of being stored (a reader that checks entry
/// by entry then never holds the whole document); under keep_last a repeated root key is handed
/// over again.
template <class Json>
class bounded_dom_builder {
 public:
  using object_t = typename Json::object_t;
  using string_t = typename Json::string_t;
  /// Whether objects keep insertion order (ordered_json): their own find is a scan.
  static constexpr bool ordered =
      std::is_base_of_v<std::vector<typename object_t::value_type, typename object_t::allocator_type>, object_t>;
  using member_callback = std::function<void(string_t&& key, Json&& value)>;

  bounded_dom_builder(duplicate_keys duplicates, member_callback on_root_member)
      : keep_last_(duplicates == duplicate_keys::keep_last), on_root_member_(std::move(on_root_member)) {}

  bool too_deep = false;
  bool has_duplicate = false;
  string_t duplicate;  ///< the first key repeated within one object (refuse)
  Json root;

  bool null() { return value(Json(nullptr)); }
  bool boolean(bool v) { return value(Json(v)); }
  bool number_integer(typename Json::number_integer_t v) { return value(Json(v)); }
  bool number_unsigned(typename Json::number_unsigned_t v) { return value(Json(v)); }
  bool number_float(typename Json::number_float_t v, const string_t&) { return value(Json(v)); }
  bool string(string_t& v) { return value(Json(std::move(v))); }
  bool binary(typename Json::binary_t& v) { return value(Json::binary(typename Json::binary_t::container_type(v))); }
  bool start_object(std::size_t) { return open(Json(Json::value_t::object)); }
  bool start_array(std::size_t) { return open(Json(Json::value_t::array)); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

  bool key(string_t& k) {
    level& top = levels_.back();
    top.slot.reset();
    bool seen = false;
    if (handing_over()) {
      seen = !top.handed_keys.insert(k).second;
    } else if constexpr (ordered) {
      const auto it = top.positions.find(k);
      seen = it != top.positions.end();
      if (seen) top.slot = it->second;
    } else {
      seen = top.container->template get_ref<object_t&>().contains(k);
    }
    if (seen && !keep_last_) {
      has_duplicate = true;
      duplicate = k;
      return false;
    }
    top.key = std::move(k);
    return true;
  }

 private:
  struct level {
    Json* container = nullptr;
    bool hand_over_at_close = false;                      ///< a root member built on its own, handed over when it closes
    string_t key;                                         ///< objects: the key whose value comes next
    std::optional<std::size_t> slot;                      ///< ordered objects, keep_last: where that key already is
    std::unordered_map<string_t, std::size_t> positions;  ///< ordered objects: key -> index
    std::unordered_set<string_t> handed_keys;             ///< a root object handed over: its keys
  };

  /// Whether the next value is a member of a root object whose members are handed over.
  bool handing_over() const { return levels_.size() == 1 && on_root_member_ && levels_.front().container->is_object(); }

  /// Puts v where the innermost open container wants it; returns where it now lives.
  Json* place(Json&& v) {
    if (levels_.empty()) {
      root = std::move(v);
      return &root;
    }
    level& top = levels_.back();
    Json& parent = *top.container;
    if (parent.is_array()) {
      auto& items = parent.template get_ref<typename Json::array_t&>();
      items.push_back(std::move(v));
      return &items.back();
    }
    auto& members = parent.template get_ref<object_t&>();
    if constexpr (ordered) {
      if (top.slot) {  // keep_last: the new value replaces the old one in its place (Python's dict)
        Json& kept = (members.begin() + static_cast<std::ptrdiff_t>(*top.slot))->second;  // (ordered_map hides the vector's [])
        kept = std::move(v);
        return &kept;
      }
      top.positions.emplace(top.key, members.size());
      members.emplace_back(std::move(top.key), std::move(v));  // the vector's own append: no scan
      return &members.back().second;
    } else {
      Json& slot = members[std::move(top.key)];
      slot = std::move(v);
      return &slot;
    }
  }

  bool value(Json&& v) {
    if (handing_over())
      on_root_member_(std::move(levels_.back().key), std::move(v));
    else
      place(std::move(v));
    return true;
  }

  bool open(Json&& container) {
    if (static_cast<int>(levels_.size()) >= json_max_depth) {
      too_deep = true;
      return false;
    }
    if (handing_over()) {
      pending_key_ = std::move(levels_.back().key);
      pending_ = std::move(container);
      levels_.emplace_back();
      levels_.back().container = &pending_;
      levels_.back().hand_over_at_close = true;
      return true;
    }
    Json* where = place(std::move(container));
    levels_.emplace_back();
    levels_.back().container = where;
    return true;
  }

  bool close() {
    const bool hand_over = levels_.back().hand_over_at_close;
    levels_.pop_back();
    if (hand_over) {
      on_root_member_(std::move(pending_key_), std::move(pending_));
      pending_ = Json();
    }
    return true;
  }

  bool keep_last_;
  member_callback on_root_member_;
  std::vector<level> levels_;
  string_t pending_key_;
  Json pending_;
};

/// The SAX handler behind scan_json_bounded: builds nothing, stops at the first level deeper than
/// json_max_depth, and hands each key over with the depth of the object it is in.
struct key_scanner {
  const std::function<void(int depth, const std::string& key)>& on_key;
  int depth = 0;
  bool too_deep = false;

  bool open() {
    too_deep = ++depth > json_max_depth;
    return !too_deep;
  }
  bool close() {
    --depth;
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
    on_key(depth, k);
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }
};

}  // namespace detail_json

/// Checks `text` as parse_json_bounded does (a NUL byte, nesting, validity, with its messages;
/// repeated keys are not looked for) without building anything: `on_key(depth, key)` sees every
/// key, `depth` 1 for the root object's own. For a look at a document's keys (which format a
/// header is) at the cost of one pass and no allocation per value.
inline void scan_json_bounded(std::string_view text, const std::string& what,
                              const std::function<void(int depth, const std::string& key)>& on_key) {
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw error(errc::malformed_file, what + " holds a NUL byte at offset " + std::to_string(nul));
  detail_json::key_scanner scanner{on_key};
  const bool parsed = nlohmann::json::sax_parse(text.begin(), text.end(), &scanner, nlohmann::json::input_format_t::json, /*strict=*/true);
  if (scanner.too_deep) throw error(errc::malformed_file, what + " nests JSON deeper than " + std::to_string(json_max_depth) + " levels");
  if (!parsed) throw error(errc::malformed_file, what + " is not valid JSON");
}

/// Parses `text` as JSON (a nlohmann::json or ordered_json) within the limits above, in one pass
/// and in time linear in its size: malformed_file, starting with `what` ("x.safetensors: the
/// safetensors header"), for a NUL byte (which would end nlohmann's input early, hiding what
/// follows), nesting deeper than json_max_depth, invalid JSON, and (duplicate_keys::refuse) a key
/// repeated in one object. keep_last reads a repeated key as Python's json module does (configs
/// written by hand): the last value, in the first one's place.
/// With `on_root_member`, a root object's members are passed to it one by one as they complete
/// (the object returned is then empty); a reader that checks each entry so never holds the
/// whole document. What the callback throws propagates.
template <class Json = nlohmann::json>
Json parse_json_bounded(std::string_view text, const std::string& what, duplicate_keys duplicates = duplicate_keys::refuse,
                        typename detail_json::bounded_dom_builder<Json>::member_callback on_root_member = nullptr) {
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw error(errc::malformed_file, what + " holds a NUL byte at offset " + std::to_string(nul));
  detail_json::bounded_dom_builder<Json> builder(duplicates, std::move(on_root_member));
  const bool parsed = Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json, /*strict=*/true);
  if (builder.too_deep) throw error(errc::malformed_file, what + " nests JSON deeper than " + std::to_string(json_max_depth) + " levels");
  if (builder.has_duplicate)
    throw error(errc::malformed_file, what + " has the key '" + clip_for_message(builder.duplicate) + "' twice in one object");
  if (!parsed) throw error(errc::malformed_file, what + " is not valid JSON");
  return std::move(builder.root);
}

}  // namespace nvfp4::io
