// nvfp4/io/safetensors_source.hpp: the tensors of a safetensors file or a Hugging Face checkpoint
// directory, read one at a time. Opening reads and checks the headers only (every check that
// read_safetensors_checkpoint makes: each header, and for a directory the index against its
// shards); a tensor's bytes are read when asked for. A reader that goes tensor by tensor (the
// CLI's inspect and dequantize) so holds one tensor at a time, not the whole checkpoint
// (issue 39: inspecting a 288 MB file peaked at 3.0 GB). Also over an image or a
// safetensors_file already in memory, so that one code path serves files and bytes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nvfp4/error.hpp"
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

/// One tensor of a safetensors_source: what its header says, and where its bytes are.
struct safetensors_entry {
  std::string name;
  safetensors_dtype dtype = safetensors_dtype::f32;
  std::vector<std::int64_t> shape;
  std::size_t part = 0;      ///< which file of the source (a shard)
  std::uint64_t offset = 0;  ///< of its first byte within that file
  std::uint64_t size = 0;    ///< its byte count (shape x dtype size)
};

/// A checkpoint's tensors, read on demand (see the file comment).
class safetensors_source {
 public:
  /// A .safetensors file, or a directory holding model.safetensors, or an index and its shards
  /// (or exactly one .safetensors file). Reads and checks the headers as read_safetensors_checkpoint
  /// does (io_error, malformed_file, unsupported, invalid_argument, with its messages); no tensor
  /// data is read. The tensors are in shard order, then file order; metadata merged (a key set
  /// differently by two shards is malformed_file).
  static safetensors_source open(const std::filesystem::path& path);

  /// A safetensors image in memory, checked as parse_safetensors checks it (`name` in messages).
  /// The image is not copied: it must outlive the source.
  static safetensors_source of_image(std::span<const std::uint8_t> image, const std::string& name) {
    safetensors_source s;
    s.image_ = image;
    s.parts_.push_back(name);
    const std::uint64_t header_size = detail_safetensors::header_length(image.data(), image.size(), name);
    const std::string_view text(reinterpret_cast<const char*>(image.data() + 8), header_size);
    const auto entries = detail_safetensors::parse_header(text, image.size() - 8 - header_size, s.metadata_, name);
    for (const auto& e : entries) s.append(e, 0, 8 + header_size);
    return s;
  }

  /// The tensors of `file` (not copied: it must outlive the source), e.g. a checkpoint of another
  /// format already read and laid out as ModelOpt's.
  static safetensors_source of_file(const safetensors_file& file) {
    safetensors_source s;
    s.file_ = &file;
    s.metadata_ = file.metadata;
    s.parts_.push_back("<memory>");
    for (std::size_t i = 0; i < file.tensors.size(); ++i) {
      const auto& t = file.tensors[i];
      s.entries_.push_back({t.name, t.dtype, t.shape, 0, static_cast<std::uint64_t>(i), t.bytes.size()});
      s.positions_.emplace(t.name, s.entries_.size() - 1);
    }
    return s;
  }

  safetensors_source(safetensors_source&&) = default;
  safetensors_source& operator=(safetensors_source&&) = default;

  const std::vector<safetensors_entry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The files the tensors are in (one for a file, the shards of a directory).
  const std::vector<std::string>& parts() const { return parts_; }

  /// The tensor named `name`, or nullptr (constant time).
  const safetensors_entry* find(std::string_view name) const {
    const auto it = positions_.find(std::string(name));
    return it == positions_.end() ? nullptr : &entries_[it->second];
  }

  /// The tensor of `e`, its bytes read now. io_error when its file cannot be read (any more).
  safetensors_tensor load(const safetensors_entry& e) const {
    safetensors_tensor t;
    t.name = e.name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    if (e.size == 0) return t;
    if (file_) {
      t.bytes = file_->tensors[static_cast<std::size_t>(e.offset)].bytes;
    } else if (!image_.empty()) {
      t.bytes.assign(image_.data() + e.offset, image_.data() + e.offset + e.size);
    } else {
      t.bytes.resize(static_cast<std::size_t>(e.size));
      read_part(e.part, e.offset, e.size, t.bytes.data());
    }
    return t;
  }

  /// The named tensors that are there, read now, in the order given, with the metadata entries
  /// whose keys are in `metadata_keys`: a small file the quantized-tensor readers take.
  safetensors_file load(std::span<const std::string> names, std::span<const std::string> metadata_keys = {}) const {
    safetensors_file out;
    for (const auto& n : names)
      if (const auto* e = find(n)) out.tensors.push_back(load(*e));
    for (const auto& k : metadata_keys)
      if (const auto it = metadata_.find(k); it != metadata_.end()) out.metadata.insert(*it);
    return out;
  }

  /// Every tensor with all the metadata: what read_safetensors_checkpoint returns.
  safetensors_file load_all() const {
    safetensors_file out;
    out.metadata = metadata_;
    out.tensors.reserve(entries_.size());
    for (const auto& e : entries_) out.tensors.push_back(load(e));
    return out;
  }

 private:
  safetensors_source() = default;

  void append(const detail_safetensors::header_entry& e, std::size_t part, std::uint64_t data_start) {
    entries_.push_back({e.name, e.dtype, e.shape, part, data_start + e.begin, e.end - e.begin});
    positions_.emplace(e.name, entries_.size() - 1);
  }

  /// Reads bytes of file `part`. One file is kept open at a time (a directory may have a shard per
  /// tensor), so reading the tensors in their order opens each file once. Guarded: const loads
  /// from several threads are safe.
  void read_part(std::size_t part, std::uint64_t offset, std::uint64_t count, std::uint8_t* out) const {
    const std::lock_guard lock(*mutex_);
    if (!open_ || open_part_ != part) {
      open_.reset();
      open_ = std::make_unique<file_reader>(parts_[part]);
      open_part_ = part;
    }
    open_->read(offset, count, out);
  }

  /// Reads and checks the header of file `path` (part `part`): its entries appended, its metadata
  /// into `metadata`. `opened` keeps the file open for the first tensor reads.
  void read_header(const std::filesystem::path& path, std::size_t part, std::map<std::string, std::string>& metadata,
                   std::vector<detail_safetensors::header_entry>& entries, std::uint64_t& data_start) {
    auto file = std::make_unique<file_reader>(path);
    std::uint8_t prefix[8] = {};
    const std::uint64_t size = file->size();
    file->read(0, std::min<std::uint64_t>(size, 8), prefix);
    const std::uint64_t header_size = detail_safetensors::header_length(prefix, size, path.string());
    const std::vector<std::uint8_t> text = file->read(8, header_size);
    entries = detail_safetensors::parse_header(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()),
                                               size - 8 - header_size, metadata, path.string());
    data_start = 8 + header_size;
    open_ = std::move(file);
    open_part_ = part;
  }

  std::vector<std::string> parts_;
  std::vector<safetensors_entry> entries_;
  std::unordered_map<std::string, std::size_t> positions_;
  std::map<std::string, std::string> metadata_;
  std::span<const std::uint8_t> image_;
  const safetensors_file* file_ = nullptr;
  std::unique_ptr<std::mutex> mutex_ = std::make_unique<std::mutex>();
  mutable std::unique_ptr<file_reader> open_;
  mutable std::size_t open_part_ = 0;
};

inline safetensors_source safetensors_source::open(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  safetensors_source s;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    s.parts_.push_back(path.string());
    std::vector<detail_safetensors::header_entry> entries;
    std::uint64_t data_start = 0;
    s.read_header(path, 0, s.metadata_, entries, data_start);
    for (const auto& e : entries) s.append(e, 0, data_start);
    return s;
  }
  const fs::path index_path = path / safetensors_index_name;
  std::vector<std::string> shard_names;
  std::map<std::string, std::string> weight_map;
  if (fs::exists(index_path, ec)) {
    const auto index = read_json_file(index_path);
    const auto it = index.find("weight_map");
    if (it == index.end() || !it->is_object()) throw error(errc::malformed_file, index_path.string() + ": no \"weight_map\" object");
    std::set<std::string> listed;  // (a set: a scan of shard_names per entry was quadratic with one shard per tensor)
    for (const auto& [tensor, shard] : it->items()) {
      if (!shard.is_string())
        throw error(errc::malformed_file, index_path.string() + ": the shard of '" + clip_for_message(tensor) + "' is not a string");
      const std::string& name = shard.get_ref<const std::string&>();
      if (name.empty() || name.size() > 255 || name.find('/') != std::string::npos || name.find('\\') != std::string::npos || name == "." ||
          name == "..")
        throw error(errc::malformed_file, index_path.string() + ": shard name '" + clip_for_message(name) + "' is not a plain file name");
      weight_map[tensor] = name;
      listed.insert(name);
    }
    shard_names.assign(listed.begin(), listed.end());  // sorted
    // A shard file beside the index that it does not list holds tensors the index would drop.
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      const std::string n = entry.path().filename().string();
      const bool shard_like = n.size() == 32 && n.rfind("model-", 0) == 0 && n.find("-of-") == 11 && n.ends_with(".safetensors");
      if (shard_like && !listed.contains(n))
        throw error(errc::malformed_file,
                    index_path.string() + ": shard " + n + " is in the directory but the index lists none of its tensors");
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
  for (const auto& shard : shard_names) {
    const fs::path shard_path = path / shard;
    const std::size_t part = s.parts_.size();
    s.parts_.push_back(shard_path.string());
    std::map<std::string, std::string> metadata;
    std::vector<detail_safetensors::header_entry> entries;
    std::uint64_t data_start = 0;
    s.read_header(shard_path, part, metadata, entries, data_start);
    for (const auto& [k, v] : metadata) {
      const auto [it, inserted] = s.metadata_.emplace(k, v);
      if (!inserted && it->second != v)
        throw error(errc::malformed_file, shard_path.string() + ": metadata '" + clip_for_message(k) + "' differs from another shard's");
    }
    for (const auto& e : entries) {
      if (!weight_map.empty()) {
        const auto it = weight_map.find(e.name);
        if (it == weight_map.end())
          throw error(errc::malformed_file, shard_path.string() + ": tensor '" + clip_for_message(e.name) + "' is not in the index");
        if (it->second != shard)
          throw error(errc::malformed_file,
                      shard_path.string() + ": tensor '" + clip_for_message(e.name) + "' is listed in shard " + it->second);
      }
      if (s.positions_.contains(e.name))
        throw error(errc::malformed_file, shard_path.string() + ": tensor '" + clip_for_message(e.name) + "' is also in another shard");
      s.append(e, part, data_start);
    }
  }
  for (const auto& [tensor, shard] : weight_map)
    if (!s.positions_.contains(tensor))
      throw error(errc::malformed_file,
                  index_path.string() + ": tensor '" + clip_for_message(tensor) + "' is listed in " + shard + " but not there");
  return s;
}

}  // namespace nvfp4::io
