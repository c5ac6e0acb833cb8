// nvfp4/io/checkpoint_annotation.hpp: what a checkpoint writer records for what its format cannot
// hold natively but another format needs back (the annotation: the other sense of a tensor scale,
// the source's metadata, configs and order), how a reader applies it, and the safetensors
// library's tensor order that writers sort by.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "nvfp4/io/checkpoint_model.hpp"
#include "nvfp4/io/detail/checkpoint_bits.hpp"
#include "nvfp4/io/json_limits.hpp"
#include "nvfp4/io/safetensors.hpp"

namespace nvfp4::io {

/// The __metadata__ key (GGUF: the KV key) under which a writer records, as JSON, what its format
/// cannot hold natively but another format needs back: the other sense of a tensor scale when it
/// is not the fp32 reciprocal of the stored one ("scale_bits"), the source's safetensors metadata,
/// hf_quant_config.json, config.json and the original dtype. Readers apply it; other tools ignore it.
/// (Not "nvfp4.<name>": that prefix is the per-tensor metadata of io/quantized_checkpoint.hpp.)
inline constexpr const char* checkpoint_annotation_key = "nvfp4_checkpoint";
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

}  // namespace nvfp4::io
