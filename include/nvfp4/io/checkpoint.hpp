// nvfp4/io/checkpoint.hpp: a whole quantized checkpoint in a form no file format owns: its NVFP4 /
// MXFP4 weights as the bits they are stored with (codes, block scale bytes, the FP32 tensor scale),
// every other tensor unchanged, and what the configs say (ignored modules, producer). The readers
// and writers of ModelOpt, compressed-tensors, GGUF and torchao files (io/modelopt.hpp, ...) meet
// here, so a conversion is a read and a write; the checks every reader runs on load live here too.
#pragma once

#include <fnmatch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "nvfp4/detail/enum_names.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e8m0.hpp"
#include "nvfp4/formats/packed_fp4.hpp"
#include "nvfp4/io/json_limits.hpp"
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

/// The __metadata__ key (GGUF: the KV key) under which a writer records, as JSON, what its format
/// cannot hold natively but another format needs back: the other sense of a tensor scale when it
/// is not the fp32 reciprocal of the stored one ("scale_bits"), the source's safetensors metadata,
/// hf_quant_config.json, config.json and the original dtype. Readers apply it; other tools ignore it.
/// (Not "nvfp4.<name>": that prefix is the per-tensor metadata of io/quantized_checkpoint.hpp.)
inline constexpr const char* checkpoint_annotation_key = "nvfp4_checkpoint";

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

/// What a writer that stores `stored_decode` (true: decode sense) must add to its annotation for
/// `w`: the unstored sense of each tensor scale whose bits are not the reciprocal of the stored one.
inline nlohmann::ordered_json unstored_scale_bits(const quantized_weight& w, bool stored_decode) {
  using detail_checkpoint_model::hex_bits;
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  auto add = [&](const char* field, const scale_pair& s) {
    const scale_pair derived = stored_decode ? scale_pair::from_decode(s.decode) : scale_pair::from_encode(s.encode);
    if (!(derived == s)) out[field] = {hex_bits(s.decode), hex_bits(s.encode)};
  };
  if (w.format == weight_format::nvfp4) add("weight", w.weight_scale);
  if (w.input_scale) add("input", *w.input_scale);
  return out;
}

/// Applies a reader's annotation entry for `w` (from unstored_scale_bits): each pair replaces the
/// derived one when its stored sense equals what the file holds (an edited file keeps its value).
inline void apply_scale_bits(quantized_weight& w, const nlohmann::json& entry, bool stored_decode) {
  using detail_checkpoint_model::parse_hex_bits;
  if (!entry.is_object()) return;
  auto apply = [&](const char* field, scale_pair& s) {
    const auto it = entry.find(field);
    if (it == entry.end() || !it->is_array() || it->size() != 2) return;
    const auto d = parse_hex_bits((*it)[0]), e = parse_hex_bits((*it)[1]);
    if (!d || !e) return;
    const float stored = stored_decode ? s.decode : s.encode;
    if (std::bit_cast<std::uint32_t>(stored) == std::bit_cast<std::uint32_t>(stored_decode ? *d : *e)) s = {*d, *e};
  };
  apply("weight", w.weight_scale);
  if (w.input_scale) apply("input", *w.input_scale);
}

/// Checks one weight on load: byte counts against its shape (throws malformed_file naming `where`
/// and the tensor), then adds a warning for each suspicious value: UE4M3 scale bytes with the
/// sign bit set (read as their low 7 bits by the GPU, kept here) or 0x7F (NaN), E8M0 0xFF (NaN),
/// a non-zero padding nibble at the end of an odd-length row, a tensor scale that is not a
/// positive finite number.
inline void check_weight_on_load(const quantized_weight& w, const std::string& where, std::vector<std::string>& warnings) {
  using detail_checkpoint_model::fail;
  const std::string what = "tensor '" + w.name + "'";
  if (w.rows < 0 || w.cols <= 0) fail(errc::malformed_file, where, what + " has an empty or negative shape");
  const auto expect = [&](const std::vector<std::uint8_t>& bytes, index_t cols, const char* part) {
    if (static_cast<std::uint64_t>(bytes.size()) != static_cast<std::uint64_t>(w.rows) * static_cast<std::uint64_t>(cols))
      fail(errc::malformed_file, where,
           what + ": " + part + ": " + std::to_string(bytes.size()) + " bytes, the shape [" + std::to_string(w.rows) + ", " +
               std::to_string(w.cols) + "] needs " + std::to_string(w.rows) + " x " + std::to_string(cols));
  };
  expect(w.data, w.data_cols(), "packed data");
  expect(w.scales, w.scale_cols(), "block scales");
  std::size_t sign_bits = 0, nans = 0;
  for (auto b : w.scales) {
    if (w.format == weight_format::nvfp4) {
      sign_bits += (b & 0x80) != 0;
      nans += (b & 0x7F) == 0x7F;
    } else {
      nans += b == 0xFF;
    }
  }
  if (sign_bits)
    warnings.push_back(what + ": " + std::to_string(sign_bits) +
                       " UE4M3 block scale bytes have the sign bit set (a GPU reads them as their low 7 bits; "
                       "llama.cpp's converter strips it)");
  if (nans)
    warnings.push_back(what + ": " + std::to_string(nans) + " block scale bytes are NaN (" +
                       (w.format == weight_format::nvfp4 ? "0x7F" : "0xFF") + "); their blocks decode to NaN");
  if (w.cols % 2) {
    std::size_t tails = 0;
    for (index_t r = 0; r < w.rows; ++r) tails += (w.data[static_cast<std::size_t>(r * w.data_cols() + w.data_cols() - 1)] & 0xF0) != 0;
    if (tails) warnings.push_back(what + ": " + std::to_string(tails) + " rows have a non-zero padding nibble after the last element");
  }
  auto check_scale = [&](const scale_pair& s, const char* name) {
    if (!(std::isfinite(s.decode) && s.decode > 0.0f && std::isfinite(s.encode) && s.encode > 0.0f))
      warnings.push_back(what + ": " + name + " is not a positive finite number (decode " + detail_checkpoint_model::float_text(s.decode) +
                         ", encode " + detail_checkpoint_model::float_text(s.encode) + ")");
  };
  if (w.format == weight_format::nvfp4) check_scale(w.weight_scale, "the weight's tensor scale");
  if (w.input_scale) check_scale(*w.input_scale, "the input scale");
}

/// Throws malformed_file, naming `where` and the weight, for what every reader refuses in it (the
/// checks of io/quantized_checkpoint.hpp's dequantize_tensor without accept_invalid_scales, which
/// inspect and dequantize run on every format): a block scale byte that is NaN or has its sign bit
/// set (UE4M3 0x7F / 0x80-0xFF, E8M0 0xFF), an NVFP4 tensor scale whose decode sense is NaN, Inf or
/// negative, values whose dequantization overflows float. Every writer runs it on each weight
/// before anything is written, so nothing is written that its readers refuse (issue 39: convert
/// wrote NaN and sign-bit scales with a warning; inspect of the output then exited 18).
inline void require_readable_weight(const quantized_weight& w, const std::string& where) {
  using detail_checkpoint_model::fail;
  const std::string what = "weight '" + w.name + "'";
  const bool nv = w.format == weight_format::nvfp4;
  const index_t scale_cols = w.scale_cols();
  const std::string remedy =
      "; the readers refuse it (inspect / dequantize --accept-invalid-scales read such a source), so it is not written";
  for (std::size_t i = 0; i < w.scales.size(); ++i) {
    const std::uint8_t b = w.scales[i];
    if (nv ? (b & 0x80) != 0 || (b & 0x7F) == 0x7F : b == 0xFF)
      fail(errc::malformed_file, where,
           what + ": block scale (" + std::to_string(static_cast<index_t>(i) / scale_cols) + ", " +
               std::to_string(static_cast<index_t>(i) % scale_cols) + ") is byte " + std::to_string(b) +
               ((nv ? (b & 0x7F) == 0x7F : true) ? " (NaN)" : " (sign bit set)") + remedy);
  }
  const float decode = nv ? w.weight_scale.decode : 1.0f;
  if (!std::isfinite(decode) || std::signbit(decode))
    fail(errc::malformed_file, where,
         what + ": the tensor scale (decode sense) is " + detail_checkpoint_model::float_text(decode) + ", not a finite number >= 0" +
             remedy);
  // Values overflow only where block scale x 6 (the largest E2M1 magnitude) x decode reaches
  // float's top: only then is each such block's largest element looked at, as the reader
  // computes it ((element x scale) x decode, in float).
  float largest_scale = 0.0f;
  for (const std::uint8_t b : w.scales)
    largest_scale = std::max(largest_scale, nv ? ue4m3::from_bits(b).to_float() : e8m0::from_bits(b).to_float());
  if (static_cast<double>(largest_scale) * 6.0 * decode < static_cast<double>(FLT_MAX)) return;
  const index_t block = w.block_cols();
  for (index_t r = 0; r < w.rows; ++r)
    for (index_t c = 0; c < w.cols; ++c) {
      const std::uint8_t sb = w.scales[static_cast<std::size_t>(r * scale_cols + c / block)];
      const float scale = nv ? ue4m3::from_bits(sb).to_float() : e8m0::from_bits(sb).to_float();
      const float value = e2m1::from_bits(detail_checkpoint_model::packed_code(w.data, w.cols, r, c)).to_float() * scale * decode;
      if (!std::isfinite(value))
        fail(errc::overflow, where,
             what + ": dequantized element (" + std::to_string(r) + ", " + std::to_string(c) +
                 ") overflows float (element times its scales is beyond float's range)" + remedy);
    }
}

/// Throws, naming `where`, for a configuration that does not describe the weights it goes with (a
/// reader refuses it, a writer does not write it; issue 39: a GGUF annotation's hf_quant_config
/// saying MXFP8 with group_size 7 was copied onto NVFP4 weights, an exclude_modules entry naming a
/// module stored quantized went into compressed-tensors' ignore list):
/// - hf_quant_config (when not null): its "quantization" object must name the format of every
///   weight (quant_algo NVFP4 / MXFP4; any other, e.g. MXFP8 or FP8, only with no NVFP4 / MXFP4
///   weight), or, for MIXED_PRECISION, each weight as its quantized_layers entry lists it (else
///   malformed_file); NVFP4 with group_size 16, MXFP4 with 32 (else unsupported);
/// - ignore (exclude_modules): no entry may name, exactly or as a shell pattern (* ? [...], as
///   ModelOpt matches it), a weight stored quantized (malformed_file); compressed-tensors' "re:"
///   regular expressions are not evaluated.
inline void check_configs(const checkpoint& c, const std::string& where) {
  using detail_checkpoint_model::fail;
  if (!c.hf_quant_config.is_null()) {
    const std::string config = where + ": hf_quant_config";
    const auto q = c.hf_quant_config.find("quantization");
    if (q == c.hf_quant_config.end() || !q->is_object()) throw error(errc::malformed_file, config + ": no \"quantization\" object");
    const auto algo_it = q->find("quant_algo");
    const std::string algo = algo_it != q->end() && algo_it->is_string() ? algo_it->get<std::string>() : "?";
    if (algo != "NVFP4" && algo != "MXFP4" && algo != "MIXED_PRECISION") {
      // (MXFP8, FP8, ...: the weights of such a checkpoint are plain tensors here, none quantized.)
      if (!c.weights.empty())
        throw error(errc::malformed_file, config + " says quant_algo " + clip_for_message(algo) + ", but weight '" + c.weights[0].name +
                                              "' is " + weight_format_name(c.weights[0].format) +
                                              ": the config does not describe these weights");
    }
    const auto group_size = [&](const nlohmann::ordered_json& o, int expected) -> std::string {
      const auto g = o.find("group_size");
      if (g == o.end() || (g->is_number_integer() && g->get<std::int64_t>() == expected)) return "";
      return json_for_message(*g);
    };
    if (algo == "NVFP4" || algo == "MXFP4") {
      const bool nv = algo == "NVFP4";
      if (const std::string g = group_size(*q, nv ? 16 : 32); !g.empty())
        throw error(errc::unsupported, config + ": " + algo + " group_size " + g + " (" + (nv ? "16" : "32") + " is the format)");
      for (const auto& w : c.weights)
        if ((w.format == weight_format::nvfp4) != nv)
          throw error(errc::malformed_file, config + " says quant_algo " + algo + ", but weight '" + w.name + "' is " +
                                                weight_format_name(w.format) + ": the config does not describe these weights");
    } else if (const auto layers = q->find("quantized_layers"); algo == "MIXED_PRECISION" && layers != q->end() && layers->is_object()) {
      std::unordered_map<std::string_view, const quantized_weight*> by_name;
      for (const auto& w : c.weights) by_name.emplace(w.name, &w);
      for (const auto& [layer, entry] : layers->items()) {
        const auto found = by_name.find(layer);
        if (found == by_name.end() || !entry.is_object()) continue;
        const auto layer_algo_it = entry.find("quant_algo");
        const std::string layer_algo = layer_algo_it != entry.end() && layer_algo_it->is_string() ? layer_algo_it->get<std::string>() : "?";
        const bool nv = found->second->format == weight_format::nvfp4;
        if (layer_algo != (nv ? "NVFP4" : "MXFP4") || !group_size(entry, nv ? 16 : 32).empty())
          throw error(errc::malformed_file, config + ": quantized_layers says " + clip_for_message(layer) + " is " +
                                                json_for_message(entry) + ", but it is stored as " +
                                                weight_format_name(found->second->format) + " with groups of " +
                                                std::to_string(found->second->block_cols()));
      }
    }
  }
  if (c.ignore.empty() || c.weights.empty()) return;
  std::unordered_set<std::string_view> quantized;
  for (const auto& w : c.weights) quantized.insert(w.name);
  const auto refuse = [&](const std::string& entry, const std::string& weight) {
    throw error(errc::malformed_file, where + ": the ignore list (exclude_modules) names '" + clip_for_message(entry) + "', but " +
                                          (entry == weight ? "that module" : "module '" + weight + "'") +
                                          " is stored quantized: an engine would run it unquantized on these bytes");
  };
  std::size_t patterns = 0;
  for (const auto& entry : c.ignore) {
    if (quantized.contains(entry)) refuse(entry, entry);
    if (entry.rfind("re:", 0) == 0 || entry.find_first_of("*?[") == std::string::npos) continue;
    // Each pattern against each weight: bounded, so a file cannot make this quadratic in time.
    if (++patterns * c.weights.size() > 100'000'000)
      throw error(errc::unsupported, where + ": the ignore list has too many shell patterns to check against " +
                                         std::to_string(c.weights.size()) + " quantized weights");
    for (const auto& w : c.weights)
      if (::fnmatch(entry.c_str(), w.name.c_str(), 0) == 0) refuse(entry, w.name);
  }
}

/// The fused group of a module, as "<parent>#<n>" (the siblings q/k/v_proj, gate/up_proj or
/// w1/w3 under one parent share it), or nothing for a module no engine fuses.
inline std::optional<std::string> fused_group_of(const std::string& module) {
  static const std::vector<std::vector<std::string>> groups = {{"q_proj", "k_proj", "v_proj"}, {"gate_proj", "up_proj"}, {"w1", "w3"}};
  const auto dot = module.rfind('.');
  const std::string parent = dot == std::string::npos ? "" : module.substr(0, dot);
  const std::string leaf = dot == std::string::npos ? module : module.substr(dot + 1);
  for (std::size_t g = 0; g < groups.size(); ++g)
    if (std::find(groups[g].begin(), groups[g].end(), leaf) != groups[g].end()) return parent + "#" + std::to_string(g);
  return std::nullopt;
}

/// Fused-layer check: modules that inference engines run as one GEMM (q/k/v_proj -> qkv,
/// gate/up_proj -> gate_up, w1/w3 of an expert) need one weight tensor scale. Adds a warning for
/// each such group of siblings whose scales differ (vLLM, for one, then uses the largest and
/// rescales or warns).
inline void check_fused_scales(const checkpoint& c, std::vector<std::string>& warnings) {
  std::map<std::string, std::vector<const quantized_weight*>> by_group;
  for (const auto& w : c.weights) {
    if (w.format != weight_format::nvfp4) continue;
    if (const auto group = fused_group_of(w.name)) by_group[*group].push_back(&w);
  }
  for (const auto& [key, members] : by_group) {
    if (members.size() < 2) continue;
    bool differ = false;
    for (const auto* m : members) differ |= m->weight_scale.decode != members[0]->weight_scale.decode;
    if (!differ) continue;
    std::string list;
    for (const auto* m : members)
      list.append(list.empty() ? "" : ", ").append(m->name).append(" ").append(detail_checkpoint_model::float_text(m->weight_scale.decode));
    warnings.push_back("fused layers with different weight tensor scales (" + list +
                       "): an engine that runs them as one GEMM must pick one scale");
  }
}

/// The order the safetensors library writes tensors in (its `prepare`): by dtype, largest first
/// in its enum order (U64 I64 F64 F32 U32 I32 BF16 F16 U16 I16 F8_E8M0 F8_E4M3 F8_E5M2 I8 U8
/// BOOL), then by name. A file written so by a peer comes out byte-identical when rewritten.
inline void sort_like_safetensors(std::vector<safetensors_tensor>& tensors) {
  auto rank = [](safetensors_dtype d) {
    switch (d) {
      case safetensors_dtype::boolean:
        return 0;
      case safetensors_dtype::u8:
        return 4;
      case safetensors_dtype::i8:
        return 5;
      case safetensors_dtype::f8_e5m2:
        return 6;
      case safetensors_dtype::f8_e4m3:
        return 7;
      case safetensors_dtype::f8_e8m0:
        return 8;
      case safetensors_dtype::i16:
        return 11;
      case safetensors_dtype::u16:
        return 12;
      case safetensors_dtype::f16:
        return 13;
      case safetensors_dtype::bf16:
        return 14;
      case safetensors_dtype::i32:
        return 15;
      case safetensors_dtype::u32:
        return 16;
      case safetensors_dtype::f32:
        return 17;
      case safetensors_dtype::f64:
        return 19;
      case safetensors_dtype::i64:
        return 20;
      case safetensors_dtype::u64:
        return 21;
    }
    return 0;
  };
  std::stable_sort(tensors.begin(), tensors.end(), [&](const safetensors_tensor& a, const safetensors_tensor& b) {
    const int ra = rank(a.dtype), rb = rank(b.dtype);
    return ra != rb ? ra > rb : a.name < b.name;
  });
}

/// The annotation a writer adds to its file: `scale_bits` per weight (see unstored_scale_bits)
/// and the checkpoint-level fields its format cannot hold (`with_metadata`: the source's
/// safetensors metadata; `with_configs`: hf_quant_config.json and config.json; `with_order`: for
/// writers that sort tensors (ModelOpt, compressed-tensors), the weights' order when it is not by
/// name and the other tensors' order when it is not safetensors' own, so that a GGUF or torchao
/// source comes back in its order). Empty when there is nothing to say.
inline nlohmann::ordered_json make_annotation(const checkpoint& c, bool stored_decode, bool with_metadata, bool with_configs,
                                              bool with_order = false) {
  nlohmann::ordered_json a = nlohmann::ordered_json::object();
  nlohmann::ordered_json bits = nlohmann::ordered_json::object();
  nlohmann::ordered_json dtypes = nlohmann::ordered_json::object();
  for (const auto& w : c.weights) {
    auto entry = unstored_scale_bits(w, stored_decode);
    if (!entry.empty()) bits[w.name] = entry;
    if (w.original_dtype != "bfloat16") dtypes[w.name] = w.original_dtype;
  }
  if (!bits.empty()) a["scale_bits"] = bits;
  if (!dtypes.empty()) a["original_dtype"] = dtypes;
  if (with_order) {
    const bool weights_by_name =
        std::is_sorted(c.weights.begin(), c.weights.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
    if (!weights_by_name) {
      nlohmann::ordered_json names = nlohmann::ordered_json::array();
      for (const auto& w : c.weights) names.push_back(w.name);
      a["weight_order"] = names;
    }
    auto sorted = c.tensors;
    sort_like_safetensors(sorted);
    bool same = true;
    for (std::size_t i = 0; same && i < sorted.size(); ++i) same = sorted[i].name == c.tensors[i].name;
    if (!same) {
      nlohmann::ordered_json names = nlohmann::ordered_json::array();
      for (const auto& t : c.tensors) names.push_back(t.name);
      a["tensor_order"] = names;
    }
  }
  if (with_metadata && !c.metadata.empty()) a["metadata"] = c.metadata;
  if (with_configs) {
    if (!c.hf_quant_config.is_null()) a["hf_quant_config"] = c.hf_quant_config;
    if (!c.model_config.is_null()) a["model_config"] = c.model_config;
    if (!c.ignore.empty()) a["ignore"] = c.ignore;
  }
  return a;
}

/// Applies an annotation (make_annotation's output, as text) to a checkpoint just read. Fields the
/// file held natively win over the annotation's. A malformed annotation is a warning, not an error.
inline void apply_annotation(checkpoint& c, const std::string& text, bool stored_decode) {
  nlohmann::ordered_json a;
  try {
    a = parse_json_bounded<nlohmann::ordered_json>(text, "annotation", duplicate_keys::keep_last);
  } catch (const error&) {
    // (a is left null: reported below)
  }
  if (!a.is_object()) {
    c.warnings.push_back(std::string("the '") + checkpoint_annotation_key + "' annotation is not a JSON object; ignored");
    return;
  }
  // Per-weight entries through a hash index: ordered_json's find scans, quadratic in the weights.
  const auto per_weight = [&](const char* key, const auto& apply) {
    const auto it = a.find(key);
    if (it == a.end() || !it->is_object()) return;
    std::unordered_map<std::string_view, const nlohmann::ordered_json*> entries;
    entries.reserve(it->size());
    for (const auto& [name, entry] : it->items()) entries.emplace(name, &entry);
    for (auto& w : c.weights)
      if (const auto e = entries.find(w.name); e != entries.end()) apply(w, *e->second);
  };
  per_weight("scale_bits", [&](quantized_weight& w, const nlohmann::ordered_json& e) { apply_scale_bits(w, e, stored_decode); });
  per_weight("original_dtype", [&](quantized_weight& w, const nlohmann::ordered_json& e) {
    if (e.is_string()) w.original_dtype = e.get<std::string>();
  });
  if (const auto it = a.find("metadata"); it != a.end() && it->is_object() && c.metadata.empty())
    for (const auto& [k, v] : it->items())
      if (v.is_string()) c.metadata[k] = v.get<std::string>();
  if (const auto it = a.find("hf_quant_config"); it != a.end() && c.hf_quant_config.is_null()) c.hf_quant_config = *it;
  if (const auto it = a.find("model_config"); it != a.end() && c.model_config.is_null()) c.model_config = *it;
  if (const auto it = a.find("ignore"); it != a.end() && it->is_array() && c.ignore.empty())
    for (const auto& v : *it)
      if (v.is_string()) c.ignore.push_back(v.get<std::string>());
  // The source's order: listed names first in the listed order, any others after, as they were.
  const auto reorder = [&](auto& items, const char* key) {
    const auto it = a.find(key);
    if (it == a.end() || !it->is_array()) return;
    std::map<std::string, std::size_t> rank;
    for (const auto& v : *it)
      if (v.is_string()) rank.emplace(v.get<std::string>(), rank.size());
    std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
      const auto rx = rank.find(x.name), ry = rank.find(y.name);
      return (rx == rank.end() ? rank.size() : rx->second) < (ry == rank.end() ? rank.size() : ry->second);
    });
  };
  reorder(c.weights, "weight_order");
  reorder(c.tensors, "tensor_order");
}

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
