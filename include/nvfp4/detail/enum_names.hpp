// nvfp4/detail/enum_names.hpp: one name table per enum, and the lookups over it. Each enum's
// table is a specialization of enum_table written beside the enum (in its home header), so the
// checkpoint metadata, the CLI and the Python module spell a value the same way and a new value
// is named in one place.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "nvfp4/error.hpp"

namespace nvfp4::detail {

template <class Enum>
struct enum_entry {
  const char* name;
  Enum value;
};

/// Specialized beside each named enum: `static constexpr enum_entry<Enum> entries[] = {...};`,
/// one entry per value, the spelling files and users write. Aliases a caller also accepts (e.g.
/// "compressed_tensors") stay at that caller, so name_list shows each value once.
template <class Enum>
struct enum_table;

/// The name of `value` ("?" for a value outside the table, which a complete table never meets).
template <class Enum>
constexpr const char* name_of(Enum value) {
  for (const auto& e : enum_table<Enum>::entries)
    if (e.value == value) return e.name;
  return "?";
}

/// The value named `text`, or nothing.
template <class Enum>
constexpr std::optional<Enum> value_of(std::string_view text) {
  for (const auto& e : enum_table<Enum>::entries)
    if (text == e.name) return e.value;
  return std::nullopt;
}

/// "a, b, c": every name, for messages.
template <class Enum>
std::string name_list(std::string_view separator = ", ") {
  std::string out;
  for (const auto& e : enum_table<Enum>::entries) out += (out.empty() ? "" : std::string(separator)) + e.name;
  return out;
}

/// The value named `text`; otherwise an invalid_argument error "<what> must be one of a, b, not 'x'".
template <class Enum>
Enum parse_name(std::string_view text, std::string_view what) {
  if (const auto v = value_of<Enum>(text)) return *v;
  throw error(errc::invalid_argument, std::string(what) + " must be one of " + name_list<Enum>() + ", not '" + std::string(text) + "'");
}

}  // namespace nvfp4::detail
