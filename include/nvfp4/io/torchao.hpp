// nvfp4/io/torchao.hpp: torchao's NVFP4Tensor saved with torchao.prototype.safetensors: for a
// weight "M.weight", the tensors "M._weight_qdata" (U8 [N, K/2], element 2i in the low nibble),
// "M._weight_scale" (F8_E4M3, [N, K/16], or in the cuBLAS 128x4 layout as
// [ceil(N/128)*32, ceil(K/64)*16] when is_swizzled_scales), "M._weight_per_tensor_scale" (F32
// scalar, amax / 2688: the decode sense, like ModelOpt's weight_scale_2) and optionally
// "M._weight_act_per_tensor_scale" (the activation's, same sense); __metadata__ holds
// "tensor_names" (a JSON list) and, per name, the JSON torchao's encoder writes
// ({"_type": "NVFP4Tensor", "_data": {...}, "_tensor_data_names": [...]}, or {"_type": "Tensor"}).
// Layout and sources: docs/formats_and_layouts.md.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>
#include <string>
#include <unordered_set>

#include "nvfp4/io/checkpoint.hpp"
#include "nvfp4/io/json_limits.hpp"
#include "nvfp4/io/modelopt.hpp"
#include "nvfp4/scaling/layout.hpp"

namespace nvfp4::io {

namespace detail_torchao {

/// JSON text exactly as Python's json.dumps (default separators ", " and ": ", ASCII escapes)
/// writes it, so our metadata strings are the ones torchao writes.
inline std::string python_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::object: {
      std::string s = "{";
      bool first = true;
      for (const auto& [k, v] : j.items()) {
        s += (first ? "" : ", ") + python_json(nlohmann::ordered_json(k)) + ": " + python_json(v);
        first = false;
      }
      return s + "}";
    }
    case nlohmann::ordered_json::value_t::array: {
      std::string s = "[";
      for (std::size_t i = 0; i < j.size(); ++i) s += (i ? ", " : "") + python_json(j[i]);
      return s + "]";
    }
    case nlohmann::ordered_json::value_t::string: {
      std::string s = "\"";
      const std::string in = j.get<std::string>();
      for (std::size_t i = 0; i < in.size(); ++i) {
        const unsigned char ch = static_cast<unsigned char>(in[i]);
        if (ch == '"')
          s += "\\\"";
        else if (ch == '\\')
          s += "\\\\";
        else if (ch == '\n')
          s += "\\n";
        else if (ch == '\r')
          s += "\\r";
        else if (ch == '\t')
          s += "\\t";
        else if (ch == '\b')
          s += "\\b";
        else if (ch == '\f')
          s += "\\f";
        else if (ch < 0x20 || ch >= 0x80) {
          // Decode one UTF-8 sequence and write it as \uXXXX (a surrogate pair above U+FFFF).
          std::uint32_t cp = ch;
          int extra = ch >= 0xF0 ? 3 : ch >= 0xE0 ? 2 : ch >= 0xC0 ? 1 : 0;
          if (ch >= 0x80) cp = ch & (0x3F >> extra);
          for (int k = 0; k < extra && i + 1 < in.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(in[++i]) & 0x3F);
          char buf[16];
          if (cp >= 0x10000) {
            cp -= 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", cp);
          }
          s += buf;
        } else {
          s += static_cast<char>(ch);
        }
      }
      return s + "\"";
    }
    case nlohmann::ordered_json::value_t::boolean:
      return j.get<bool>() ? "true" : "false";
    case nlohmann::ordered_json::value_t::null:
      return "null";
    default:
      return j.dump();
  }
}

inline float f32_value(const safetensors_tensor& t, const std::string& where) {
  if (t.dtype != safetensors_dtype::f32 || t.bytes.size() != 4 || !t.shape.empty())
    throw error(errc::dtype_mismatch, where + ": tensor '" + t.name + "' is not an F32 scalar (" +
                                          std::string(safetensors_dtype_name(t.dtype)) + " " + detail_safetensors::shape_text(t.shape) +
                                          ")");
  float v;
  std::memcpy(&v, t.bytes.data(), 4);
  return v;
}

/// "M.weight" -> "M._weight_" (torchao's flattening of a tensor subclass attribute).
inline std::string data_prefix(const std::string& tensor_name) {
  const auto dot = tensor_name.rfind('.');
  if (dot == std::string::npos) return "_" + tensor_name + "_";
  return tensor_name.substr(0, dot) + "._" + tensor_name.substr(dot + 1) + "_";
}

}  // namespace detail_torchao

/// Parses torchao's layout. Every name in "tensor_names" must be described: an NVFP4Tensor
/// (block_size 16, 2-D) becomes a quantized weight named by its module (the swizzled scales are
/// unswizzled, orig_dtype kept); a plain "Tensor" stays a tensor; other torchao types are
/// unsupported by name. Throws malformed_file for missing or inconsistent parts.
inline checkpoint torchao_from_safetensors(const safetensors_file& file, const std::string& where) {
  using namespace detail_torchao;
  checkpoint c;
  const auto names_it = file.metadata.find("tensor_names");
  if (names_it == file.metadata.end())
    throw error(errc::malformed_file, where + ": no \"tensor_names\" in __metadata__ (not written by torchao's safetensors support)");
  const auto names = parse_json_bounded(names_it->second, where + ": \"tensor_names\"", duplicate_keys::keep_last);
  if (!names.is_array()) throw error(errc::malformed_file, where + ": \"tensor_names\" is not a JSON list");
  std::set<std::string> consumed;
  for (const auto& n : names) {
    if (!n.is_string()) throw error(errc::malformed_file, where + ": \"tensor_names\" holds a non-string");
    const std::string name = n.get<std::string>();
    const auto meta_it = file.metadata.find(name);
    if (meta_it == file.metadata.end()) throw error(errc::malformed_file, where + ": no metadata for '" + clip_for_message(name) + "'");
    const auto meta =
        parse_json_bounded(meta_it->second, where + ": the metadata of '" + clip_for_message(name) + "'", duplicate_keys::keep_last);
    if (!meta.is_object() || !meta.contains("_type") || !meta["_type"].is_string())
      throw error(errc::malformed_file, where + ": the metadata of '" + clip_for_message(name) + "' has no \"_type\"");
    const std::string type = meta["_type"].get<std::string>();
    if (type == "Tensor") {
      consumed.insert(name);  // kept as a plain tensor below
      continue;
    }
    if (type != "NVFP4Tensor")
      throw error(errc::unsupported, where + ": tensor '" + name + "' is a torchao " + type + "; NVFP4Tensor is read");
    const auto data = meta.value("_data", nlohmann::json::object());
    if (data.value("block_size", 16) != 16)
      throw error(errc::unsupported, where + ": tensor '" + name + "' has block_size " + std::to_string(data.value("block_size", 0)));
    const bool swizzled = data.value("is_swizzled_scales", false);
    const std::string prefix = data_prefix(name);
    const auto* qdata = file.find(prefix + "qdata");
    const auto* scale = file.find(prefix + "scale");
    if (!qdata || !scale)
      throw error(errc::malformed_file, where + ": tensor '" + name + "' lacks " + prefix + (qdata ? "scale" : "qdata"));
    if (qdata->dtype != safetensors_dtype::u8 || qdata->shape.size() != 2)
      throw error(errc::dtype_mismatch, where + ": " + qdata->name + " is " + std::string(safetensors_dtype_name(qdata->dtype)) + " " +
                                            detail_safetensors::shape_text(qdata->shape) +
                                            ", expected U8 [N, K/2] (3-D expert weights are not read)");
    quantized_weight w;
    const auto dot = name.rfind('.');
    w.name = dot == std::string::npos ? name : name.substr(0, dot);
    if (dot == std::string::npos || name.substr(dot + 1) != "weight") w.name = name;  // not a ".weight": keep the whole name
    w.format = weight_format::nvfp4;
    w.rows = qdata->shape[0];
    w.cols = qdata->shape[1] * 2;
    const index_t scale_rows = swizzled ? (w.rows + 127) / 128 * 32 : w.rows;
    const index_t scale_cols = swizzled ? (w.cols + 63) / 64 * 16 : w.scale_cols();
    if (scale->dtype != safetensors_dtype::f8_e4m3 || scale->shape.size() != 2 || scale->shape[0] != scale_rows ||
        scale->shape[1] != scale_cols)
      throw error(errc::shape_mismatch, where + ": " + scale->name + " is " + std::string(safetensors_dtype_name(scale->dtype)) + " " +
                                            detail_safetensors::shape_text(scale->shape) + ", expected F8_E4M3 [" +
                                            std::to_string(scale_rows) + ", " + std::to_string(scale_cols) + "]" +
                                            (swizzled ? " (swizzled)" : ""));
    w.data = qdata->bytes;
    if (swizzled) {
      w.scales = unswizzle_128x4(swizzled_scales{w.rows, w.scale_cols(), scale->bytes});
      // The padding of the 128x4 tiles is zero in what torchao writes; anything else is lost here.
      const auto back = swizzle_128x4(w.scales, w.rows, w.scale_cols());
      if (!std::equal(back.bytes().begin(), back.bytes().end(), scale->bytes.begin(), scale->bytes.end()))
        c.warnings.push_back(where + ": " + scale->name + " has non-zero bytes in the padding of its 128x4 tiles; they are dropped");
    } else {
      w.scales = scale->bytes;
    }
    consumed.insert({qdata->name, scale->name});
    if (const auto* pts = file.find(prefix + "per_tensor_scale")) {
      w.weight_scale = scale_pair::from_decode(f32_value(*pts, where));
      consumed.insert(pts->name);
    } else {
      w.weight_scale = scale_pair::from_decode(1.0f);  // single-level scaling: no tensor scale
    }
    if (const auto* act = file.find(prefix + "act_per_tensor_scale")) {
      w.input_scale = scale_pair::from_decode(f32_value(*act, where));
      consumed.insert(act->name);
    }
    if (const auto od = data.find("orig_dtype"); od != data.end() && od->is_object() && od->contains("_data") && (*od)["_data"].is_string())
      w.original_dtype = (*od)["_data"].get<std::string>();
    check_weight_on_load(w, where, c.warnings);
    c.weights.push_back(std::move(w));
  }
  for (const auto& t : file.tensors) {
    const bool listed = consumed.contains(t.name);
    const bool part_of_weight = listed && file.metadata.find(t.name) == file.metadata.end();
    if (part_of_weight) continue;
    if (!listed) throw error(errc::malformed_file, where + ": tensor '" + t.name + "' belongs to no entry of \"tensor_names\"");
    c.tensors.push_back(t);
  }
  std::unordered_set<std::string> described;  // (a scan of the names per metadata key was quadratic)
  for (const auto& n : names)
    if (n.is_string()) described.insert(n.get<std::string>());
  for (const auto& [k, v] : file.metadata) {
    if (k == "tensor_names" || k == checkpoint_annotation_key) continue;
    if (!described.contains(k)) c.metadata[k] = v;
  }
  if (const auto it = file.metadata.find(checkpoint_annotation_key); it != file.metadata.end())
    apply_annotation(c, it->second, /*stored_decode=*/true);
  check_configs(c, where);
  check_fused_scales(c, c.warnings);
  return c;
}

/// Reads a torchao safetensors file (or a directory holding one, as write_torchao makes).
inline checkpoint read_torchao(const std::filesystem::path& path) {
  return torchao_from_safetensors(read_safetensors_checkpoint(path), path.string());
}

/// Options of the torchao writer.
struct torchao_write_options {
  bool swizzled_scales = true;  ///< is_swizzled_scales (what torchao's NVFP4 inference configs use)
};

/// The torchao layout of a checkpoint as one safetensors_file: each NVFP4 weight W as the
/// NVFP4Tensor "W.weight", other tensors as plain Tensors, metadata as torchao's encoder writes
/// it. Throws unsupported for MXFP4 or RHT weights, shape_mismatch for an odd K.
inline safetensors_file torchao_to_safetensors(const checkpoint& c, const torchao_write_options& options = {}) {
  using namespace detail_torchao;
  using detail_modelopt::f32_tensor;
  using detail_modelopt::u8_tensor;
  safetensors_file file;
  std::vector<std::string> warnings;
  nlohmann::ordered_json tensor_names = nlohmann::ordered_json::array();
  check_configs(c, "torchao writer");
  for (const auto& w : c.weights) {
    check_weight_on_load(w, "torchao writer", warnings);
    require_readable_weight(w, "torchao writer");  // nothing its readers refuse
    if (w.format != weight_format::nvfp4)
      throw error(errc::unsupported, "torchao writer: tensor '" + w.name + "' is MXFP4; this writer holds NVFP4Tensor weights only");
    if (w.rht)
      throw error(errc::unsupported, "torchao writer: tensor '" + w.name + "' was quantized after TE's RHT; torchao cannot say so");
    if (w.cols % 16)
      throw error(errc::shape_mismatch,
                  "torchao writer: tensor '" + w.name + "' has " + std::to_string(w.cols) + " columns; NVFP4Tensor needs a multiple of 16");
    const std::string name = w.name + ".weight";
    const std::string prefix = data_prefix(name);
    file.tensors.push_back(u8_tensor(prefix + "qdata", safetensors_dtype::u8, w.rows, w.data_cols(), w.data));
    if (options.swizzled_scales) {
      const auto swizzled = swizzle_128x4(w.scales, w.rows, w.scale_cols());
      file.tensors.push_back(u8_tensor(prefix + "scale", safetensors_dtype::f8_e4m3, (w.rows + 127) / 128 * 32, (w.cols + 63) / 64 * 16,
                                       {swizzled.bytes().begin(), swizzled.bytes().end()}));
    } else {
      file.tensors.push_back(u8_tensor(prefix + "scale", safetensors_dtype::f8_e4m3, w.rows, w.scale_cols(), w.scales));
    }
    file.tensors.push_back(f32_tensor(prefix + "per_tensor_scale", w.weight_scale.decode, {}));
    nlohmann::ordered_json data_names = {"per_tensor_scale"};
    if (w.input_scale) {
      file.tensors.push_back(f32_tensor(prefix + "act_per_tensor_scale", w.input_scale->decode, {}));
      data_names.push_back("act_per_tensor_scale");
    }
    data_names.push_back("qdata");
    data_names.push_back("scale");
    nlohmann::ordered_json meta;
    meta["_type"] = "NVFP4Tensor";
    meta["_data"] = {{"is_swizzled_scales", options.swizzled_scales},
                     {"use_triton_kernel", false},
                     {"act_quant_kwargs", nullptr},
                     {"block_size", 16},
                     {"orig_dtype", {{"_type", "torch.dtype"}, {"_data", w.original_dtype}}}};
    meta["_tensor_data_names"] = data_names;
    file.metadata[name] = python_json(meta);
    tensor_names.push_back(name);
  }
  for (const auto& t : c.tensors) {
    file.tensors.push_back(t);
    file.metadata[t.name] = python_json({{"_type", "Tensor"}});
    tensor_names.push_back(t.name);
  }
  std::set<std::string> names;
  for (const auto& t : file.tensors)
    if (!names.insert(t.name).second) throw error(errc::invalid_argument, "torchao writer: two tensors would be named '" + t.name + "'");
  for (const auto& [k, v] : c.metadata) {
    if (file.metadata.contains(k) || k == "tensor_names")
      throw error(errc::invalid_argument, "torchao writer: metadata key '" + k + "' is also a tensor name");
    file.metadata[k] = v;
  }
  file.metadata["tensor_names"] = python_json(tensor_names);
  const auto annotation = make_annotation(c, /*stored_decode=*/true, /*with_metadata=*/false, /*with_configs=*/true);
  if (!annotation.empty()) file.metadata[checkpoint_annotation_key] = annotation.dump();
  sort_like_safetensors(file.tensors);
  return file;
}

/// Writes a torchao safetensors file (one file; a path without .safetensors gets model.safetensors
/// inside it).
inline void write_torchao(const std::filesystem::path& path, const checkpoint& c, const torchao_write_options& options = {}) {
  const safetensors_file file = torchao_to_safetensors(c, options);
  if (path.extension() == ".safetensors") {
    write_safetensors(path, file);
    return;
  }
  // The directory as a whole (io/atomic_directory.hpp): a failure leaves an existing one as it was.
  write_directory_atomically(path, [&](const std::filesystem::path& dir) { write_safetensors(dir / "model.safetensors", file); });
}

}  // namespace nvfp4::io
