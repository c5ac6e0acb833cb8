// nvfp4/io/quantized_checkpoint.hpp: quantized tensors stored in safetensors files, in the tensor
// layout of NVIDIA ModelOpt's NVFP4 checkpoints (W.weight, W.weight_scale, W.weight_scale_2) and
// its MX analogues, with what our dequantizer needs recorded in __metadata__ (docs/cli.md).
#pragma once

#include <nlohmann/json.hpp>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "nvfp4/io/safetensors.hpp"
#include "nvfp4/scaling/layout.hpp"
#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/transforms/hadamard.hpp"

namespace nvfp4::io {

/// Which of our formats a stored tensor is.
enum class stored_format { nvfp4_1x16, nvfp4_16x16, mxfp4, mxfp8 };

constexpr const char* stored_format_name(stored_format f) {
  switch (f) {
    case stored_format::nvfp4_1x16: return "nvfp4";
    case stored_format::nvfp4_16x16: return "nvfp4";
    case stored_format::mxfp4: return "mxfp4";
    case stored_format::mxfp8: return "mxfp8";
  }
  return "?";
}

template <block_scaled_format Format>
constexpr stored_format stored_format_of() {
  if constexpr (std::is_same_v<Format, nvfp4_1x16>) return stored_format::nvfp4_1x16;
  else if constexpr (std::is_same_v<Format, nvfp4_16x16>) return stored_format::nvfp4_16x16;
  else if constexpr (std::is_same_v<Format, mxfp4>) return stored_format::mxfp4;
  else {
    static_assert(std::is_same_v<Format, mxfp8>, "no stored layout for this format");
    return stored_format::mxfp8;
  }
}

/// Everything a stored quantized tensor says about itself (from its metadata, or inferred from
/// the ModelOpt tensor names and dtypes when the file has none of ours).
struct stored_tensor_info {
  std::string name;                 ///< the prefix W of W.weight
  stored_format format = stored_format::nvfp4_1x16;
  index_t rows = 0;                 ///< the quantized matrix's shape
  index_t cols = 0;
  std::vector<std::int64_t> shape;  ///< the source array's shape (rows = product of all but the last)
  bool swizzled = false;            ///< scales in the 128x4 layout instead of compact
  bool rht = false;                 ///< rows were transformed by TE's 16-point RHT before quantizing
  std::string rounding = "nearest_even";
  std::uint64_t seed = 0;
  std::string mx_rule = "ocp_floor";
  float amax = 0.0f;
  bool has_metadata = false;        ///< written by this library (else inferred)
};

/// How a tensor was made; recorded in the metadata.
struct store_options {
  bool swizzle = false;                  ///< write the scales in the 128x4 layout GPU GEMMs read
  bool rht = false;                      ///< the rows went through TE's RHT (dequantize inverts it)
  quantize_options quantize = {};        ///< rounding, seed, MX rule used
  std::vector<std::int64_t> source_shape;  ///< the N-D shape to restore; empty = [rows, cols]
};

namespace detail_checkpoint {

inline std::string metadata_key(const std::string& name) { return "nvfp4." + name; }

inline std::vector<std::uint8_t> float_bytes(float v) {
  std::vector<std::uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}

[[noreturn]] inline void fail(errc code, const std::string& name, const std::string& what) {
  throw error(code, "tensor '" + name + "': " + what);
}

}  // namespace detail_checkpoint

/// Adds q to `file` as `name`.weight (packed elements), `name`.weight_scale (block scales) and,
/// for NVFP4, `name`.weight_scale_2 (F32 scalar S_dec = 1 / S_enc, which is amax/2688 up to one
/// rounding), plus a metadata entry "nvfp4.<name>" describing it. NVFP4 scales are F8_E4M3; MX
/// scales are E8M0 bytes stored as U8; MXFP8 elements are F8_E4M3. Throws invalid_argument when
/// the name is taken.
template <block_scaled_format Format>
void add_quantized_tensor(safetensors_file& file, const std::string& name, const quantized_tensor<Format>& q,
                          const store_options& options = {}) {
  constexpr stored_format format = stored_format_of<Format>();
  nlohmann::json meta;
  meta["format"] = stored_format_name(format);
  meta["block"] = {Format::block_rows, Format::block_cols};
  meta["rows"] = q.rows();
  meta["cols"] = q.cols();
  meta["shape"] = options.source_shape.empty() ? std::vector<std::int64_t>{q.rows(), q.cols()} : options.source_shape;
  meta["axis"] = q.axis() == quantized_axis::rowwise ? "rowwise" : "columnwise";
  meta["scale_layout"] = options.swizzle ? "128x4" : "compact";
  meta["rht"] = options.rht ? "te16_rows" : "none";
  meta["rounding"] = options.quantize.rounding == rounding_mode::stochastic ? "stochastic" : "nearest_even";
  meta["seed"] = options.quantize.seed;
  if constexpr (!Format::has_tensor_scale) meta["mx_rule"] = options.quantize.mx_rule == mx_scale_rule::te_ceil ? "te_ceil" : "ocp_floor";
  meta["amax"] = q.amax();

  safetensors_tensor weight;
  weight.name = name + ".weight";
  weight.dtype = Format::is_fp4 ? safetensors_dtype::u8 : safetensors_dtype::f8_e4m3;
  weight.shape = {q.rows(), q.data_row_stride()};
  weight.bytes.reserve(q.data().size());
  for (auto unit : q.data()) weight.bytes.push_back(unit.bits());

  safetensors_tensor scale;
  scale.name = name + ".weight_scale";
  scale.dtype = Format::has_tensor_scale ? safetensors_dtype::f8_e4m3 : safetensors_dtype::u8;
  if (options.swizzle) {
    swizzled_scales swizzled = swizzle_128x4(q);
    scale.shape = {swizzled.padded_rows(), swizzled.padded_cols()};
    scale.bytes.assign(swizzled.bytes().begin(), swizzled.bytes().end());
  } else {
    scale.shape = {q.rows(), q.scale_cols()};
    scale.bytes.reserve(q.scales().size());
    for (auto s : q.scales()) scale.bytes.push_back(s.bits());
  }

  // Check every name before adding any, so a failure leaves the file as it was.
  const std::string key = detail_checkpoint::metadata_key(name);
  for (const auto& n : {weight.name, scale.name, name + ".weight_scale_2"})
    detail::require(file.find(n) == nullptr, errc::invalid_argument, "safetensors: a tensor named '" + n + "' is already in the file");
  detail::require(!file.metadata.contains(key), errc::invalid_argument, "safetensors: metadata for '" + name + "' already exists");
  file.add(std::move(weight));
  file.add(std::move(scale));
  if constexpr (Format::has_tensor_scale) {
    safetensors_tensor scale_2;
    scale_2.name = name + ".weight_scale_2";
    scale_2.dtype = safetensors_dtype::f32;
    scale_2.shape = {};
    scale_2.bytes = detail_checkpoint::float_bytes(q.decode_scale());
    file.add(std::move(scale_2));
  }
  file.metadata[key] = meta.dump();
  file.metadata.emplace("format", "pt");  // what Hugging Face loaders expect to find
}

/// The names W for which the file holds a quantized tensor: those with our metadata, and those
/// with a W.weight and a W.weight_scale of a recognisable layout (ModelOpt NVFP4, MX).
inline std::vector<std::string> quantized_tensor_names(const safetensors_file& file) {
  std::vector<std::string> names;
  for (const auto& [key, value] : file.metadata)
    if (key.rfind("nvfp4.", 0) == 0 && key.size() > 6) names.push_back(key.substr(6));
  for (const auto& t : file.tensors) {
    const std::string suffix = ".weight_scale";
    if (t.name.size() > suffix.size() && t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const std::string prefix = t.name.substr(0, t.name.size() - suffix.size());
      if (file.find(prefix + ".weight") && std::find(names.begin(), names.end(), prefix) == names.end()) names.push_back(prefix);
    }
  }
  return names;
}

/// What the file says about quantized tensor `name`, checked against the tensors' dtypes and
/// shapes. Throws invalid_argument when `name` is not there, dtype_mismatch / malformed_file
/// when its tensors or metadata do not fit together.
inline stored_tensor_info describe_quantized_tensor(const safetensors_file& file, const std::string& name) {
  using detail_checkpoint::fail;
  stored_tensor_info info;
  info.name = name;
  const safetensors_tensor* weight = file.find(name + ".weight");
  const safetensors_tensor* scale = file.find(name + ".weight_scale");
  const safetensors_tensor* scale_2 = file.find(name + ".weight_scale_2");
  if (!weight || !scale) {
    detail::require(!file.metadata.contains(detail_checkpoint::metadata_key(name)), errc::malformed_file,
                    "tensor '" + name + "': metadata present but " + name + ".weight or " + name + ".weight_scale is missing");
    throw error(errc::invalid_argument, "no quantized tensor '" + name + "' (no " + name + ".weight + " + name +
                                            ".weight_scale pair)");
  }
  if (weight->shape.size() != 2) fail(errc::shape_mismatch, name, name + ".weight is not 2-D");
  if (scale->shape.size() != 2) fail(errc::shape_mismatch, name, name + ".weight_scale is not 2-D");
  const auto meta_it = file.metadata.find(detail_checkpoint::metadata_key(name));
  if (meta_it != file.metadata.end()) {
    info.has_metadata = true;
    const nlohmann::json meta = nlohmann::json::parse(meta_it->second, nullptr, /*allow_exceptions=*/false);
    if (!meta.is_object()) fail(errc::malformed_file, name, "its metadata is not a JSON object");
    try {
      const std::string format = meta.at("format").get<std::string>();
      const auto block = meta.at("block").get<std::vector<int>>();
      if (format == "nvfp4" && block == std::vector<int>{1, 16}) info.format = stored_format::nvfp4_1x16;
      else if (format == "nvfp4" && block == std::vector<int>{16, 16}) info.format = stored_format::nvfp4_16x16;
      else if (format == "mxfp4" && block == std::vector<int>{1, 32}) info.format = stored_format::mxfp4;
      else if (format == "mxfp8" && block == std::vector<int>{1, 32}) info.format = stored_format::mxfp8;
      else fail(errc::unsupported, name, "format '" + format + "' with this block shape is not one of ours");
      info.rows = meta.at("rows").get<index_t>();
      info.cols = meta.at("cols").get<index_t>();
      info.shape = meta.at("shape").get<std::vector<std::int64_t>>();
      const std::string layout = meta.at("scale_layout").get<std::string>();
      if (layout != "compact" && layout != "128x4") fail(errc::malformed_file, name, "unknown scale_layout '" + layout + "'");
      info.swizzled = layout == "128x4";
      const std::string rht = meta.value("rht", std::string("none"));
      if (rht != "none" && rht != "te16_rows") fail(errc::malformed_file, name, "unknown rht '" + rht + "'");
      info.rht = rht == "te16_rows";
      info.rounding = meta.value("rounding", std::string("nearest_even"));
      info.seed = meta.value("seed", std::uint64_t{0});
      info.mx_rule = meta.value("mx_rule", std::string("ocp_floor"));
      info.amax = meta.at("amax").get<float>();
    } catch (const nlohmann::json::exception& e) {
      fail(errc::malformed_file, name, std::string("its metadata is incomplete or mistyped (") + e.what() + ")");
    }
    if (info.rows < 0 || info.cols < 0) fail(errc::malformed_file, name, "negative shape in metadata");
    std::int64_t shape_rows = 1;
    for (std::size_t d = 0; d + 1 < info.shape.size(); ++d) {
      if (info.shape[d] < 0 || (info.shape[d] != 0 && shape_rows > (std::int64_t{1} << 40) / info.shape[d]))
        fail(errc::malformed_file, name, "metadata shape is out of range");
      shape_rows *= info.shape[d];
    }
    if (info.shape.empty() || info.shape.back() != info.cols || shape_rows != info.rows)
      fail(errc::malformed_file, name, "metadata shape does not match its rows and cols");
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
      fail(errc::dtype_mismatch, name, "unrecognised layout: " + name + ".weight is " +
                                           std::string(safetensors_dtype_name(weight->dtype)) + ", " + name + ".weight_scale is " +
                                           std::string(safetensors_dtype_name(scale->dtype)));
    }
    info.shape = {info.rows, info.cols};
    if (scale_2 && scale_2->dtype == safetensors_dtype::f32 && scale_2->bytes.size() == 4) {
      float decode;
      std::memcpy(&decode, scale_2->bytes.data(), 4);
      info.amax = decode * 2688.0f;
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
    fail(errc::dtype_mismatch, name, name + ".weight is " + std::string(safetensors_dtype_name(weight->dtype)) + ", expected " +
                                         std::string(safetensors_dtype_name(expected_weight_dtype)));
  if (weight->shape[0] != info.rows || weight->shape[1] != data_cols)
    fail(errc::shape_mismatch, name, name + ".weight is " + detail_safetensors::shape_text(weight->shape) + ", expected [" +
                                         std::to_string(info.rows) + ", " + std::to_string(data_cols) + "]");
  const bool scale_dtype_ok = is_nvfp4 ? scale->dtype == safetensors_dtype::f8_e4m3
                                       : (scale->dtype == safetensors_dtype::u8 || scale->dtype == safetensors_dtype::f8_e8m0);
  if (!scale_dtype_ok)
    fail(errc::dtype_mismatch, name, name + ".weight_scale has dtype " + std::string(safetensors_dtype_name(scale->dtype)) +
                                         (is_nvfp4 ? ", expected F8_E4M3" : ", expected U8 (E8M0 bytes)"));
  const index_t scale_rows_expected = info.swizzled ? swizzled_scales::padded(info.rows, 128) : info.rows;
  const index_t scale_cols_expected = info.swizzled ? swizzled_scales::padded(scale_cols, 4) : scale_cols;
  if (scale->shape[0] != scale_rows_expected || scale->shape[1] != scale_cols_expected)
    fail(errc::shape_mismatch, name, name + ".weight_scale is " + detail_safetensors::shape_text(scale->shape) + ", expected [" +
                                         std::to_string(scale_rows_expected) + ", " + std::to_string(scale_cols_expected) + "]");
  if (is_nvfp4) {
    if (!scale_2) fail(errc::malformed_file, name, name + ".weight_scale_2 is missing");
    if (scale_2->dtype != safetensors_dtype::f32 || scale_2->bytes.size() != 4)
      fail(errc::dtype_mismatch, name, name + ".weight_scale_2 is not one F32 value");
  }
  return info;
}

/// Rebuilds the quantized tensor `name` of `file` (stored as Format) bit for bit as it was
/// stored. Throws as describe_quantized_tensor does, and dtype_mismatch when it is another format.
template <block_scaled_format Format>
quantized_tensor<Format> load_quantized_tensor(const safetensors_file& file, const std::string& name) {
  const stored_tensor_info info = describe_quantized_tensor(file, name);
  detail::require(info.format == stored_format_of<Format>(), errc::dtype_mismatch,
                  "tensor '" + name + "' is stored as " + stored_format_name(info.format) + " with another block shape");
  quantized_tensor<Format> q(info.rows, info.cols);
  const auto& weight = file.at(name + ".weight");
  const auto& scale = file.at(name + ".weight_scale");
  auto data = q.data();
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = Format::storage_type::from_bits(weight.bytes[i]);
  std::vector<std::uint8_t> compact;
  if (info.swizzled) {
    swizzled_scales swizzled{info.rows, q.scale_cols(), scale.bytes};
    compact = unswizzle_128x4(swizzled);
  } else {
    compact = scale.bytes;
  }
  auto scales = q.scales();
  for (std::size_t i = 0; i < scales.size(); ++i) scales[i] = Format::scale_type::from_bits(compact[i]);
  if constexpr (Format::has_tensor_scale) {
    float decode;
    std::memcpy(&decode, file.at(name + ".weight_scale_2").bytes.data(), 4);
    // S_enc only matters for quantizing; recompute it from amax when we recorded one.
    const tensor_scale from_amax = nvfp4_tensor_scale(info.amax);
    const float encode = info.has_metadata && from_amax.decode == decode ? from_amax.encode : 1.0f / decode;
    q.set_tensor_scale(info.amax, encode, decode);
  } else {
    q.set_tensor_scale(info.amax, 1.0f, 1.0f);
  }
  return q;
}

/// A dequantized tensor in its source shape.
struct restored_tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;  ///< C order
};

/// Dequantizes quantized tensor `name` of `file` (any of our formats, or a ModelOpt NVFP4 / MX
/// layout without our metadata) into its source shape; a tensor stored with RHT is transformed
/// back (the inverse RHT rounds each value to bf16, as the forward one did).
inline restored_tensor dequantize_tensor(const safetensors_file& file, const std::string& name) {
  const stored_tensor_info info = describe_quantized_tensor(file, name);
  restored_tensor out;
  out.shape = info.shape;
  switch (info.format) {
    case stored_format::nvfp4_1x16: out.values = dequantize(load_quantized_tensor<nvfp4_1x16>(file, name)); break;
    case stored_format::nvfp4_16x16: out.values = dequantize(load_quantized_tensor<nvfp4_16x16>(file, name)); break;
    case stored_format::mxfp4: out.values = dequantize(load_quantized_tensor<mxfp4>(file, name)); break;
    case stored_format::mxfp8: out.values = dequantize(load_quantized_tensor<mxfp8>(file, name)); break;
  }
  if (info.rht) {
    const auto transform = hadamard_transform::te_default();
    detail::require(info.cols % transform.size() == 0, errc::malformed_file,
                    "tensor '" + name + "': RHT recorded but cols = " + std::to_string(info.cols) + " is not a multiple of 16");
    std::vector<bf16> restored(out.values.size());
    hadamard_rows(matrix_view<const float>::row_major(out.values.data(), info.rows, info.cols), transform,
                  matrix_view<bf16>::row_major(restored.data(), info.rows, info.cols), hadamard_direction::inverse);
    for (std::size_t i = 0; i < restored.size(); ++i) out.values[i] = restored[i].to_float();
  }
  return out;
}

}  // namespace nvfp4::io
