// nvfp4/io/stored_tensor.hpp: what a quantized tensor stored in a safetensors file is (its format,
// shape, scale layout, RHT, rounding; stored_tensor_info) and what a file says about one: its
// quantized tensors' names and each one's description, checked against its tensors. ModelOpt's
// NVFP4 layout and its MX analogues, with or without our metadata (docs/cli.md).
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/io/detail/checkpoint_metadata.hpp"
#include "nvfp4/io/safetensors.hpp"
#include "nvfp4/scaling/layout.hpp"
#include "nvfp4/scaling/quantize.hpp"

namespace nvfp4::io {

/// Which of our formats a stored tensor is.
enum class stored_format { nvfp4_1x16, nvfp4_16x16, mxfp4, mxfp8 };

constexpr const char* stored_format_name(stored_format f) {
  switch (f) {
    case stored_format::nvfp4_1x16:
      return "nvfp4";
    case stored_format::nvfp4_16x16:
      return "nvfp4";
    case stored_format::mxfp4:
      return "mxfp4";
    case stored_format::mxfp8:
      return "mxfp8";
  }
  return "?";
}

template <block_scaled_format Format>
constexpr stored_format stored_format_of() {
  if constexpr (std::is_same_v<Format, nvfp4_1x16>)
    return stored_format::nvfp4_1x16;
  else if constexpr (std::is_same_v<Format, nvfp4_16x16>)
    return stored_format::nvfp4_16x16;
  else if constexpr (std::is_same_v<Format, mxfp4>)
    return stored_format::mxfp4;
  else {
    static_assert(std::is_same_v<Format, mxfp8>, "no stored layout for this format");
    return stored_format::mxfp8;
  }
}

/// Everything a stored quantized tensor says about itself (from its metadata, or inferred from
/// the ModelOpt tensor names and dtypes when the file has none of ours).
struct stored_tensor_info {
  std::string name;  ///< the prefix W of W.weight
  stored_format format = stored_format::nvfp4_1x16;
  index_t rows = 0;  ///< the quantized matrix's shape
  index_t cols = 0;
  std::vector<std::int64_t> shape;  ///< the source array's shape (rows = product of all but the last)
  bool swizzled = false;            ///< scales in the 128x4 layout instead of compact
  bool rht = false;                 ///< rows were transformed by TE's 16-point RHT before quantizing
  std::string rounding = "nearest_even";
  std::uint64_t seed = 0;
  std::string mx_rule = "ocp_floor";
  float amax = 0.0f;
  bool has_metadata = false;  ///< written by this library (else inferred)
};

/// How a stored quantized tensor is read.
struct load_options {
  /// Read block scales that are NaN or have their sign bit set (UE4M3 0x7F and 0x80..0xFF, E8M0
  /// 0xFF) and a weight_scale_2 that is NaN, Inf or negative as they are, e.g. to inspect a
  /// damaged file (the dequantized values are then NaN, Inf or of flipped sign). Off (the
  /// default): such a file is malformed_file, naming the scale.
  bool accept_invalid_scales = false;
};

namespace detail_checkpoint {

inline std::string metadata_key(const std::string& name) { return "nvfp4." + name; }

/// The stored shape of a [rows, scale_cols] scale matrix: itself (compact), or padded to 128x4
/// tiles. A matrix with a zero dimension holds no bytes and pads to nothing: it keeps its own
/// shape in either layout (so a file of 2^40 empty rows does not claim 2^40 padded ones).
inline std::vector<std::int64_t> stored_scale_shape(index_t rows, index_t scale_cols, bool swizzled) {
  if (!swizzled || rows == 0 || scale_cols == 0) return {rows, scale_cols};
  return {swizzled_scales::padded(rows, 128), swizzled_scales::padded(scale_cols, 4)};
}

/// quantized_tensor_names over any set of tensors: its metadata, its tensors (each with a .name)
/// in order, and whether a tensor of a given name is there.
template <class Tensors, class Contains>
std::vector<std::string> quantized_names(const std::map<std::string, std::string>& metadata, const Tensors& tensors,
                                         const Contains& contains) {
  std::vector<std::string> names;
  std::unordered_set<std::string> listed;  // (a scan of names per tensor was quadratic in the weights)
  for (const auto& [key, value] : metadata)
    if (key.rfind("nvfp4.", 0) == 0 && key.size() > 6 && listed.insert(key.substr(6)).second) names.push_back(key.substr(6));
  for (const auto& t : tensors) {
    const auto prefix = name_before_suffix(t.name, ".weight_scale");
    if (prefix && contains(*prefix + ".weight") && listed.insert(*prefix).second) names.push_back(*prefix);
  }
  return names;
}

}  // namespace detail_checkpoint

/// The names W for which the file holds a quantized tensor: those with our metadata, and those
/// with a W.weight and a W.weight_scale of a recognisable layout (ModelOpt NVFP4, MX).
inline std::vector<std::string> quantized_tensor_names(const safetensors_file& file) {
  return detail_checkpoint::quantized_names(file.metadata, file.tensors, [&](const std::string& n) { return file.find(n) != nullptr; });
}

/// Whether W is a per-tensor FP8 weight in ModelOpt's FP8 layout (what `nvfp4 pack --format fp8`
/// and ModelOpt's FP8 export write): W.weight F8_E4M3 or F8_E5M2 [N, K], W.weight_scale one F32
/// (the decode scale, amax / 448 for E4M3), and none of our "nvfp4.W" metadata.
inline bool is_fp8_weight(const safetensors_file& file, const std::string& name) {
  const auto* w = file.find(name + ".weight");
  const auto* s = file.find(name + ".weight_scale");
  return w && s && !file.metadata.contains("nvfp4." + name) &&
         (w->dtype == safetensors_dtype::f8_e4m3 || w->dtype == safetensors_dtype::f8_e5m2) && w->shape.size() == 2 &&
         s->dtype == safetensors_dtype::f32 && s->bytes.size() == 4 && s->shape.size() <= 1;
}
/// What the file says about quantized tensor `name`, checked against the tensors' dtypes and
/// shapes. Throws invalid_argument when `name` is not there, dtype_mismatch / shape_mismatch /
/// malformed_file when its tensors or metadata do not fit together, when a metadata number is not
/// exactly an integer in range (amax: a finite number >= 0), when a shape exceeds
/// nvfp4::max_element_count, or (unless options.accept_invalid_scales) when weight_scale_2 is
/// NaN, Inf or negative.
inline stored_tensor_info describe_quantized_tensor(const safetensors_file& file, const std::string& name,
                                                    const load_options& options = {}) {
  using detail_checkpoint::fail;
  stored_tensor_info info;
  info.name = name;
  const safetensors_tensor* weight = file.find(name + ".weight");
  const safetensors_tensor* scale = file.find(name + ".weight_scale");
  const safetensors_tensor* scale_2 = file.find(name + ".weight_scale_2");
  if (!weight || !scale) {
    detail::require(!file.metadata.contains(detail_checkpoint::metadata_key(name)), errc::malformed_file,
                    "tensor '" + name + "': metadata present but " + name + ".weight or " + name + ".weight_scale is missing");
    throw error(errc::invalid_argument, "no quantized tensor '" + name + "' (no " + name + ".weight + " + name + ".weight_scale pair)");
  }
  // Past these checks every dimension is at most 2^40, so the sizes below cannot overflow.
  detail_checkpoint::check_2d(*weight, name);
  detail_checkpoint::check_2d(*scale, name);
  const auto meta_it = file.metadata.find(detail_checkpoint::metadata_key(name));
  if (meta_it != file.metadata.end()) {
    info.has_metadata = true;
    const nlohmann::json meta = detail_safetensors::parse_strict_json(meta_it->second, "tensor '" + name + "': its metadata");
    if (!meta.is_object()) fail(errc::malformed_file, name, "its metadata is not a JSON object");
    const detail_checkpoint::metadata_reader read(meta, name);
    const std::string format = read.text("format");
    const auto block = read.sizes("block");
    if (format == "nvfp4" && block == std::vector<std::int64_t>{1, 16})
      info.format = stored_format::nvfp4_1x16;
    else if (format == "nvfp4" && block == std::vector<std::int64_t>{16, 16})
      info.format = stored_format::nvfp4_16x16;
    else if (format == "mxfp4" && block == std::vector<std::int64_t>{1, 32})
      info.format = stored_format::mxfp4;
    else if (format == "mxfp8" && block == std::vector<std::int64_t>{1, 32})
      info.format = stored_format::mxfp8;
    else
      fail(errc::unsupported, name, "format '" + format + "' with block " + detail::shape_text(block) + " is not one of ours");
    info.rows = read.size("rows");
    info.cols = read.size("cols");
    (void)detail::checked_element_count(info.rows, info.cols, errc::malformed_file, "tensor '" + name + "': metadata rows x cols");
    info.shape = read.sizes("shape");
    info.swizzled = read.choice("scale_layout", nullptr, {"compact", "128x4"}) == "128x4";
    info.rht = read.choice("rht", "none", {"none", "te16_rows"}) == "te16_rows";
    info.rounding = read.choice("rounding", "nearest_even", {"nearest_even", "stochastic"});
    info.seed = read.seed();
    info.mx_rule = read.choice("mx_rule", "ocp_floor", {"ocp_floor", "te_ceil"});
    info.amax = read.amax();
    // The leading dimensions' product is bounded once the whole shape passes the check.
    (void)detail::checked_element_count(info.shape, errc::malformed_file, "tensor '" + name + "': metadata shape");
    // A 0-d source (shape []) is one element, stored as a 1 x 1 matrix.
    std::int64_t shape_rows = 1;
    for (std::size_t d = 0; d + 1 < info.shape.size(); ++d) shape_rows *= info.shape[d];
    const std::int64_t shape_cols = info.shape.empty() ? 1 : info.shape.back();
    if (shape_cols != info.cols || shape_rows != info.rows)
      fail(errc::malformed_file, name,
           "metadata shape " + detail::shape_text(info.shape) + " does not match its rows (" + std::to_string(info.rows) + ") and cols (" +
               std::to_string(info.cols) + ")");
  } else {
    // No metadata of ours: recognise the layout from the dtypes (ModelOpt NVFP4, MX) and assume
    // compact scales and an even number of columns.
    info.rows = weight->shape[0];
    if (weight->dtype == safetensors_dtype::u8 && scale->dtype == safetensors_dtype::f8_e4m3 && scale_2) {
      info.format = stored_format::nvfp4_1x16;
      info.cols = weight->shape[1] * 2;
    } else if (weight->dtype == safetensors_dtype::u8 &&
               (scale->dtype == safetensors_dtype::u8 || scale->dtype == safetensors_dtype::f8_e8m0)) {
      info.format = stored_format::mxfp4;
      info.cols = weight->shape[1] * 2;
    } else if (weight->dtype == safetensors_dtype::f8_e4m3 &&
               (scale->dtype == safetensors_dtype::u8 || scale->dtype == safetensors_dtype::f8_e8m0)) {
      info.format = stored_format::mxfp8;
      info.cols = weight->shape[1];
    } else {
      fail(errc::dtype_mismatch, name,
           "unrecognised layout: " + name + ".weight is " + std::string(safetensors_dtype_name(weight->dtype)) + ", " + name +
               ".weight_scale is " + std::string(safetensors_dtype_name(scale->dtype)));
    }
    (void)detail::checked_element_count(info.rows, info.cols, errc::malformed_file, "tensor '" + name + "': its rows x cols");
    info.shape = {info.rows, info.cols};
    if (scale_2 && scale_2->dtype == safetensors_dtype::f32 && scale_2->bytes.size() == 4) {
      float decode;
      std::memcpy(&decode, scale_2->bytes.data(), 4);
      info.amax = decode * 2688.0f;  // a NaN/Inf/negative decode is refused below
    }
  }

  // The tensors must have exactly the dtypes and shapes the description implies.
  const bool is_nvfp4 = info.format == stored_format::nvfp4_1x16 || info.format == stored_format::nvfp4_16x16;
  const bool is_fp4 = info.format != stored_format::mxfp8;
  const index_t block_cols = is_nvfp4 ? 16 : 32;
  const index_t data_cols = is_fp4 ? (info.cols + 1) / 2 : info.cols;
  const index_t scale_cols = (info.cols + block_cols - 1) / block_cols;
  const auto expected_weight_dtype = is_fp4 ? safetensors_dtype::u8 : safetensors_dtype::f8_e4m3;
  if (weight->dtype != expected_weight_dtype)
    fail(errc::dtype_mismatch, name,
         name + ".weight is " + std::string(safetensors_dtype_name(weight->dtype)) + ", expected " +
             std::string(safetensors_dtype_name(expected_weight_dtype)));
  if (weight->shape[0] != info.rows || weight->shape[1] != data_cols)
    fail(errc::shape_mismatch, name,
         name + ".weight is " + detail::shape_text(weight->shape) + ", expected [" + std::to_string(info.rows) + ", " +
             std::to_string(data_cols) + "]");
  const bool scale_dtype_ok = is_nvfp4 ? scale->dtype == safetensors_dtype::f8_e4m3
                                       : (scale->dtype == safetensors_dtype::u8 || scale->dtype == safetensors_dtype::f8_e8m0);
  if (!scale_dtype_ok)
    fail(errc::dtype_mismatch, name,
         name + ".weight_scale has dtype " + std::string(safetensors_dtype_name(scale->dtype)) +
             (is_nvfp4 ? ", expected F8_E4M3" : ", expected U8 (E8M0 bytes)"));
  const auto scale_shape_expected = detail_checkpoint::stored_scale_shape(info.rows, scale_cols, info.swizzled);
  if (scale->shape != scale_shape_expected)
    fail(errc::shape_mismatch, name,
         name + ".weight_scale is " + detail::shape_text(scale->shape) + ", expected " + detail::shape_text(scale_shape_expected));
  if (is_nvfp4) {
    if (!scale_2) fail(errc::malformed_file, name, name + ".weight_scale_2 is missing");
    if (scale_2->dtype != safetensors_dtype::f32 || scale_2->bytes.size() != 4)
      fail(errc::dtype_mismatch, name, name + ".weight_scale_2 is not one F32 value");
    float decode;
    std::memcpy(&decode, scale_2->bytes.data(), 4);
    if (!options.accept_invalid_scales && (!std::isfinite(decode) || std::signbit(decode)))
      fail(errc::malformed_file, name,
           name + ".weight_scale_2 is " + detail::number_text(decode) +
               ": a tensor scale must be a finite number >= 0 (load_options::accept_invalid_scales, "
               "the CLI's --accept-invalid-scales, read it anyway)");
  }
  return info;
}

}  // namespace nvfp4::io
