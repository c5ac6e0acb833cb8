// nvfp4/io/npy_array.hpp: npy_array, the typed byte buffer with a shape that an .npy file holds,
// and its element types (npy_dtype, with their sizes and NumPy descr strings). io/npy.hpp reads and
// writes it; io/npy_convert.hpp converts its elements and order.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/error.hpp"

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

}  // namespace nvfp4::io
