// nvfp4/io/npy.hpp: NumPy .npy files (format versions 1.0, 2.0 and 3.0; little-endian; C or
// Fortran order) read into and written from npy_array, a typed byte buffer with a shape.
// Used by the tools and tests; the core library does not need it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/io/file_bytes.hpp"

namespace nvfp4::io {

/// Element types an .npy file may hold here (the dtype's `descr`).
enum class npy_dtype { float32, float16, bfloat16, float64, uint8, int8, uint16, int16, uint32, int32, int64, uint64, boolean };

constexpr std::size_t npy_dtype_size(npy_dtype t) {
  switch (t) {
    case npy_dtype::float64: case npy_dtype::int64: case npy_dtype::uint64: return 8;
    case npy_dtype::float32: case npy_dtype::uint32: case npy_dtype::int32: return 4;
    case npy_dtype::float16: case npy_dtype::bfloat16: case npy_dtype::uint16: case npy_dtype::int16: return 2;
    default: return 1;
  }
}

/// The descr string NumPy writes for each type ("<V2" has no standard name for bf16; ml_dtypes
/// saves bfloat16 as "<V2", which is accepted only when the caller asks for bfloat16).
constexpr std::string_view npy_descr(npy_dtype t) {
  switch (t) {
    case npy_dtype::float32: return "<f4";
    case npy_dtype::float16: return "<f2";
    case npy_dtype::bfloat16: return "<V2";
    case npy_dtype::float64: return "<f8";
    case npy_dtype::uint8: return "|u1";
    case npy_dtype::int8: return "|i1";
    case npy_dtype::uint16: return "<u2";
    case npy_dtype::int16: return "<i2";
    case npy_dtype::uint32: return "<u4";
    case npy_dtype::int32: return "<i4";
    case npy_dtype::int64: return "<i8";
    case npy_dtype::uint64: return "<u8";
    case npy_dtype::boolean: return "|b1";
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

  std::int64_t element_count() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  /// The elements as T (its size must match the dtype's; no conversion is done).
  template <class T>
  std::vector<T> as() const {
    detail::require(sizeof(T) == npy_dtype_size(dtype), errc::dtype_mismatch,
                    "npy: element size " + std::to_string(sizeof(T)) + " asked of a " +
                        std::string(npy_descr(dtype)) + " array");
    detail::require(bytes.size() == static_cast<std::size_t>(element_count()) * sizeof(T), errc::shape_mismatch,
                    "npy: " + std::to_string(bytes.size()) + " bytes do not fit the array's shape");
    std::vector<T> out(static_cast<std::size_t>(element_count()));
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
};

namespace detail_npy {

inline std::string header_value(const std::string& header, const std::string& key, const std::string& file) {
  const auto at = header.find("'" + key + "'");
  if (at == std::string::npos) throw error(errc::malformed_file, file + ": .npy header lacks '" + key + "'");
  auto colon = header.find(':', at);
  if (colon == std::string::npos) throw error(errc::malformed_file, file + ": .npy header is malformed near '" + key + "'");
  ++colon;
  while (colon < header.size() && header[colon] == ' ') ++colon;
  if (colon >= header.size()) throw error(errc::malformed_file, file + ": .npy header ends after '" + key + "'");
  const char open = header[colon];
  char close = 0;
  if (open == '\'' || open == '"') close = open;
  else if (open == '(') close = ')';
  if (close) {
    const auto end = header.find(close, colon + 1);
    if (end == std::string::npos) throw error(errc::malformed_file, file + ": unterminated value of '" + key + "'");
    return header.substr(colon + 1, end - colon - 1);
  }
  auto end = header.find_first_of(",}", colon);
  if (end == std::string::npos) throw error(errc::malformed_file, file + ": unterminated value of '" + key + "'");
  return header.substr(colon, end - colon);
}

inline npy_dtype parse_descr(std::string descr, const std::string& file) {
  if (descr.size() == 3 && descr[0] == '=') descr[0] = '<';
  const npy_dtype all[] = {npy_dtype::float32, npy_dtype::float16, npy_dtype::bfloat16, npy_dtype::float64,
                           npy_dtype::uint8,   npy_dtype::int8,    npy_dtype::uint16,   npy_dtype::int16,
                           npy_dtype::uint32,  npy_dtype::int32,   npy_dtype::int64,    npy_dtype::uint64,
                           npy_dtype::boolean};
  for (auto t : all) {
    const std::string_view d = npy_descr(t);
    if (descr == d) return t;
    if (d[0] == '|' && descr.size() == 3 && (descr[0] == '<' || descr[0] == '>') && descr.substr(1) == d.substr(1)) return t;
  }
  if (!descr.empty() && descr[0] == '>')
    throw error(errc::unsupported, file + ": big-endian .npy data ('" + descr + "') is not supported");
  throw error(errc::dtype_mismatch, file + ": unsupported .npy dtype '" + descr + "'");
}

inline std::vector<std::int64_t> parse_shape(const std::string& text, const std::string& file) {
  std::vector<std::int64_t> shape;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
    if (i >= text.size()) break;
    if (text[i] < '0' || text[i] > '9') throw error(errc::malformed_file, file + ": bad .npy shape '(" + text + ")'");
    std::int64_t d = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (d > (std::int64_t{1} << 48)) throw error(errc::malformed_file, file + ": .npy dimension too large");
      d = d * 10 + (text[i++] - '0');
    }
    if (i < text.size() && text[i] == 'L') ++i;
    shape.push_back(d);
  }
  return shape;
}

}  // namespace detail_npy

/// Parses an .npy image held in memory. `name` is used in error messages.
inline npy_array parse_npy(const std::uint8_t* image, std::size_t size, const std::string& name = "<memory>") {
  static constexpr char magic[] = "\x93NUMPY";
  if (size < 10 || std::memcmp(image, magic, 6) != 0)
    throw error(errc::malformed_file, name + ": not an .npy file (bad magic)");
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
  const std::string header(reinterpret_cast<const char*>(image + prefix), header_len);
  if (header.find('{') == std::string::npos || header.find('}') == std::string::npos)
    throw error(errc::malformed_file, name + ": .npy header is not a dictionary");
  npy_array out;
  out.dtype = detail_npy::parse_descr(detail_npy::header_value(header, "descr", name), name);
  const std::string order = detail_npy::header_value(header, "fortran_order", name);
  if (order == "True") out.fortran_order = true;
  else if (order != "False") throw error(errc::malformed_file, name + ": bad fortran_order '" + order + "'");
  out.shape = detail_npy::parse_shape(detail_npy::header_value(header, "shape", name), name);
  std::uint64_t count = 1;
  for (auto d : out.shape) {
    if (d != 0 && count > (std::uint64_t{1} << 52) / static_cast<std::uint64_t>(d))
      throw error(errc::malformed_file, name + ": .npy shape is too large");
    count *= static_cast<std::uint64_t>(d);
  }
  const std::uint64_t payload = count * npy_dtype_size(out.dtype);
  const std::size_t data_at = prefix + header_len;
  if (payload > size - data_at)
    throw error(errc::malformed_file, name + ": .npy data is truncated (" + std::to_string(size - data_at) +
                                          " bytes, shape needs " + std::to_string(payload) + ")");
  out.bytes.assign(image + data_at, image + data_at + payload);
  return out;
}

/// Reads an .npy file. Throws io_error when it cannot be read, malformed_file / dtype_mismatch /
/// unsupported as parse_npy does.
inline npy_array read_npy(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> image = read_file_bytes(path);
  return parse_npy(image.data(), image.size(), path.string());
}

/// Serializes an array as an .npy (version 1.0 when the header fits, else 2.0) image. Throws
/// shape_mismatch when the byte count does not match the shape and dtype.
inline std::vector<std::uint8_t> serialize_npy(const npy_array& array) {
  std::uint64_t count = 1;
  for (auto d : array.shape) {
    detail::require(d >= 0, errc::invalid_argument, "serialize_npy: negative dimension");
    count *= static_cast<std::uint64_t>(d);
  }
  detail::require(array.bytes.size() == count * npy_dtype_size(array.dtype), errc::shape_mismatch,
                  "serialize_npy: " + std::to_string(array.bytes.size()) + " bytes for " + std::to_string(count) +
                      " elements of " + std::string(npy_descr(array.dtype)));
  std::string shape = "(";
  for (std::size_t i = 0; i < array.shape.size(); ++i) shape += std::to_string(array.shape[i]) + (array.shape.size() == 1 || i + 1 < array.shape.size() ? "," : "");
  if (array.shape.size() > 1 && shape.back() == ',') shape.pop_back();
  shape += ")";
  std::string header = "{'descr': '" + std::string(npy_descr(array.dtype)) + "', 'fortran_order': " +
                       (array.fortran_order ? "True" : "False") + ", 'shape': " + shape + ", }";
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
  image.insert(image.end(), array.bytes.begin(), array.bytes.end());
  return image;
}

/// Writes an .npy file atomically (temporary file + rename; see file_bytes.hpp): either the whole
/// file appears or `path` is left as it was. Throws io_error or shape_mismatch.
inline void write_npy(const std::filesystem::path& path, const npy_array& array) {
  const std::vector<std::uint8_t> image = serialize_npy(array);
  write_file_atomically(path, image);
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
  detail::require(array.bytes.size() == count * element, errc::shape_mismatch,
                  "npy: byte count does not fit the array's shape");
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
  if (array.shape.empty()) return {1, 1};
  npy_matrix_shape shape{1, array.shape.back()};
  for (std::size_t d = 0; d + 1 < array.shape.size(); ++d) shape.rows *= array.shape[d];
  return shape;
}

/// The elements as float32 in C order: float32 as is, float16 and bfloat16 exactly, float64
/// rounded to nearest. Throws dtype_mismatch for any other dtype.
inline std::vector<float> to_float32(const npy_array& source) {
  const npy_array array = to_c_order(source);
  const std::size_t count = static_cast<std::size_t>(array.element_count());
  detail::require(array.bytes.size() == count * npy_dtype_size(array.dtype), errc::shape_mismatch,
                  "npy: byte count does not fit the array's shape");
  std::vector<float> out(count);
  const std::uint8_t* bytes = array.bytes.data();
  switch (array.dtype) {
    case npy_dtype::float32:
      if (count) std::memcpy(out.data(), bytes, count * 4);
      break;
    case npy_dtype::float16:
    case npy_dtype::bfloat16:
      for (std::size_t i = 0; i < count; ++i) {
        const auto bits = static_cast<std::uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
        out[i] = array.dtype == npy_dtype::float16 ? half_to_float(bits) : bf16::from_bits(bits).to_float();
      }
      break;
    case npy_dtype::float64:
      for (std::size_t i = 0; i < count; ++i) {
        double v;
        std::memcpy(&v, bytes + 8 * i, 8);
        out[i] = static_cast<float>(v);
      }
      break;
    default:
      throw error(errc::dtype_mismatch, "npy: a " + std::string(npy_descr(array.dtype)) +
                                            " array is not floating point (float32, float16, bfloat16 or float64 expected)");
  }
  return out;
}

/// A float32 C-order array of the given shape holding `values` (their count must match).
inline npy_array make_float32_array(std::span<const float> values, std::vector<std::int64_t> shape) {
  npy_array out;
  out.dtype = npy_dtype::float32;
  out.shape = std::move(shape);
  detail::require(static_cast<std::size_t>(out.element_count()) == values.size(), errc::shape_mismatch,
                  "make_float32_array: " + std::to_string(values.size()) + " values for a shape of " +
                      std::to_string(out.element_count()) + " elements");
  out.bytes.resize(values.size() * 4);
  if (!values.empty()) std::memcpy(out.bytes.data(), values.data(), out.bytes.size());
  return out;
}

}  // namespace nvfp4::io
