// nvfp4/io/stored_tensor_load.hpp: a quantized tensor stored in a safetensors file (described by
// io/stored_tensor.hpp) read back: bit for bit as a quantized_tensor, or dequantized into its
// source shape, whole or piece by piece, the recorded RHT inverted.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "nvfp4/detail/checked_size.hpp"
#include "nvfp4/io/detail/checkpoint_metadata.hpp"
#include "nvfp4/io/safetensors.hpp"
#include "nvfp4/io/stored_tensor.hpp"
#include "nvfp4/scaling/layout.hpp"
#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/transforms/hadamard.hpp"

namespace nvfp4::io {

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

}  // namespace nvfp4::io
