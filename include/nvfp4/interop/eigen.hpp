// nvfp4/interop/eigen.hpp: opt-in Eigen interop. Any dense Eigen matrix, Map or Ref (float or
// Eigen::bfloat16, row- or column-major, any strides) goes in; row-major Eigen matrices come out,
// named so (row_major_matrix_f32), and compare() matches elements by (row, column), not by memory.
#pragma once

#include <type_traits>

#include "nvfp4/config.hpp"

// Eigen 3.4's AVX-512 packet code inlines the same GCC 12 intrinsics (see config.hpp).
NVFP4_BEGIN_INTRINSIC_CODE
#include <Eigen/Core>
NVFP4_END_INTRINSIC_CODE

#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/metrics/error_metrics.hpp"
#include "nvfp4/scaling/quantize.hpp"

namespace nvfp4::eigen {

static_assert(sizeof(Eigen::bfloat16) == sizeof(bf16) && std::is_standard_layout_v<Eigen::bfloat16>,
              "nvfp4::bf16 must be layout-compatible with Eigen::bfloat16");

/// Row-major dynamic float matrix: what dequantize and the GEMMs return. Eigen's default
/// (Eigen::MatrixXf) is column-major: assigning one to the other converts correctly, but their
/// .data() buffers hold the elements in different orders (compare them with eigen::compare).
using row_major_matrix_f32 = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// Row-major dynamic Eigen::bfloat16 matrix: what dequantize_bf16 returns.
using row_major_matrix_bf16 = Eigen::Matrix<Eigen::bfloat16, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace detail {
template <class Scalar>
using core_type = std::conditional_t<std::is_same_v<Scalar, Eigen::bfloat16>, const bf16, const float>;

template <class Scalar>
inline constexpr bool supported_scalar = std::is_same_v<Scalar, float> || std::is_same_v<Scalar, Eigen::bfloat16>;

/// The elements of x in row-major order: x's own memory when it already holds them so (float,
/// row-major, contiguous), otherwise a copy made into `storage`.
template <class Derived>
std::span<const float> row_major_values(const Eigen::DenseBase<Derived>& x, row_major_matrix_f32& storage) {
  const auto& d = x.derived();
  if constexpr (std::is_same_v<typename Derived::Scalar, float> && Derived::IsRowMajor &&
                (static_cast<int>(Eigen::internal::traits<Derived>::Flags) & Eigen::DirectAccessBit)) {
    if (d.innerStride() == 1 && (d.outerStride() == d.cols() || d.rows() <= 1))
      return std::span<const float>(d.data(), static_cast<std::size_t>(d.size()));
  }
  storage = d.template cast<float>();
  return std::span<const float>(storage.data(), static_cast<std::size_t>(storage.size()));
}
}  // namespace detail

/// A matrix_view of an Eigen object with direct memory access (Matrix, Map, Ref, Block), with its
/// strides, so no copy is made. Scalar must be float or Eigen::bfloat16.
template <class Derived>
auto view(const Eigen::DenseBase<Derived>& x) {
  using Scalar = typename Derived::Scalar;
  static_assert(detail::supported_scalar<Scalar>, "nvfp4 quantizes float or Eigen::bfloat16 matrices");
  static_assert(static_cast<int>(Eigen::internal::traits<Derived>::Flags) & Eigen::DirectAccessBit,
                "view() needs an object with direct memory access; evaluate the expression first");
  const auto& d = x.derived();
  using T = detail::core_type<Scalar>;
  const auto* data = reinterpret_cast<T*>(d.data());
  const index_t inner = d.innerStride(), outer = d.outerStride();
  return Derived::IsRowMajor ? matrix_view<T>(data, d.rows(), d.cols(), outer, inner)
                             : matrix_view<T>(data, d.rows(), d.cols(), inner, outer);
}

/// Quantizes any dense Eigen expression of float or Eigen::bfloat16 (expressions without direct
/// access are evaluated first). Same contract as nvfp4::quantize.
template <block_scaled_format Format, class Derived>
quantized_tensor<Format> quantize(const Eigen::DenseBase<Derived>& x, const quantize_options& options = {}) {
  static_assert(detail::supported_scalar<typename Derived::Scalar>,
                "nvfp4 quantizes float or Eigen::bfloat16 matrices (cast other types first)");
  if constexpr (static_cast<int>(Eigen::internal::traits<Derived>::Flags) & Eigen::DirectAccessBit) {
    return nvfp4::quantize<Format>(view(x), options);
  } else {
    const Eigen::Matrix<typename Derived::Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> evaluated = x;
    return nvfp4::quantize<Format>(view(evaluated), options);
  }
}

/// Both copies (x and xᵀ) with a shared tensor scale; see nvfp4::quantize_rowwise_and_columnwise.
template <block_scaled_format Format, class Derived>
quantized_pair<Format> quantize_rowwise_and_columnwise(const Eigen::DenseBase<Derived>& x, const quantize_options& options = {}) {
  const Eigen::Matrix<typename Derived::Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> evaluated = x;
  return nvfp4::quantize_rowwise_and_columnwise<Format>(view(evaluated), options);
}

/// Dequantizes to a row-major float matrix of the tensor's shape (x̂ = element * block scale *
/// S_dec, as nvfp4::dequantize).
template <block_scaled_format Format>
row_major_matrix_f32 dequantize(const quantized_tensor<Format>& q) {
  row_major_matrix_f32 out(q.rows(), q.cols());
  nvfp4::dequantize(q, matrix_view<float>::row_major(out.data(), q.rows(), q.cols()));
  return out;
}

/// Dequantizes to a row-major Eigen::bfloat16 matrix (each float value rounded to nearest even).
template <block_scaled_format Format>
row_major_matrix_bf16 dequantize_bf16(const quantized_tensor<Format>& q) {
  return eigen::dequantize(q).template cast<Eigen::bfloat16>();
}

/// nvfp4::compare (SQNR, MSE, max errors, cosine) of two Eigen matrices of the same shape, element
/// (r, c) against element (r, c) whatever their storage orders and strides (float or
/// Eigen::bfloat16, or any expression). Throws nvfp4::error(shape_mismatch) when the shapes differ.
template <class DerivedRef, class DerivedApprox>
error_report compare(const Eigen::DenseBase<DerivedRef>& reference, const Eigen::DenseBase<DerivedApprox>& approx) {
  static_assert(detail::supported_scalar<typename DerivedRef::Scalar> && detail::supported_scalar<typename DerivedApprox::Scalar>,
                "eigen::compare takes float or Eigen::bfloat16 matrices");
  nvfp4::detail::require(reference.rows() == approx.rows() && reference.cols() == approx.cols(), errc::shape_mismatch,
                         "eigen::compare: reference is " + std::to_string(reference.rows()) + "x" + std::to_string(reference.cols()) +
                             ", approximation " + std::to_string(approx.rows()) + "x" + std::to_string(approx.cols()));
  row_major_matrix_f32 reference_copy, approx_copy;
  return nvfp4::compare(detail::row_major_values(reference, reference_copy), detail::row_major_values(approx, approx_copy));
}

}  // namespace nvfp4::eigen
