// nvfp4/io/detail/npy_header.hpp: the parser of an .npy header's dictionary (NumPy's Python
// literal: 'descr', 'fortran_order', 'shape') and of its descr strings; used by io/npy.hpp.
#pragma once

#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/io/npy_array.hpp"

namespace nvfp4::io {

namespace detail_npy {

/// The header dictionary, as NumPy writes it (a Python literal): {'descr': '<f4',
/// 'fortran_order': False, 'shape': (2, 3), } with either quote style, any spacing, an optional
/// trailing comma; exactly these three keys, each once (as NumPy's own reader demands).
class header_parser {
 public:
  header_parser(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  struct result {
    std::string descr;
    bool fortran_order = false;
    std::vector<std::int64_t> shape;
  };

  result parse() {
    result r;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    skip_spaces();
    expect('{', "the header is not a dictionary");
    skip_spaces();
    while (peek() != '}') {
      const std::string key = quoted_string("a key");
      skip_spaces();
      expect(':', "':' expected after key '" + key + "'");
      skip_spaces();
      if (key == "descr") {
        once(seen_descr, key);
        if (peek() == '[' || peek() == '{')
          throw error(errc::unsupported,
                      file_ + ": structured .npy dtype " + bracketed() + " is not supported (a plain numeric dtype such as '<f4' is)");
        r.descr = quoted_string("the value of 'descr'");
      } else if (key == "fortran_order") {
        once(seen_order, key);
        if (take_word("True"))
          r.fortran_order = true;
        else if (take_word("False"))
          r.fortran_order = false;
        else
          fail("'fortran_order' must be True or False, found " + excerpt());
      } else if (key == "shape") {
        once(seen_shape, key);
        r.shape = shape_tuple();
      } else {
        fail("unexpected key '" + key + "' (an .npy header has exactly 'descr', 'fortran_order' and 'shape')");
      }
      skip_spaces();
      if (peek() == ',') {
        ++at_;
        skip_spaces();
      } else if (peek() != '}') {
        fail("',' or '}' expected, found " + excerpt());
      }
    }
    ++at_;
    skip_spaces();
    if (at_ != text_.size()) fail("text after the header dictionary: " + excerpt());
    if (!seen_descr) fail("the header lacks 'descr'");
    if (!seen_order) fail("the header lacks 'fortran_order'");
    if (!seen_shape) fail("the header lacks 'shape'");
    return r;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw error(errc::malformed_file, file_ + ": .npy " + what); }
  char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
  void skip_spaces() {
    while (at_ < text_.size() && text_[at_] == ' ') ++at_;
  }
  void expect(char c, const std::string& what) {
    if (peek() != c) fail(what);
    ++at_;
  }
  void once(bool& seen, const std::string& key) {
    if (seen) fail("the header names '" + key + "' twice");
    seen = true;
  }
  /// Up to 40 characters from the current position, quoted, for messages.
  std::string excerpt() const {
    if (at_ >= text_.size()) return "the end of the header";
    std::string quoted = "'";  // appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "'" + string
    quoted += text_.substr(at_, 40);
    quoted += text_.size() - at_ > 40 ? "...'" : "'";
    return quoted;
  }
  /// A bracketed value ([...] or {...}) whole, for the structured-dtype message.
  std::string bracketed() const {
    int depth = 0;
    for (std::size_t i = at_; i < text_.size(); ++i) {
      if (text_[i] == '[' || text_[i] == '{' || text_[i] == '(') ++depth;
      if ((text_[i] == ']' || text_[i] == '}' || text_[i] == ')') && --depth == 0) return std::string(text_.substr(at_, i + 1 - at_));
    }
    return std::string(text_.substr(at_));
  }
  bool take_word(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    const std::size_t after = at_ + word.size();
    if (after < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[after])) || text_[after] == '_')) return false;
    at_ = after;
    return true;
  }
  std::string quoted_string(const std::string& what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail(what + " must be a quoted string, found " + excerpt());
    const std::size_t end = text_.find(quote, at_ + 1);
    if (end == std::string_view::npos) fail("unterminated string in " + what);
    std::string value(text_.substr(at_ + 1, end - at_ - 1));
    if (value.find('\\') != std::string::npos) fail(what + " holds an escape sequence: " + excerpt());
    at_ = end + 1;
    return value;
  }
  std::vector<std::int64_t> shape_tuple() {
    expect('(', "'shape' must be a tuple, found " + excerpt());
    std::vector<std::int64_t> shape;
    skip_spaces();
    while (peek() != ')') {
      if (peek() < '0' || peek() > '9') fail("bad 'shape' entry at " + excerpt());
      const std::size_t first_digit = at_;
      std::int64_t d = 0;
      while (peek() >= '0' && peek() <= '9') {
        d = d * 10 + (text_[at_++] - '0');
        // Refused as soon as it passes the limit, long before int64 could overflow.
        if (d > max_element_count) {
          while (peek() >= '0' && peek() <= '9') ++at_;
          fail("shape entry " + std::string(text_.substr(first_digit, at_ - first_digit)) + " exceeds the limit of " +
               std::to_string(max_element_count) + " (nvfp4::max_element_count)");
        }
      }
      if (peek() == 'L') ++at_;  // Python 2 long
      shape.push_back(d);
      skip_spaces();
      if (peek() == ',') {
        ++at_;
        skip_spaces();
      } else if (peek() != ')') {
        fail("',' or ')' expected in 'shape', found " + excerpt());
      }
    }
    ++at_;
    return shape;
  }

  std::string_view text_;
  const std::string& file_;
  std::size_t at_ = 0;
};

inline npy_dtype parse_descr(std::string descr, const std::string& file) {
  if (descr.size() == 3 && descr[0] == '=') descr[0] = '<';
  const npy_dtype all[] = {npy_dtype::float32, npy_dtype::float16, npy_dtype::bfloat16, npy_dtype::float64, npy_dtype::uint8,
                           npy_dtype::int8,    npy_dtype::uint16,  npy_dtype::int16,    npy_dtype::uint32,  npy_dtype::int32,
                           npy_dtype::int64,   npy_dtype::uint64,  npy_dtype::boolean,  npy_dtype::void2};
  for (auto t : all) {
    const std::string_view d = npy_descr(t);
    if (descr == d) return t;
    // One-byte types carry no byte order; some writers put '<' or '>' there anyway.
    if (d[0] == '|' && t != npy_dtype::void2 && descr.size() == 3 && (descr[0] == '<' || descr[0] == '>') && descr.substr(1) == d.substr(1))
      return t;
  }
  if (!descr.empty() && descr[0] == '>') throw error(errc::unsupported, file + ": big-endian .npy data ('" + descr + "') is not supported");
  throw error(errc::unsupported, file + ": .npy dtype '" + descr +
                                     "' is not supported (float32, float16, bfloat16, float64 and "
                                     "the integer types are)");
}

}  // namespace detail_npy

}  // namespace nvfp4::io
