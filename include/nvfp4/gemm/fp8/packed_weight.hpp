// nvfp4/gemm/fp8/packed_weight.hpp: an FP8 or MXFP8 GEMM operand B (a weight, [N, K]) with its
// per-step statistics and its 16-column tiles made once, in the layout the FP8 kernels read
// (gemm/fp8/detail/layout.hpp), then used by any number of products with different A: what the
// unpacked fp8_gemm / mxfp8_gemm redo on every call (for a decode-shaped product most of its
// time). The products give the same bits as with the tensor itself.
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "nvfp4/gemm/fp8/gemm.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4 {

/// A weight for fp8_gemm (Tensor = fp8_tensor) or mxfp8_gemm (Tensor = quantized_tensor<F>, F an
/// MXFP8 format) and its packed form. Immutable once made; copies share it. The packed tiles take
/// 7 bytes per element of the weight (values, exponents and bf16 pairs for every kernel set).
template <class Tensor>
class fp8_packed_weight {
 public:
  fp8_packed_weight() = default;
  /// Packs `weight` (kept, for the products' epilogues and fallbacks and for tensor()).
  explicit fp8_packed_weight(Tensor weight) : state_(std::make_shared<state>(std::move(weight))) {}

  /// False for a default-constructed one (no weight).
  explicit operator bool() const { return state_ != nullptr; }
  const Tensor& tensor() const { return state_->weight; }
  index_t rows() const { return state_ ? state_->weight.rows() : 0; }
  index_t cols() const { return state_ ? state_->weight.cols() : 0; }
  /// Bytes of the packed form (besides the tensor's own).
  std::size_t packed_bytes() const {
    if (!state_) return 0;
    std::size_t bytes = state_->operand.max_exponent.size() * (sizeof(std::int32_t) + 2);
    for (const auto& t : state_->tiles)
      bytes += t.value.size() * sizeof(float) + t.exponent.size() + t.pair.size() * sizeof(std::uint32_t) +
               (t.max_exponent.size() + t.scale_exponent.size()) * sizeof(std::int32_t) + t.special.size() * sizeof(std::uint16_t);
    return bytes;
  }
  /// The operand as the kernels read it (its packed_tiles set).
  const fp8_gemm_detail::operand_rows& operand() const { return state_->operand; }

 private:
  struct state {
    Tensor weight;
    fp8_gemm_detail::operand_rows operand;  // reads weight's codes in place
    std::vector<fp8_gemm_detail::column_tile> tiles;
    explicit state(Tensor w) : weight(std::move(w)), operand(detail::unpack_operand(weight)) {
      const index_t count = (weight.rows() + fp8_gemm_detail::lanes - 1) / fp8_gemm_detail::lanes;
      tiles.resize(static_cast<std::size_t>(count));
      simd::parallel_ranges(count, simd::worth_parallel(weight.rows() * weight.cols()), [&](index_t begin, index_t end) {
        for (index_t t = begin; t < end; ++t)
          fp8_gemm_detail::pack_tile(operand, t * fp8_gemm_detail::lanes, tiles[static_cast<std::size_t>(t)]);
      });
      operand.packed_tiles = tiles.data();
    }
    state(const state&) = delete;
    state& operator=(const state&) = delete;
  };
  std::shared_ptr<const state> state_;
};

namespace detail {
inline void check_packed_fp8_weight(bool present, const char* what) {
  require(present, errc::invalid_argument, std::string(what) + ": the packed weight is empty (default-constructed)");
}
}  // namespace detail

/// fp8_gemm with B packed beforehand; as fp8_gemm(a, b.tensor(), out, options).
template <class Out>
requires(std::is_same_v<Out, float> || std::is_same_v<Out, bf16>) void fp8_gemm(const fp8_tensor& a, const fp8_packed_weight<fp8_tensor>& b,
                                                                                matrix_view<Out> out,
                                                                                const fp8_gemm_options& options = {}) {
  detail::check_packed_fp8_weight(static_cast<bool>(b), "fp8_gemm");
  detail::check_fp8_gemm(a.rows(), a.cols(), b.rows(), b.cols(), options, "fp8_gemm");
  detail::check_fp8_scaling_pair(a, b.tensor());
  detail::check_fp8_output(out, a.rows(), b.rows(), "output");
  // Relaxed on BF16 tiles: B folded from its tensor (the packed tiles are the vector kernels').
  if (detail::relaxed_tiles_first(options, a.rows(), b.rows()) &&
      detail::fp8_gemm_on_tiles<simd::amx::hardware_tiles>(a, b.tensor(), out, options))
    return;
  detail::fp8_gemm_checked(a, detail::unpack_operand_into(a, detail::operand_workspace().a), b.tensor(), b.operand(), out, options);
}

/// mxfp8_gemm with B packed beforehand; as mxfp8_gemm(a, b.tensor(), out, options).
template <mxfp8_format FormatA, mxfp8_format FormatB, class Out>
requires(std::is_same_v<Out, float> || std::is_same_v<Out, bf16>) void mxfp8_gemm(const quantized_tensor<FormatA>& a,
                                                                                  const fp8_packed_weight<quantized_tensor<FormatB>>& b,
                                                                                  matrix_view<Out> out,
                                                                                  const fp8_gemm_options& options = {}) {
  detail::check_packed_fp8_weight(static_cast<bool>(b), "mxfp8_gemm");
  detail::check_fp8_gemm(a.rows(), a.cols(), b.rows(), b.cols(), options, "mxfp8_gemm");
  detail::check_fp8_output(out, a.rows(), b.rows(), "output");
  if (detail::relaxed_tiles_first(options, a.rows(), b.rows()) &&
      detail::mxfp8_gemm_on_tiles<simd::amx::hardware_tiles>(a, b.tensor(), out, options))
    return;
  detail::mxfp8_gemm_checked(detail::unpack_operand_into(a, detail::operand_workspace().a), b.operand(), out, options);
}

}  // namespace nvfp4
