// nvfp4/io/npy.hpp: NumPy .npy files (format versions 1.0, 2.0 and 3.0; little-endian; C or
// Fortran order) read into and written from npy_array (io/npy_array.hpp), a typed byte buffer with
// a shape; its conversions are in io/npy_convert.hpp, included here. Used by the tools and tests;
// the core library does not need it.
#pragma once

#include <algorithm>
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
#include "nvfp4/io/detail/npy_header.hpp"
#include "nvfp4/io/file_bytes.hpp"
#include "nvfp4/io/npy_array.hpp"
#include "nvfp4/io/npy_convert.hpp"

namespace nvfp4::io {

/// True when `image` starts with the .npy magic string.
inline bool looks_like_npy(const std::uint8_t* image, std::size_t size) { return size >= 6 && std::memcmp(image, "\x93NUMPY", 6) == 0; }

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

}  // namespace nvfp4::io
