// nvfp4/io/sharded_safetensors.hpp: a Hugging Face checkpoint directory's tensors: one
// model.safetensors, or shards named by model.safetensors.index.json ({"metadata": {"total_size"},
// "weight_map": {tensor: shard}}), read into one safetensors_file with every cross-file check, and
// written back (sharded above a size limit), plus its JSON side files (config.json, ...).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nvfp4/io/atomic_directory.hpp"
#include "nvfp4/io/checkpoint.hpp"
#include "nvfp4/io/file_bytes.hpp"
#include "nvfp4/io/json_limits.hpp"
#include "nvfp4/io/safetensors.hpp"

namespace nvfp4::io {

/// The index file name of a sharded checkpoint.
inline constexpr const char* safetensors_index_name = "model.safetensors.index.json";

/// Reads a JSON file (config.json, hf_quant_config.json, an index); io_error when it cannot be
/// read, malformed_file when it is not a JSON object, is invalid or nests deeper than
/// json_max_depth (a key given twice keeps its last value, as Python's json module reads it).
inline nlohmann::ordered_json read_json_file(const std::filesystem::path& path) {
  const auto bytes = read_file_bytes(path);
  auto j = parse_json_bounded<nlohmann::ordered_json>(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                                                      path.string(), duplicate_keys::keep_last);
  if (!j.is_object()) throw error(errc::malformed_file, path.string() + ": not a JSON object");
  return j;
}

/// Writes JSON text the way Python's json.dump(indent=...) lays it out (what ModelOpt and
/// Hugging Face write), atomically; `trailing_newline` as HF adds to its files. An
/// nlohmann::json sorts its keys (HF's sort_keys=True), an ordered_json keeps their order.
template <class Json>
void write_json_file(const std::filesystem::path& path, const Json& j, int indent, bool trailing_newline = false) {
  std::string text = j.dump(indent);
  if (trailing_newline) text += "\n";
  write_file_atomically(path, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

/// All tensors of a checkpoint: a .safetensors file, or a directory holding model.safetensors or
/// an index and its shards (or exactly one .safetensors file). Shards are checked against the
/// index: every listed tensor in its shard, no tensor in two places, none unlisted. The result's
/// tensors are in shard order, then file order; metadata is merged (a key set differently by two
/// shards is malformed_file).
inline safetensors_file read_safetensors_checkpoint(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return read_safetensors(path);
  const fs::path index_path = path / safetensors_index_name;
  std::vector<std::string> shard_names;
  std::map<std::string, std::string> weight_map;
  if (fs::exists(index_path, ec)) {
    std::set<std::string> listed;  // (a set: a scan of shard_names per entry was quadratic with one shard per tensor)
    const auto index = read_json_file(index_path);
    const auto it = index.find("weight_map");
    if (it == index.end() || !it->is_object())
      throw error(errc::malformed_file, index_path.string() + ": no \"weight_map\" object");
    for (const auto& [tensor, shard] : it->items()) {
      if (!shard.is_string()) throw error(errc::malformed_file, index_path.string() + ": the shard of '" + clip_for_message(tensor) + "' is not a string");
      const std::string s = shard.get<std::string>();
      if (s.empty() || s.size() > 255 || s.find('/') != std::string::npos || s.find('\\') != std::string::npos || s == "." || s == "..")
        throw error(errc::malformed_file, index_path.string() + ": shard name '" + clip_for_message(s) + "' is not a plain file name");
      weight_map[tensor] = s;
      listed.insert(s);
    }
    shard_names.assign(listed.begin(), listed.end());  // sorted
    // A shard file beside the index that it does not list holds tensors the index would drop.
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      const std::string n = entry.path().filename().string();
      const bool shard_like = n.size() == 32 && n.rfind("model-", 0) == 0 && n.find("-of-") == 11 && n.ends_with(".safetensors");
      if (shard_like && !listed.contains(n))
        throw error(errc::malformed_file, index_path.string() + ": shard " + n + " is in the directory but the index lists none of its tensors");
    }
  } else if (fs::exists(path / "model.safetensors", ec)) {
    shard_names = {"model.safetensors"};
  } else {
    for (const auto& entry : fs::directory_iterator(path, ec))
      if (entry.path().extension() == ".safetensors") shard_names.push_back(entry.path().filename().string());
    if (shard_names.size() != 1)
      throw error(errc::invalid_argument, path.string() + ": no model.safetensors or " + safetensors_index_name + ", and " +
                                              std::to_string(shard_names.size()) + " .safetensors files (expected one)");
  }
  safetensors_file merged;
  std::set<std::string> seen;
  for (const auto& shard : shard_names) {
    safetensors_file part = read_safetensors(path / shard);
    for (const auto& [k, v] : part.metadata) {
      const auto [it, inserted] = merged.metadata.emplace(k, v);
      if (!inserted && it->second != v)
        throw error(errc::malformed_file, (path / shard).string() + ": metadata '" + clip_for_message(k) + "' differs from another shard's");
    }
    for (auto& t : part.tensors) {
      if (!weight_map.empty()) {
        const auto it = weight_map.find(t.name);
        if (it == weight_map.end())
          throw error(errc::malformed_file, (path / shard).string() + ": tensor '" + clip_for_message(t.name) + "' is not in the index");
        if (it->second != shard)
          throw error(errc::malformed_file, (path / shard).string() + ": tensor '" + clip_for_message(t.name) + "' is listed in shard " + it->second);
      }
      if (!seen.insert(t.name).second)
        throw error(errc::malformed_file, (path / shard).string() + ": tensor '" + clip_for_message(t.name) + "' is also in another shard");
      merged.tensors.push_back(std::move(t));
    }
  }
  for (const auto& [tensor, shard] : weight_map)
    if (!seen.contains(tensor))
      throw error(errc::malformed_file, index_path.string() + ": tensor '" + clip_for_message(tensor) + "' is listed in " + shard + " but not there");
  return merged;
}

namespace detail_sharded {

/// write_safetensors_checkpoint's files, written into the existing directory `dir`.
inline void write_tensor_files(const std::filesystem::path& dir, safetensors_file file, std::uint64_t max_shard_bytes) {
  sort_like_safetensors(file.tensors);
  std::uint64_t total = 0;
  for (const auto& t : file.tensors) total += t.bytes.size();
  if (total <= max_shard_bytes) {
    write_safetensors(dir / "model.safetensors", file);
    return;
  }
  std::vector<safetensors_file> shards(1);
  std::uint64_t current = 0;
  for (auto& t : file.tensors) {
    if (current > 0 && current + t.bytes.size() > max_shard_bytes) {
      shards.emplace_back();
      current = 0;
    }
    current += t.bytes.size();
    shards.back().tensors.push_back(std::move(t));
  }
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  std::map<std::string, std::string> sorted_map;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    shards[i].metadata = file.metadata;
    for (const auto& t : shards[i].tensors) sorted_map[t.name] = name;
    write_safetensors(dir / name, shards[i]);
  }
  // (appended to the ordered map's vector: its operator[] scans, quadratic in the tensor count;
  // the std::map's keys are unique and sorted)
  auto& entries = weight_map.get_ref<nlohmann::ordered_json::object_t&>();
  entries.reserve(sorted_map.size());
  for (const auto& [k, v] : sorted_map) entries.emplace_back(k, v);
  nlohmann::ordered_json index;
  index["metadata"] = {{"total_size", total}};
  index["weight_map"] = weight_map;
  write_json_file(dir / safetensors_index_name, index, 2, /*trailing_newline=*/true);
}

}  // namespace detail_sharded

/// Writes `file` into directory `dir` as model.safetensors, or, when its tensors take more than
/// `max_shard_bytes`, as model-0000i-of-0000n.safetensors filled in order (a new shard starts
/// when the next tensor would overflow the current one) plus model.safetensors.index.json, as
/// Hugging Face does. Tensors go in safetensors' own order (sort_like_safetensors). The directory
/// is written as a whole (write_directory_atomically): a failure leaves `dir` as it was, an
/// existing `dir` is replaced at once, keeping the files beside its checkpoint.
inline void write_safetensors_checkpoint(const std::filesystem::path& dir, safetensors_file file,
                                         std::uint64_t max_shard_bytes = std::uint64_t{5} << 30) {
  write_directory_atomically(dir, [&](const std::filesystem::path& staging) {
    detail_sharded::write_tensor_files(staging, std::move(file), max_shard_bytes);
  });
}

}  // namespace nvfp4::io
