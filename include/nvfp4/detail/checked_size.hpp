// nvfp4/detail/checked_size.hpp: overflow-checked size arithmetic for every shape that comes from
// a file or a user, and the library's documented size limit (docs/errors.md, "Limits"). Needs
// only the standard library, so every layer (core, io, tools) can use it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "nvfp4/config.hpp"
#include "nvfp4/error.hpp"

namespace nvfp4 {

/// The largest element count, and the largest single dimension, the library accepts for a tensor
/// (2^40, about 1.1e12 elements, 4 TiB of float32). Far above any real tensor, yet low enough
/// that every size derived from an accepted shape (bytes of 8-byte elements, rows padded to 128,
/// FP4 bytes, a GEMM's M * N) fits index_t without overflow. Shapes above it are refused with
/// invalid_argument (from a caller) or malformed_file (from a file) before anything is allocated.
inline constexpr index_t max_element_count = index_t{1} << 40;

namespace detail {

/// a * b for 0 <= a, b, or -1 when the product exceeds `limit` (no overflow on the way).
constexpr index_t bounded_product(index_t a, index_t b, index_t limit = max_element_count) {
  if (a < 0 || b < 0) return -1;
  if (a == 0 || b == 0) return 0;
  if (a > limit / b) return -1;
  return a * b;
}

/// a + b for 0 <= a, b, or -1 when the sum exceeds `limit`.
constexpr index_t bounded_sum(index_t a, index_t b, index_t limit = max_element_count) {
  if (a < 0 || b < 0 || a > limit - b) return -1;
  return a + b;
}

/// "[d0, d1, ...]" for messages; a shape of more than 16 dimensions (read from a file, it may
/// have a million) shows its first 8 and the count, so a message stays short.
inline std::string shape_text(std::span<const std::int64_t> shape) {
  std::string s = "[";
  const std::size_t shown = shape.size() > 16 ? 8 : shape.size();
  for (std::size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shown < shape.size()) s += ", ... (" + std::to_string(shape.size()) + " dimensions)";
  return s + "]";
}

/// The element count of `shape`, checked: every dimension in [0, max_element_count] and the
/// product of the non-zero dimensions at most max_element_count (so any partial product, e.g. the
/// rows of an N-D array seen as a matrix, is bounded too, even when another dimension is 0).
/// Throws nvfp4::error(code, "<what>: ...") otherwise.
inline index_t checked_element_count(std::span<const std::int64_t> shape, errc code, std::string_view what) {
  index_t nonzero = 1;
  bool empty = false;
  for (const std::int64_t d : shape) {
    if (d < 0) throw error(code, std::string(what) + ": shape " + shape_text(shape) + " has a negative dimension");
    if (d > max_element_count)
      throw error(code, std::string(what) + ": dimension " + std::to_string(d) + " of shape " + shape_text(shape) +
                            " exceeds the limit of " + std::to_string(max_element_count) + " (nvfp4::max_element_count)");
    if (d == 0) {
      empty = true;
      continue;
    }
    nonzero = bounded_product(nonzero, d);
    if (nonzero < 0)
      throw error(code, std::string(what) + ": shape " + shape_text(shape) + " has more than " + std::to_string(max_element_count) +
                            " elements (nvfp4::max_element_count)");
  }
  return empty ? 0 : nonzero;
}

/// checked_element_count for a matrix [rows, cols].
inline index_t checked_element_count(index_t rows, index_t cols, errc code, std::string_view what) {
  const std::int64_t shape[] = {rows, cols};
  return checked_element_count(std::span<const std::int64_t>(shape), code, what);
}

}  // namespace detail
}  // namespace nvfp4
