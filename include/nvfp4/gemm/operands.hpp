// nvfp4/gemm/operands.hpp: what a block-scaled FP4 GEMM accepts, and the checks of its operands.
// Both operands are [rows, K] matrices blocked along K (the "TN" layout of every Blackwell FP4
// GEMM): A is [M, K], B is [N, K], and D = C + A·Bᵀ is [M, N].
#pragma once

#include <string>
#include <type_traits>

#include "nvfp4/detail/enum_names.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"

namespace nvfp4 {

/// E2M1 elements with UE4M3 scales per 16 (NVFP4, 1x16 or 16x16 tiles: both store a scale per
/// row and 16 columns) or E8M0 scales per 32 (MXFP4). MXFP8 is not an operand of kind::mxf4nvf4.
template <class Format>
concept fp4_gemm_format = block_scaled_format<Format> && Format::is_fp4 &&
    ((std::is_same_v<typename Format::scale_type, ue4m3> && Format::block_cols == 16) ||
     (std::is_same_v<typename Format::scale_type, e8m0> && Format::block_cols == 32));

/// Two formats one MMA can multiply: the same scale type (NVFP4 with NVFP4, MXFP4 with MXFP4).
template <class FormatA, class FormatB>
concept fp4_gemm_pair =
    fp4_gemm_format<FormatA> && fp4_gemm_format<FormatB> && std::is_same_v<typename FormatA::scale_type, typename FormatB::scale_type>;

/// How the block terms of a step are added up.
enum class gemm_mode {
  exact,   ///< the tensor core's fused, truncating 35-fractional-bit sum, RZ to fp32 (§6)
  relaxed  ///< each block term P_g * s_a * s_b fused-multiply-added into an fp32 accumulator in K
           ///< order: what CUTLASS's host reference and most emulators do; not bit-exact
};
/// Its names in checkpoints, the CLI and Python (one table: nvfp4/detail/enum_names.hpp).
namespace detail {
template <>
struct enum_table<gemm_mode> {
  static constexpr enum_entry<gemm_mode> entries[] = {{"exact", gemm_mode::exact}, {"relaxed", gemm_mode::relaxed}};
};
}  // namespace detail

namespace detail {
template <class FormatA, class FormatB>
void check_gemm_operands(const quantized_tensor<FormatA>& a, const quantized_tensor<FormatB>& b) {
  require(a.cols() == b.cols(), errc::shape_mismatch,
          "gemm: A is " + std::to_string(a.rows()) + "x" + std::to_string(a.cols()) + " and B is " + std::to_string(b.rows()) + "x" +
              std::to_string(b.cols()) + ": both must be [rows, K] with the same K (B is [N, K], the TN layout)");
}
}  // namespace detail

}  // namespace nvfp4
