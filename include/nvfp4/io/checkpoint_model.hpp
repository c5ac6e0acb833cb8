// nvfp4/io/checkpoint_model.hpp: a whole quantized checkpoint in a form no file format owns: its
// NVFP4 / MXFP4 weights as the bits they are stored with (codes, block scale bytes, the FP32 tensor
// scale; quantized_weight), every other tensor unchanged, and what the configs say (ignored
// modules, producer); a weight to and from a quantized_tensor.
#pragma once

#include <nlohmann/json.hpp>

#include <bit>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "nvfp4/detail/enum_names.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e8m0.hpp"
#include "nvfp4/formats/packed_fp4.hpp"
#include "nvfp4/io/safetensors.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"

namespace nvfp4::io {

/// The checkpoint file formats.
enum class checkpoint_format { modelopt, compressed_tensors, gguf, torchao };

}  // namespace nvfp4::io

/// Its names in checkpoints, the CLI and Python (one table: nvfp4/detail/enum_names.hpp).
namespace nvfp4::detail {
template <>
struct enum_table<io::checkpoint_format> {
  static constexpr enum_entry<io::checkpoint_format> entries[] = {{"modelopt", io::checkpoint_format::modelopt},
                                                                  {"compressed-tensors", io::checkpoint_format::compressed_tensors},
                                                                  {"gguf", io::checkpoint_format::gguf},
                                                                  {"torchao", io::checkpoint_format::torchao}};
};
}  // namespace nvfp4::detail

namespace nvfp4::io {

constexpr const char* checkpoint_format_name(checkpoint_format f) { return nvfp4::detail::name_of(f); }

/// A tensor-level FP32 scale, which formats store in one of two senses: as the decode factor
/// (ModelOpt `weight_scale_2` / `input_scale`, torchao `per_tensor_scale`, GGUF `.scale`:
/// amax / 2688) or as the encode factor (compressed-tensors `weight_global_scale` /
/// `input_global_scale`: 2688 / amax). The sense a file stores is kept exactly; the other is its
/// fp32 reciprocal unless the file said otherwise (see checkpoint_annotation_key).
struct scale_pair {
  float decode = 1.0f;
  float encode = 1.0f;
  static scale_pair from_decode(float d) { return {d, 1.0f / d}; }
  static scale_pair from_encode(float e) { return {1.0f / e, e}; }
  friend bool operator==(const scale_pair& a, const scale_pair& b) {
    return std::bit_cast<std::uint32_t>(a.decode) == std::bit_cast<std::uint32_t>(b.decode) &&
           std::bit_cast<std::uint32_t>(a.encode) == std::bit_cast<std::uint32_t>(b.encode);
  }
};

/// Which block-scaled format a stored weight is.
enum class weight_format {
  nvfp4,  ///< E2M1, UE4M3 per 16 consecutive elements of a row, FP32 tensor scale
  mxfp4,  ///< E2M1, E8M0 per 32, no tensor scale
};

constexpr const char* weight_format_name(weight_format f) { return f == weight_format::nvfp4 ? "nvfp4" : "mxfp4"; }

/// One quantized weight matrix [rows, cols] (out_features x in_features), in the canonical layout
/// every format is converted from and to: `data` row-major [rows, ceil(cols / 2)], element 2i in
/// the low nibble of byte i (ModelOpt's packing); `scales` compact row-major
/// [rows, ceil(cols / block)].
struct quantized_weight {
  std::string name;  ///< the module: "model.layers.0.mlp.down_proj" for its "....weight"
  weight_format format = weight_format::nvfp4;
  index_t rows = 0;
  index_t cols = 0;
  std::vector<std::uint8_t> data;
  std::vector<std::uint8_t> scales;
  scale_pair weight_scale;                  ///< NVFP4's tensor scale (1 / 1 for MXFP4)
  std::optional<scale_pair> input_scale;    ///< the activation's tensor scale, if calibrated
  bool rht = false;                         ///< quantized after TE's RHT (our own files only)
  std::string original_dtype = "bfloat16";  ///< the unquantized weight's dtype (torchao records it)

  index_t block_cols() const { return format == weight_format::nvfp4 ? 16 : 32; }
  index_t data_cols() const { return (cols + 1) / 2; }
  index_t scale_cols() const { return (cols + block_cols() - 1) / block_cols(); }
  friend bool operator==(const quantized_weight&, const quantized_weight&) = default;
};

/// A checkpoint: quantized weights, other tensors, and what the configs say.
struct checkpoint {
  std::vector<quantized_weight> weights;
  std::vector<safetensors_tensor> tensors;      ///< everything else (norms, embeddings, KV scales), as stored
  std::map<std::string, std::string> metadata;  ///< safetensors __metadata__ entries of the source ("format": "pt")
  nlohmann::ordered_json hf_quant_config;       ///< ModelOpt's hf_quant_config.json, as read (null if none)
  nlohmann::ordered_json model_config;          ///< config.json without quantization_config (null if none)
  std::vector<std::string> ignore;              ///< modules left unquantized (exclude_modules / ignore)
  std::vector<std::string> warnings;            ///< what the load-time checks found that is not fatal

  const quantized_weight* find_weight(const std::string& name) const {
    for (const auto& w : weights)
      if (w.name == name) return &w;
    return nullptr;
  }
  const safetensors_tensor* find_tensor(const std::string& name) const {
    for (const auto& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
};
/// Rebuilds an NVFP4 weight as a quantized_tensor (for dequantizing or comparing): bytes as they
/// are, tensor scale (amax = decode * 2688, encode, decode) from the stored pair.
inline nvfp4_tensor to_nvfp4_tensor(const quantized_weight& w) {
  detail::require(w.format == weight_format::nvfp4, errc::dtype_mismatch, "tensor '" + w.name + "' is not NVFP4");
  auto q = nvfp4_tensor::from_bytes(w.rows, w.cols, w.data, w.scales);
  q.set_tensor_scale(w.weight_scale.decode * 2688.0f, w.weight_scale.encode, w.weight_scale.decode);
  return q;
}

/// The same for an MXFP4 weight.
inline mxfp4_tensor to_mxfp4_tensor(const quantized_weight& w) {
  detail::require(w.format == weight_format::mxfp4, errc::dtype_mismatch, "tensor '" + w.name + "' is not MXFP4");
  return mxfp4_tensor::from_bytes(w.rows, w.cols, w.data, w.scales);
}

/// A weight made from a quantized tensor (e.g. a quantizer's output) under module name `name`.
/// Throws invalid_argument for an empty name or a NaN block scale (which no reader accepts).
template <class Format>
quantized_weight make_quantized_weight(const std::string& name, const quantized_tensor<Format>& q) {
  static_assert(std::is_same_v<Format, nvfp4_1x16> || std::is_same_v<Format, nvfp4_16x16> || std::is_same_v<Format, mxfp4>,
                "checkpoints hold NVFP4 and MXFP4 weights");
  // Nothing goes into a checkpoint that its readers refuse (issue 34): an empty name, NaN block
  // scales (torchao's rule divides 0 by 0 when the tensor's amax is 0 or denormal).
  detail::require(!name.empty(), errc::invalid_argument, "checkpoint: a quantized weight needs a non-empty module name");
  for (std::size_t i = 0; i < q.scales().size(); ++i) {
    const std::uint8_t b = q.scales()[i].bits();
    if (Format::has_tensor_scale ? (b & 0x7F) == 0x7F : b == 0xFF)
      throw error(errc::invalid_argument, "checkpoint: weight '" + name + "': block scale " + std::to_string(i) +
                                              " (row-major) is NaN, which the checkpoint's readers refuse; the quantizer made it "
                                              "(torchao's rule divides 0 by 0 when the tensor's amax is 0 or denormal)");
  }
  quantized_weight w;
  w.name = name;
  w.format = Format::has_tensor_scale ? weight_format::nvfp4 : weight_format::mxfp4;
  w.rows = q.rows();
  w.cols = q.cols();
  w.data.reserve(q.data().size());
  for (auto u : q.data()) w.data.push_back(u.bits());
  w.scales.reserve(q.scales().size());
  for (auto s : q.scales()) w.scales.push_back(s.bits());
  if constexpr (Format::has_tensor_scale) w.weight_scale = {q.decode_scale(), q.encode_scale()};
  return w;
}

}  // namespace nvfp4::io
