// nvfp4/io/npy.hpp: NumPy .npy files (format versions 1.0, 2.0 and 3.0; little-endian; C or
// Fortran order) read into and written from npy_array, a typed byte buffer with a shape.
// Used by the tools and tests; the core library does not need it.
#pragma once

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/io/file_bytes.hpp"

namespace nvfp4::io {

/// Element types an .npy file may hold here (the dtype's `descr`).
enum class npy_dtype { float32, float16, bfloat16, float64, uint8, int8, uint16, int16, uint32, int32, int64, uint64, boolean, void2 };

constexpr std::size_t npy_dtype_size(npy_dtype t) {
  switch (t) {
    case npy_dtype::float64:
    case npy_dtype::int64:
    case npy_dtype::uint64:
      return 8;
    case npy_dtype::float32:
    case npy_dtype::uint32:
    case npy_dtype::int32:
      return 4;
    case npy_dtype::float16:
    case npy_dtype::bfloat16:
    case npy_dtype::uint16:
    case npy_dtype::int16:
    case npy_dtype::void2:
      return 2;
    default:
      return 1;
  }
}

/// The descr string NumPy writes for each type. NumPy has no bfloat16: ml_dtypes saves one as
/// "<V2", read here as bfloat16; "|V2" (a plain 2-byte void, e.g. `a.view('V2')`) and "<u2" stay
/// raw until the caller says they hold bfloat16 bits (reinterpret_as_bfloat16).
constexpr std::string_view npy_descr(npy_dtype t) {
  switch (t) {
    case npy_dtype::float32:
      return "<f4";
    case npy_dtype::float16:
      return "<f2";
    case npy_dtype::bfloat16:
      return "<V2";
    case npy_dtype::float64:
      return "<f8";
    case npy_dtype::uint8:
      return "|u1";
    case npy_dtype::int8:
      return "|i1";
    case npy_dtype::uint16:
      return "<u2";
    case npy_dtype::int16:
      return "<i2";
    case npy_dtype::uint32:
      return "<u4";
    case npy_dtype::int32:
      return "<i4";
    case npy_dtype::int64:
      return "<i8";
    case npy_dtype::uint64:
      return "<u8";
    case npy_dtype::boolean:
      return "|b1";
    case npy_dtype::void2:
      return "|V2";
  }
  return "";
}

/// An n-dimensional array as stored in an .npy file: raw little-endian bytes in `fortran_order`
/// or C order.
struct npy_array {
  npy_dtype dtype = npy_dtype::float32;
  std::vector<std::int64_t> shape;
  bool fortran_order = false;
  std::vector<std::uint8_t> bytes;

  /// The product of the shape; invalid_argument for a shape above nvfp4::max_element_count.
  std::int64_t element_count() const { return detail::checked_element_count(shape, errc::invalid_argument, "npy array"); }
  /// The elements as T (its size must match the dtype's; no conversion is done).
  template <class T>
  std::vector<T> as() const {
    detail::require(sizeof(T) == npy_dtype_size(dtype), errc::dtype_mismatch,
                    "npy: element size " + std::to_string(sizeof(T)) + " asked of a " + std::string(npy_descr(dtype)) + " array");
    detail::require(bytes.size() == static_cast<std::size_t>(element_count()) * sizeof(T), errc::shape_mismatch,
                    "npy: " + std::to_string(bytes.size()) + " bytes do not fit the array's shape");
    std::vector<T> out(static_cast<std::size_t>(element_count()));
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
};

/// True when `image` starts with the .npy magic string.
inline bool looks_like_npy(const std::uint8_t* image, std::size_t size) { return size >= 6 && std::memcmp(image, "\x93NUMPY", 6) == 0; }

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

/// What an .npy header says, and where its data starts.
struct npy_header_info {
  npy_dtype dtype = npy_dtype::float32;
  std::vector<std::int64_t> shape;
  bool fortran_order = false;
  std::uint64_t data_offset = 0;  ///< bytes before the data
  std::uint64_t data_bytes = 0;   ///< element count x element size
};

namespace detail_npy {

/// The header length and the prefix before it (10 or 12 bytes) of an .npy image of `size` bytes
/// whose first min(size, 12) bytes are `image`, checked as parse_npy documents.
inline std::pair<std::size_t, std::size_t> header_extent(const std::uint8_t* image, std::uint64_t size, const std::string& name) {
  if (!looks_like_npy(image, static_cast<std::size_t>(std::min<std::uint64_t>(size, 12)))) {
    if (size >= 9 && image[8] == '{')
      throw error(errc::malformed_file, name + ": this is a safetensors file, not an .npy file (bad magic)");
    throw error(errc::malformed_file, name + ": not an .npy file (bad magic)");
  }
  if (size < 10) throw error(errc::malformed_file, name + ": truncated .npy preamble");
  const int major = image[6];
  std::size_t header_len = 0, prefix = 0;
  if (major == 1) {
    header_len = image[8] | (image[9] << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) throw error(errc::malformed_file, name + ": truncated .npy preamble");
    header_len = static_cast<std::size_t>(image[8]) | (static_cast<std::size_t>(image[9]) << 8) |
                 (static_cast<std::size_t>(image[10]) << 16) | (static_cast<std::size_t>(image[11]) << 24);
    prefix = 12;
  } else {
    throw error(errc::unsupported, name + ": .npy format version " + std::to_string(major) + " is not supported");
  }
  if (header_len > size - prefix) throw error(errc::malformed_file, name + ": .npy header runs past the end of the file");
  return {header_len, prefix};
}

/// The header text (`header_len` bytes after the prefix) of an image of `size` bytes, parsed and
/// checked against the size as parse_npy documents.
inline npy_header_info parse_header_text(std::string_view header, std::size_t prefix, std::uint64_t size, const std::string& name) {
  const std::size_t header_len = header.size();
  // The format ends the header with '\n' (after the padding spaces): a length field that is off
  // (too short, it would read header bytes as data) shows here.
  if (header.empty() || header.back() != '\n')
    throw error(errc::malformed_file,
                name + ": .npy header of " + std::to_string(header_len) + " bytes does not end in a newline (wrong header length field?)");
  for (std::size_t i = 0; i + 1 < header.size(); ++i) {
    const auto c = static_cast<unsigned char>(header[i]);
    if (c < 0x20 || c > 0x7E)
      throw error(errc::malformed_file, name + ": .npy header holds byte " + std::to_string(c) + " at offset " +
                                            std::to_string(prefix + i) + " (only printable ASCII is allowed)");
  }
  const auto dict = header_parser(header.substr(0, header.size() - 1), name).parse();
  npy_header_info out;
  out.dtype = parse_descr(dict.descr, name);
  out.fortran_order = dict.fortran_order;
  out.shape = dict.shape;
  const index_t count = detail::checked_element_count(out.shape, errc::malformed_file, name + ": .npy shape");
  out.data_bytes = static_cast<std::uint64_t>(count) * npy_dtype_size(out.dtype);
  out.data_offset = prefix + header_len;
  if (out.data_bytes != size - out.data_offset)
    throw error(errc::malformed_file, name + ": .npy data is " + std::to_string(size - out.data_offset) + " bytes, shape " +
                                          detail::shape_text(out.shape) + " of " + std::string(npy_descr(out.dtype)) + " needs " +
                                          std::to_string(out.data_bytes) +
                                          (out.data_bytes > size - out.data_offset ? " (truncated file)" : " (trailing bytes)"));
  return out;
}

}  // namespace detail_npy

/// The header of an .npy image held in memory, checked as parse_npy checks it, its data not copied.
inline npy_header_info parse_npy_header(const std::uint8_t* image, std::size_t size, const std::string& name = "<memory>") {
  const auto [header_len, prefix] = detail_npy::header_extent(image, size, name);
  return detail_npy::parse_header_text(std::string_view(reinterpret_cast<const char*>(image + prefix), header_len), prefix, size, name);
}

/// The header of an .npy file, read and checked as read_npy checks it, without its data (which
/// starts at data_offset). Throws io_error when the file cannot be read, else as parse_npy.
inline npy_header_info read_npy_header(const file_reader& file) {
  std::uint8_t preamble[12] = {};
  file.read(0, std::min<std::uint64_t>(file.size(), 12), preamble);
  const auto [header_len, prefix] = detail_npy::header_extent(preamble, file.size(), file.path());
  const std::vector<std::uint8_t> header = file.read(prefix, header_len);
  return detail_npy::parse_header_text(std::string_view(reinterpret_cast<const char*>(header.data()), header.size()), prefix, file.size(),
                                       file.path());
}

/// Parses an .npy image held in memory. `name` is used in error messages. Throws
/// malformed_file for a bad magic (saying so when the image is a safetensors file), a header
/// whose length field runs past the file, that does not end in a newline or holds bytes other
/// than printable ASCII, that is not NumPy's dictionary (see detail_npy::header_parser), a shape
/// above nvfp4::max_element_count, or data shorter or longer than the shape needs;
/// unsupported for big-endian, structured or unknown dtypes and format versions other than 1-3.
inline npy_array parse_npy(const std::uint8_t* image, std::size_t size, const std::string& name = "<memory>") {
  const npy_header_info header = parse_npy_header(image, size, name);
  npy_array out;
  out.dtype = header.dtype;
  out.fortran_order = header.fortran_order;
  out.shape = header.shape;
  out.bytes.assign(image + header.data_offset, image + header.data_offset + header.data_bytes);
  return out;
}

/// Reads an .npy file. Throws io_error when it cannot be read, malformed_file / dtype_mismatch /
/// unsupported as parse_npy does.
inline npy_array read_npy(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> image = read_file_bytes(path);
  return parse_npy(image.data(), image.size(), path.string());
}

/// The .npy preamble and header (version 1.0 when the header fits, else 2.0; padded so the data
/// starts at a multiple of 64 bytes) of an array of `dtype` and `shape`; a shape of no dimensions
/// is NumPy's 0-d array, "()". Throws invalid_argument for a shape above max_element_count.
inline std::vector<std::uint8_t> npy_header_bytes(npy_dtype dtype, std::span<const std::int64_t> shape_dims, bool fortran_order = false) {
  (void)detail::checked_element_count(shape_dims, errc::invalid_argument, "serialize_npy");
  std::string shape = "(";
  for (std::size_t i = 0; i < shape_dims.size(); ++i)
    shape += std::to_string(shape_dims[i]) + (shape_dims.size() == 1 || i + 1 < shape_dims.size() ? "," : "");
  if (shape_dims.size() > 1 && shape.back() == ',') shape.pop_back();
  shape += ")";
  std::string header = "{'descr': '" + std::string(npy_descr(dtype)) + "', 'fortran_order': " + (fortran_order ? "True" : "False") +
                       ", 'shape': " + shape + ", }";
  const bool v1 = header.size() + 11 < 65535;
  const std::size_t prefix = v1 ? 10 : 12;
  const std::size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header.push_back('\n');
  std::vector<std::uint8_t> image = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(v1 ? 1 : 2), 0};
  const std::size_t len = header.size();
  image.push_back(static_cast<std::uint8_t>(len & 0xFF));
  image.push_back(static_cast<std::uint8_t>((len >> 8) & 0xFF));
  if (!v1) {
    image.push_back(static_cast<std::uint8_t>((len >> 16) & 0xFF));
    image.push_back(static_cast<std::uint8_t>((len >> 24) & 0xFF));
  }
  image.insert(image.end(), header.begin(), header.end());
  return image;
}

/// Serializes an array as an .npy image (npy_header_bytes, then the data). Throws
/// shape_mismatch when the byte count does not match the shape and dtype.
inline std::vector<std::uint8_t> serialize_npy(const npy_array& array) {
  const auto count = static_cast<std::uint64_t>(detail::checked_element_count(array.shape, errc::invalid_argument, "serialize_npy"));
  detail::require(array.bytes.size() == count * npy_dtype_size(array.dtype), errc::shape_mismatch,
                  "serialize_npy: " + std::to_string(array.bytes.size()) + " bytes for " + std::to_string(count) + " elements of " +
                      std::string(npy_descr(array.dtype)));
  std::vector<std::uint8_t> image = npy_header_bytes(array.dtype, array.shape, array.fortran_order);
  image.insert(image.end(), array.bytes.begin(), array.bytes.end());
  return image;
}

/// Writes an .npy file atomically (temporary file + rename; see file_bytes.hpp): either the whole
/// file appears or `path` is left as it was. Throws io_error or shape_mismatch.
inline void write_npy(const std::filesystem::path& path, const npy_array& array) {
  const auto count = static_cast<std::uint64_t>(detail::checked_element_count(array.shape, errc::invalid_argument, "serialize_npy"));
  detail::require(array.bytes.size() == count * npy_dtype_size(array.dtype), errc::shape_mismatch,
                  "serialize_npy: " + std::to_string(array.bytes.size()) + " bytes for " + std::to_string(count) + " elements of " +
                      std::string(npy_descr(array.dtype)));
  const std::vector<std::uint8_t> header = npy_header_bytes(array.dtype, array.shape, array.fortran_order);
  const std::span<const std::uint8_t> parts[] = {header, array.bytes};  // (no copy of the data into one image)
  write_file_atomically(path, std::span<const std::span<const std::uint8_t>>(parts));
}

/// Where write_float32_npy's values go: each call appends values in C order.
using float_sink = std::function<void(std::span<const float>)>;

/// Writes a float32 C-order .npy file of `shape` whose values `produce` hands to its sink piece by
/// piece, atomically (write_file_atomically's streamed form): an array of any size is written
/// holding one piece at a time. Throws shape_mismatch when the values handed over are not
/// exactly the shape's count (nothing written), and what `produce` throws (nothing written).
inline void write_float32_npy(const std::filesystem::path& path, std::span<const std::int64_t> shape,
                              const std::function<void(const float_sink&)>& produce) {
  const std::vector<std::uint8_t> header = npy_header_bytes(npy_dtype::float32, shape);
  const auto expected = static_cast<std::uint64_t>(detail::checked_element_count(shape, errc::invalid_argument, "write_float32_npy"));
  write_file_atomically(path, [&](const byte_sink& sink) {
    sink(header);
    std::uint64_t written = 0;
    produce([&](std::span<const float> values) {
      written += values.size();
      detail::require(written <= expected, errc::shape_mismatch,
                      "write_float32_npy: more values than the shape " + detail::shape_text(shape) + " holds");
      sink(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(values.data()), values.size_bytes()));
    });
    detail::require(written == expected, errc::shape_mismatch,
                    "write_float32_npy: " + std::to_string(written) + " values for the shape " + detail::shape_text(shape));
  });
}

/// IEEE binary16 bits -> float (exact: every half is a float).
constexpr float half_to_float(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1Fu;
  std::uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0x1F) return nvfp4::detail::bits_float(sign | 0x7F800000u | (mantissa << 13));  // Inf / NaN
  if (exponent != 0) return nvfp4::detail::bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return nvfp4::detail::bits_float(sign);
  // Subnormal half: mantissa * 2^-24, normalised into a float.
  int shift = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  return nvfp4::detail::bits_float(sign | ((113u - static_cast<std::uint32_t>(shift)) << 23) | ((mantissa & 0x3FFu) << 13));
}

/// The array with its bytes in C (row-major) order; a C-order array is returned unchanged.
inline npy_array to_c_order(const npy_array& array) {
  if (!array.fortran_order || array.shape.size() < 2) {
    npy_array out = array;
    out.fortran_order = false;
    return out;
  }
  const std::size_t element = npy_dtype_size(array.dtype);
  const std::size_t count = static_cast<std::size_t>(array.element_count());
  detail::require(array.bytes.size() == count * element, errc::shape_mismatch, "npy: byte count does not fit the array's shape");
  npy_array out = array;
  out.fortran_order = false;
  // Walk the Fortran-order source linearly, keeping the multi-index (first index fastest) and
  // the matching C-order offset (last index fastest) up to date.
  const std::size_t rank = array.shape.size();
  std::vector<std::size_t> c_stride(rank, 1);
  for (std::size_t d = rank - 1; d-- > 0;) c_stride[d] = c_stride[d + 1] * static_cast<std::size_t>(array.shape[d + 1]);
  std::vector<std::int64_t> index(rank, 0);
  std::size_t c_offset = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::memcpy(out.bytes.data() + c_offset * element, array.bytes.data() + i * element, element);
    for (std::size_t d = 0; d < rank; ++d) {
      if (++index[d] < array.shape[d]) {
        c_offset += c_stride[d];
        break;
      }
      c_offset -= static_cast<std::size_t>(index[d] - 1) * c_stride[d];
      index[d] = 0;
    }
  }
  return out;
}

/// How an array is seen as a matrix: a 2-D array as it is, a 1-D array (or a scalar) as one row,
/// an N-D array with its leading dimensions flattened into rows (the last one is the columns).
struct npy_matrix_shape {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

inline npy_matrix_shape matrix_shape_of(const npy_array& array) {
  // Checked first: the leading dimensions' product is then bounded even when the last one is 0.
  (void)detail::checked_element_count(array.shape, errc::invalid_argument, "npy array");
  if (array.shape.empty()) return {1, 1};
  npy_matrix_shape shape{1, array.shape.back()};
  for (std::size_t d = 0; d + 1 < array.shape.size(); ++d) shape.rows *= array.shape[d];
  return shape;
}

/// The array with dtype bfloat16 when it holds raw 2-byte values (|V2, <u2, <i2; already
/// bfloat16 is returned as is): for bfloat16 data saved without a bfloat16 dtype, which NumPy
/// lacks. Throws dtype_mismatch for any other dtype (float16 holds IEEE halves, not bf16 bits).
inline npy_array reinterpret_as_bfloat16(npy_array array) {
  switch (array.dtype) {
    case npy_dtype::bfloat16:
    case npy_dtype::void2:
    case npy_dtype::uint16:
    case npy_dtype::int16:
      array.dtype = npy_dtype::bfloat16;
      return array;
    default:
      throw error(errc::dtype_mismatch, "npy: a " + std::string(npy_descr(array.dtype)) +
                                            " array cannot hold bfloat16 bits (2-byte raw types |V2, <u2, <i2 can)");
  }
}

/// Decodes `count` elements of `dtype` at `bytes` (little-endian) into `out`, as to_float32 does;
/// `first` is the index of the first of them in the whole array (C order), for messages. For a
/// caller that converts an array a piece at a time.
inline void decode_float32(npy_dtype dtype, const std::uint8_t* bytes, std::size_t count, std::size_t first, float* out) {
  switch (dtype) {
    case npy_dtype::float32:
      if (count) std::memcpy(out, bytes, count * 4);
      break;
    case npy_dtype::float16:
    case npy_dtype::bfloat16:
      for (std::size_t i = 0; i < count; ++i) {
        const auto bits = static_cast<std::uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
        out[i] = dtype == npy_dtype::float16 ? half_to_float(bits) : bf16::from_bits(bits).to_float();
      }
      break;
    case npy_dtype::float64: {
      // The doubles that round to a finite float: below FLT_MAX + half its ulp (2^103), the tie
      // rounding to even, which is infinity. Beyond, the conversion is undefined in C++ and the
      // value does not fit: overflow, not "holds Inf" as a later finiteness check would say.
      const double limit = static_cast<double>(FLT_MAX) + 0x1p103;
      for (std::size_t i = 0; i < count; ++i) {
        double v;
        std::memcpy(&v, bytes + 8 * i, 8);
        if (std::isfinite(v) && !(std::fabs(v) < limit))
          throw error(errc::overflow, "npy: float64 element " + std::to_string(first + i) + " (" + detail::number_text(v) +
                                          ", C order) is finite but beyond float32's range");
        out[i] = static_cast<float>(v);
      }
      break;
    }
    case npy_dtype::void2:
    case npy_dtype::uint16:
      throw error(errc::dtype_mismatch, "npy: a " + std::string(npy_descr(dtype)) +
                                            " array is not floating point; if it holds bfloat16 bits, say so (the CLI's "
                                            "--input-dtype bf16, io::reinterpret_as_bfloat16)");
    default:
      throw error(errc::dtype_mismatch, "npy: a " + std::string(npy_descr(dtype)) +
                                            " array is not floating point (float32, float16, bfloat16 or float64 expected)");
  }
}

/// The elements as float32 in C order: float32 as is, float16 and bfloat16 exactly, float64
/// rounded to nearest. Throws dtype_mismatch for any other dtype.
inline std::vector<float> to_float32(const npy_array& source) {
  const bool c_order = !source.fortran_order || source.shape.size() < 2;
  npy_array reordered;
  if (!c_order) reordered = to_c_order(source);  // (a C-order array is read where it is: no copy)
  const npy_array& array = c_order ? source : reordered;
  const std::size_t count = static_cast<std::size_t>(array.element_count());
  detail::require(array.bytes.size() == count * npy_dtype_size(array.dtype), errc::shape_mismatch,
                  "npy: byte count does not fit the array's shape");
  std::vector<float> out(count);
  decode_float32(array.dtype, array.bytes.data(), count, 0, out.data());
  return out;
}

/// A float32 C-order array of the given shape holding `values` (their count must match).
inline npy_array make_float32_array(std::span<const float> values, std::vector<std::int64_t> shape) {
  npy_array out;
  out.dtype = npy_dtype::float32;
  out.shape = std::move(shape);
  detail::require(static_cast<std::size_t>(out.element_count()) == values.size(), errc::shape_mismatch,
                  "make_float32_array: " + std::to_string(values.size()) + " values for a shape of " + std::to_string(out.element_count()) +
                      " elements");
  out.bytes.resize(values.size() * 4);
  if (!values.empty()) std::memcpy(out.bytes.data(), values.data(), out.bytes.size());
  return out;
}

}  // namespace nvfp4::io
