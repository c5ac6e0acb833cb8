// nvfp4/io/compressed_tensors.hpp: compressed-tensors' "nvfp4-pack-quantized" checkpoints (what
// llm-compressor writes and vLLM reads): for each quantized module W, W.weight_packed (U8 [N, K/2],
// the same packing as ModelOpt), W.weight_scale (F8_E4M3 [N, K/16]), W.weight_global_scale (F32
// [1], the ENCODE scale 2688 / amax, the reciprocal sense of ModelOpt's weight_scale_2) and
// W.input_global_scale (F32 [1], likewise 1 / ModelOpt's input_scale), plus config.json's
// "quantization_config" (quant_method "compressed-tensors", format "nvfp4-pack-quantized",
// config_groups, ignore). Layout and sources: docs/formats_and_layouts.md.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>
#include <string>
#include <utility>

#include "nvfp4/io/checkpoint.hpp"
#include "nvfp4/io/modelopt.hpp"
#include "nvfp4/io/sharded_safetensors.hpp"

namespace nvfp4::io {

inline constexpr const char* compressed_tensors_nvfp4_format = "nvfp4-pack-quantized";

namespace detail_compressed_tensors {

inline float one_f32(const safetensors_tensor& t, const std::string& where) {
  if (t.dtype != safetensors_dtype::f32 || t.bytes.size() != 4)
    throw error(errc::dtype_mismatch, where + ": tensor '" + t.name + "' is not one F32 value (" +
                                          std::string(safetensors_dtype_name(t.dtype)) + " " + detail_safetensors::shape_text(t.shape) +
                                          ")");
  float v;
  std::memcpy(&v, t.bytes.data(), 4);
  return v;
}

/// The NVFP4 preset's QuantizationArgs (quantization/quant_scheme.py NVFP4 / NVFP4A16), as JSON.
inline nlohmann::ordered_json nvfp4_args(bool activations) {
  nlohmann::ordered_json a;
  a["num_bits"] = 4;
  a["type"] = "float";
  a["symmetric"] = true;
  a["group_size"] = 16;
  a["strategy"] = "tensor_group";
  a["block_structure"] = nullptr;
  a["dynamic"] = activations ? nlohmann::ordered_json("local") : nlohmann::ordered_json(false);
  a["actorder"] = nullptr;
  a["scale_dtype"] = "torch.float8_e4m3fn";
  a["zp_dtype"] = "torch.float8_e4m3fn";
  a["observer"] = activations ? "static_minmax" : "memoryless_minmax";
  a["observer_kwargs"] = nlohmann::ordered_json::object();
  return a;
}

}  // namespace detail_compressed_tensors

/// Parses compressed-tensors' NVFP4 tensors out of a set of tensors; every W.weight_packed must
/// come with W.weight_scale (F8_E4M3, [N, K/16]) and W.weight_global_scale (one F32). Anything
/// else stays a tensor. Throws malformed_file / dtype_mismatch / shape_mismatch naming the tensor.
inline checkpoint compressed_tensors_from_safetensors(const safetensors_file& file, const std::string& where) {
  using namespace detail_compressed_tensors;
  checkpoint c;
  std::set<std::string> consumed;
  for (const auto& t : file.tensors) {
    const auto module = name_before_suffix(t.name, ".weight_packed");
    if (!module) continue;
    const std::string& name = *module;
    const auto* scale = file.find(name + ".weight_scale");
    const auto* global = file.find(name + ".weight_global_scale");
    if (!scale || !global)
      throw error(errc::malformed_file,
                  where + ": tensor '" + name + "' has weight_packed but no " + (scale ? "weight_global_scale" : "weight_scale"));
    if (t.dtype != safetensors_dtype::u8 || t.shape.size() != 2)
      throw error(errc::dtype_mismatch, where + ": " + t.name + " is " + std::string(safetensors_dtype_name(t.dtype)) + " " +
                                            detail_safetensors::shape_text(t.shape) + ", expected U8 [N, K/2]");
    if (scale->dtype != safetensors_dtype::f8_e4m3 || scale->shape.size() != 2)
      throw error(errc::dtype_mismatch, where + ": " + scale->name + " is " + std::string(safetensors_dtype_name(scale->dtype)) + " " +
                                            detail_safetensors::shape_text(scale->shape) + ", expected F8_E4M3 [N, K/16]");
    quantized_weight w;
    w.name = name;
    w.format = weight_format::nvfp4;
    w.rows = t.shape[0];
    w.cols = t.shape[1] * 2;
    if (scale->shape[0] != w.rows || scale->shape[1] != w.scale_cols())
      throw error(errc::shape_mismatch, where + ": " + scale->name + " is " + detail_safetensors::shape_text(scale->shape) +
                                            ", the packed weight " + detail_safetensors::shape_text(t.shape) + " needs [" +
                                            std::to_string(w.rows) + ", " + std::to_string(w.scale_cols()) + "]");
    w.data = t.bytes;
    w.scales = scale->bytes;
    w.weight_scale = scale_pair::from_encode(one_f32(*global, where));
    consumed.insert({t.name, scale->name, global->name});
    if (const auto* input = file.find(name + ".input_global_scale")) {
      w.input_scale = scale_pair::from_encode(one_f32(*input, where));
      consumed.insert(input->name);
    }
    if (const auto* zp = file.find(name + ".weight_zero_point"))
      throw error(errc::unsupported, where + ": " + zp->name + ": asymmetric NVFP4 is not a format a GPU runs");
    check_weight_on_load(w, where, c.warnings);
    c.weights.push_back(std::move(w));
  }
  for (const auto& t : file.tensors)
    if (!consumed.contains(t.name)) c.tensors.push_back(t);
  for (const auto& [k, v] : file.metadata)
    if (k != checkpoint_annotation_key) c.metadata[k] = v;
  if (const auto it = file.metadata.find(checkpoint_annotation_key); it != file.metadata.end())
    apply_annotation(c, it->second, /*stored_decode=*/false);
  check_configs(c, where);
  check_fused_scales(c, c.warnings);
  return c;
}

/// Reads a compressed-tensors checkpoint (a .safetensors file, or a directory with config.json).
/// A directory's quantization_config must say quant_method "compressed-tensors" and format
/// nvfp4-pack-quantized (per group or overall); its "ignore" list becomes `ignore`.
inline checkpoint read_compressed_tensors(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  checkpoint c = compressed_tensors_from_safetensors(read_safetensors_checkpoint(path), path.string());
  std::error_code ec;
  if (!fs::is_directory(path, ec) || !fs::exists(path / "config.json", ec)) return c;
  auto config = read_json_file(path / "config.json");
  if (const auto q = config.find("quantization_config"); q != config.end() && q->is_object()) {
    const std::string method = q->value("quant_method", std::string("?"));
    if (method != "compressed-tensors")
      throw error(errc::malformed_file, (path / "config.json").string() + ": quant_method is '" + method + "', not compressed-tensors");
    std::set<std::string> formats;
    if (q->contains("format") && (*q)["format"].is_string()) formats.insert((*q)["format"].get<std::string>());
    if (const auto g = q->find("config_groups"); g != q->end() && g->is_object())
      for (const auto& [_, group] : g->items())
        if (group.is_object() && group.contains("format") && group["format"].is_string())
          formats.insert(group["format"].get<std::string>());
    for (const auto& f : formats)
      if (f != compressed_tensors_nvfp4_format && f != "dense" && f != "mixed-precision")
        throw error(errc::unsupported, (path / "config.json").string() + ": compression format '" + f + "' (only " +
                                           compressed_tensors_nvfp4_format + " is read)");
    if (const auto ig = q->find("ignore"); ig != q->end() && ig->is_array()) {
      c.ignore.clear();
      for (const auto& m : *ig)
        if (m.is_string()) c.ignore.push_back(m.get<std::string>());
    }
  }
  config.erase("quantization_config");
  if (!config.empty()) c.model_config = config;
  check_configs(c, path.string());
  return c;
}

/// The quantization_config compressed-tensors writes into config.json for these weights.
inline nlohmann::ordered_json compressed_tensors_quantization_config(const checkpoint& c) {
  using detail_compressed_tensors::nvfp4_args;
  bool activations = !c.weights.empty();
  for (const auto& w : c.weights) activations = activations && w.input_scale.has_value();
  nlohmann::ordered_json group;
  group["format"] = compressed_tensors_nvfp4_format;
  group["input_activations"] = activations ? nvfp4_args(true) : nlohmann::ordered_json(nullptr);
  group["output_activations"] = nullptr;
  group["targets"] = {"Linear"};
  group["weights"] = nvfp4_args(false);
  nlohmann::ordered_json q;
  q["config_groups"] = {{"group_0", group}};
  q["format"] = compressed_tensors_nvfp4_format;
  q["global_compression_ratio"] = nullptr;
  q["ignore"] = c.ignore;
  q["kv_cache_scheme"] = nullptr;
  q["quant_method"] = "compressed-tensors";
  q["quantization_status"] = "compressed";
  return q;
}

/// The compressed-tensors tensors of a checkpoint as one safetensors_file. Throws unsupported for
/// MXFP4 and RHT-rotated weights, shape_mismatch for an odd K, before anything is written.
inline safetensors_file compressed_tensors_to_safetensors(const checkpoint& c, bool annotate_model_config) {
  using detail_modelopt::f32_tensor;
  using detail_modelopt::u8_tensor;
  safetensors_file file;
  std::vector<std::string> warnings;
  check_configs(c, "compressed-tensors writer");
  for (const auto& w : c.weights) {
    check_weight_on_load(w, "compressed-tensors writer", warnings);
    require_readable_weight(w, "compressed-tensors writer");  // nothing its readers refuse
    if (w.format != weight_format::nvfp4)
      throw error(errc::unsupported, "compressed-tensors writer: tensor '" + w.name + "' is MXFP4; this writer holds " +
                                         compressed_tensors_nvfp4_format + " weights only");
    if (w.rht)
      throw error(errc::unsupported,
                  "compressed-tensors writer: tensor '" + w.name + "' was quantized after TE's RHT; compressed-tensors cannot say so");
    if (w.cols % 2)
      throw error(errc::shape_mismatch, "compressed-tensors writer: tensor '" + w.name + "' has an odd number of columns (" +
                                            std::to_string(w.cols) + "); the layout infers K = 2 x bytes per row");
    file.tensors.push_back(u8_tensor(w.name + ".weight_packed", safetensors_dtype::u8, w.rows, w.data_cols(), w.data));
    file.tensors.push_back(u8_tensor(w.name + ".weight_scale", safetensors_dtype::f8_e4m3, w.rows, w.scale_cols(), w.scales));
    file.tensors.push_back(f32_tensor(w.name + ".weight_global_scale", w.weight_scale.encode, {1}));
    if (w.input_scale) file.tensors.push_back(f32_tensor(w.name + ".input_global_scale", w.input_scale->encode, {1}));
  }
  for (const auto& t : c.tensors) file.tensors.push_back(t);
  std::set<std::string> names;
  for (const auto& t : file.tensors)
    if (!names.insert(t.name).second)
      throw error(errc::invalid_argument, "compressed-tensors writer: two tensors would be named '" + t.name + "'");
  file.metadata = c.metadata;
  // config.json holds ignore and the model config natively; ModelOpt's producer block does not fit.
  auto annotation = make_annotation(c, /*stored_decode=*/false, /*with_metadata=*/false, /*with_configs=*/true, /*with_order=*/true);
  if (!annotate_model_config) {  // (erasing keeps the order of the other keys: the same JSON as leaving them out)
    annotation.erase("model_config");
    annotation.erase("ignore");
  }
  if (!annotation.empty()) file.metadata[checkpoint_annotation_key] = annotation.dump();
  sort_like_safetensors(file.tensors);
  return file;
}

/// Writes a compressed-tensors checkpoint: a .safetensors file, or a directory (model.safetensors
/// or shards + index, and config.json with quantization_config, built on the source's config.json
/// when it had one).
inline void write_compressed_tensors(const std::filesystem::path& path, const checkpoint& c,
                                     std::uint64_t max_shard_bytes = std::uint64_t{5} << 30) {
  const bool single_file = path.extension() == ".safetensors";
  safetensors_file file = compressed_tensors_to_safetensors(c, /*annotate_model_config=*/single_file);
  if (single_file) {
    write_safetensors(path, file);
    return;
  }
  // Hugging Face's save_pretrained writes config.json with sorted keys, indent 2 and a newline.
  nlohmann::json config = c.model_config.is_null() ? nlohmann::json::object() : nlohmann::json(c.model_config);
  config["quantization_config"] = nlohmann::json(compressed_tensors_quantization_config(c));
  // The directory as a whole (io/atomic_directory.hpp): a failure leaves an existing one as it was.
  write_directory_atomically(path, [&](const std::filesystem::path& dir) {
    detail_sharded::write_tensor_files(dir, std::move(file), max_shard_bytes);  // (taken by value: no copy of the model)
    write_json_file(dir / "config.json", config, 2, /*trailing_newline=*/true);
  });
}

}  // namespace nvfp4::io
