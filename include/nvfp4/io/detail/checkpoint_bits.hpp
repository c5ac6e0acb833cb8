// nvfp4/io/detail/checkpoint_bits.hpp: small helpers of the format-neutral checkpoint
// (io/checkpoint_model.hpp) and its checks and annotation: packed FP4 codes by (row, column), a
// float's bits as hex text and back, a float as %.9g, the error naming where it happened.
#pragma once

#include <nlohmann/json.hpp>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>

#include "nvfp4/error.hpp"
#include "nvfp4/formats/packed_fp4.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"

namespace nvfp4::io {

namespace detail_checkpoint_model {

/// The 4-bit code of element (r, c) of a packed FP4 matrix stored as raw bytes, rows of
/// (cols + 1) / 2 bytes, element 2i in the low nibble (the layout quantized_weight::data holds).
inline std::uint8_t packed_code(std::span<const std::uint8_t> data, index_t cols, index_t r, index_t c) {
  return e2m1x2::from_bits(data[static_cast<std::size_t>(r * ((cols + 1) / 2) + c / 2)])[static_cast<int>(c & 1)].bits();
}

/// Sets element (r, c) of such a matrix to `code` (0-15), leaving its neighbour in the byte alone.
inline void set_packed_code(std::span<std::uint8_t> data, index_t cols, index_t r, index_t c, std::uint8_t code) {
  auto& byte = data[static_cast<std::size_t>(r * ((cols + 1) / 2) + c / 2)];
  byte = e2m1x2::from_bits(byte).with(static_cast<int>(c & 1), e2m1::from_bits(code)).bits();
}

inline std::string hex_bits(float v) {
  char text[16];
  std::snprintf(text, sizeof text, "%08x", std::bit_cast<std::uint32_t>(v));
  return text;
}

inline std::optional<float> parse_hex_bits(const nlohmann::json& j) {
  if (!j.is_string()) return std::nullopt;
  const std::string s = j.get<std::string>();
  if (s.size() != 8 || s.find_first_not_of("0123456789abcdef") != std::string::npos) return std::nullopt;
  return std::bit_cast<float>(static_cast<std::uint32_t>(std::stoul(s, nullptr, 16)));
}

/// A float as printf's %.9g writes it (every float distinguishable).
inline std::string float_text(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(v));
  return text;
}

[[noreturn]] inline void fail(errc code, const std::string& where, const std::string& what) { throw error(code, where + ": " + what); }

}  // namespace detail_checkpoint_model

}  // namespace nvfp4::io
