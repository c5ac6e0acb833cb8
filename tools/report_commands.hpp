// tools/report_commands.hpp: `nvfp4 inspect FILE` (what a .npy or safetensors file holds, with
// value statistics and the layout of every quantized tensor) and `nvfp4 stats A B` (how far B is
// from A: MSE, SQNR, max errors, cosine).
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

#include "cli_support.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e5m2.hpp"
#include "nvfp4/metrics/error_metrics.hpp"

namespace nvfp4::cli {

inline constexpr const char* inspect_help = R"(usage: nvfp4 inspect FILE [--json]

Describes a .npy or safetensors file: every tensor's dtype, shape and size with value statistics
(count, min, max, mean, std, amax, non-finite count) for floating-point tensors; for every
quantized tensor (ours or a ModelOpt NVFP4 / MX layout) its format, block, scale layout, amax,
tensor scale, block-scale range and the statistics of its dequantized values.

options:
  --json              print one JSON object instead of text
  -h, --help          this help
)";

inline constexpr const char* stats_help = R"(usage: nvfp4 stats REFERENCE APPROX [--name W] [--json]

Error metrics of APPROX against REFERENCE, which must have the same shape: MSE, RMSE, SQNR (dB),
max abs error, max rel error, cosine similarity. Each file is a .npy (float32/16, bfloat16,
float64) or a safetensors file whose quantized tensor is dequantized first (--name picks it).

options:
  --name W            the quantized tensor to use from a safetensors argument
  --json              print one JSON object instead of text
  -h, --help          this help
)";

/// Summary statistics of a float tensor (non-finite values counted, left out of the rest).
inline nlohmann::ordered_json value_stats(std::span<const float> values) {
  double sum = 0, sum_sq = 0, lo = std::numeric_limits<double>::infinity(), hi = -lo, amax = 0;
  std::int64_t finite = 0, non_finite = 0, zeros = 0;
  for (const float v : values) {
    if (!std::isfinite(v)) {
      ++non_finite;
      continue;
    }
    ++finite;
    sum += v;
    sum_sq += static_cast<double>(v) * v;
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
    amax = std::max<double>(amax, std::fabs(v));
    zeros += v == 0;
  }
  nlohmann::ordered_json s;
  s["count"] = values.size();
  if (finite > 0) {
    const double mean = sum / static_cast<double>(finite);
    s["min"] = lo;
    s["max"] = hi;
    s["mean"] = mean;
    s["std"] = std::sqrt(std::max(0.0, sum_sq / static_cast<double>(finite) - mean * mean));
    s["amax"] = amax;
  }
  s["zeros"] = zeros;
  s["non_finite"] = non_finite;
  return s;
}

/// The values of a safetensors tensor as float, for the float and FP8 dtypes.
inline std::optional<std::vector<float>> tensor_values(const io::safetensors_tensor& t) {
  const std::size_t n = static_cast<std::size_t>(t.element_count());
  std::vector<float> v(n);
  const std::uint8_t* b = t.bytes.data();
  switch (t.dtype) {
    case io::safetensors_dtype::f32:
      if (n) std::memcpy(v.data(), b, 4 * n);
      return v;
    case io::safetensors_dtype::f64:
      for (std::size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, b + 8 * i, 8);
        v[i] = static_cast<float>(d);
      }
      return v;
    case io::safetensors_dtype::f16:
    case io::safetensors_dtype::bf16:
      for (std::size_t i = 0; i < n; ++i) {
        const auto bits = static_cast<std::uint16_t>(b[2 * i] | (b[2 * i + 1] << 8));
        v[i] = t.dtype == io::safetensors_dtype::f16 ? io::half_to_float(bits) : bf16::from_bits(bits).to_float();
      }
      return v;
    case io::safetensors_dtype::f8_e4m3:
      for (std::size_t i = 0; i < n; ++i) v[i] = e4m3::from_bits(b[i]).to_float();
      return v;
    case io::safetensors_dtype::f8_e5m2:
      for (std::size_t i = 0; i < n; ++i) v[i] = e5m2::from_bits(b[i]).to_float();
      return v;
    default:
      return std::nullopt;
  }
}

inline std::string format_label(const io::stored_tensor_info& info) {
  switch (info.format) {
    case io::stored_format::nvfp4_1x16: return "nvfp4 1x16";
    case io::stored_format::nvfp4_16x16: return "nvfp4 16x16";
    case io::stored_format::mxfp4: return "mxfp4 1x32";
    case io::stored_format::mxfp8: return "mxfp8 1x32";
  }
  return "?";
}

inline nlohmann::ordered_json describe_quantized(const io::safetensors_file& file, const std::string& name) {
  const io::stored_tensor_info info = io::describe_quantized_tensor(file, name);
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
  q["bits_per_element"] = info.rows * info.cols == 0 ? 0.0
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
  std::int64_t zero_scales = 0, nan_scales = 0;
  // Statistics over the real scales only: a swizzled layout's zero padding is left out.
  const std::vector<std::uint8_t> compact_scales =
      info.swizzled ? unswizzle_128x4(swizzled_scales{info.rows, (info.cols + (e8m0_scales ? 31 : 15)) / (e8m0_scales ? 32 : 16), scale.bytes})
                    : scale.bytes;
  for (const std::uint8_t code : compact_scales) {
    const float v = e8m0_scales ? e8m0::from_bits(code).to_float() : ue4m3::from_bits(code).to_float();
    if (std::isnan(v)) {
      ++nan_scales;
      continue;
    }
    if (v == 0) ++zero_scales;
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
  }
  q["block_scales"] = {{"count", compact_scales.size()}, {"min", std::isfinite(lo) ? lo : 0.0}, {"max", hi}, {"zero", zero_scales}, {"nan", nan_scales}};
  q["dequantized"] = value_stats(io::dequantize_tensor(file, name).values);
  return q;
}

inline nlohmann::ordered_json inspect_file(const std::string& path) {
  const std::vector<std::uint8_t> image = io::read_file_bytes(path);
  nlohmann::ordered_json out;
  out["file"] = path;
  out["size_bytes"] = image.size();
  if (looks_like_npy(image)) {
    const io::npy_array array = io::parse_npy(image.data(), image.size(), path);
    out["kind"] = "npy";
    out["dtype"] = std::string(io::npy_descr(array.dtype));
    out["shape"] = array.shape;
    out["fortran_order"] = array.fortran_order;
    const bool is_float = array.dtype == io::npy_dtype::float32 || array.dtype == io::npy_dtype::float16 ||
                          array.dtype == io::npy_dtype::bfloat16 || array.dtype == io::npy_dtype::float64;
    if (is_float) out["stats"] = value_stats(io::to_float32(array));
    return out;
  }
  const io::safetensors_file file = io::parse_safetensors(image.data(), image.size(), path);
  out["kind"] = "safetensors";
  out["metadata"] = file.metadata;
  out["tensors"] = nlohmann::ordered_json::array();
  for (const auto& t : file.tensors) {
    nlohmann::ordered_json j;
    j["name"] = t.name;
    j["dtype"] = std::string(io::safetensors_dtype_name(t.dtype));
    j["shape"] = t.shape;
    j["bytes"] = t.bytes.size();
    if (auto values = tensor_values(t)) j["stats"] = value_stats(*values);
    out["tensors"].push_back(j);
  }
  out["quantized"] = nlohmann::ordered_json::array();
  for (const auto& name : io::quantized_tensor_names(file)) out["quantized"].push_back(describe_quantized(file, name));
  return out;
}

inline std::string stats_text(const nlohmann::ordered_json& s) {
  char line[256];
  if (!s.contains("min")) {
    std::snprintf(line, sizeof line, "count %lld, no finite values", static_cast<long long>(s["count"].get<std::int64_t>()));
    return line;
  }
  std::snprintf(line, sizeof line, "min %.6g  max %.6g  mean %.6g  std %.6g  amax %.6g  zeros %lld  non-finite %lld",
                s["min"].get<double>(), s["max"].get<double>(), s["mean"].get<double>(), s["std"].get<double>(),
                s["amax"].get<double>(), static_cast<long long>(s["zeros"].get<std::int64_t>()),
                static_cast<long long>(s["non_finite"].get<std::int64_t>()));
  return line;
}

inline int run_inspect(int argc, char** argv) {
  const arguments args(argc, argv, 2, {}, {"--json"});
  if (args.help()) {
    std::fputs(inspect_help, stdout);
    return exit_ok;
  }
  args.expect_positional(1, 1);
  const nlohmann::ordered_json info = inspect_file(args.positional()[0]);
  if (args.flag("--json")) {
    std::printf("%s\n", info.dump(2).c_str());
    return exit_ok;
  }
  std::printf("%s: %s, %llu bytes\n", info["file"].get<std::string>().c_str(), info["kind"].get<std::string>().c_str(),
              static_cast<unsigned long long>(info["size_bytes"].get<std::uint64_t>()));
  if (info["kind"] == "npy") {
    std::printf("  dtype %s  shape %s  %s order\n", info["dtype"].get<std::string>().c_str(),
                shape_string(info["shape"].get<std::vector<std::int64_t>>()).c_str(), info["fortran_order"].get<bool>() ? "Fortran" : "C");
    if (info.contains("stats")) std::printf("  %s\n", stats_text(info["stats"]).c_str());
    return exit_ok;
  }
  for (const auto& [key, value] : info["metadata"].items())
    if (key.rfind("nvfp4.", 0) != 0) std::printf("  metadata %s = %s\n", key.c_str(), value.get<std::string>().c_str());
  std::printf("  %-40s %-8s %-16s %10s\n", "tensor", "dtype", "shape", "bytes");
  for (const auto& t : info["tensors"]) {
    std::printf("  %-40s %-8s %-16s %10llu\n", t["name"].get<std::string>().c_str(), t["dtype"].get<std::string>().c_str(),
                shape_string(t["shape"].get<std::vector<std::int64_t>>()).c_str(), static_cast<unsigned long long>(t["bytes"].get<std::uint64_t>()));
    if (t.contains("stats")) std::printf("      %s\n", stats_text(t["stats"]).c_str());
  }
  for (const auto& q : info["quantized"]) {
    std::printf("  quantized %s: %s, %lld x %lld (source %s), scales %s%s, %.3f bits/element\n", q["name"].get<std::string>().c_str(),
                q["format"].get<std::string>().c_str(), static_cast<long long>(q["rows"].get<std::int64_t>()),
                static_cast<long long>(q["cols"].get<std::int64_t>()), shape_string(q["shape"].get<std::vector<std::int64_t>>()).c_str(),
                q["scale_layout"].get<std::string>().c_str(), q["rht"].get<bool>() ? ", RHT rows" : "", q["bits_per_element"].get<double>());
    std::printf("      amax %.6g%s  block scales %.6g .. %.6g (%lld zero, %lld NaN)\n", q["amax"].get<double>(),
                q.contains("weight_scale_2") ? (", weight_scale_2 " + std::to_string(q["weight_scale_2"].get<double>())).c_str() : "",
                q["block_scales"]["min"].get<double>(), q["block_scales"]["max"].get<double>(),
                static_cast<long long>(q["block_scales"]["zero"].get<std::int64_t>()),
                static_cast<long long>(q["block_scales"]["nan"].get<std::int64_t>()));
    std::printf("      dequantized: %s\n", stats_text(q["dequantized"]).c_str());
  }
  return exit_ok;
}

inline int run_stats(int argc, char** argv) {
  const arguments args(argc, argv, 2, {"--name"}, {"--json"});
  if (args.help()) {
    std::fputs(stats_help, stdout);
    return exit_ok;
  }
  args.expect_positional(2, 2);
  const std::string name = args.value("--name", "");
  const float_array reference = load_float_array(args.positional()[0], name);
  const float_array approx = load_float_array(args.positional()[1], name);
  if (reference.shape != approx.shape)
    throw error(errc::shape_mismatch, "stats: " + args.positional()[0] + " is " + shape_string(reference.shape) + " but " +
                                          args.positional()[1] + " is " + shape_string(approx.shape));
  const error_report r = compare(reference.values, approx.values);
  if (args.flag("--json")) {
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
    std::printf("%s\n", j.dump(2).c_str());
    return exit_ok;
  }
  std::printf("elements           %zu\n", reference.values.size());
  std::printf("mse                %.6e\n", r.mse);
  std::printf("rmse               %.6e\n", r.rmse);
  std::printf("sqnr_db            %.3f\n", r.sqnr_db);
  std::printf("max_abs_error      %.6e\n", r.max_abs_error);
  std::printf("max_rel_error      %.6e\n", r.max_rel_error);
  std::printf("cosine_similarity  %.9f\n", r.cosine_similarity);
  return exit_ok;
}

}  // namespace nvfp4::cli
