// tools/cli_support.hpp: what every nvfp4 subcommand shares: a small argument parser (positional
// arguments, --option VALUE, --flag), usage errors, exit codes, a stderr progress bar, and
// loading any input file (.npy, or a quantized tensor of a safetensors file) as float32.
#pragma once

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/io/npy.hpp"
#include "nvfp4/io/quantized_checkpoint.hpp"
#include "nvfp4/io/safetensors.hpp"

namespace nvfp4::cli {

/// Exit statuses (docs/cli.md): 0 success, 1 an unexpected runtime failure, 2 a usage error,
/// 10 + errc for an nvfp4::error (11 invalid_argument ... 19 unsupported).
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;
inline constexpr int exit_usage = 2;
inline constexpr int exit_code_for(errc code) { return 10 + static_cast<int>(code); }

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
    std::fprintf(stderr, "\r%s [%.*s%*s] %3d%% %5.1fs %-24s", label_.c_str(), filled, "##############################",
                 width - filled, "", static_cast<int>(100 * done_ / total_), seconds, stage_.c_str());
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

/// True when the file starts with the .npy magic.
inline bool looks_like_npy(const std::vector<std::uint8_t>& image) {
  return image.size() >= 6 && image[0] == 0x93 && std::string(image.begin() + 1, image.begin() + 6) == "NUMPY";
}

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

/// The single quantized tensor of a file, or the one named; invalid_argument otherwise.
inline std::string pick_quantized_name(const io::safetensors_file& file, const std::string& requested, const std::string& path) {
  if (!requested.empty()) return requested;
  const auto names = io::quantized_tensor_names(file);
  if (names.size() == 1) return names[0];
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
  throw error(errc::invalid_argument, path + (names.empty() ? " holds no quantized tensor"
                                                            : " holds several quantized tensors (" + all + "); pick one with --name"));
}

/// Loads a .npy (float32/float16/bfloat16/float64) or a quantized tensor of a safetensors file
/// (dequantized; `name` picks it) as float32.
inline float_array load_float_array(const std::filesystem::path& path, const std::string& name = "") {
  const std::vector<std::uint8_t> image = io::read_file_bytes(path);
  float_array out;
  if (looks_like_npy(image)) {
    const io::npy_array array = io::parse_npy(image.data(), image.size(), path.string());
    out.shape = array.shape;
    out.values = io::to_float32(array);
    return out;
  }
  const io::safetensors_file file = io::parse_safetensors(image.data(), image.size(), path.string());
  const std::string picked = pick_quantized_name(file, name, path.string());
  io::restored_tensor restored = io::dequantize_tensor(file, picked);
  out.shape = std::move(restored.shape);
  out.values = std::move(restored.values);
  return out;
}

inline std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace nvfp4::cli
