// nvfp4/io/quantized_checkpoint.hpp: quantized tensors stored in safetensors files, in the tensor
// layout of NVIDIA ModelOpt's NVFP4 checkpoints (W.weight, W.weight_scale, W.weight_scale_2) and
// its MX analogues, with what our dequantizer needs recorded in __metadata__ (docs/cli.md). Here:
// storing one (add_quantized_tensor); what a file says about its tensors is io/stored_tensor.hpp,
// reading them back io/stored_tensor_load.hpp, both included.
#pragma once

#include <nlohmann/json.hpp>

#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/io/safetensors.hpp"
#include "nvfp4/io/stored_tensor.hpp"
#include "nvfp4/io/stored_tensor_load.hpp"
#include "nvfp4/scaling/layout.hpp"
#include "nvfp4/scaling/quantize.hpp"

namespace nvfp4::io {

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

inline std::vector<std::uint8_t> float_bytes(float v) {
  std::vector<std::uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}

/// Throws, with the reader's reason, when dequantize_tensor refuses `name` of `file`.
template <block_scaled_format Format>
void require_reads_back(const safetensors_file& file, const std::string& name) {
  try {
    (void)dequantize_tensor_in_pieces(file, name, {}, [](std::span<const float>) {});  // (nothing kept)
  } catch (const error& e) {
    std::string reason = e.what();
    if (reason.rfind("nvfp4: ", 0) == 0) reason.erase(0, 7);
    throw error(e.code() == errc::overflow ? errc::overflow : errc::invalid_argument,
                "not storing tensor '" + name + "': the file would not read back (" + reason + ")");
  }
}

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

}  // namespace nvfp4::io
