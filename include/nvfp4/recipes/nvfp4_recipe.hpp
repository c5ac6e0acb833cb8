// nvfp4/recipes/nvfp4_recipe.hpp: TransformerEngine's NVFP4BlockScaling recipe (docs/numerics_spec.md §8, TE
// common/recipe/__init__.py and pytorch/quantization.py) as one API: the recipe's switches, the
// three tensor roles of a linear layer Y = X Wᵀ quantized into the operands the fprop, dgrad and
// wgrad GEMMs read, and the GEMM with TE's epilogue (alpha from the amaxes and E4M3 bounds,
// row-scaled outputs, bias, fp32 or bf16 output).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "nvfp4/detail/enum_names.hpp"
#include "nvfp4/gemm/fp4/gemm.hpp"
#include "nvfp4/recipes/nvfp4_amax_rule.hpp"
#include "nvfp4/recipes/recipe_common.hpp"
#include "nvfp4/recipes/recipe_fields.hpp"
#include "nvfp4/scaling/four_over_six.hpp"
#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/scaling/quantize_finite.hpp"
#include "nvfp4/scaling/row_scaled_nvfp4.hpp"
#include "nvfp4/simd/parallel.hpp"
#include "nvfp4/transforms/hadamard.hpp"

namespace nvfp4 {

/// Which tensors of a layer 4over6 applies to (TE's nvfp4_4over6 and nvfp4_4over6_e4m3_use_256
/// values 'none', 'weights', 'activations', 'all'). Gradients never use it.
enum class four_over_six_scope { none, weights, activations, all };
/// Its names (TE's values; one table: nvfp4/detail/enum_names.hpp).
namespace detail {
template <>
struct enum_table<four_over_six_scope> {
  static constexpr enum_entry<four_over_six_scope> entries[] = {{"none", four_over_six_scope::none},
                                                                {"weights", four_over_six_scope::weights},
                                                                {"activations", four_over_six_scope::activations},
                                                                {"all", four_over_six_scope::all}};
};
}  // namespace detail

/// NVFP4BlockScaling with TE's field names and defaults, plus the seed of the gradients'
/// stochastic rounding and the Hadamard transform (TE's fixed 16-point one by default).
struct nvfp4_block_scaling {
  bool disable_rht = false;                  ///< no RHT on the wgrad operands' columnwise copies
  bool disable_stochastic_rounding = false;  ///< gradients rounded to nearest instead of SR
  bool disable_2d_quantization = false;      ///< weights in 1x16 blocks instead of 16x16 tiles
  bool row_scaled_activation = false;        ///< activations with one amax (tensor scale) per row
  four_over_six_scope nvfp4_4over6 = four_over_six_scope::none;
  four_over_six_scope nvfp4_4over6_e4m3_use_256 = four_over_six_scope::all;
  four_over_six_error nvfp4_4over6_err_mode = four_over_six_error::mae;
  std::uint64_t seed = 0;  ///< seed of the gradients' SR streams
  hadamard_transform rht = hadamard_transform::te_default();

  static constexpr auto fields() {
    using R = nvfp4_block_scaling;
    return std::tuple{
        field_row("disable_rht", &R::disable_rht, field_origin::te, "no RHT on the wgrad operands' columnwise copies"),
        field_row("disable_stochastic_rounding", &R::disable_stochastic_rounding, field_origin::te, "gradients rounded to nearest"),
        field_row("disable_2d_quantization", &R::disable_2d_quantization, field_origin::te, "weights in 1x16 blocks, not 16x16 tiles"),
        field_row("row_scaled_activation", &R::row_scaled_activation, field_origin::te, "one amax (tensor scale) per activation row"),
        field_row("nvfp4_4over6", &R::nvfp4_4over6, field_origin::te, "tensors quantized with 4over6: none, weights, activations, all"),
        field_row("nvfp4_4over6_e4m3_use_256", &R::nvfp4_4over6_e4m3_use_256, field_origin::te, "4over6 tensors whose E4M3 bound is 256"),
        field_row("nvfp4_4over6_err_mode", &R::nvfp4_4over6_err_mode, field_origin::te, "4over6's block error: MAE or MSE"),
        field_row("seed", &R::seed, field_origin::library, "seed of the gradients' stochastic rounding"),
        field_row("rht", &R::rht, field_origin::library, "the Hadamard transform (TE's fixed 16-point one)")};
  }

  /// Whether a scope covers a role ('activations' is every non-weight forward tensor).
  static constexpr bool covers(four_over_six_scope scope, tensor_role role) {
    if (role == tensor_role::grad_output || scope == four_over_six_scope::none) return false;
    if (scope == four_over_six_scope::all) return true;
    return (scope == four_over_six_scope::weights) == (role == tensor_role::weight);
  }
  /// Whether the role is quantized with 4over6 (never gradients, TE pytorch/quantization.py).
  bool uses_4over6(tensor_role role) const { return covers(nvfp4_4over6, role); }
  /// The E4M3 bound of the role's tensor scale: 256 for 4over6 tensors selected by
  /// nvfp4_4over6_e4m3_use_256, else 448.
  int e4m3_max(tensor_role role) const { return uses_4over6(role) && covers(nvfp4_4over6_e4m3_use_256, role) ? 256 : 448; }

  /// TE's rejections for a layer that runs forward and backward (messages as TE's):
  /// 4over6 on activations needs disable_rht (TE: "NVFP4 4over6 quantization does not support
  /// RHT"); row_scaled_activation needs disable_rht ("Row-scaled NVFP4 quantization does not
  /// support RHT") and no 4over6 on activations (the columnwise copy the wgrad GEMM needs: "Row-scaled
  /// NVFP4 transpose quantization is not supported with 4over6 mode").
  void validate() const {
    detail::require(!(uses_4over6(tensor_role::input) && !disable_rht), errc::invalid_argument,
                    "nvfp4_block_scaling: NVFP4 4over6 quantization does not support RHT; nvfp4_4over6 covers the activations, "
                    "whose columnwise copy uses RHT: set disable_rht or use nvfp4_4over6 = weights");
    detail::require(!(row_scaled_activation && !disable_rht), errc::invalid_argument,
                    "nvfp4_block_scaling: row-scaled NVFP4 quantization does not support RHT: set disable_rht with row_scaled_activation");
    detail::require(!(row_scaled_activation && uses_4over6(tensor_role::input)), errc::invalid_argument,
                    "nvfp4_block_scaling: row-scaled NVFP4 transpose quantization is not supported with 4over6 mode (the activations' "
                    "columnwise copy for wgrad)");
  }
};

/// The name this library used before the recipe had TE's other switches.
using nvfp4_recipe = nvfp4_block_scaling;

/// One copy of a tensor as a GEMM operand, with what TE's epilogue needs beside the data: the
/// E4M3 bound of its tensor scale (448, or 256 for 4over6 tensors) and, for a row-scaled copy, the
/// amax of each row (tensor.amax() is then not used). Blocks run along rows; every copy is stored
/// in the 1x16 layout (a 16x16 tile's scale is repeated on its 16 rows).
struct nvfp4_operand {
  nvfp4_tensor tensor;
  float e4m3_max = 448.0f;
  std::vector<float> row_amax;
  bool row_scaled() const { return !row_amax.empty(); }
};

/// The two copies of one tensor: rowwise (blocks along its rows) and columnwise (its transpose,
/// blocks along its columns, RHT'd where the recipe says so).
struct operand_pair {
  nvfp4_operand rowwise;
  nvfp4_operand columnwise;
};

/// One GEMM's operands, both blocked along the reduction dimension: D = A · Bᵀ.
struct gemm_operands {
  const nvfp4_operand* a;
  const nvfp4_operand* b;
};

/// The seed of an independent random stream, splitmix64 of `seed` and a tag: the SR streams of a
/// gradient's two copies (tags 0 rowwise, 1 columnwise), a layer's gradient seed per backward
/// (nn::linear::gradient_seed), a model layer's seed from its name.
constexpr std::uint64_t derived_seed(std::uint64_t seed, std::uint64_t tag) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (tag + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// What the role quantizers' into forms reuse from call to call: W's 16x16 tiles before their
/// relabelling as 1x16 rows, and the RHT's bf16 transform of a columnwise copy.
struct nvfp4_role_storage {
  nvfp4_tile_tensor tiles;
  columnwise_rht rht;
};

namespace detail {
/// A per-tensor operand's fields besides its tensor (bound 448, no row amaxes).
inline void plain(nvfp4_operand& op, float e4m3_max = 448.0f) {
  op.e4m3_max = e4m3_max;
  op.row_amax.clear();
}
/// tiles into op.tensor as the 1x16 layout they already are (a tile's scale is stored on each of
/// its 16 rows): the same bytes, copied by rows on the library's threads (a serial 9 MiB copy would
/// stand out at 16 threads).
inline void tiles_as_rows(const nvfp4_tile_tensor& tiles, nvfp4_tensor& out) {
  if (out.rows() != tiles.rows() || out.cols() != tiles.cols() || out.axis() != tiles.axis())
    out = nvfp4_tensor(tiles.rows(), tiles.cols(), tiles.axis());
  const auto data = tiles.data();
  const auto scales = tiles.scales();
  const auto data_out = out.data();
  const auto scales_out = out.scales();
  const index_t rows = tiles.rows();
  const std::size_t data_row = data.size() / static_cast<std::size_t>(std::max<index_t>(rows, 1));
  const std::size_t scale_row = scales.size() / static_cast<std::size_t>(std::max<index_t>(rows, 1));
  simd::parallel_ranges(rows, simd::worth_parallel(rows * tiles.cols()), [&](index_t begin, index_t end) {
    const auto b0 = static_cast<std::size_t>(begin), b1 = static_cast<std::size_t>(end);
    std::copy(data.begin() + b0 * data_row, data.begin() + b1 * data_row, data_out.begin() + b0 * data_row);
    std::copy(scales.begin() + b0 * scale_row, scales.begin() + b1 * scale_row, scales_out.begin() + b0 * scale_row);
  });
  out.set_tensor_scale(tiles.amax(), tiles.encode_scale(), tiles.decode_scale());
}
/// The tensor amax of x: `known` when the caller has it (>= 0: from the pass that found every value
/// finite, e.g. a layer's NaN / Inf check), else TE's max |x| (amax() refuses NaN / Inf); under a
/// rule, the rule's choice. Either way x is known finite afterwards.
template <class T>
float tensor_amax(matrix_view<const T> x, tensor_role role, const nvfp4_amax_rule& rule, float known = -1.0f) {
  return chosen_amax(rule, role, false, x, known >= 0.0f && !rule ? known : amax(x));
}
/// The wgrad copy along M into op: with RHT, against the amax of the transformed values (TE), asked
/// of the rule once more; without, against the tensor's.
template <class T>
void columnwise_into(matrix_view<const T> x, float x_amax, const nvfp4_block_scaling& recipe, quantize_options options, tensor_role role,
                     const nvfp4_amax_rule& rule, nvfp4_operand& op, nvfp4_role_storage& storage) {
  plain(op);
  options.axis = quantized_axis::columnwise;
  if (recipe.disable_rht) return quantize_finite_with_amax_into(x.transposed(), x_amax, op.tensor, options);
  if (!rule) return quantize_columnwise_rht_into(x, recipe.rht, options, op.tensor, storage.rht);  // amax after the transform
  const columnwise_rht transformed = rht_columnwise(x, recipe.rht);
  quantize_with_amax_into(transformed.view(), chosen_amax(rule, role, true, transformed.view(), transformed.amax), op.tensor, options);
}
/// One round of transpose_nibbles_16x16: rows i and i + S (i & S == 0) exchange the columns j
/// with j & S set of row i with the columns j - S of row i + S (`low` selects the nibbles j with
/// j & S == 0). S is a template argument so that every shift is a constant.
template <int S>
inline void swap_nibble_round(std::uint64_t (&w)[16], std::uint64_t low) {
  for (int i = 0; i < 16; ++i) {
    if (i & S) continue;
    const std::uint64_t t = ((w[i] >> (4 * S)) ^ w[i + S]) & low;
    w[i + S] ^= t;
    w[i] ^= t << (4 * S);
  }
}
/// 16 rows of 16 E2M1 codes (row i in w[i], column j in bits 4j..4j+3) transposed in place: four
/// rounds of masked swaps, between 8 x 8, 4 x 4, 2 x 2 and 1 x 1 blocks of codes.
inline void transpose_nibbles_16x16(std::uint64_t (&w)[16]) {
  swap_nibble_round<8>(w, 0x00000000FFFFFFFFull);
  swap_nibble_round<4>(w, 0x0000FFFF0000FFFFull);
  swap_nibble_round<2>(w, 0x00FF00FF00FF00FFull);
  swap_nibble_round<1>(w, 0x0F0F0F0F0F0F0F0Full);
}
/// The columnwise copy of W from its rowwise copy in 16x16 tiles, into out ([K, N], the 1x16
/// layout): element (k, n) is tiles' element (n, k), its scale the scale of tile (n / 16, k / 16).
/// These are the bytes quantizing Wᵀ in 16x16 tiles gives (a tile of Wᵀ is the transpose of a tile
/// of W: the same values, amax, scale and codes; the tensor scale is W's), without reading W again.
/// Whole 16x16 blocks move as 16 64-bit words; edge rows and columns one code at a time. Bands of
/// 128 output rows are split over the library's threads (the bytes do not depend on the count).
inline void transpose_tiles_into(const nvfp4_tile_tensor& tiles, nvfp4_tensor& out) {
  const index_t n_rows = tiles.rows(), k_cols = tiles.cols();  // W [N, K]; out [K, N]
  if (out.rows() != k_cols || out.cols() != n_rows || out.axis() != quantized_axis::columnwise)
    out = nvfp4_tensor(k_cols, n_rows, quantized_axis::columnwise);
  const std::uint8_t* const in = bytes_of(tiles.data());
  const std::uint8_t* const in_scales = bytes_of(tiles.scales());
  std::uint8_t* const to = bytes_of(out.data());
  std::uint8_t* const to_scales = bytes_of(out.scales());
  const index_t in_stride = tiles.data_row_stride(), in_scale_cols = tiles.scale_cols();
  const index_t out_stride = out.data_row_stride(), out_scale_cols = out.scale_cols();
  const index_t n_full = n_rows / 16 * 16;
  const auto code = [&](index_t n, index_t k) -> std::uint8_t { return (in[n * in_stride + k / 2] >> (4 * (k & 1))) & 0x0Fu; };
  const index_t k_blocks = (k_cols + 15) / 16;
  // Whole blocks in squares of 8 x 8 blocks: 128 source rows and 128 output rows, each read or
  // written as one 64-byte line (a walk along one block column would touch a line and a page per
  // block and use 8 bytes of it).
  constexpr index_t square = 8;
  const index_t k_squares = (k_blocks + square - 1) / square;
  simd::parallel_ranges(k_squares, simd::worth_parallel(n_rows * k_cols), [&](index_t begin, index_t end) {
    for (index_t ks = begin; ks < end; ++ks) {
      const index_t kb0 = ks * square, kb1 = std::min(k_blocks, kb0 + square);
      for (index_t ns = 0; ns < n_full; ns += 16 * square)
        for (index_t kb = kb0; kb < kb1; ++kb) {
          const index_t k0 = kb * 16;
          if (k0 + 16 > k_cols) continue;  // a partial block: one code at a time below
          for (index_t n0 = ns; n0 < std::min(n_full, ns + 16 * square); n0 += 16) {
            std::uint64_t w[16];
            for (int i = 0; i < 16; ++i) std::memcpy(&w[i], in + (n0 + i) * in_stride + k0 / 2, 8);
            transpose_nibbles_16x16(w);
            for (int i = 0; i < 16; ++i) std::memcpy(to + (k0 + i) * out_stride + n0 / 2, &w[i], 8);
          }
        }
      for (index_t kb = kb0; kb < kb1; ++kb) {
        const index_t k0 = kb * 16, k1 = std::min(k_cols, k0 + 16);
        for (index_t k = k0; k < k1; ++k) {
          std::uint8_t* const row = to + k * out_stride;
          for (index_t n = (k1 - k0 == 16 ? n_full : 0); n < n_rows; n += 2)
            row[n / 2] = static_cast<std::uint8_t>(code(n, k) | (n + 1 < n_rows ? code(n + 1, k) << 4 : 0));
        }
      }
      // Scales: output row k holds tile (nb, k / 16)'s scale for each nb, the same for the 16 rows
      // of a block. Each tile row's scales of the square are read once (adjacent bytes), written
      // to the blocks' first rows, then copied down.
      for (index_t nb = 0; nb < out_scale_cols; ++nb) {
        const std::uint8_t* const tile_row = in_scales + nb * 16 * in_scale_cols;
        for (index_t kb = kb0; kb < kb1; ++kb) to_scales[kb * 16 * out_scale_cols + nb] = tile_row[kb];
      }
      for (index_t kb = kb0; kb < kb1; ++kb) {
        const index_t k0 = kb * 16, k1 = std::min(k_cols, k0 + 16);
        const std::uint8_t* const first = to_scales + k0 * out_scale_cols;
        for (index_t k = k0 + 1; k < k1; ++k) std::memcpy(to_scales + k * out_scale_cols, first, static_cast<std::size_t>(out_scale_cols));
      }
    }
  });
  out.set_tensor_scale(tiles.amax(), tiles.encode_scale(), tiles.decode_scale());
}
/// W's (or Wᵀ's) copy into op: 16x16 tiles stored as 1x16 rows, or 1x16; 4over6 where the recipe says.
template <class T>
void weight_copy_into(matrix_view<const T> w, float w_amax, const nvfp4_block_scaling& recipe, quantized_axis axis, nvfp4_operand& op,
                      nvfp4_role_storage& storage) {
  if (recipe.uses_4over6(tensor_role::weight)) {
    const four_over_six_options options{recipe.nvfp4_4over6_err_mode, recipe.e4m3_max(tensor_role::weight)};
    plain(op, static_cast<float>(options.e4m3_max));
    if (recipe.disable_2d_quantization)
      op.tensor = quantize_4over6_with_amax<nvfp4_1x16>(w, w_amax, options, axis);
    else
      tiles_as_rows(quantize_4over6_with_amax<nvfp4_16x16>(w, w_amax, options, axis), op.tensor);
    return;
  }
  plain(op);
  if (recipe.disable_2d_quantization) return quantize_finite_with_amax_into(w, w_amax, op.tensor, {.axis = axis});
  quantize_finite_with_amax_into(w, w_amax, storage.tiles, {.axis = axis});
  tiles_as_rows(storage.tiles, op.tensor);
}
}  // namespace detail

// NVFP4's role rules, each once: the into forms below write a role's copies into operands the
// caller keeps (a layer's step then touches no fresh memory for them), the value forms after them
// return new ones. Each takes an optional nvfp4_amax_rule (recipes/nvfp4_amax_rule.hpp) that
// chooses the tensor amax in place of TE's maximum (without one the results are TE's), and
// `known_amax`, the tensor's max |value| when the caller has it from a pass that also found every
// value finite (>= 0; ignored under a rule). x is then read once per encoding and no more
// (scaling/quantize_finite.hpp); without it, once more for amax(), which refuses NaN / Inf.

/// Activations X [M tokens, K]: the rowwise copy (fprop) into `rowwise` and, unless null, the
/// columnwise one (wgrad) into `columnwise`: 1x16, round-to-nearest; the columnwise copy along M,
/// with RHT unless disabled. With 4over6 on activations: both by 4over6 with the tensor amax;
/// with row_scaled_activation: one amax per token rowwise, one per feature columnwise (TE's
/// quantizer; a rule is not asked). Throws as the quantizers do, and invalid_argument for a
/// rule's amax that is not finite and >= 0.
template <quantizer_input T>
void quantize_activation_into(matrix_view<const T> x, const nvfp4_block_scaling& recipe, const nvfp4_amax_rule& rule,
                              nvfp4_operand& rowwise, nvfp4_operand* columnwise, nvfp4_role_storage& storage, float known_amax = -1.0f) {
  if (recipe.row_scaled_activation) {
    if (columnwise) {
      auto col = quantize_row_scaled(x.transposed(), quantized_axis::columnwise);
      *columnwise = {std::move(col.values), 448.0f, std::move(col.row_amax)};
    }
    auto row = quantize_row_scaled(x);
    rowwise = {std::move(row.values), 448.0f, std::move(row.row_amax)};
    return;
  }
  const float x_amax = detail::tensor_amax(x, tensor_role::input, rule, known_amax);
  if (recipe.uses_4over6(tensor_role::input)) {
    const four_over_six_options options{recipe.nvfp4_4over6_err_mode, recipe.e4m3_max(tensor_role::input)};
    const auto bound = static_cast<float>(options.e4m3_max);
    if (columnwise)
      *columnwise = {quantize_4over6_with_amax<nvfp4_1x16>(x.transposed(), x_amax, options, quantized_axis::columnwise), bound, {}};
    rowwise = {quantize_4over6_with_amax<nvfp4_1x16>(x, x_amax, options), bound, {}};
    return;
  }
  if (columnwise) detail::columnwise_into(x, x_amax, recipe, {}, tensor_role::input, rule, *columnwise, storage);
  detail::plain(rowwise);
  quantize_finite_with_amax_into(x, x_amax, rowwise.tensor);
}

/// Weights W [N, K]: the rowwise copy (fprop) into `rowwise` and, unless null, the columnwise one
/// (dgrad) into `columnwise`: 16x16 tiles (1x16 if disabled), round-to-nearest, never RHT (with
/// tiles and no 4over6, the columnwise copy is exactly the transpose of the rowwise one). With
/// 4over6 on weights each copy is chosen by 4over6 (its errors summed in that copy's own order, as
/// TE's kernel does).
template <quantizer_input T>
void quantize_weight_into(matrix_view<const T> w, const nvfp4_block_scaling& recipe, const nvfp4_amax_rule& rule, nvfp4_operand& rowwise,
                          nvfp4_operand* columnwise, nvfp4_role_storage& storage, float known_amax = -1.0f) {
  const float w_amax = detail::tensor_amax(w, tensor_role::weight, rule, known_amax);
  if (!recipe.uses_4over6(tensor_role::weight) && !recipe.disable_2d_quantization) {
    // 16x16 tiles: the columnwise copy is the rowwise one transposed (one quantization of W).
    detail::weight_copy_into(w, w_amax, recipe, quantized_axis::rowwise, rowwise, storage);
    if (columnwise) {
      detail::plain(*columnwise);
      detail::transpose_tiles_into(storage.tiles, columnwise->tensor);
    }
    return;
  }
  if (columnwise) detail::weight_copy_into(w.transposed(), w_amax, recipe, quantized_axis::columnwise, *columnwise, storage);
  detail::weight_copy_into(w, w_amax, recipe, quantized_axis::rowwise, rowwise, storage);
}

/// Output gradients dY [M, N]: the rowwise copy (dgrad) into `rowwise`, the columnwise one (wgrad,
/// along M, with RHT unless disabled) into `columnwise`: 1x16, stochastic rounding (RN if
/// disabled) with independent streams per copy (seeds derived_seed(recipe.seed, 0) rowwise, 1
/// columnwise). Never 4over6 or row-scaled.
template <quantizer_input T>
void quantize_gradient_into(matrix_view<const T> dy, const nvfp4_block_scaling& recipe, const nvfp4_amax_rule& rule, nvfp4_operand& rowwise,
                            nvfp4_operand& columnwise, nvfp4_role_storage& storage, float known_amax = -1.0f) {
  const float dy_amax = detail::tensor_amax(dy, tensor_role::grad_output, rule, known_amax);
  const auto rounding = recipe.disable_stochastic_rounding ? rounding_mode::nearest_even : rounding_mode::stochastic;
  detail::columnwise_into(dy, dy_amax, recipe, {.rounding = rounding, .seed = derived_seed(recipe.seed, 1)}, tensor_role::grad_output, rule,
                          columnwise, storage);
  detail::plain(rowwise);
  quantize_finite_with_amax_into(dy, dy_amax, rowwise.tensor, {.rounding = rounding, .seed = derived_seed(recipe.seed, 0)});
}

/// The value forms: quantize_activation_into's, quantize_weight_into's and
/// quantize_gradient_into's copies as new operands (both, or the rowwise one alone: what an
/// inference forward needs).
template <quantizer_input T>
operand_pair quantize_activation(matrix_view<const T> x, const nvfp4_block_scaling& recipe = {}, const nvfp4_amax_rule& rule = {}) {
  operand_pair out;
  nvfp4_role_storage storage;
  quantize_activation_into(x, recipe, rule, out.rowwise, &out.columnwise, storage);
  return out;
}
template <quantizer_input T>
nvfp4_operand quantize_activation_rowwise(matrix_view<const T> x, const nvfp4_block_scaling& recipe = {},
                                          const nvfp4_amax_rule& rule = {}) {
  nvfp4_operand out;
  nvfp4_role_storage storage;
  quantize_activation_into(x, recipe, rule, out, nullptr, storage);
  return out;
}
template <quantizer_input T>
operand_pair quantize_weight(matrix_view<const T> w, const nvfp4_block_scaling& recipe = {}, const nvfp4_amax_rule& rule = {}) {
  operand_pair out;
  nvfp4_role_storage storage;
  quantize_weight_into(w, recipe, rule, out.rowwise, &out.columnwise, storage);
  return out;
}
template <quantizer_input T>
nvfp4_operand quantize_weight_rowwise(matrix_view<const T> w, const nvfp4_block_scaling& recipe = {}, const nvfp4_amax_rule& rule = {}) {
  nvfp4_operand out;
  nvfp4_role_storage storage;
  quantize_weight_into(w, recipe, rule, out, nullptr, storage);
  return out;
}
template <quantizer_input T>
operand_pair quantize_gradient(matrix_view<const T> dy, const nvfp4_block_scaling& recipe = {}, const nvfp4_amax_rule& rule = {}) {
  operand_pair out;
  nvfp4_role_storage storage;
  quantize_gradient_into(dy, recipe, rule, out.rowwise, out.columnwise, storage);
  return out;
}

/// Everything the three GEMMs of a linear layer Y = X Wᵀ need, X [M, K], W [N, K], dY [M, N]:
/// fprop Y = X·Wᵀ (A = X rowwise, B = W rowwise), dgrad dX = dY·W (A = dY rowwise, B = W
/// columnwise), wgrad dW = dYᵀ·X (A = dY columnwise, B = X columnwise; both RHT'd along M with
/// the same T along M, which cancels in the product since T Tᵀ = I).
struct linear_operands {
  operand_pair activation;
  operand_pair weight;
  operand_pair gradient;
  gemm_operands fprop() const { return {&activation.rowwise, &weight.rowwise}; }
  gemm_operands dgrad() const { return {&gradient.rowwise, &weight.columnwise}; }
  gemm_operands wgrad() const { return {&gradient.columnwise, &activation.columnwise}; }
};

/// Quantizes the three tensors of a linear layer by their roles. Throws shape_mismatch unless
/// X [M, K], W [N, K] and dY [M, N] fit together, invalid_argument for a recipe TE rejects.
template <quantizer_input T>
linear_operands quantize_linear_operands(matrix_view<const T> x, matrix_view<const T> w, matrix_view<const T> dy,
                                         const nvfp4_block_scaling& recipe = {}, const nvfp4_amax_rule& rule = {}) {
  detail::require(x.cols() == w.cols() && dy.rows() == x.rows() && dy.cols() == w.rows(), errc::shape_mismatch,
                  "quantize_linear_operands: X is " + std::to_string(x.rows()) + "x" + std::to_string(x.cols()) + ", W " +
                      std::to_string(w.rows()) + "x" + std::to_string(w.cols()) + ", dY " + std::to_string(dy.rows()) + "x" +
                      std::to_string(dy.cols()) + "; need X [M, K], W [N, K], dY [M, N]");
  recipe.validate();
  return {quantize_activation(x, recipe, rule), quantize_weight(w, recipe, rule), quantize_gradient(dy, recipe, rule)};
}

/// TE's NVFP4 GEMM alpha factor 1 / (6 * 6 * e4m3_max_A * e4m3_max_B) (TE common/recipe/nvfp4.cu,
/// compute_nvfp4_per_tensor_scale_kernel), in fp32.
inline float nvfp4_alpha_factor(float e4m3_max_a, float e4m3_max_b) { return 1.0f / (6.0f * 6.0f * e4m3_max_a * e4m3_max_b); }

namespace detail {
/// nvfp4_gemm's work on A and B's parts (B's tensor, E4M3 bound and row amaxes, and its packed
/// form or null): the checks, the MMA and the epilogue.
template <class Out>
void nvfp4_gemm_parts(const nvfp4_operand& a, const nvfp4_tensor& b, float b_e4m3_max, std::span<const float> b_row_amax,
                      const packed_b* b_packed, matrix_view<Out> out, gemm_mode mode, std::span<const float> bias) {
  const index_t m = a.tensor.rows(), n = b.rows();
  require(a.tensor.cols() == b.cols(), errc::shape_mismatch,
          "nvfp4_gemm: A is " + std::to_string(m) + "x" + std::to_string(a.tensor.cols()) + " and B is " + std::to_string(n) + "x" +
              std::to_string(b.cols()) + ": both must be [rows, K] with the same K");
  require(!a.row_scaled() || static_cast<index_t>(a.row_amax.size()) == m, errc::shape_mismatch,
          "nvfp4_gemm: A's row amaxes do not match its rows");
  const bool b_row_scaled = !b_row_amax.empty();
  require(!b_row_scaled || static_cast<index_t>(b_row_amax.size()) == n, errc::shape_mismatch,
          "nvfp4_gemm: B's row amaxes do not match its rows");
  require(bias.empty() || static_cast<index_t>(bias.size()) == n, errc::shape_mismatch,
          "nvfp4_gemm: bias has " + std::to_string(bias.size()) + " values, expected " + std::to_string(n));
  out.validate("output");
  require(out.rows() == m && out.cols() == n, errc::shape_mismatch,
          "nvfp4_gemm: output is " + std::to_string(out.rows()) + "x" + std::to_string(out.cols()) + ", expected " + std::to_string(m) +
              "x" + std::to_string(n));
  check_gemm_operands(a.tensor, b);
  // TE's epilogue (the FP4 GEMM's one, gemm/fp4/gemm.hpp): alpha from the amaxes, or the factor
  // alone with the row amaxes applied per output.
  const float factor = nvfp4_alpha_factor(a.e4m3_max, b_e4m3_max);
  fp4_epilogue epilogue;
  epilogue.row_scaled = a.row_scaled() || b_row_scaled;
  epilogue.alpha = epilogue.row_scaled ? factor : simd::materialize(a.tensor.amax() * b.amax()) * factor;
  if (epilogue.row_scaled) {
    epilogue.a_rows = a.row_amax;
    epilogue.b_rows = b_row_amax;
    epilogue.a_factor = a.tensor.amax();
    epilogue.b_factor = b.amax();
  }
  epilogue.bias = bias;
  fp4_gemm_checked(a.tensor, b, b_packed, out, epilogue, mode, false);
}
}  // namespace detail

/// out = epilogue(A·Bᵀ) as TransformerEngine computes an NVFP4 GEMM: D = the tensor core's
/// block-scaled MMA from zero (nvfp4::block_scaled_mma, exact or relaxed); then
/// - per-tensor operands: alpha = (amax_A * amax_B) * factor, value = alpha * D (cuBLAS's alpha);
/// - a row-scaled operand (TE pytorch/cpp_extensions/gemm.py): value = factor * D (the GEMM run
///   with both amaxes 1), then multiplied by r_i * c (or c_j * r) when one side is per-tensor, or
///   by r_i and then by c_j when both are row-scaled, where r comes from A's amax(es) (output rows)
///   and c from B's (output columns);
/// then + bias[j] (fp32), rounded to Out (float, or bf16 nearest-even). factor =
/// nvfp4_alpha_factor(A's bound, B's bound). Throws shape_mismatch for operands that do not fit.
template <class Out>
requires(std::is_same_v<Out, float> || std::is_same_v<Out, bf16>) void nvfp4_gemm(const nvfp4_operand& a, const nvfp4_operand& b,
                                                                                  matrix_view<Out> out, gemm_mode mode = gemm_mode::exact,
                                                                                  std::span<const float> bias = {}) {
  detail::nvfp4_gemm_parts(a, b.tensor, b.e4m3_max, b.row_amax, nullptr, out, mode, bias);
}

}  // namespace nvfp4
