// nvfp4/recipes/nvfp4_recipe.hpp: the three tensor roles of TransformerEngine's NVFP4BlockScaling
// recipe (NUMERICS.md §8) as one API: activations, weights and output gradients quantized into
// the operands the fprop, dgrad and wgrad GEMMs of a linear layer Y = X Wᵀ read.
#pragma once

#include <cstdint>

#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/transforms/hadamard.hpp"

namespace nvfp4 {

/// The recipe's switches (TE: NVFP4BlockScaling and its NVTE_NVFP4_DISABLE_* settings).
struct nvfp4_recipe {
  bool disable_rht = false;                  ///< no RHT on the wgrad operands' columnwise copies
  bool disable_stochastic_rounding = false;  ///< gradients rounded to nearest instead of SR
  bool disable_2d_quantization = false;      ///< weights in 1x16 blocks instead of 16x16 tiles
  std::uint64_t seed = 0;                    ///< seed of the gradients' SR streams
  hadamard_transform rht = hadamard_transform::te_default();
};

/// The two copies of one tensor: rowwise (blocks along its rows) and columnwise (its transpose,
/// blocks along its columns, RHT'd where the recipe says so). Every copy is stored in the 1x16
/// layout (one UE4M3 scale per 16 elements of a row): a 16x16 weight tile's scale is repeated on
/// its 16 rows, which is what the block-scaled GEMM reads.
struct operand_pair {
  nvfp4_tensor rowwise;
  nvfp4_tensor columnwise;
};

/// One GEMM's operands, both blocked along the reduction dimension: D = A · Bᵀ.
struct gemm_operands {
  const nvfp4_tensor* a;
  const nvfp4_tensor* b;
};

namespace detail {
/// A 16x16-tile tensor re-labelled as the 1x16 layout it already is (scales repeated per row).
inline nvfp4_tensor as_row_blocks(const nvfp4_tile_tensor& tiles) {
  nvfp4_tensor out(tiles.rows(), tiles.cols(), tiles.axis());
  std::copy(tiles.data().begin(), tiles.data().end(), out.data().begin());
  std::copy(tiles.scales().begin(), tiles.scales().end(), out.scales().begin());
  out.set_tensor_scale(tiles.amax(), tiles.encode_scale(), tiles.decode_scale());
  return out;
}
/// Independent SR streams for each copy of a gradient (splitmix64 of seed and a tag).
constexpr std::uint64_t derived_seed(std::uint64_t seed, std::uint64_t tag) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (tag + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
template <class T>
nvfp4_tensor columnwise_copy(matrix_view<const T> x, float rowwise_amax, bool with_rht, const hadamard_transform& t,
                             quantize_options options) {
  options.axis = quantized_axis::columnwise;
  if (with_rht) return quantize_columnwise_rht<nvfp4_1x16>(x, t, options);  // amax after the transform
  return quantize_with_amax<nvfp4_1x16>(x.transposed(), rowwise_amax, options);
}
}  // namespace detail

/// Activations X [M tokens, K]: 1x16, round-to-nearest; rowwise for fprop, columnwise (along M,
/// with RHT unless disabled) for wgrad. Throws as quantize / rht_columnwise do.
template <quantizer_input T>
operand_pair quantize_activation(matrix_view<const T> x, const nvfp4_recipe& recipe = {}) {
  const float x_amax = amax(x);
  operand_pair out;
  out.columnwise = detail::columnwise_copy(x, x_amax, !recipe.disable_rht, recipe.rht, {});
  out.rowwise = quantize_with_amax<nvfp4_1x16>(x, x_amax, {});
  return out;
}

/// Weights W [N, K]: 16x16 tiles (1x16 if disabled), round-to-nearest, never RHT; rowwise for
/// fprop, columnwise for dgrad (with tiles, exactly the transpose of the rowwise copy).
template <quantizer_input T>
operand_pair quantize_weight(matrix_view<const T> w, const nvfp4_recipe& recipe = {}) {
  const float w_amax = amax(w);
  operand_pair out;
  if (recipe.disable_2d_quantization) {
    out.rowwise = quantize_with_amax<nvfp4_1x16>(w, w_amax, {});
    out.columnwise = quantize_with_amax<nvfp4_1x16>(w.transposed(), w_amax, {.axis = quantized_axis::columnwise});
  } else {
    out.rowwise = detail::as_row_blocks(quantize_with_amax<nvfp4_16x16>(w, w_amax, {}));
    out.columnwise = detail::as_row_blocks(quantize_with_amax<nvfp4_16x16>(w.transposed(), w_amax, {.axis = quantized_axis::columnwise}));
  }
  return out;
}

/// Output gradients dY [M, N]: 1x16, stochastic rounding (RN if disabled) with independent
/// streams per copy; rowwise for dgrad, columnwise (along M, with RHT unless disabled) for wgrad.
template <quantizer_input T>
operand_pair quantize_gradient(matrix_view<const T> dy, const nvfp4_recipe& recipe = {}) {
  const float dy_amax = amax(dy);
  const auto rounding = recipe.disable_stochastic_rounding ? rounding_mode::nearest_even : rounding_mode::stochastic;
  operand_pair out;
  out.columnwise = detail::columnwise_copy(dy, dy_amax, !recipe.disable_rht, recipe.rht,
                                           {.rounding = rounding, .seed = detail::derived_seed(recipe.seed, 1)});
  out.rowwise = quantize_with_amax<nvfp4_1x16>(dy, dy_amax, {.rounding = rounding, .seed = detail::derived_seed(recipe.seed, 0)});
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
/// X [M, K], W [N, K] and dY [M, N] fit together.
template <quantizer_input T>
linear_operands quantize_linear_operands(matrix_view<const T> x, matrix_view<const T> w, matrix_view<const T> dy,
                                         const nvfp4_recipe& recipe = {}) {
  detail::require(x.cols() == w.cols() && dy.rows() == x.rows() && dy.cols() == w.rows(), errc::shape_mismatch,
                  "quantize_linear_operands: X is " + std::to_string(x.rows()) + "x" + std::to_string(x.cols()) + ", W " +
                      std::to_string(w.rows()) + "x" + std::to_string(w.cols()) + ", dY " + std::to_string(dy.rows()) + "x" +
                      std::to_string(dy.cols()) + "; need X [M, K], W [N, K], dY [M, N]");
  return {quantize_activation(x, recipe), quantize_weight(w, recipe), quantize_gradient(dy, recipe)};
}

}  // namespace nvfp4
