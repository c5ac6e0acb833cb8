// nvfp4/io/sharded_safetensors.hpp: a Hugging Face checkpoint directory's tensors: one
// model.safetensors, or shards named by model.safetensors.index.json ({"metadata": {"total_size"},
// "weight_map": {tensor: shard}}), read into one safetensors_file with every cross-file check
// (io/safetensors_source.hpp reads them one at a time), and written back (sharded above a size
// limit), plus its JSON side files (config.json, ...).
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
#include "nvfp4/io/safetensors_source.hpp"

namespace nvfp4::io {

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
/// shards is malformed_file). Each tensor is read straight into its own buffer (no copy of the
/// whole file is held); safetensors_source reads them one at a time.
inline safetensors_file read_safetensors_checkpoint(const std::filesystem::path& path) { return safetensors_source::open(path).load_all(); }

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
  write_directory_atomically(
      dir, [&](const std::filesystem::path& staging) { detail_sharded::write_tensor_files(staging, std::move(file), max_shard_bytes); });
}

}  // namespace nvfp4::io
