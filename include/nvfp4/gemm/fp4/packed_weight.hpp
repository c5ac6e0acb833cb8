// nvfp4/gemm/fp4/packed_weight.hpp: a GEMM operand B (a weight, [N, K]) packed once into the layout of
// the kernels this machine runs, then used by any number of products with different A: what an
// inference engine does with a linear layer's weight at load time. block_scaled_mma and gemm
// take it in place of B and give the same bits as with the quantized tensor itself.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "nvfp4/gemm/fp4/detail/fast_gemm.hpp"
#include "nvfp4/gemm/fp4/gemm.hpp"

namespace nvfp4 {

/// A quantized weight and its packed form. The layout is chosen when it is packed: AMX tiles where
/// the AMX kernels run (and accept this B), else the tiles of the build's kernel set (AVX-512,
/// AVX2 or portable). A product that cannot use it (AMX turned off since, or operands the AMX kernels leave to
/// the others) packs B itself as the unpacked call does: slower, never different.
template <fp4_gemm_format Format>
class packed_weight {
 public:
  packed_weight() = default;
  /// Packs `weight` (kept, for the products' fallbacks and for tensor()).
  explicit packed_weight(quantized_tensor<Format> weight) : weight_(std::move(weight)), packed_(detail::pack_b(weight_)) {}

  index_t rows() const { return weight_.rows(); }
  index_t cols() const { return weight_.cols(); }
  const quantized_tensor<Format>& tensor() const { return weight_; }
  /// Bytes of the packed form (besides the tensor's own).
  std::size_t packed_bytes() const {
    return packed_.tiles.size() * sizeof(detail::tile_step) + packed_.amx_tiles.size() * sizeof(detail::amx::tile_block_step);
  }
  const detail::packed_b& packed() const { return packed_; }

 private:
  quantized_tensor<Format> weight_;
  detail::packed_b packed_;
};

/// D = C + A·Bᵀ with B packed beforehand; as block_scaled_mma(a, b.tensor(), c, d, mode).
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB>
requires fp4_gemm_pair<FormatA, FormatB>
void block_scaled_mma(const quantized_tensor<FormatA>& a, const packed_weight<FormatB>& b, matrix_view<const float> c, matrix_view<float> d,
                      gemm_mode mode = gemm_mode::exact) {
  detail::check_gemm_operands(a, b.tensor());
  detail::check_output(d, a.rows(), b.rows(), "D");
  if (!c.empty() || c.data() != nullptr) detail::check_output(c, a.rows(), b.rows(), "C");
  detail::block_scaled_mma_fast(a, b.tensor(), &b.packed(), c, detail::store_to_matrix{d}, mode);
}

/// gemm() with B packed beforehand; as gemm(a, b.tensor(), out, options, c).
template <fp4_gemm_format FormatA, fp4_gemm_format FormatB, class Out>
requires fp4_gemm_pair<FormatA, FormatB> &&
    (std::is_same_v<Out, float> || std::is_same_v<Out, bf16>)void gemm(const quantized_tensor<FormatA>& a, const packed_weight<FormatB>& b,
                                                                       matrix_view<Out> out, const gemm_options& options = {},
                                                                       matrix_view<const float> c = {}) {
  detail::check_gemm_operands(a, b.tensor());
  detail::check_output(out, a.rows(), b.rows(), "output");
  if (!c.empty() || c.data() != nullptr) detail::check_output(c, a.rows(), b.rows(), "C");
  detail::gemm_checked(a, b.tensor(), &b.packed(), out, options, c);
}

}  // namespace nvfp4
