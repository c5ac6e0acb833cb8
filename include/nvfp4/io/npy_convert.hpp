// nvfp4/io/npy_convert.hpp: an npy_array's elements as float32 (float16, bfloat16 and float64
// decoded; raw 2-byte data relabelled as bfloat16), its bytes in C order, the matrix shape it is
// seen as, and a float32 array made from values.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/io/npy_array.hpp"

namespace nvfp4::io {

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
