// Tests for nvfp4/scaling/detail/input_checks.hpp and the quantizers that run its checks first
// (issue 39 item 8): a view of more than max_element_count elements is refused before any pass
// over it. The view here broadcasts one NaN over 2^41 elements (zero strides): a quantizer that
// scans first meets the NaN at (0, 0) and says non_finite_input (or, ignoring NaN, scans 2^41
// elements); one that checks first says invalid_argument at once, naming the limit.
#include "nvfp4/scaling/detail/input_checks.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "nvfp4/scaling/four_over_six.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"
#include "nvfp4/scaling/mxfp8_quantize.hpp"
#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/scaling/quantizer_flavor.hpp"
#include "nvfp4/scaling/reference.hpp"
#include "nvfp4/scaling/row_scaled_nvfp4.hpp"

namespace nvfp4 {
namespace {
namespace scaling_detail_input_checks_test {

const float nan_value = NAN;
const bf16 nan_bf16 = bf16::from_float(NAN);

/// 2^21 x 2^20 = 2^41 elements, every one the same NaN.
template <class T>
matrix_view<const T> broadcast(const T* value) {
  return matrix_view<const T>(value, index_t{1} << 21, index_t{1} << 20, 0, 0);
}

void expect_size_refused(const std::string& what, const std::function<void()>& call) {
  try {
    call();
    ADD_FAILURE() << what << ": accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument) << what << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find("max_element_count"), std::string::npos) << what << ": " << e.what();
  }
}

TEST(InputChecks, ViewsAboveTheLimitAreRefusedBeforeAnyPass) {
  const auto x = broadcast(&nan_value);
  const auto b = broadcast(&nan_bf16);
  // (Those that stop at the first NaN first: before the fix they fail at once, the others scan.)
  expect_size_refused("reference::amax", [&] { (void)reference::amax(x); });
  expect_size_refused("quantize", [&] { (void)quantize<nvfp4_1x16>(x); });
  expect_size_refused("quantize bf16", [&] { (void)quantize<mxfp4>(b); });
  expect_size_refused("quantize_with_amax", [&] { (void)quantize_with_amax<nvfp4_16x16>(x, 1.0f); });
  expect_size_refused("quantize_rowwise_and_columnwise", [&] { (void)quantize_rowwise_and_columnwise<nvfp4_1x16>(x); });
  expect_size_refused("quantize_into", [&] {
    nvfp4_tensor out;
    quantize_into(x, out);
  });
  expect_size_refused("quantize_with_amax_into", [&] {
    nvfp4_tensor out;
    quantize_with_amax_into(x, 1.0f, out);
  });
  expect_size_refused("reference::quantize", [&] { (void)reference::quantize<nvfp4_1x16>(x); });
  expect_size_refused("reference::quantize_with_amax", [&] { (void)reference::quantize_with_amax<mxfp8>(x, 1.0f); });
  expect_size_refused("quantize_fp8_current", [&] { (void)quantize_fp8_current(x, fp8_format::e4m3); });
  expect_size_refused("quantize_fp8_with_scale", [&] { (void)quantize_fp8_with_scale(x, fp8_format::e4m3, 1.0f); });
  // TE's delayed-scaling cast reads NaN as a code: without the check it would scan all 2^41.
  expect_size_refused("quantize_fp8_with_scale te_satfinite", [&] {
    (void)quantize_fp8_with_scale(x, fp8_format::e4m3, 1.0f, quantized_axis::rowwise, fp8_non_finite::te_satfinite);
  });
  expect_size_refused("reference::quantize_fp8_with_scale te_satfinite", [&] {
    (void)reference::quantize_fp8_with_scale(x, fp8_format::e5m2, 1.0f, quantized_axis::rowwise, fp8_non_finite::te_satfinite);
  });
  expect_size_refused("quantize_fp8_blockwise", [&] { (void)quantize_fp8_blockwise(x, fp8_format::e4m3, fp8_block_shape::block_1x128); });
  expect_size_refused("quantize_mxfp8_te", [&] { (void)quantize_mxfp8_te<mxfp8>(x); });
  expect_size_refused("quantize_nvfp4_flavor", [&] { (void)quantize_nvfp4_flavor(x, quantizer_flavor::modelopt); });
  expect_size_refused("quantize_mxfp4_flavor", [&] { (void)quantize_mxfp4_flavor(x, quantizer_flavor::ggml); });
  expect_size_refused("quantize_4over6", [&] { (void)quantize_4over6<nvfp4_1x16>(x); });
  expect_size_refused("quantize_row_scaled", [&] { (void)quantize_row_scaled(x); });
  expect_size_refused("amax", [&] { (void)amax(x); });
  expect_size_refused("all_finite", [&] { (void)all_finite(x); });
}

TEST(InputChecks, ViewsAtTheLimitPassTheCheck) {
  // 2^40 elements is the limit itself (no pass is made here: the check alone).
  const auto at_limit = matrix_view<const float>(&nan_value, index_t{1} << 20, index_t{1} << 20, 0, 0);
  EXPECT_NO_THROW(detail::check_input_view(at_limit, "x"));
  // A zero dimension holds nothing, whatever the other one (up to the per-dimension limit).
  EXPECT_NO_THROW(detail::check_input_view(matrix_view<const float>(nullptr, 0, max_element_count, 0, 0), "x"));
  EXPECT_THROW(detail::check_input_view(matrix_view<const float>(nullptr, 0, max_element_count + 1, 0, 0), "x"), error);
  // The view's own checks still come first.
  try {
    detail::check_input_view(matrix_view<const float>(nullptr, 2, 2, 2, 1), "x");
    ADD_FAILURE() << "accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::null_pointer);
  }
}

}  // namespace scaling_detail_input_checks_test
}  // namespace
}  // namespace nvfp4
