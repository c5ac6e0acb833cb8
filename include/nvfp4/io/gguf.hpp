// nvfp4/io/gguf.hpp: GGUF files (ggml / llama.cpp) as checkpoints, and the two 4-bit block types.
// The container itself: gguf_format.hpp (types, tensor table), gguf_reader.hpp, gguf_writer.hpp,
// all included here. The blocks: NVFP4 (type 40: 64 elements in 36 bytes, four UE4M3 sub-block
// scales then 32 bytes whose byte 8s+j holds element 16s+j in its low nibble and 16s+j+8 in its
// high one; the tensor scale is a separate F32 tensor "<W>.scale", the activation's
// "<W>.input_scale", as llama.cpp's converter writes them) and MXFP4 (type 39: 32 elements in 17
// bytes, an E8M0 byte then 16 bytes, byte j holding elements j and j+16).
// Layout and sources: docs/formats_and_layouts.md.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/io/checkpoint.hpp"
#include "nvfp4/io/gguf_format.hpp"
#include "nvfp4/io/gguf_reader.hpp"
#include "nvfp4/io/gguf_writer.hpp"
#include "nvfp4/io/json_limits.hpp"

namespace nvfp4::io {

// --- The 4-bit blocks ----------------------------------------------------------------------------

/// NVFP4 weight [rows, cols] (canonical bytes: data [rows, cols/2] low nibble first, compact
/// UE4M3 scales [rows, cols/16]) -> GGUF type-40 blocks, row after row. cols % 64 == 0.
inline std::vector<std::uint8_t> encode_gguf_nvfp4(index_t rows, index_t cols, std::span<const std::uint8_t> data,
                                                   std::span<const std::uint8_t> scales) {
  detail::require(cols % 64 == 0 && rows >= 0, errc::shape_mismatch,
                  "gguf: NVFP4 blocks hold 64 elements; " + std::to_string(cols) + " columns is not a multiple");
  detail::require(data.size() == static_cast<std::size_t>(rows * cols / 2) && scales.size() == static_cast<std::size_t>(rows * cols / 16),
                  errc::shape_mismatch, "gguf: NVFP4 byte counts do not fit the shape");
  std::vector<std::uint8_t> out(static_cast<std::size_t>(rows * (cols / 64) * 36));
  std::size_t o = 0;
  for (index_t r = 0; r < rows; ++r)
    for (index_t b = 0; b < cols / 64; ++b) {
      for (int s = 0; s < 4; ++s) out[o++] = scales[static_cast<std::size_t>(r * (cols / 16) + b * 4 + s)];
      for (int s = 0; s < 4; ++s)
        for (int j = 0; j < 8; ++j) {
          const index_t c0 = b * 64 + s * 16 + j;
          out[o++] = static_cast<std::uint8_t>(detail_checkpoint_model::packed_code(data, cols, r, c0) |
                                               (detail_checkpoint_model::packed_code(data, cols, r, c0 + 8) << 4));
        }
    }
  return out;
}

/// GGUF type-40 blocks -> canonical data and compact scales (the inverse of encode_gguf_nvfp4).
inline void decode_gguf_nvfp4(index_t rows, index_t cols, std::span<const std::uint8_t> blocks, std::vector<std::uint8_t>& data,
                              std::vector<std::uint8_t>& scales) {
  detail::require(cols % 64 == 0 && blocks.size() == static_cast<std::size_t>(rows * (cols / 64) * 36), errc::shape_mismatch,
                  "gguf: NVFP4 block bytes do not fit the shape");
  data.assign(static_cast<std::size_t>(rows * cols / 2), 0);
  scales.assign(static_cast<std::size_t>(rows * cols / 16), 0);
  std::size_t i = 0;
  for (index_t r = 0; r < rows; ++r)
    for (index_t b = 0; b < cols / 64; ++b) {
      for (int s = 0; s < 4; ++s) scales[static_cast<std::size_t>(r * (cols / 16) + b * 4 + s)] = blocks[i++];
      for (int s = 0; s < 4; ++s)
        for (int j = 0; j < 8; ++j) {
          const std::uint8_t byte = blocks[i++];
          const index_t c0 = b * 64 + s * 16 + j;
          detail_checkpoint_model::set_packed_code(data, cols, r, c0, byte & 0xF);
          detail_checkpoint_model::set_packed_code(data, cols, r, c0 + 8, byte >> 4);
        }
    }
}

/// MXFP4 weight (canonical data, compact E8M0 scales [rows, cols/32]) -> GGUF type-39 blocks.
inline std::vector<std::uint8_t> encode_gguf_mxfp4(index_t rows, index_t cols, std::span<const std::uint8_t> data,
                                                   std::span<const std::uint8_t> scales) {
  detail::require(cols % 32 == 0 && rows >= 0, errc::shape_mismatch,
                  "gguf: MXFP4 blocks hold 32 elements; " + std::to_string(cols) + " columns is not a multiple");
  detail::require(data.size() == static_cast<std::size_t>(rows * cols / 2) && scales.size() == static_cast<std::size_t>(rows * cols / 32),
                  errc::shape_mismatch, "gguf: MXFP4 byte counts do not fit the shape");
  std::vector<std::uint8_t> out(static_cast<std::size_t>(rows * (cols / 32) * 17));
  std::size_t o = 0;
  for (index_t r = 0; r < rows; ++r)
    for (index_t b = 0; b < cols / 32; ++b) {
      out[o++] = scales[static_cast<std::size_t>(r * (cols / 32) + b)];
      for (int j = 0; j < 16; ++j) {
        out[o++] = static_cast<std::uint8_t>(detail_checkpoint_model::packed_code(data, cols, r, b * 32 + j) |
                                             (detail_checkpoint_model::packed_code(data, cols, r, b * 32 + j + 16) << 4));
      }
    }
  return out;
}

/// GGUF type-39 blocks -> canonical data and compact E8M0 scales.
inline void decode_gguf_mxfp4(index_t rows, index_t cols, std::span<const std::uint8_t> blocks, std::vector<std::uint8_t>& data,
                              std::vector<std::uint8_t>& scales) {
  detail::require(cols % 32 == 0 && blocks.size() == static_cast<std::size_t>(rows * (cols / 32) * 17), errc::shape_mismatch,
                  "gguf: MXFP4 block bytes do not fit the shape");
  data.assign(static_cast<std::size_t>(rows * cols / 2), 0);
  scales.assign(static_cast<std::size_t>(rows * cols / 32), 0);
  std::size_t i = 0;
  for (index_t r = 0; r < rows; ++r)
    for (index_t b = 0; b < cols / 32; ++b) {
      scales[static_cast<std::size_t>(r * (cols / 32) + b)] = blocks[i++];
      for (int j = 0; j < 16; ++j) {
        const std::uint8_t byte = blocks[i++];
        detail_checkpoint_model::set_packed_code(data, cols, r, b * 32 + j, byte & 0xF);
        detail_checkpoint_model::set_packed_code(data, cols, r, b * 32 + j + 16, byte >> 4);
      }
    }
}

// --- Checkpoints ---------------------------------------------------------------------------------

namespace detail_gguf {

struct dtype_pair {
  safetensors_dtype st;
  std::uint32_t ggml;
};
inline constexpr dtype_pair plain_types[] = {
    {safetensors_dtype::f32, ggml_type::f32}, {safetensors_dtype::f16, ggml_type::f16}, {safetensors_dtype::bf16, ggml_type::bf16},
    {safetensors_dtype::i8, ggml_type::i8},   {safetensors_dtype::i16, ggml_type::i16}, {safetensors_dtype::i32, ggml_type::i32},
    {safetensors_dtype::i64, ggml_type::i64}, {safetensors_dtype::f64, ggml_type::f64},
};

inline float f32_of(const gguf_tensor& t, const std::string& where) {
  if (t.type != ggml_type::f32 || t.bytes.size() != 4)
    throw error(errc::dtype_mismatch, where + ": tensor '" + t.name + "' (a tensor scale) is not one f32 value but " +
                                          ggml_type_text(t.type) + " of " + std::to_string(t.bytes.size()) + " bytes");
  float v;
  std::memcpy(&v, t.bytes.data(), 4);
  return v;
}

inline gguf_tensor f32_scalar(const std::string& name, float v) {
  gguf_tensor t;
  t.name = name;
  t.ne = {1};
  t.type = ggml_type::f32;
  t.bytes.resize(4);
  std::memcpy(t.bytes.data(), &v, 4);
  return t;
}

}  // namespace detail_gguf

/// The checkpoint a GGUF file holds. NVFP4 (40) and MXFP4 (39) tensors of two dimensions become
/// quantized weights: "<W>.weight" gives the module W; the F32 side tensors "<W>.scale" and
/// "<W>.input_scale" (one value each, as llama.cpp's converter writes them; a missing scale is
/// 1.0) are their tensor scales, decode sense. f32, f16, bf16, i8, i16, i32, i64 and f64 tensors
/// are kept (dimensions reversed into row-major order). Any other type is unsupported, naming the
/// tensor and its type; so are 3-D NVFP4 / MXFP4 tensors (expert stacks) and per-expert scales.
inline checkpoint checkpoint_from_gguf(const gguf_file& file, const std::string& where) {
  using namespace detail_gguf;
  checkpoint c;
  std::set<std::string> consumed;
  // Side tensors found through an index: gguf_file::find scans, quadratic in the weights.
  std::unordered_map<std::string_view, const gguf_tensor*> by_name;
  for (const auto& t : file.tensors) by_name.emplace(t.name, &t);
  const auto find = [&](const std::string& name) -> const gguf_tensor* {
    const auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  };
  for (const auto& t : file.tensors) {
    if (t.type != ggml_type::nvfp4 && t.type != ggml_type::mxfp4) continue;
    if (t.ne.size() != 2)
      throw error(errc::unsupported, where + ": tensor '" + t.name + "' of " + ggml_type_text(t.type) + " has " +
                                         std::to_string(t.ne.size()) + " dimensions; 2-D weights are converted");
    quantized_weight w;
    w.name = name_before_suffix(t.name, ".weight").value_or(t.name);
    w.cols = t.ne[0];
    w.rows = t.ne[1];
    if (t.type == ggml_type::nvfp4) {
      w.format = weight_format::nvfp4;
      decode_gguf_nvfp4(w.rows, w.cols, t.bytes, w.data, w.scales);
      const gguf_tensor* scale = find(w.name + ".scale");
      w.weight_scale = scale_pair::from_decode(scale ? f32_of(*scale, where) : 1.0f);
      if (scale) consumed.insert(scale->name);
    } else {
      w.format = weight_format::mxfp4;
      decode_gguf_mxfp4(w.rows, w.cols, t.bytes, w.data, w.scales);
    }
    if (const gguf_tensor* input = find(w.name + ".input_scale")) {
      w.input_scale = scale_pair::from_decode(f32_of(*input, where));
      consumed.insert(input->name);
    }
    consumed.insert(t.name);
    check_weight_on_load(w, where, c.warnings);
    c.weights.push_back(std::move(w));
  }
  for (const auto& t : file.tensors) {
    if (consumed.contains(t.name)) continue;
    std::optional<safetensors_dtype> dtype;
    for (const auto& p : plain_types)
      if (p.ggml == t.type) dtype = p.st;
    if (!dtype)
      throw error(errc::unsupported,
                  where + ": tensor '" + t.name + "' is " + ggml_type_text(t.type) +
                      ", which this library cannot represent (it reads nvfp4, mxfp4, f32, f16, bf16 and integer tensors)");
    safetensors_tensor s;
    s.name = t.name;
    s.dtype = *dtype;
    s.shape.assign(t.ne.rbegin(), t.ne.rend());
    s.bytes = t.bytes;
    c.tensors.push_back(std::move(s));
  }
  if (const gguf_kv* a = file.find_kv(checkpoint_annotation_key)) apply_annotation(c, a->as_string(), /*stored_decode=*/true);
  check_configs(c, where);
  check_fused_scales(c, c.warnings);
  return c;
}

/// Reads a GGUF file as a checkpoint.
inline checkpoint read_gguf_checkpoint(const std::filesystem::path& path) { return checkpoint_from_gguf(read_gguf(path), path.string()); }

/// A checkpoint as a GGUF file: each weight W as "W.weight" (type 40 or 39, ne = {cols, rows})
/// followed by its F32 side tensors "W.scale" and "W.input_scale" (NVFP4 has no room for the tensor
/// scale in its blocks), then the other tensors. The metadata holds general.alignment (32) and the
/// annotation with what GGUF cannot hold (safetensors metadata, configs, unstored scale senses).
/// Throws, before anything is written: shape_mismatch for cols not a multiple of 64 (NVFP4) or 32
/// (MXFP4), invalid_argument for a name over 63 bytes, unsupported for a tensor dtype GGUF has no
/// type for (U8, U16, U32, U64, BOOL, F8_*) or an RHT weight.
inline gguf_file checkpoint_to_gguf(const checkpoint& c) {
  using namespace detail_gguf;
  gguf_file file;
  std::vector<std::string> warnings;
  check_configs(c, "gguf writer");
  for (const auto& w : c.weights) {
    check_weight_on_load(w, "gguf writer", warnings);
    require_readable_weight(w, "gguf writer");  // nothing its readers refuse
    if (w.rht) throw error(errc::unsupported, "gguf writer: tensor '" + w.name + "' was quantized after TE's RHT; GGUF cannot say so");
    const index_t block = w.format == weight_format::nvfp4 ? 64 : 32;
    if (w.cols % block)
      throw error(errc::shape_mismatch, "gguf writer: tensor '" + w.name + "' has " + std::to_string(w.cols) + " columns; GGUF " +
                                            weight_format_name(w.format) + " blocks hold " + std::to_string(block) + " elements of a row");
    gguf_tensor t;
    t.name = w.name + ".weight";
    t.ne = {w.cols, w.rows};
    if (w.format == weight_format::nvfp4) {
      t.type = ggml_type::nvfp4;
      t.bytes = encode_gguf_nvfp4(w.rows, w.cols, w.data, w.scales);
    } else {
      t.type = ggml_type::mxfp4;
      t.bytes = encode_gguf_mxfp4(w.rows, w.cols, w.data, w.scales);
    }
    file.tensors.push_back(std::move(t));
    if (w.format == weight_format::nvfp4) file.tensors.push_back(f32_scalar(w.name + ".scale", w.weight_scale.decode));
    if (w.input_scale) file.tensors.push_back(f32_scalar(w.name + ".input_scale", w.input_scale->decode));
  }
  for (const auto& s : c.tensors) {
    std::optional<std::uint32_t> type;
    for (const auto& p : plain_types)
      if (p.st == s.dtype) type = p.ggml;
    if (!type)
      throw error(errc::unsupported, "gguf writer: tensor '" + s.name + "' is " + std::string(safetensors_dtype_name(s.dtype)) +
                                         ", which has no GGUF tensor type");
    if (s.shape.size() > gguf_max_dims)
      throw error(errc::unsupported,
                  "gguf writer: tensor '" + s.name + "' has " + std::to_string(s.shape.size()) + " dimensions (GGUF: at most 4)");
    gguf_tensor t;
    t.name = s.name;
    t.type = *type;
    t.ne.assign(s.shape.rbegin(), s.shape.rend());
    t.bytes = s.bytes;
    file.tensors.push_back(std::move(t));
  }
  std::set<std::string> names;
  for (const auto& t : file.tensors) {
    if (t.name.size() > gguf_max_name_bytes)
      throw error(errc::invalid_argument, "gguf writer: tensor name '" + t.name + "' is " + std::to_string(t.name.size()) +
                                              " bytes; ggml allows 63 (rename it, e.g. to llama.cpp's blk.N names)");
    if (!names.insert(t.name).second) throw error(errc::invalid_argument, "gguf writer: two tensors would be named '" + t.name + "'");
  }
  file.metadata.push_back(gguf_kv::u32_value("general.alignment", 32));
  const auto annotation = make_annotation(c, /*stored_decode=*/true, /*with_metadata=*/true, /*with_configs=*/true);
  if (!annotation.empty()) file.metadata.push_back(gguf_kv::string_value(checkpoint_annotation_key, annotation.dump()));
  return file;
}

/// Writes a checkpoint as a GGUF file.
inline void write_gguf_checkpoint(const std::filesystem::path& path, const checkpoint& c) { write_gguf(path, checkpoint_to_gguf(c)); }

}  // namespace nvfp4::io
