// nvfp4/io/modelopt.hpp: NVIDIA ModelOpt's quantized Hugging Face checkpoints, read and written
// whole: for each quantized module W, W.weight (U8 [N, K/2], two E2M1 codes per byte, element 2i
// in the low nibble), W.weight_scale (F8_E4M3 [N, K/16]; MXFP4: U8 E8M0 codes [N, K/32]),
// W.weight_scale_2 (F32 scalar, amax / 2688) and W.input_scale (F32 scalar, the activation's
// amax / 2688), every other tensor as is; one model.safetensors or shards with an index; beside
// them hf_quant_config.json ({"producer", "quantization": {"quant_algo", "kv_cache_quant_algo",
// "group_size", "exclude_modules"}}) and config.json's "quantization_config". Layout and sources:
// docs/formats_and_layouts.md.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "nvfp4/config.hpp"
#include "nvfp4/io/checkpoint.hpp"
#include "nvfp4/io/quantized_checkpoint.hpp"
#include "nvfp4/io/sharded_safetensors.hpp"
#include "nvfp4/scaling/layout.hpp"

namespace nvfp4::io {

namespace detail_modelopt {

inline float scalar_f32(const safetensors_tensor& t, const std::string& where) {
  if (t.dtype != safetensors_dtype::f32 || t.bytes.size() != 4 || t.element_count() != 1)
    throw error(errc::dtype_mismatch, where + ": tensor '" + t.name + "' is not one F32 value (" +
                                          std::string(safetensors_dtype_name(t.dtype)) + " " + detail_safetensors::shape_text(t.shape) +
                                          ")");
  float v;
  std::memcpy(&v, t.bytes.data(), 4);
  return v;
}

inline safetensors_tensor f32_tensor(const std::string& name, float v, std::vector<std::int64_t> shape) {
  safetensors_tensor t;
  t.name = name;
  t.dtype = safetensors_dtype::f32;
  t.shape = std::move(shape);
  t.bytes.resize(4);
  std::memcpy(t.bytes.data(), &v, 4);
  return t;
}

inline safetensors_tensor u8_tensor(const std::string& name, safetensors_dtype dtype, index_t rows, index_t cols,
                                    std::vector<std::uint8_t> bytes) {
  safetensors_tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = {rows, cols};
  t.bytes = std::move(bytes);
  return t;
}

/// The quant_algo ModelOpt writes for a set of weights.
inline nlohmann::ordered_json make_hf_quant_config(const checkpoint& c) {
  bool any_nv = false, any_mx = false;
  for (const auto& w : c.weights) (w.format == weight_format::nvfp4 ? any_nv : any_mx) = true;
  nlohmann::ordered_json config;
  config["producer"] = {{"name", "nvfp4"},
                        {"version", std::to_string(NVFP4_VERSION_MAJOR) + "." + std::to_string(NVFP4_VERSION_MINOR) + "." +
                                        std::to_string(NVFP4_VERSION_PATCH)}};
  nlohmann::ordered_json q;
  if (any_nv && any_mx) {
    q["quant_algo"] = "MIXED_PRECISION";
    q["kv_cache_quant_algo"] = nullptr;
    nlohmann::ordered_json layers = nlohmann::ordered_json::object();
    for (const auto& w : c.weights)
      layers[w.name] = {{"quant_algo", w.format == weight_format::nvfp4 ? "NVFP4" : "MXFP4"}, {"group_size", w.block_cols()}};
    q["quantized_layers"] = layers;
  } else {
    q["quant_algo"] = any_mx ? "MXFP4" : "NVFP4";
    q["kv_cache_quant_algo"] = nullptr;
    q["group_size"] = any_mx ? 32 : 16;
    q["exclude_modules"] = c.ignore;
  }
  config["quantization"] = q;
  return config;
}

/// config.json's "quantization_config" as ModelOpt derives it from hf_quant_config
/// (export/convert_hf_config.py: convert_hf_quant_config_format).
inline nlohmann::ordered_json config_json_quantization(const nlohmann::ordered_json& hf) {
  const auto& q = hf.contains("quantization") ? hf["quantization"] : nlohmann::ordered_json::object();
  nlohmann::ordered_json out;
  const std::string algo = q.value("quant_algo", std::string());
  if (algo == "NVFP4") {
    const auto group = q.value("group_size", 16);
    nlohmann::ordered_json args = {{"dynamic", false}, {"num_bits", 4}, {"type", "float"}, {"group_size", group}};
    out["config_groups"] = {{"group_0", {{"input_activations", args}, {"weights", args}, {"targets", {"Linear"}}}}};
  }
  out["ignore"] = q.contains("exclude_modules") && q["exclude_modules"].is_array() ? q["exclude_modules"] : nlohmann::ordered_json::array();
  if (!algo.empty()) out["quant_algo"] = algo;
  if (q.contains("kv_cache_quant_algo") && q["kv_cache_quant_algo"].is_string()) out["kv_cache_scheme"] = q["kv_cache_quant_algo"];
  if (hf.contains("producer")) out["producer"] = hf["producer"];
  out["quant_method"] = "modelopt";
  return out;
}

}  // namespace detail_modelopt

/// Parses the ModelOpt layout out of a set of tensors (a file, or a directory's shards merged).
/// Every W with W.weight + W.weight_scale becomes a quantized weight (recognised from the dtypes,
/// or from the "nvfp4.W" metadata `nvfp4 quantize` writes, whose 128x4 scales are unswizzled);
/// everything else stays a tensor. `where` names the source in errors. Throws as
/// describe_quantized_tensor does, and unsupported for MXFP8 / FP8 layouts.
inline checkpoint modelopt_from_safetensors(const safetensors_file& file, const std::string& where) {
  using detail_modelopt::scalar_f32;
  checkpoint c;
  std::set<std::string> consumed;
  for (const auto& name : quantized_tensor_names(file)) {
    if (is_fp8_weight(file, name))
      throw error(errc::unsupported, where + ": tensor '" + name + "' is per-tensor FP8; checkpoints convert NVFP4 and MXFP4 weights");
    stored_tensor_info info;
    try {
      info = describe_quantized_tensor(file, name);
    } catch (const error& e) {
      throw detail::with_context(e, where);
    }
    if (info.format == stored_format::mxfp8)
      throw error(errc::unsupported, where + ": tensor '" + name + "' is MXFP8; checkpoints convert NVFP4 and MXFP4 weights");
    quantized_weight w;
    w.name = name;
    w.format = info.format == stored_format::mxfp4 ? weight_format::mxfp4 : weight_format::nvfp4;
    w.rows = info.rows;
    w.cols = info.cols;
    w.rht = info.rht;
    w.data = file.at(name + ".weight").bytes;
    const auto& scale = file.at(name + ".weight_scale");
    w.scales = info.swizzled ? unswizzle_128x4(swizzled_scales{info.rows, w.scale_cols(), scale.bytes}) : scale.bytes;
    consumed.insert({name + ".weight", name + ".weight_scale"});
    if (w.format == weight_format::nvfp4) {
      w.weight_scale = scale_pair::from_decode(scalar_f32(file.at(name + ".weight_scale_2"), where));
      consumed.insert(name + ".weight_scale_2");
    }
    if (const auto* input = file.find(name + ".input_scale")) {
      w.input_scale = scale_pair::from_decode(scalar_f32(*input, where));
      consumed.insert(name + ".input_scale");
    }
    check_weight_on_load(w, where, c.warnings);
    c.weights.push_back(std::move(w));
  }
  for (const auto& t : file.tensors)
    if (!consumed.contains(t.name)) c.tensors.push_back(t);
  std::unordered_set<std::string_view> weight_names;  // (find_weight scans: quadratic in the weights)
  for (const auto& w : c.weights) weight_names.insert(w.name);
  for (const auto& [k, v] : file.metadata) {
    if (k == checkpoint_annotation_key) continue;
    if (k.rfind("nvfp4.", 0) == 0 && weight_names.contains(std::string_view(k).substr(6))) continue;  // our per-tensor notes: re-derived
    c.metadata[k] = v;
  }
  if (const auto it = file.metadata.find(checkpoint_annotation_key); it != file.metadata.end())
    apply_annotation(c, it->second, /*stored_decode=*/true);
  check_configs(c, where);
  check_fused_scales(c, c.warnings);
  return c;
}

/// Reads a ModelOpt checkpoint: a .safetensors file, or a directory (model.safetensors or shards
/// + index, hf_quant_config.json, config.json). hf_quant_config's exclude_modules become
/// `ignore`; a quant_algo other than NVFP4 / MXFP4 / MIXED_PRECISION, or an NVFP4 group_size
/// other than 16, is unsupported. Load-time findings are in `warnings`.
inline checkpoint read_modelopt(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  checkpoint c = modelopt_from_safetensors(read_safetensors_checkpoint(path), path.string());
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return c;
  if (fs::exists(path / "hf_quant_config.json", ec)) {
    c.hf_quant_config = read_json_file(path / "hf_quant_config.json");
    const auto q = c.hf_quant_config.find("quantization");
    if (q == c.hf_quant_config.end() || !q->is_object())
      throw error(errc::malformed_file, (path / "hf_quant_config.json").string() + ": no \"quantization\" object");
    const auto algo_it = q->find("quant_algo");
    const std::string algo = algo_it != q->end() && algo_it->is_string() ? algo_it->get<std::string>() : "?";
    if (algo != "NVFP4" && algo != "MXFP4" && algo != "MIXED_PRECISION")
      throw error(errc::unsupported, (path / "hf_quant_config.json").string() + ": quant_algo " + clip_for_message(algo) +
                                         " (NVFP4, MXFP4 and MIXED_PRECISION are read)");
    check_configs(c, (path / "hf_quant_config.json").string());  // (group_size, and the weights it describes)
    c.ignore.clear();
    if (const auto ex = q->find("exclude_modules"); ex != q->end() && ex->is_array())
      for (const auto& m : *ex)
        if (m.is_string()) c.ignore.push_back(m.get<std::string>());
  }
  if (fs::exists(path / "config.json", ec)) {
    c.model_config = read_json_file(path / "config.json");
    c.model_config.erase("quantization_config");
  }
  check_configs(c, path.string());
  return c;
}

/// What write_modelopt does beyond the tensors.
struct modelopt_write_options {
  std::uint64_t max_shard_bytes = std::uint64_t{5} << 30;  ///< directory output: shard above this
  bool hf_quant_config_beside_file = false;                ///< file output: also write hf_quant_config.json beside it
};

/// The ModelOpt tensors of a checkpoint as one safetensors_file (in safetensors' own order), with
/// the annotation for what ModelOpt cannot hold when `annotate_configs` (a file output: configs).
/// Throws shape_mismatch for a weight with an odd number of columns (ModelOpt infers K from the
/// byte count) and unsupported for an RHT-rotated weight.
inline safetensors_file modelopt_to_safetensors(const checkpoint& c, bool annotate_configs) {
  using namespace detail_modelopt;
  safetensors_file file;
  std::vector<std::string> warnings;
  for (const auto& w : c.weights) {
    check_weight_on_load(w, "modelopt writer", warnings);
    if (w.cols % 2)
      throw error(errc::shape_mismatch, "modelopt writer: tensor '" + w.name + "' has " + std::to_string(w.cols) +
                                            " columns; ModelOpt's layout infers K = 2 x bytes per row, so it cannot hold an odd K");
    file.tensors.push_back(u8_tensor(w.name + ".weight", safetensors_dtype::u8, w.rows, w.data_cols(), w.data));
    file.tensors.push_back(u8_tensor(w.name + ".weight_scale",
                                     w.format == weight_format::nvfp4 ? safetensors_dtype::f8_e4m3 : safetensors_dtype::u8, w.rows,
                                     w.scale_cols(), w.scales));
    if (w.format == weight_format::nvfp4) file.tensors.push_back(f32_tensor(w.name + ".weight_scale_2", w.weight_scale.decode, {}));
    if (w.input_scale) file.tensors.push_back(f32_tensor(w.name + ".input_scale", w.input_scale->decode, {}));
  }
  for (const auto& t : c.tensors) file.tensors.push_back(t);
  std::unordered_set<std::string_view> names;  // (a set, not a count per tensor: linear in the tensor count)
  names.reserve(file.tensors.size());
  for (const auto& t : file.tensors)
    if (!names.insert(t.name).second)
      throw error(errc::invalid_argument, "modelopt writer: two tensors would be named '" + clip_for_message(t.name) + "'");
  for (const auto& w : c.weights)
    if (w.rht)
      throw error(errc::unsupported,
                  "modelopt writer: tensor '" + w.name +
                      "' was quantized after TE's RHT; ModelOpt's layout cannot say so (use nvfp4 quantize's own files)");
  file.metadata = c.metadata;
  const auto annotation = make_annotation(c, /*stored_decode=*/true, /*with_metadata=*/false, annotate_configs, /*with_order=*/true);
  if (!annotation.empty()) file.metadata[checkpoint_annotation_key] = annotation.dump();
  sort_like_safetensors(file.tensors);
  return file;
}

/// Writes a ModelOpt checkpoint. `path` ending in .safetensors: one file (and hf_quant_config.json
/// beside it when asked). Otherwise a directory: model.safetensors or shards + index,
/// hf_quant_config.json (the source's when it had one, else made from the weights), and
/// config.json with ModelOpt's quantization_config when the source had a config.json. Everything
/// is checked before the first file is written.
inline void write_modelopt(const std::filesystem::path& path, const checkpoint& c, const modelopt_write_options& options = {}) {
  using namespace detail_modelopt;
  // Nothing its readers refuse (modelopt_to_safetensors also lays out what read_as_modelopt reads,
  // --accept-invalid-scales included, so the checks are the writer's).
  check_configs(c, "modelopt writer");
  for (const auto& w : c.weights) require_readable_weight(w, "modelopt writer");
  const bool single_file = path.extension() == ".safetensors";
  safetensors_file file = modelopt_to_safetensors(c, /*annotate_configs=*/single_file);
  const nlohmann::ordered_json hf = c.hf_quant_config.is_null() ? make_hf_quant_config(c) : c.hf_quant_config;
  if (single_file) {
    write_safetensors(path, file);
    if (options.hf_quant_config_beside_file) {
      const auto dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
      write_json_file(dir / "hf_quant_config.json", hf, 4);
    }
    return;
  }
  // The directory as a whole (io/atomic_directory.hpp): a failure leaves an existing one as it was.
  write_directory_atomically(path, [&](const std::filesystem::path& dir) {
    detail_sharded::write_tensor_files(dir, std::move(file), options.max_shard_bytes);  // (taken by value: no copy of the model)
    write_json_file(dir / "hf_quant_config.json", hf, 4);
    if (!c.model_config.is_null()) {
      nlohmann::ordered_json config = c.model_config;
      config["quantization_config"] = config_json_quantization(hf);
      write_json_file(dir / "config.json", config, 4);
    }
  });
}

}  // namespace nvfp4::io
