// tools/report_commands.hpp: `nvfp4 inspect FILE` (what a .npy or safetensors file holds, with
// value statistics and the layout of every quantized tensor) and `nvfp4 stats A B` (how far B is
// from A: MSE, SQNR, max errors, cosine). The cores (inspect_image, stats_report) work on bytes
// in memory and return JSON, so the fuzz harness runs them without files.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cli_support.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e5m2.hpp"
#include "nvfp4/metrics/error_metrics.hpp"

namespace nvfp4::cli {

inline constexpr const char* inspect_help = R"(usage: nvfp4 inspect FILE [--json]

Describes a .npy array or a checkpoint of any format the readers take (detected and named: a
safetensors file, a ModelOpt directory single or sharded, compressed-tensors, GGUF, torchao; the
last three shown in ModelOpt's tensor names, as dequantize sees them): every tensor's dtype, shape and size with value statistics
(count, min, max, mean, std, amax, non-finite count) for floating-point tensors; for every
quantized tensor (ours or a ModelOpt NVFP4 / MX layout) its format, block, scale layout, amax,
tensor scale, block-scale range and the statistics of its dequantized values.

options:
  --json                    print one JSON object instead of text
  --accept-invalid-scales   describe quantized tensors whose scales are NaN, negative or Inf
                            (counted as such) instead of refusing the file
  -h, --help                this help
)";

inline constexpr const char* stats_help = R"(usage: nvfp4 stats REFERENCE APPROX [--name W] [--json]

Error metrics of APPROX against REFERENCE, which must have the same shape: MSE, RMSE, SQNR (dB),
max abs error, max rel error, cosine similarity. Each file is a .npy (float32/16, bfloat16,
float64) or a checkpoint of any format the readers take (safetensors, ModelOpt directory,
compressed-tensors, GGUF, torchao; detected and printed) whose quantized tensor is dequantized
first (--name picks it).
NaN or Inf in either is refused (exit 13), naming the element: no metric is meaningful then.

options:
  --name W                  the quantized tensor to use from a safetensors argument
  --input-dtype T           auto (default) | bf16: raw 2-byte .npy arrays hold bfloat16 bits
  --accept-invalid-scales   read invalid scales of a safetensors argument (its NaNs are then refused)
  --json                    print one JSON object instead of text
  -h, --help                this help
)";

/// Summary statistics of float values seen in pieces (non-finite values counted, left out of the
/// rest): value_stats of their concatenation, accumulated in the same order, so the same numbers.
class value_statistics {
 public:
  void add(std::span<const float> values) {
    count_ += static_cast<std::int64_t>(values.size());
    for (const float v : values) {
      if (!std::isfinite(v)) {
        ++non_finite_;
        continue;
      }
      ++finite_;
      sum_ += v;
      sum_sq_ += static_cast<double>(v) * v;
      lo_ = std::min<double>(lo_, v);
      hi_ = std::max<double>(hi_, v);
      amax_ = std::max<double>(amax_, std::fabs(v));
      zeros_ += v == 0;
    }
  }
  nlohmann::ordered_json json() const {
    nlohmann::ordered_json s;
    s["count"] = count_;
    if (finite_ > 0) {
      const double mean = sum_ / static_cast<double>(finite_);
      s["min"] = lo_;
      s["max"] = hi_;
      s["mean"] = mean;
      s["std"] = std::sqrt(std::max(0.0, sum_sq_ / static_cast<double>(finite_) - mean * mean));
      s["amax"] = amax_;
    }
    s["zeros"] = zeros_;
    s["non_finite"] = non_finite_;
    return s;
  }

 private:
  double sum_ = 0, sum_sq_ = 0, lo_ = std::numeric_limits<double>::infinity(), hi_ = -std::numeric_limits<double>::infinity(), amax_ = 0;
  std::int64_t count_ = 0, finite_ = 0, non_finite_ = 0, zeros_ = 0;
};

/// Summary statistics of a float tensor (non-finite values counted, left out of the rest).
inline nlohmann::ordered_json value_stats(std::span<const float> values) {
  value_statistics s;
  s.add(values);
  return s.json();
}

/// Whether inspect shows value statistics for a dtype: the float and FP8 ones.
inline bool has_value_stats(io::safetensors_dtype dtype) {
  using io::safetensors_dtype;
  return dtype == safetensors_dtype::f32 || dtype == safetensors_dtype::f64 || dtype == safetensors_dtype::f16 ||
         dtype == safetensors_dtype::bf16 || dtype == safetensors_dtype::f8_e4m3 || dtype == safetensors_dtype::f8_e5m2;
}

/// Decodes `count` elements of `dtype` (a float or FP8 dtype, little-endian bytes) into `out`.
inline void decode_values(io::safetensors_dtype dtype, const std::uint8_t* b, std::size_t count, float* out) {
  switch (dtype) {
    case io::safetensors_dtype::f32:
      std::memcpy(out, b, 4 * count);
      return;
    case io::safetensors_dtype::f64:
      for (std::size_t i = 0; i < count; ++i) {
        double d;
        std::memcpy(&d, b + 8 * i, 8);
        out[i] = static_cast<float>(d);
      }
      return;
    case io::safetensors_dtype::f16:
    case io::safetensors_dtype::bf16:
      for (std::size_t i = 0; i < count; ++i) {
        const auto bits = static_cast<std::uint16_t>(b[2 * i] | (b[2 * i + 1] << 8));
        out[i] = dtype == io::safetensors_dtype::f16 ? io::half_to_float(bits) : bf16::from_bits(bits).to_float();
      }
      return;
    case io::safetensors_dtype::f8_e4m3:
      for (std::size_t i = 0; i < count; ++i) out[i] = e4m3::from_bits(b[i]).to_float();
      return;
    case io::safetensors_dtype::f8_e5m2:
      for (std::size_t i = 0; i < count; ++i) out[i] = e5m2::from_bits(b[i]).to_float();
      return;
    default:
      return;
  }
}

/// The statistics of a safetensors tensor's values, for the float and FP8 dtypes (nothing for the
/// others), decoded a piece at a time: no float copy of the tensor is made.
inline std::optional<nlohmann::ordered_json> tensor_stats(const io::safetensors_tensor& t) {
  if (!has_value_stats(t.dtype)) return std::nullopt;
  const std::size_t n = static_cast<std::size_t>(t.element_count()), size = io::safetensors_dtype_size(t.dtype);
  constexpr std::size_t piece = std::size_t{1} << 16;
  std::vector<float> values(std::min(n, piece));
  value_statistics stats;
  for (std::size_t at = 0; at < n; at += piece) {
    const std::size_t count = std::min(piece, n - at);
    decode_values(t.dtype, t.bytes.data() + at * size, count, values.data());
    stats.add(std::span<const float>(values.data(), count));
  }
  return stats.json();
}

/// The statistics of quantized weight `name`'s dequantized values, computed piece by piece
/// (io::dequantize_any_in_pieces): the float tensor (8x the packed FP4 bytes) is never held whole.
inline nlohmann::ordered_json dequantized_stats(const io::safetensors_file& file, const std::string& name,
                                                const io::load_options& options) {
  value_statistics stats;
  io::dequantize_any_in_pieces(file, name, options, [&](std::span<const float> values) { stats.add(values); });
  return stats.json();
}

inline std::string format_label(const io::stored_tensor_info& info) {
  switch (info.format) {
    case io::stored_format::nvfp4_1x16:
      return "nvfp4 1x16";
    case io::stored_format::nvfp4_16x16:
      return "nvfp4 16x16";
    case io::stored_format::mxfp4:
      return "mxfp4 1x32";
    case io::stored_format::mxfp8:
      return "mxfp8 1x32";
  }
  return "?";
}

/// describe_quantized for a per-tensor FP8 weight (one scale: the "block scales" are that one).
inline nlohmann::ordered_json describe_fp8(const io::safetensors_file& file, const std::string& name) {
  const fp8_tensor t = io::load_fp8_weight(file, name);
  const float decode = t.scale_inv()[0];
  nlohmann::ordered_json q;
  q["name"] = name;
  q["format"] = std::string("fp8 ") + fp8_format_name(t.format()) + " per-tensor";
  q["rows"] = t.rows();
  q["cols"] = t.cols();
  q["shape"] = {t.rows(), t.cols()};
  q["scale_layout"] = "per-tensor";
  q["rht"] = false;
  q["rounding"] = "nearest_even";
  q["amax"] = static_cast<double>(decode) * (t.format() == fp8_format::e4m3 ? 448.0 : 57344.0);
  q["from_metadata"] = false;
  q["bits_per_element"] = t.rows() * t.cols() == 0 ? 0.0 : 8.0 + 32.0 / static_cast<double>(t.rows() * t.cols());
  q["weight_scale"] = decode;
  q["block_scales"] = {{"count", 1},
                       {"min", decode},
                       {"max", decode},
                       {"zero", decode == 0 ? 1 : 0},
                       {"nan", std::isnan(decode) ? 1 : 0},
                       {"sign_bit", std::signbit(decode) ? 1 : 0}};
  q["dequantized"] = dequantized_stats(file, name, {});
  return q;
}

inline nlohmann::ordered_json describe_quantized(const io::safetensors_file& file, const std::string& name,
                                                 const io::load_options& options) {
  if (io::is_fp8_weight(file, name)) return describe_fp8(file, name);
  const io::stored_tensor_info info = io::describe_quantized_tensor(file, name, options);
  nlohmann::ordered_json q;
  q["name"] = name;
  q["format"] = format_label(info);
  q["rows"] = info.rows;
  q["cols"] = info.cols;
  q["shape"] = info.shape;
  q["scale_layout"] = info.swizzled ? "128x4" : "compact";
  q["rht"] = info.rht;
  q["rounding"] = info.rounding;
  q["amax"] = info.amax;
  q["from_metadata"] = info.has_metadata;
  const auto& weight = file.at(name + ".weight");
  const auto& scale = file.at(name + ".weight_scale");
  q["bits_per_element"] =
      info.rows * info.cols == 0
          ? 0.0
          : 8.0 * static_cast<double>(weight.bytes.size() + scale.bytes.size() + (file.find(name + ".weight_scale_2") ? 4 : 0)) /
                static_cast<double>(info.rows * info.cols);
  if (const auto* scale_2 = file.find(name + ".weight_scale_2")) {
    float decode;
    std::memcpy(&decode, scale_2->bytes.data(), 4);
    q["weight_scale_2"] = decode;
  }
  // Block scales in value terms (E4M3 or E8M0 powers of two); padding of a swizzled layout included.
  const bool e8m0_scales = info.format == io::stored_format::mxfp4 || info.format == io::stored_format::mxfp8;
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  std::int64_t zero_scales = 0, nan_scales = 0, sign_bit_scales = 0;
  // Statistics over the real scales only: a swizzled layout's zero padding is left out.
  const index_t scale_cols = (info.cols + (e8m0_scales ? 31 : 15)) / (e8m0_scales ? 32 : 16);
  const std::vector<std::uint8_t> compact_scales =
      info.swizzled ? unswizzle_128x4(swizzled_scales(info.rows, scale_cols, scale.bytes)) : scale.bytes;
  for (const std::uint8_t code : compact_scales) {
    sign_bit_scales += !e8m0_scales && (code & 0x80) != 0;  // UE4M3 ignores it; PyTorch's E4M3 reads it as negative
    const float v = e8m0_scales ? e8m0::from_bits(code).to_float() : ue4m3::from_bits(code).to_float();
    if (std::isnan(v)) {
      ++nan_scales;
      continue;
    }
    if (v == 0) ++zero_scales;
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
  }
  q["block_scales"] = {
      {"count", compact_scales.size()}, {"min", std::isfinite(lo) ? lo : 0.0}, {"max", hi}, {"zero", zero_scales}, {"nan", nan_scales},
      {"sign_bit", sign_bit_scales}};
  q["dequantized"] = dequantized_stats(file, name, options);
  return q;
}

/// Where inspect's description of a checkpoint goes, entry by entry as it is made: each tensor's
/// entry, then each quantized tensor's (inspect streams them out; nothing holds them all).
struct inspect_sink {
  std::function<void(nlohmann::ordered_json&&)> tensor;
  std::function<void(nlohmann::ordered_json&&)> quantized;
};

inline void describe_tensors(const io::safetensors_source& source, const std::string& path, const io::load_options& options,
                             const inspect_sink& sink);

/// describe_tensors into `out` as its "metadata", "tensors" and "quantized" fields.
inline void describe_tensors(nlohmann::ordered_json& out, const io::safetensors_source& source, const std::string& path,
                             const io::load_options& options) {
  out["metadata"] = source.metadata();
  out["tensors"] = nlohmann::ordered_json::array();
  out["quantized"] = nlohmann::ordered_json::array();
  describe_tensors(source, path, options,
                   {[&](nlohmann::ordered_json&& j) { out["tensors"].push_back(std::move(j)); },
                    [&](nlohmann::ordered_json&& q) { out["quantized"].push_back(std::move(q)); }});
}

/// inspect's description of an .npy array whose header is `header`: `read(offset, count, out)`
/// gives the bytes of its file or image. The statistics are taken a piece at a time from a C-order
/// array (a Fortran-order one is read whole and put in C order first, the order they are summed in).
template <class Read>
void describe_npy(nlohmann::ordered_json& out, const io::npy_header_info& header, const std::string& path, const Read& read) {
  out["kind"] = "npy";
  out["dtype"] = std::string(io::npy_descr(header.dtype));
  out["shape"] = header.shape;
  out["fortran_order"] = header.fortran_order;
  const bool is_float = header.dtype == io::npy_dtype::float32 || header.dtype == io::npy_dtype::float16 ||
                        header.dtype == io::npy_dtype::bfloat16 || header.dtype == io::npy_dtype::float64;
  if (!is_float) return;
  const std::size_t size = io::npy_dtype_size(header.dtype), n = static_cast<std::size_t>(header.data_bytes / size);
  if (header.fortran_order && header.shape.size() >= 2) {
    io::npy_array array;
    array.dtype = header.dtype;
    array.shape = header.shape;
    array.fortran_order = true;
    array.bytes.resize(static_cast<std::size_t>(header.data_bytes));
    read(header.data_offset, header.data_bytes, array.bytes.data());
    out["stats"] = value_stats(to_float32_of(array, path));
    return;
  }
  constexpr std::size_t piece = std::size_t{1} << 16;
  std::vector<std::uint8_t> bytes;
  std::vector<float> values;
  value_statistics stats;
  for (std::size_t at = 0; at < n; at += piece) {
    const std::size_t count = std::min(piece, n - at);
    bytes.resize(count * size);
    values.resize(count);
    read(header.data_offset + at * size, count * size, bytes.data());
    io::decode_float32(header.dtype, bytes.data(), count, at, values.data());
    stats.add(values);
  }
  out["stats"] = stats.json();
}

/// The core of `nvfp4 inspect`: what the image holds, as the JSON --json prints.
inline nlohmann::ordered_json inspect_image(const input_image& input, const io::load_options& options = {}) {
  const std::string& path = input.name;
  const std::span<const std::uint8_t> image = input.bytes;
  nlohmann::ordered_json out;
  out["file"] = path;
  out["size_bytes"] = image.size();
  if (io::looks_like_npy(image.data(), image.size())) {
    const io::npy_header_info header = io::parse_npy_header(image.data(), image.size(), path);
    describe_npy(out, header, path,
                 [&](std::uint64_t offset, std::uint64_t count, std::uint8_t* to) { std::copy_n(image.data() + offset, count, to); });
    return out;
  }
  const io::safetensors_source source = io::safetensors_source::of_image(image, path);
  out["kind"] = "safetensors";
  describe_tensors(out, source, path, options);
  return out;
}

/// inspect's safetensors part: the entries of the tensors and quantized tensors of `source`, in
/// order, to `sink`, one tensor (or one quantized weight's tensors) read at a time.
inline void describe_tensors(const io::safetensors_source& source, const std::string& path, const io::load_options& options,
                             const inspect_sink& sink) {
  for (const auto& e : source.entries()) {
    nlohmann::ordered_json j;
    j["name"] = e.name;
    j["dtype"] = std::string(io::safetensors_dtype_name(e.dtype));
    j["shape"] = e.shape;
    j["bytes"] = e.size;
    if (has_value_stats(e.dtype))
      if (auto stats = tensor_stats(source.load(e))) j["stats"] = std::move(*stats);
    sink.tensor(std::move(j));
  }
  for (const auto& name : io::quantized_tensor_names(source)) {
    try {
      sink.quantized(describe_quantized(io::load_quantized_weight_file(source, name), name, options));
    } catch (const error& e) {
      throw nvfp4::detail::with_context(e, path);
    }
  }
}

/// The size and kind inspect reports for a checkpoint path (a directory: its files' sizes summed).
inline std::pair<std::uint64_t, std::string> checkpoint_size_and_kind(const std::string& path, const io::detected_file& found) {
  std::uint64_t size = 0;
  std::error_code ec;
  if (found.directory) {
    for (const auto& e : std::filesystem::directory_iterator(path, ec))
      if (e.is_regular_file(ec)) size += e.file_size(ec);
  } else {
    size = std::filesystem::file_size(path, ec);
  }
  return {size, found.directory ? "directory" : found.format == io::checkpoint_format::gguf ? "gguf" : "safetensors"};
}

/// inspect of an .npy path, as the JSON --json prints (read a piece at a time).
inline nlohmann::ordered_json inspect_npy_path(const std::string& path, const io::detected_file& found) {
  nlohmann::ordered_json out;
  out["file"] = path;
  const io::file_reader file(path);
  out["size_bytes"] = file.size();
  describe_npy(out, io::read_npy_header(file), path,
               [&](std::uint64_t offset, std::uint64_t count, std::uint8_t* to) { file.read(offset, count, to); });
  out["format"] = found.description;
  return out;
}

/// The core of `nvfp4 inspect` on a path: what inspect_image says, for any format the readers
/// take (a checkpoint in another format is shown in ModelOpt's tensor names, as the readers see
/// it), with "format" naming what was found. Load-time warnings go to `warnings`. A ModelOpt file
/// or directory and an .npy array are read a tensor (a piece) at a time; the other formats are
/// read whole by their readers first. (run_inspect prints the same, streamed.)
inline nlohmann::ordered_json inspect_path(const std::string& path, const io::load_options& options, std::vector<std::string>& warnings) {
  const io::detected_file found = io::require_readable(path, /*npy_too=*/true);
  if (found.kind == io::file_kind::npy) return inspect_npy_path(path, found);
  nlohmann::ordered_json out;
  out["file"] = path;
  io::modelopt_source opened = io::open_as_modelopt(path, found);
  warnings = std::move(opened.warnings);
  const auto [size, kind] = checkpoint_size_and_kind(path, found);
  out["size_bytes"] = size;
  out["kind"] = kind;
  describe_tensors(out, opened.source, path, options);
  out["format"] = found.description;
  out["checkpoint_format"] = io::checkpoint_format_name(found.format);
  return out;
}

inline std::string stats_text(const nlohmann::ordered_json& s) {
  char line[256];
  if (!s.contains("min")) {
    std::snprintf(line, sizeof line, "count %lld, no finite values", static_cast<long long>(s["count"].get<std::int64_t>()));
    return line;
  }
  std::snprintf(line, sizeof line, "min %.6g  max %.6g  mean %.6g  std %.6g  amax %.6g  zeros %lld  non-finite %lld",
                s["min"].get<double>(), s["max"].get<double>(), s["mean"].get<double>(), s["std"].get<double>(), s["amax"].get<double>(),
                static_cast<long long>(s["zeros"].get<std::int64_t>()), static_cast<long long>(s["non_finite"].get<std::int64_t>()));
  return line;
}

namespace detail {

/// `text` (a JSON value dumped with indent 2) as it sits `indent` spaces deep in a larger dump:
/// every line after the first shifted right (nlohmann lays out nested values additively).
inline std::string indented(const std::string& text, std::size_t indent) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    out += c;
    if (c == '\n') out.append(indent, ' ');
  }
  return out;
}

/// Prints JSON array fields one level deep in an object, entry by entry, exactly as dump(2) lays
/// them out: `  "key": [` ... `  ]` (`[]` when empty).
class json_array_printer {
 public:
  void open(const char* key) {
    std::printf("  %s: [", nlohmann::ordered_json(key).dump().c_str());
    first_ = true;
  }
  void entry(const nlohmann::ordered_json& value) {
    std::printf("%s\n    %s", first_ ? "" : ",", indented(value.dump(2), 4).c_str());
    first_ = false;
  }
  void close() { std::printf(first_ ? "]" : "\n  ]"); }

 private:
  bool first_ = true;
};

}  // namespace detail

inline void print_quantized_text(const nlohmann::ordered_json& q) {
  std::printf("  quantized %s: %s, %lld x %lld (source %s), scales %s%s, %.3f bits/element\n", q["name"].get<std::string>().c_str(),
              q["format"].get<std::string>().c_str(), static_cast<long long>(q["rows"].get<std::int64_t>()),
              static_cast<long long>(q["cols"].get<std::int64_t>()), shape_string(q["shape"].get<std::vector<std::int64_t>>()).c_str(),
              q["scale_layout"].get<std::string>().c_str(), q["rht"].get<bool>() ? ", RHT rows" : "", q["bits_per_element"].get<double>());
  const std::string scale_2 =
      q.contains("weight_scale_2") ? ", weight_scale_2 " + nvfp4::detail::number_text(q["weight_scale_2"].get<double>()) : "";
  std::printf("      amax %.6g%s  block scales %.6g .. %.6g (%lld zero, %lld NaN, %lld sign bit)\n", q["amax"].get<double>(),
              scale_2.c_str(), q["block_scales"]["min"].get<double>(), q["block_scales"]["max"].get<double>(),
              static_cast<long long>(q["block_scales"]["zero"].get<std::int64_t>()),
              static_cast<long long>(q["block_scales"]["nan"].get<std::int64_t>()),
              static_cast<long long>(q["block_scales"]["sign_bit"].get<std::int64_t>()));
  std::printf("      dequantized: %s\n", stats_text(q["dequantized"]).c_str());
}

/// `nvfp4 inspect` of a checkpoint: each tensor's entry printed as it is made (text or JSON, the
/// same bytes as printing inspect_path's whole description), so that neither the checkpoint nor
/// its description is held whole: a 10^6-tensor header held about 1 GB. An error met on the way
/// ends the output where it is (the exit status says so).
inline void print_checkpoint_inspection(const std::string& path, const io::detected_file& found, const io::modelopt_source& opened,
                                        const io::load_options& options, bool json) {
  const auto [size, kind] = checkpoint_size_and_kind(path, found);
  if (json) {
    const auto field = [](const char* key, const nlohmann::ordered_json& value) {
      std::printf("  %s: %s,\n", nlohmann::ordered_json(key).dump().c_str(), detail::indented(value.dump(2), 2).c_str());
    };
    std::printf("{\n");
    field("file", path);
    field("size_bytes", size);
    field("kind", kind);
    field("metadata", opened.source.metadata());
    // describe_tensors gives every tensor entry, then every quantized one.
    detail::json_array_printer array;
    array.open("tensors");
    bool in_quantized = false;
    describe_tensors(opened.source, path, options,
                     {[&](nlohmann::ordered_json&& j) { array.entry(j); },
                      [&](nlohmann::ordered_json&& q) {
                        if (!in_quantized) {
                          array.close();
                          std::printf(",\n");
                          array.open("quantized");
                          in_quantized = true;
                        }
                        array.entry(q);
                      }});
    if (!in_quantized) {
      array.close();
      std::printf(",\n");
      array.open("quantized");
    }
    array.close();
    std::printf(",\n  \"format\": %s,\n  \"checkpoint_format\": %s\n}\n", nlohmann::ordered_json(found.description).dump().c_str(),
                nlohmann::ordered_json(io::checkpoint_format_name(found.format)).dump().c_str());
    return;
  }
  std::printf("%s: %s, %llu bytes\n", path.c_str(), found.description.c_str(), static_cast<unsigned long long>(size));
  for (const auto& [key, value] : opened.source.metadata())
    if (key.rfind("nvfp4.", 0) != 0) std::printf("  metadata %s = %s\n", key.c_str(), value.c_str());
  // Columns as wide as their longest entry, so long tensor names keep the table aligned.
  int name_width = 6, shape_width = 5;
  for (const auto& e : opened.source.entries()) {
    name_width = std::max(name_width, static_cast<int>(e.name.size()));
    shape_width = std::max(shape_width, static_cast<int>(shape_string(e.shape).size()));
  }
  std::printf("  %-*s  %-8s %-*s %12s\n", name_width, "tensor", "dtype", shape_width, "shape", "bytes");
  describe_tensors(opened.source, path, options,
                   {[&](nlohmann::ordered_json&& t) {
                      std::printf("  %-*s  %-8s %-*s %12llu\n", name_width, t["name"].get<std::string>().c_str(),
                                  t["dtype"].get<std::string>().c_str(), shape_width,
                                  shape_string(t["shape"].get<std::vector<std::int64_t>>()).c_str(),
                                  static_cast<unsigned long long>(t["bytes"].get<std::uint64_t>()));
                      if (t.contains("stats")) std::printf("      %s\n", stats_text(t["stats"]).c_str());
                    },
                    [&](nlohmann::ordered_json&& q) { print_quantized_text(q); }});
}

inline int run_inspect(int argc, char** argv) {
  const arguments args(argc, argv, 2, {}, {"--json", "--accept-invalid-scales"});
  if (args.help()) {
    std::fputs(inspect_help, stdout);
    return exit_ok;
  }
  args.expect_positional(1, 1);
  const std::string& path = args.positional()[0];
  const io::load_options options{.accept_invalid_scales = args.flag("--accept-invalid-scales")};
  const io::detected_file found = io::require_readable(path, /*npy_too=*/true);
  if (found.kind == io::file_kind::checkpoint) {
    const io::modelopt_source opened = io::open_as_modelopt(path, found);
    print_warnings_once(opened.warnings, false);
    print_checkpoint_inspection(path, found, opened, options, args.flag("--json"));
    return exit_ok;
  }
  const nlohmann::ordered_json info = inspect_npy_path(path, found);
  if (args.flag("--json")) {
    std::printf("%s\n", info.dump(2).c_str());
    return exit_ok;
  }
  std::printf("%s: %s, %llu bytes\n", info["file"].get<std::string>().c_str(), info["format"].get<std::string>().c_str(),
              static_cast<unsigned long long>(info["size_bytes"].get<std::uint64_t>()));
  std::printf("  dtype %s  shape %s  %s order\n", info["dtype"].get<std::string>().c_str(),
              shape_string(info["shape"].get<std::vector<std::int64_t>>()).c_str(), info["fortran_order"].get<bool>() ? "Fortran" : "C");
  if (info.contains("stats")) std::printf("  %s\n", stats_text(info["stats"]).c_str());
  return exit_ok;
}

/// The core of `nvfp4 stats`: the metrics of `approx` against `reference`, as --json prints them.
/// Throws shape_mismatch for different shapes, non_finite_input naming a NaN/Inf element.
inline nlohmann::ordered_json stats_of(const float_array& reference, const std::string& reference_name, const float_array& approx,
                                       const std::string& approx_name);

inline nlohmann::ordered_json stats_report(const input_image& reference_image, const input_image& approx_image,
                                           const input_options& options) {
  return stats_of(load_float_array(reference_image, options), reference_image.name, load_float_array(approx_image, options),
                  approx_image.name);
}

/// stats_report of arrays already loaded.
inline nlohmann::ordered_json stats_of(const float_array& reference, const std::string& reference_name, const float_array& approx,
                                       const std::string& approx_name) {
  if (reference.shape != approx.shape)
    throw error(errc::shape_mismatch, "stats: " + reference_name + " is " + shape_string(reference.shape) + " but " + approx_name + " is " +
                                          shape_string(approx.shape));
  require_finite(reference.values, reference.shape, reference_name);
  require_finite(approx.values, approx.shape, approx_name);
  const error_report r = compare(reference.values, approx.values);
  nlohmann::ordered_json j;
  j["count"] = reference.values.size();
  j["mse"] = r.mse;
  j["rmse"] = r.rmse;
  // JSON has no Inf: an exact match reports sqnr_db null and exact true.
  j["sqnr_db"] = std::isfinite(r.sqnr_db) ? nlohmann::ordered_json(r.sqnr_db) : nlohmann::ordered_json(nullptr);
  j["exact"] = r.mse == 0;
  j["max_abs_error"] = r.max_abs_error;
  j["max_rel_error"] = r.max_rel_error;
  j["cosine_similarity"] = r.cosine_similarity;
  return j;
}

inline int run_stats(int argc, char** argv) {
  const arguments args(argc, argv, 2, {"--name", "--input-dtype"}, {"--json", "--accept-invalid-scales"});
  if (args.help()) {
    std::fputs(stats_help, stdout);
    return exit_ok;
  }
  args.expect_positional(2, 2);
  input_options options;
  options.tensor = args.value("--name", "");
  options.bf16 = input_is_bf16(args);
  options.load.accept_invalid_scales = args.flag("--accept-invalid-scales");
  io::detected_file reference_found, approx_found;
  const float_array reference = load_float_array(args.positional()[0], options, &reference_found);
  const float_array approx = load_float_array(args.positional()[1], options, &approx_found);
  nlohmann::ordered_json j = stats_of(reference, args.positional()[0], approx, args.positional()[1]);
  j["reference_format"] = reference_found.description;
  j["approx_format"] = approx_found.description;
  if (args.flag("--json")) {
    std::printf("%s\n", j.dump(2).c_str());
    return exit_ok;
  }
  std::printf("reference          %s (%s)\n", args.positional()[0].c_str(), reference_found.description.c_str());
  std::printf("approx             %s (%s)\n", args.positional()[1].c_str(), approx_found.description.c_str());
  std::printf("elements           %llu\n", static_cast<unsigned long long>(j["count"].get<std::uint64_t>()));
  std::printf("mse                %.6e\n", j["mse"].get<double>());
  std::printf("rmse               %.6e\n", j["rmse"].get<double>());
  if (j["sqnr_db"].is_null())
    std::printf("sqnr_db            inf (exact)\n");
  else
    std::printf("sqnr_db            %.3f\n", j["sqnr_db"].get<double>());
  std::printf("max_abs_error      %.6e\n", j["max_abs_error"].get<double>());
  std::printf("max_rel_error      %.6e\n", j["max_rel_error"].get<double>());
  std::printf("cosine_similarity  %.9f\n", j["cosine_similarity"].get<double>());
  return exit_ok;
}

}  // namespace nvfp4::cli
