// nvfp4/recipes/nvfp4_packed_operand.hpp: an NVFP4 GEMM operand B (a weight's rowwise copy) packed
// once into the GEMM kernels' layout (gemm/packed_weight.hpp), with what TE's epilogue needs beside
// it, for any number of nvfp4_gemm products with different A: decode steps and micro-batches on a
// kept weight. The products give the same bits as with the operand itself.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "nvfp4/gemm/fp4/packed_weight.hpp"
#include "nvfp4/recipes/nvfp4_recipe.hpp"

namespace nvfp4 {

/// An nvfp4_operand and its packed form. Immutable once made; copies share it.
class nvfp4_packed_operand {
 public:
  nvfp4_packed_operand() = default;
  /// Packs `operand` (kept: the epilogue reads its amaxes and bound, fallbacks its tensor).
  explicit nvfp4_packed_operand(nvfp4_operand operand) : state_(std::make_shared<state>(std::move(operand))) {}

  /// False for a default-constructed one (no operand).
  explicit operator bool() const { return state_ != nullptr; }
  const nvfp4_tensor& tensor() const { return state_->weight.tensor(); }
  float e4m3_max() const { return state_->e4m3_max; }
  std::span<const float> row_amax() const { return state_->row_amax; }
  index_t rows() const { return state_ ? state_->weight.rows() : 0; }
  index_t cols() const { return state_ ? state_->weight.cols() : 0; }
  /// Bytes of the packed form (besides the tensor's own).
  std::size_t packed_bytes() const { return state_ ? state_->weight.packed_bytes() : 0; }
  const packed_weight<nvfp4_1x16>& packed() const { return state_->weight; }

 private:
  struct state {
    packed_weight<nvfp4_1x16> weight;
    float e4m3_max;
    std::vector<float> row_amax;
    explicit state(nvfp4_operand op) : weight(std::move(op.tensor)), e4m3_max(op.e4m3_max), row_amax(std::move(op.row_amax)) {}
  };
  std::shared_ptr<const state> state_;
};

/// nvfp4_gemm with B packed beforehand; as nvfp4_gemm(a, b's operand, out, mode, bias). Throws
/// invalid_argument for an empty (default-constructed) b, else as nvfp4_gemm.
template <class Out>
requires(std::is_same_v<Out, float> || std::is_same_v<Out, bf16>) void nvfp4_gemm(const nvfp4_operand& a, const nvfp4_packed_operand& b,
                                                                                  matrix_view<Out> out, gemm_mode mode = gemm_mode::exact,
                                                                                  std::span<const float> bias = {}) {
  detail::require(static_cast<bool>(b), errc::invalid_argument, "nvfp4_gemm: the packed operand is empty (default-constructed)");
  detail::nvfp4_gemm_parts(a, b.tensor(), b.e4m3_max(), b.row_amax(), &b.packed().packed(), out, mode, bias);
}

}  // namespace nvfp4
