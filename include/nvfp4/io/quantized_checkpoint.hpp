// nvfp4/io/quantized_checkpoint.hpp: quantized tensors stored in safetensors files, in the tensor
// layout of NVIDIA ModelOpt's NVFP4 checkpoints (W.weight, W.weight_scale, W.weight_scale_2) and
// its MX analogues, with what our dequantizer needs recorded in __metadata__ (docs/cli.md).
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/io/detail/checkpoint_metadata.hpp"
#include "nvfp4/io/safetensors.hpp"
#include "nvfp4/scaling/layout.hpp"
#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/transforms/hadamard.hpp"

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

/// How a tensor was made; recorded in the metadata.
struct store_options {
  bool swizzle = false;            ///< write the scales in the 128x4 layout GPU GEMMs read
  bool rht = false;                ///< the rows went through TE's RHT (dequantize inverts it)
  quantize_options quantize = {};  ///< rounding, seed, MX rule used
  /// The N-D shape to restore (rows = the product of all but the last, cols = the last; a 0-d
  /// source, {}, is one element); none: [rows, cols].
  std::optional<std::vector<std::int64_t>> source_shape = std::nullopt;
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

inline std::vector<std::uint8_t> float_bytes(float v) {
  std::vector<std::uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}

}  // namespace detail_checkpoint

namespace detail_checkpoint {
/// Throws, with the reader's reason, when dequantize_tensor refuses `name` of `file` (defined
/// below it; a template so that the call in add_quantized_tensor is looked up there).
template <block_scaled_format Format>
void require_reads_back(const safetensors_file& file, const std::string& name);
}  // namespace detail_checkpoint

/// Adds q to `file` as `name`.weight (packed elements), `name`.weight_scale (block scales) and,
/// for NVFP4, `name`.weight_scale_2 (F32 scalar S_dec = 1 / S_enc, which is amax/2688 up to one
/// rounding), plus a metadata entry "nvfp4.<name>" describing it. NVFP4 scales are F8_E4M3; MX
/// scales are E8M0 bytes stored as U8; MXFP8 elements are F8_E4M3. Throws invalid_argument when
/// the name is empty or taken, and, leaving `file` as it was, when dequantize_tensor would refuse
/// the stored tensor (overflow when its values or their inverse RHT overflow, invalid_argument for
/// NaN block scales, a NaN amax or tensor scale), with the reader's reason: nothing is stored
/// that does not read back.
template <block_scaled_format Format>
void add_quantized_tensor(safetensors_file& file, const std::string& name, const quantized_tensor<Format>& q,
                          const store_options& options = {}) {
  constexpr stored_format format = stored_format_of<Format>();
  detail::require(!name.empty(), errc::invalid_argument,
                  "safetensors: a quantized tensor needs a non-empty name (its tensors are W.weight, W.weight_scale, ...)");
  nlohmann::json meta;
  meta["format"] = stored_format_name(format);
  meta["block"] = {Format::block_rows, Format::block_cols};
  meta["rows"] = q.rows();
  meta["cols"] = q.cols();
  meta["shape"] = options.source_shape ? *options.source_shape : std::vector<std::int64_t>{q.rows(), q.cols()};
  meta["axis"] = nvfp4::detail::name_of(q.axis());
  meta["scale_layout"] = options.swizzle ? "128x4" : "compact";
  meta["rht"] = options.rht ? "te16_rows" : "none";
  meta["rounding"] = nvfp4::detail::name_of(options.quantize.rounding);
  meta["seed"] = options.quantize.seed;
  if constexpr (!Format::has_tensor_scale) meta["mx_rule"] = nvfp4::detail::name_of(options.quantize.mx_rule);
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
    scale.shape = detail_checkpoint::stored_scale_shape(q.rows(), q.scale_cols(), /*swizzled=*/true);
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
  // Nothing is stored that our own reader would refuse (issue 34): the tensor is read back as
  // dequantize_tensor reads it (NaN block scales, as torchao's quantizer makes for an all-zero
  // block; values whose scales overflow float, as the TE ceil rule gives FLT_MAX; an RHT whose
  // inverse overflows; NaN amax or tensor scale) and refused with the reader's reason.
  // A NaN block scale is named as the quantizer's doing (the reader's message speaks to readers).
  for (std::size_t i = 0; i < q.scales().size(); ++i) {
    const std::uint8_t b = q.scales()[i].bits();
    if (Format::has_tensor_scale ? (b & 0x7F) == 0x7F : b == 0xFF)
      throw error(errc::invalid_argument, "not storing tensor '" + name + "': block scale " + std::to_string(i) +
                                              " (row-major) is NaN, which the file's readers refuse; the quantizer made it "
                                              "(torchao's rule divides 0 by 0 when the tensor's amax is 0 or denormal)");
  }
  safetensors_file probe;
  probe.add(std::move(weight));
  probe.add(std::move(scale));
  if constexpr (Format::has_tensor_scale) {
    safetensors_tensor scale_2;
    scale_2.name = name + ".weight_scale_2";
    scale_2.dtype = safetensors_dtype::f32;
    scale_2.shape = {};
    scale_2.bytes = detail_checkpoint::float_bytes(q.decode_scale());
    probe.add(std::move(scale_2));
  }
  probe.metadata[key] = meta.dump();
  detail_checkpoint::require_reads_back<Format>(probe, name);
  for (auto& t : probe.tensors) file.add(std::move(t));
  file.metadata[key] = std::move(probe.metadata[key]);
  file.metadata.emplace("format", "pt");  // what Hugging Face loaders expect to find
}

namespace detail_checkpoint {

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

/// How a stored quantized tensor is read.
struct load_options {
  /// Read block scales that are NaN or have their sign bit set (UE4M3 0x7F and 0x80..0xFF, E8M0
  /// 0xFF) and a weight_scale_2 that is NaN, Inf or negative as they are, e.g. to inspect a
  /// damaged file (the dequantized values are then NaN, Inf or of flipped sign). Off (the
  /// default): such a file is malformed_file, naming the scale.
  bool accept_invalid_scales = false;
};

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

namespace detail_checkpoint {

/// Throws malformed_file naming the first block scale of `compact` that is NaN or has its sign
/// bit set (what load_options::accept_invalid_scales lets through).
template <block_scaled_format Format>
void refuse_invalid_scales(std::span<const std::uint8_t> compact, index_t scale_cols, const std::string& name) {
  if (const auto bad = first_invalid_scale(compact, !Format::has_tensor_scale)) {
    const auto row = static_cast<index_t>(*bad) / scale_cols, block = static_cast<index_t>(*bad) % scale_cols;
    const std::uint8_t code = compact[*bad];
    const bool nan = Format::has_tensor_scale ? (code & 0x7F) == 0x7F : true;
    fail(errc::malformed_file, name,
         "block scale (" + std::to_string(row) + ", " + std::to_string(block) + ") of " + name + ".weight_scale is byte " +
             std::to_string(code) + (nan ? " (NaN)" : " (sign bit set: PyTorch reads it as a negative E4M3 scale)") +
             "; load_options::accept_invalid_scales (the CLI's --accept-invalid-scales) reads it anyway");
  }
}

/// The tensor scale (amax, encode, decode) a stored tensor is rebuilt with.
template <block_scaled_format Format>
void set_stored_tensor_scale(quantized_tensor<Format>& q, const safetensors_file& file, const std::string& name,
                             const stored_tensor_info& info) {
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
}

/// The compact block scales of a stored tensor: its own bytes, or unswizzled from 128x4.
inline std::vector<std::uint8_t> unswizzled_copy(const safetensors_file& file, const std::string& name, const stored_tensor_info& info,
                                                 index_t scale_cols) {
  return unswizzle_128x4(swizzled_scales(info.rows, scale_cols, file.at(name + ".weight_scale").bytes));
}

}  // namespace detail_checkpoint

/// Rebuilds the quantized tensor `name` of `file` (stored as Format) bit for bit as it was
/// stored. Throws as describe_quantized_tensor does, dtype_mismatch when it is another format,
/// and (unless options.accept_invalid_scales) malformed_file naming the first block scale that
/// is NaN or has its sign bit set.
template <block_scaled_format Format>
quantized_tensor<Format> load_quantized_tensor(const safetensors_file& file, const std::string& name, const load_options& options = {}) {
  const stored_tensor_info info = describe_quantized_tensor(file, name, options);
  detail::require(info.format == stored_format_of<Format>(), errc::dtype_mismatch,
                  "tensor '" + name + "' is stored as " + stored_format_name(info.format) + " with another block shape");
  quantized_tensor<Format> q(info.rows, info.cols);
  const auto& weight = file.at(name + ".weight");
  auto data = q.data();
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = Format::storage_type::from_bits(weight.bytes[i]);
  std::vector<std::uint8_t> unswizzled;
  if (info.swizzled) unswizzled = detail_checkpoint::unswizzled_copy(file, name, info, q.scale_cols());
  const std::span<const std::uint8_t> compact =
      info.swizzled ? std::span<const std::uint8_t>(unswizzled) : file.at(name + ".weight_scale").bytes;
  if (!options.accept_invalid_scales) detail_checkpoint::refuse_invalid_scales<Format>(compact, q.scale_cols(), name);
  auto scales = q.scales();
  for (std::size_t i = 0; i < scales.size(); ++i) scales[i] = Format::scale_type::from_bits(compact[i]);
  detail_checkpoint::set_stored_tensor_scale(q, file, name, info);
  return q;
}

/// A dequantized tensor in its source shape.
struct restored_tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;  ///< C order
};

/// What dequantize_tensor_in_pieces hands over, piece by piece.
using value_consumer = std::function<void(std::span<const float> values)>;

/// Floats per piece of dequantize_tensor_in_pieces by default (16 MiB: few enough pieces that the
/// threads of each piece's kernel meet rarely, small beside any weight worth streaming).
inline constexpr index_t dequantize_piece_elements = index_t{1} << 22;

namespace detail_checkpoint {

/// The pieces a [rows, cols] tensor is cut into: runs of whole rows of about `piece_elements`
/// values, or, for a row longer than that, runs of one row's columns (a multiple of 32, so every
/// piece holds whole blocks of every format, RHT's 16 included). fn(r0, r1, c0, c1) per piece, in
/// C order.
template <class Fn>
void for_each_piece(index_t rows, index_t cols, index_t piece_elements, Fn&& fn) {
  if (rows == 0 || cols == 0) return;
  if (cols <= piece_elements) {
    const index_t step = std::max<index_t>(1, piece_elements / cols);
    for (index_t r0 = 0; r0 < rows; r0 += step) fn(r0, std::min(rows, r0 + step), index_t{0}, cols);
    return;
  }
  const index_t step = std::max<index_t>(32, piece_elements / 32 * 32);
  for (index_t r = 0; r < rows; ++r)
    for (index_t c0 = 0; c0 < cols; c0 += step) fn(r, r + 1, c0, std::min(cols, c0 + step));
}

/// The error of an inverse RHT that failed on a piece of rows [r0, r0 + rows) x columns [c0, c0 +
/// cols) of a tensor, with the failing block's place given in the tensor's coordinates: the first
/// block whose own transform fails is found again, block by block (only on failure).
inline error rht_error_in_tensor(const error& piece_error, std::span<const float> values, index_t r0, index_t rows, index_t c0,
                                 index_t cols) {
  const auto transform = hadamard_transform::te_default();
  bf16 out[16];
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; c += 16) {
      try {
        hadamard_rows(matrix_view<const float>::row_major(values.data() + r * cols + c, 1, 16), transform,
                      matrix_view<bf16>::row_major(out, 1, 16), hadamard_direction::inverse);
      } catch (const error& e) {
        std::string what = e.what();
        if (what.rfind("nvfp4: ", 0) == 0) what.erase(0, 7);
        const std::string local = "at row 0, columns 0..15", place = "at row " + std::to_string(r0 + r) + ", columns " +
                                                                     std::to_string(c0 + c) + ".." + std::to_string(c0 + c + 15);
        if (const auto at = what.find(local); at != std::string::npos) what.replace(at, local.size(), place);
        return error(e.code(), what);
      }
    }
  return piece_error;
}

/// dequantize_tensor_in_pieces for a tensor stored as Format.
template <block_scaled_format Format>
void dequantize_pieces(const safetensors_file& file, const std::string& name, const stored_tensor_info& info, const load_options& options,
                       const value_consumer& consume, index_t piece_elements) {
  const index_t rows = info.rows, cols = info.cols;
  const index_t data_stride = (cols + Format::elements_per_storage - 1) / Format::elements_per_storage;
  const index_t scale_cols = (cols + Format::block_cols - 1) / Format::block_cols;
  const auto& weight = file.at(name + ".weight");
  std::vector<std::uint8_t> unswizzled;
  if (info.swizzled) unswizzled = unswizzled_copy(file, name, info, scale_cols);
  const std::span<const std::uint8_t> compact =
      info.swizzled ? std::span<const std::uint8_t>(unswizzled) : file.at(name + ".weight_scale").bytes;
  if (!options.accept_invalid_scales) refuse_invalid_scales<Format>(compact, scale_cols, name);
  quantized_tensor<Format> whole_scale;  // (only its tensor scale: copied into each piece)
  set_stored_tensor_scale(whole_scale, file, name, info);
  std::vector<float> values;
  // The stored values of rows [r0, r1) x columns [c0, c1), as dequantize() gives them.
  const auto dequantize_piece = [&](index_t r0, index_t r1, index_t c0, index_t c1) {
    quantized_tensor<Format> q(r1 - r0, c1 - c0);
    auto data = q.data();
    auto scales = q.scales();
    const index_t piece_stride = q.data_row_stride(), piece_scale_cols = q.scale_cols();
    for (index_t r = r0; r < r1; ++r) {
      const std::uint8_t* from = weight.bytes.data() + r * data_stride + c0 / Format::elements_per_storage;
      for (index_t i = 0; i < piece_stride; ++i)
        data[static_cast<std::size_t>((r - r0) * piece_stride + i)] = Format::storage_type::from_bits(from[i]);
      const std::uint8_t* scale_from = compact.data() + r * scale_cols + c0 / Format::block_cols;
      for (index_t i = 0; i < piece_scale_cols; ++i)
        scales[static_cast<std::size_t>((r - r0) * piece_scale_cols + i)] = Format::scale_type::from_bits(scale_from[i]);
    }
    // A piece ending at an odd column leaves a pad nibble the tensor does not read.
    q.set_tensor_scale(whole_scale.amax(), whole_scale.encode_scale(), whole_scale.decode_scale());
    values.resize(static_cast<std::size_t>((r1 - r0) * (c1 - c0)));
    nvfp4::dequantize(q, matrix_view<float>::row_major(values.data(), r1 - r0, c1 - c0));
  };
  // Valid scales can still be too large together: scale x weight_scale_2 x element beyond float.
  const auto refuse_overflow = [&](index_t r0, index_t c0, index_t piece_cols) {
    for (std::size_t i = 0; i < values.size(); ++i)
      if (!std::isfinite(values[i]))
        throw error(errc::overflow, "tensor '" + name + "': dequantized element (" +
                                        std::to_string(r0 + static_cast<index_t>(i) / piece_cols) + ", " +
                                        std::to_string(c0 + static_cast<index_t>(i) % piece_cols) +
                                        ") overflows float (element times its scales is beyond float's range)");
  };
  if (!info.rht) {
    for_each_piece(rows, cols, piece_elements, [&](index_t r0, index_t r1, index_t c0, index_t c1) {
      dequantize_piece(r0, r1, c0, c1);
      if (!options.accept_invalid_scales) refuse_overflow(r0, c0, c1 - c0);
      consume(values);
    });
    return;
  }
  // RHT: every overflow is reported before the transform is (a first pass), as for the whole tensor.
  if (!options.accept_invalid_scales)
    for_each_piece(rows, cols, piece_elements, [&](index_t r0, index_t r1, index_t c0, index_t c1) {
      dequantize_piece(r0, r1, c0, c1);
      refuse_overflow(r0, c0, c1 - c0);
    });
  const auto transform = hadamard_transform::te_default();
  detail::require(cols % transform.size() == 0, errc::malformed_file,
                  "tensor '" + name + "': RHT recorded but cols = " + std::to_string(cols) + " is not a multiple of 16");
  std::vector<bf16> restored;
  std::vector<std::size_t> poisoned_blocks;
  for_each_piece(rows, cols, piece_elements, [&](index_t r0, index_t r1, index_t c0, index_t c1) {
    dequantize_piece(r0, r1, c0, c1);
    // Read with invalid scales accepted, a block holding NaN/Inf comes back all NaN (as an
    // arithmetic transform would make it); the others are transformed as usual.
    poisoned_blocks.clear();
    if (options.accept_invalid_scales) {
      for (std::size_t b = 0; b < values.size(); b += 16) {
        bool finite = true;
        for (std::size_t i = b; i < b + 16; ++i) finite = finite && std::isfinite(values[i]);
        if (finite) continue;
        poisoned_blocks.push_back(b);
        std::fill_n(values.begin() + static_cast<std::ptrdiff_t>(b), 16, 0.0f);
      }
    }
    restored.resize(values.size());
    try {
      hadamard_rows(matrix_view<const float>::row_major(values.data(), r1 - r0, c1 - c0), transform,
                    matrix_view<bf16>::row_major(restored.data(), r1 - r0, c1 - c0), hadamard_direction::inverse);
    } catch (const error& e) {
      // Name the tensor and the block's place in it (the transform saw the piece alone): the
      // dequantized values (of invalid scales, or huge ones) do not fit bf16.
      throw detail::with_context(rht_error_in_tensor(e, values, r0, r1 - r0, c0, c1 - c0),
                                 "tensor '" + name + "': inverse RHT of the dequantized values");
    }
    for (std::size_t i = 0; i < restored.size(); ++i) values[i] = restored[i].to_float();
    for (const std::size_t b : poisoned_blocks) std::fill_n(values.begin() + static_cast<std::ptrdiff_t>(b), 16, NAN);
    consume(values);
  });
}

/// dequantize_pieces for whichever format `info` says.
inline void dequantize_described(const safetensors_file& file, const std::string& name, const stored_tensor_info& info,
                                 const load_options& options, const value_consumer& consume, index_t piece_elements) {
  switch (info.format) {
    case stored_format::nvfp4_1x16:
      dequantize_pieces<nvfp4_1x16>(file, name, info, options, consume, piece_elements);
      break;
    case stored_format::nvfp4_16x16:
      dequantize_pieces<nvfp4_16x16>(file, name, info, options, consume, piece_elements);
      break;
    case stored_format::mxfp4:
      dequantize_pieces<mxfp4>(file, name, info, options, consume, piece_elements);
      break;
    case stored_format::mxfp8:
      dequantize_pieces<mxfp8>(file, name, info, options, consume, piece_elements);
      break;
  }
}

}  // namespace detail_checkpoint

/// The values dequantize_tensor returns, handed to `consume` piece by piece in C order (whole
/// rows, or runs of one long row's columns, about `piece_elements` values each): the same values,
/// the same checks and the same errors, each thrown before the piece holding the fault is handed
/// over (an RHT tensor's overflow before any piece). Holds one piece beside the stored bytes, not
/// the whole float tensor (8x the packed FP4 bytes). Returns the tensor's description.
inline stored_tensor_info dequantize_tensor_in_pieces(const safetensors_file& file, const std::string& name, const load_options& options,
                                                      const value_consumer& consume, index_t piece_elements = dequantize_piece_elements) {
  const stored_tensor_info info = describe_quantized_tensor(file, name, options);
  detail_checkpoint::dequantize_described(file, name, info, options, consume, piece_elements);
  return info;
}

/// Dequantizes quantized tensor `name` of `file` (any of our formats, or a ModelOpt NVFP4 / MX
/// layout without our metadata) into its source shape; a tensor stored with RHT is transformed
/// back (the inverse RHT rounds each value to bf16, as the forward one did). Throws as
/// load_quantized_tensor does, and errc::overflow when a dequantized value overflows float
/// (unless options.accept_invalid_scales) or the inverse RHT overflows bf16.
inline restored_tensor dequantize_tensor(const safetensors_file& file, const std::string& name, const load_options& options = {}) {
  const stored_tensor_info info = describe_quantized_tensor(file, name, options);
  restored_tensor out;
  out.shape = info.shape;
  out.values.reserve(static_cast<std::size_t>(info.rows * info.cols));
  detail_checkpoint::dequantize_described(
      file, name, info, options, [&](std::span<const float> piece) { out.values.insert(out.values.end(), piece.begin(), piece.end()); },
      dequantize_piece_elements);
  return out;
}

template <block_scaled_format Format>
void detail_checkpoint::require_reads_back(const safetensors_file& file, const std::string& name) {
  try {
    (void)dequantize_tensor_in_pieces(file, name, {}, [](std::span<const float>) {});  // (nothing kept)
  } catch (const error& e) {
    std::string reason = e.what();
    if (reason.rfind("nvfp4: ", 0) == 0) reason.erase(0, 7);
    throw error(e.code() == errc::overflow ? errc::overflow : errc::invalid_argument,
                "not storing tensor '" + name + "': the file would not read back (" + reason + ")");
  }
}

}  // namespace nvfp4::io
