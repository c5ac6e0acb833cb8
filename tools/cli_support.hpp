// tools/cli_support.hpp: what every nvfp4 subcommand shares: a small argument parser (positional
// arguments, --option VALUE, --flag), usage errors, the exit status table, a stderr progress bar,
// and loading any input (.npy, or a quantized tensor of a safetensors file) as float32 from a
// file or from bytes in memory (the fuzz harness calls the commands' cores that way).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/io/checkpoint_reader.hpp"
#include "nvfp4/io/npy.hpp"
#include "nvfp4/io/quantized_checkpoint.hpp"
#include "nvfp4/io/safetensors.hpp"

namespace nvfp4::cli {

/// Exit statuses (docs/cli.md): 0 success, 1 an unexpected runtime failure, 2 a usage error,
/// 10 + errc for an nvfp4::error (11 invalid_argument ... 20 overflow).
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;
inline constexpr int exit_usage = 2;
inline constexpr int exit_code_for(errc code) { return 10 + static_cast<int>(code); }

/// Every exit status with its meaning: the one table the help text prints, docs/cli.md
/// reproduces and the tests check against both.
struct exit_status_row {
  int status;
  const char* name;  ///< errc name, or a word for 0, 1, 2
  const char* meaning;
};
inline constexpr exit_status_row exit_statuses[] = {
    {0, "ok", "success"},
    {1, "failure", "an unexpected failure (out of memory, an exception that is not an nvfp4::error)"},
    {2, "usage", "usage error: unknown command or option, missing or extra argument, a bad option value"},
    {exit_code_for(errc::invalid_argument), "invalid_argument",
     "a value out of its domain (no tensor of that name, an output that is an input, ...)"},
    {exit_code_for(errc::shape_mismatch), "shape_mismatch", "shapes that do not fit (GEMM K, stats of different shapes, --rht cols)"},
    {exit_code_for(errc::non_finite_input), "non_finite_input", "NaN/Inf in an input array"},
    {exit_code_for(errc::null_pointer), "null_pointer", "(library only; the tool does not produce it)"},
    {exit_code_for(errc::misaligned), "misaligned", "(library only; the tool does not produce it)"},
    {exit_code_for(errc::dtype_mismatch), "dtype_mismatch", "an element type the command cannot use (an integer .npy to quantize)"},
    {exit_code_for(errc::io_error), "io_error",
     "a file that cannot be opened, read, written or renamed; an existing output (no --force); a read-only output"},
    {exit_code_for(errc::malformed_file), "malformed_file",
     "truncated, inconsistent or lying file; invalid scales; the wrong kind of file; no known format"},
    {exit_code_for(errc::unsupported), "unsupported",
     "a valid file this version does not handle (big-endian, unknown dtype, another tool's format)"},
    {exit_code_for(errc::overflow), "overflow", "finite input whose result does not fit (RHT beyond bf16, GEMM alpha)"},
};

/// The exit status section of the help text, from exit_statuses.
inline std::string exit_status_help() {
  std::string text = "exit status:\n";
  for (const auto& row : exit_statuses) {
    char line[200];
    std::snprintf(line, sizeof line, "  %2d  %-17s %s\n", row.status, row.name, row.meaning);
    text += line;
  }
  return text + "See docs/cli.md.\n";
}

/// A command line that does not fit the subcommand's synopsis.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The parsed arguments of one subcommand.
class arguments {
 public:
  /// Parses argv[first..]: `value_options` take the next argument as their value, `flags` take
  /// none; "--" ends the options. Throws usage_error for unknown options or a missing value.
  arguments(int argc, char** argv, int first, const std::set<std::string>& value_options, const std::set<std::string>& flags) {
    bool options_done = false;
    for (int i = first; i < argc; ++i) {
      const std::string arg = argv[i];
      if (!options_done && arg == "--") {
        options_done = true;
      } else if (!options_done && arg.size() > 1 && arg[0] == '-' && arg != "-") {
        std::string name = arg, value;
        const auto eq = arg.find('=');
        const bool inline_value = eq != std::string::npos;
        if (inline_value) {
          name = arg.substr(0, eq);
          value = arg.substr(eq + 1);
        }
        if (name == "-h") name = "--help";
        if (flags.contains(name) || name == "--help") {
          if (inline_value) throw usage_error("option " + name + " takes no value");
          flags_.insert(name);
        } else if (value_options.contains(name)) {
          if (!inline_value) {
            if (i + 1 >= argc) throw usage_error("option " + name + " needs a value");
            value = argv[++i];
          }
          values_[name] = value;
        } else {
          throw usage_error("unknown option " + name);
        }
      } else {
        positional_.push_back(arg);
      }
    }
  }

  bool help() const { return flags_.contains("--help"); }
  bool flag(const std::string& name) const { return flags_.contains(name); }
  bool has(const std::string& name) const { return values_.contains(name); }
  std::string value(const std::string& name, const std::string& fallback) const {
    const auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  /// An unsigned integer option; usage_error unless the whole value is a number.
  std::uint64_t unsigned_value(const std::string& name, std::uint64_t fallback) const {
    const auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    std::uint64_t v = 0;
    const auto* end = it->second.data() + it->second.size();
    const auto [ptr, ec] = std::from_chars(it->second.data(), end, v);
    if (ec != std::errc{} || ptr != end) throw usage_error("option " + name + " needs a non-negative integer, got '" + it->second + "'");
    return v;
  }
  /// One of `choices`; usage_error otherwise.
  std::string choice(const std::string& name, const std::string& fallback, const std::vector<std::string>& choices) const {
    const std::string v = value(name, fallback);
    for (const auto& c : choices)
      if (v == c) return v;
    std::string all;
    for (const auto& c : choices) all += (all.empty() ? "" : "|") + c;
    throw usage_error("option " + name + " must be one of " + all + ", got '" + v + "'");
  }
  const std::vector<std::string>& positional() const { return positional_; }
  /// Checks the number of positional arguments.
  void expect_positional(std::size_t at_least, std::size_t at_most) const {
    if (positional_.size() < at_least) throw usage_error("missing arguments");
    if (positional_.size() > at_most) throw usage_error("unexpected argument '" + positional_[at_most] + "'");
  }

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
};

/// A progress bar on stderr, drawn only when stderr is a terminal and the job is long enough to
/// be worth one (`worth_showing`); otherwise every call does nothing.
class progress_bar {
 public:
  progress_bar(std::string label, std::int64_t total, bool worth_showing)
      : label_(std::move(label)), total_(total > 0 ? total : 1), enabled_(worth_showing && ::isatty(STDERR_FILENO)) {
    draw();
  }
  progress_bar(const progress_bar&) = delete;
  progress_bar& operator=(const progress_bar&) = delete;
  ~progress_bar() { finish(); }

  /// Marks `steps` more units done; `stage` (optional) names what runs next.
  void advance(std::int64_t steps = 1, const std::string& stage = "") {
    done_ = std::min(total_, done_ + steps);
    if (!stage.empty()) stage_ = stage;
    draw();
  }
  void set_stage(const std::string& stage) {
    stage_ = stage;
    draw();
  }
  void finish() {
    if (!enabled_ || finished_) return;
    done_ = total_;
    draw();
    std::fputc('\n', stderr);
    finished_ = true;
  }

 private:
  void draw() const {
    if (!enabled_ || finished_) return;
    constexpr int width = 30;
    const int filled = static_cast<int>(width * done_ / total_);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "\r%s [%.*s%*s] %3d%% %5.1fs %-24s", label_.c_str(), filled, "##############################", width - filled, "",
                 static_cast<int>(100 * done_ / total_), seconds, stage_.c_str());
    std::fflush(stderr);
  }

  std::string label_;
  std::string stage_;
  std::int64_t total_;
  std::int64_t done_ = 0;
  bool enabled_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// Jobs above this many elements get a progress bar (on a terminal).
inline constexpr std::int64_t progress_threshold = std::int64_t{1} << 22;

/// Output safety, which every command that writes runs before reading its inputs: an output that
/// is one of the inputs (the same file by device and inode, so also through symbolic or hard links,
/// or a directory output holding an input file) is refused, --force or not, since writing it would
/// destroy what is being read; an existing output is refused unless `force`. The write itself is
/// atomic (a temporary renamed over the target), so a refused or failed run leaves files as they were.
namespace detail_output {

struct file_id {
  dev_t device;
  ino_t inode;
  friend bool operator==(const file_id&, const file_id&) = default;
};

inline std::optional<file_id> id_of(const std::filesystem::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return std::nullopt;  // follows symbolic links
  return file_id{st.st_dev, st.st_ino};
}

/// The identities of `p` and, for a directory, of the files in it (two levels: shards, configs).
inline void collect_ids(const std::filesystem::path& p, std::vector<std::pair<file_id, std::string>>& ids, int depth = 0) {
  const auto id = id_of(p);
  if (!id) return;
  ids.push_back({*id, p.string()});
  std::error_code ec;
  if (depth < 2 && std::filesystem::is_directory(p, ec))
    for (const auto& entry : std::filesystem::directory_iterator(p, ec)) collect_ids(entry.path(), ids, depth + 1);
}

}  // namespace detail_output

inline void check_output(const std::string& output, const std::vector<std::string>& inputs, bool force) {
  std::vector<std::pair<detail_output::file_id, std::string>> input_ids, output_ids;
  for (const auto& in : inputs) detail_output::collect_ids(in, input_ids);
  detail_output::collect_ids(output, output_ids);
  for (const auto& [out_id, out_name] : output_ids)
    for (const auto& [in_id, in_name] : input_ids)
      if (out_id == in_id)
        throw error(errc::invalid_argument, "output " + output + (out_name == output ? "" : " (" + out_name + ")") + " is the input " +
                                                in_name + (in_name == output ? "" : " (the same file)") +
                                                "; writing it would destroy the input: choose another output path");
  std::error_code ec;
  if (!force && std::filesystem::exists(std::filesystem::symlink_status(output, ec)))
    throw error(errc::io_error, "output " + output + " exists; pass --force to replace it");
}

/// The message of a checkpoint's load-time warnings: each once, none with --quiet.
inline void print_warnings_once(const std::vector<std::string>& warnings, bool quiet) {
  if (quiet) return;
  std::set<std::string> seen;
  for (const auto& w : warnings)
    if (seen.insert(w).second) std::fprintf(stderr, "warning: %s\n", w.c_str());
}

/// A file's bytes in memory with the name messages use.
struct input_image {
  std::span<const std::uint8_t> bytes;
  std::string name;
};

/// How input files are read (the options several commands share).
struct input_options {
  bool bf16 = false;      ///< --input-dtype bf16: a raw 2-byte .npy array (|V2, <u2, <i2) holds bfloat16 bits
  io::load_options load;  ///< --accept-invalid-scales
  std::string tensor;     ///< --name: which quantized tensor of a safetensors file
};

/// An array loaded as float32: its shape and values (C order).
struct float_array {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
  io::npy_matrix_shape matrix() const {
    io::npy_array a;
    a.shape = shape;
    return io::matrix_shape_of(a);
  }
};

/// The single quantized tensor among `names`, or the one named; invalid_argument otherwise.
inline std::string pick_quantized_name(const std::vector<std::string>& names, const std::string& requested, const std::string& path) {
  if (!requested.empty()) return requested;
  if (names.size() == 1) return names[0];
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
  throw error(errc::invalid_argument, path + (names.empty() ? " holds no quantized tensor"
                                                            : " holds several quantized tensors (" + all + "); pick one with --name"));
}
inline std::string pick_quantized_name(const io::safetensors_file& file, const std::string& requested, const std::string& path) {
  return pick_quantized_name(requested.empty() ? io::quantized_tensor_names(file) : std::vector<std::string>{}, requested, path);
}

/// An .npy image parsed (its dtype reinterpreted as bfloat16 when the options say so); a
/// safetensors image is refused with a message saying what to do instead.
inline io::npy_array parse_npy_input(const input_image& image, const input_options& options, const char* command) {
  if (!io::looks_like_npy(image.bytes.data(), image.bytes.size()) && image.bytes.size() >= 9 && image.bytes[8] == '{')
    throw error(errc::malformed_file, image.name + ": this is a safetensors file, but " + command +
                                          " reads an .npy array (nvfp4 dequantize restores a quantized safetensors file)");
  io::npy_array array = io::parse_npy(image.bytes.data(), image.bytes.size(), image.name);
  if (options.bf16) array = io::reinterpret_as_bfloat16(std::move(array));
  return array;
}

/// A safetensors image parsed; an .npy image is refused with a message saying what to do instead.
inline io::safetensors_file parse_safetensors_input(const input_image& image, const char* command) {
  if (io::looks_like_npy(image.bytes.data(), image.bytes.size()))
    throw error(errc::malformed_file, image.name + ": this is an .npy file, but " + command +
                                          " reads a safetensors file (nvfp4 quantize makes one from an .npy array)");
  return io::parse_safetensors(image.bytes.data(), image.bytes.size(), image.name);
}

/// io::to_float32, its errors naming the file.
inline std::vector<float> to_float32_of(const io::npy_array& array, const std::string& name) {
  try {
    return io::to_float32(array);
  } catch (const error& e) {
    throw nvfp4::detail::with_context(e, name);
  }
}

/// Loads an .npy (float32/float16/bfloat16/float64) or a quantized tensor of a safetensors file
/// (dequantized; options.tensor picks it) as float32.
inline float_array load_float_array(const input_image& image, const input_options& options = {}) {
  float_array out;
  if (io::looks_like_npy(image.bytes.data(), image.bytes.size())) {
    const io::npy_array array = parse_npy_input(image, options, "this command");
    out.shape = array.shape;
    out.values = to_float32_of(array, image.name);
    return out;
  }
  const io::safetensors_file file = io::parse_safetensors(image.bytes.data(), image.bytes.size(), image.name);
  const std::string picked = pick_quantized_name(file, options.tensor, image.name);
  io::restored_tensor restored = io::dequantize_any(file, picked, options.load);
  out.shape = std::move(restored.shape);
  out.values = std::move(restored.values);
  return out;
}

/// A checkpoint of any format the readers take, as ModelOpt tensors read on demand (a ModelOpt
/// file or directory one tensor at a time: io/checkpoint_reader.hpp's open_as_modelopt); an .npy
/// file is refused saying what to do instead, any other file named by its format.
inline io::modelopt_source open_checkpoint_input(const std::string& path, const char* command) {
  const io::detected_file found = io::detect_file(path);
  if (found.kind == io::file_kind::npy)
    throw error(errc::malformed_file, path + ": this is an .npy file, but " + command +
                                          " reads a quantized checkpoint (nvfp4 quantize makes one from an .npy array)");
  return io::open_as_modelopt(path, found);
}

/// load_float_array of a path: an .npy file, or a quantized tensor of a checkpoint in any format
/// the readers take (a file or a directory). `found` (optional) receives what the path holds.
inline float_array load_float_array(const std::filesystem::path& path, const input_options& options = {},
                                    io::detected_file* found = nullptr, bool quiet = false) {
  const io::detected_file detected = io::require_readable(path, /*npy_too=*/true);
  if (found) *found = detected;
  if (detected.kind == io::file_kind::npy) {
    const std::vector<std::uint8_t> bytes = io::read_file_bytes(path);
    return load_float_array(input_image{bytes, path.string()}, options);
  }
  const io::modelopt_view view = io::read_as_modelopt(path, detected);
  print_warnings_once(view.warnings, quiet);
  float_array out;
  const std::string picked = pick_quantized_name(view.file, options.tensor, path.string());
  try {
    io::restored_tensor restored = io::dequantize_any(view.file, picked, options.load);
    out.shape = std::move(restored.shape);
    out.values = std::move(restored.values);
  } catch (const error& e) {
    throw nvfp4::detail::with_context(e, path.string());
  }
  return out;
}

/// Throws non_finite_input naming `what` and the first NaN/Inf of `values` (C order, `shape`).
inline void require_finite(std::span<const float> values, const std::vector<std::int64_t>& shape, const std::string& what) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    // The multi-index of element i, last dimension fastest.
    std::vector<std::int64_t> index(shape.size(), 0);
    std::size_t rest = i;
    for (std::size_t d = shape.size(); d-- > 0;) {
      const auto extent = static_cast<std::size_t>(shape[d]);
      index[d] = static_cast<std::int64_t>(rest % extent);
      rest /= extent;
    }
    throw error(errc::non_finite_input, what + " holds " + (std::isnan(values[i]) ? "NaN" : "Inf") + " at " + detail::shape_text(index));
  }
}

inline std::string shape_string(const std::vector<std::int64_t>& shape) { return detail::shape_text(shape); }

/// The --input-dtype option's value as input_options::bf16.
inline bool input_is_bf16(const arguments& args) { return args.choice("--input-dtype", "auto", {"auto", "bf16"}) == "bf16"; }

}  // namespace nvfp4::cli
