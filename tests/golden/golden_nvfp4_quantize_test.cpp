// Golden test, kind `nvfp4_quantize`, modes 1d and 2d: our quantizer against TransformerEngine's
// reference quantizer (NVFP4QuantizerRef), bit for bit: packed data, E4M3 scale bytes, columnwise
// data and scales, and both amax values, on the case's shape. Mode 1d_rht is checked by
// golden_rht_test.cpp.
#include <gtest/gtest.h>

#include <bit>

#include "golden/golden_support.hpp"
#include "nvfp4/scaling/quantize.hpp"

namespace nvfp4 {
namespace {
namespace golden_nvfp4_quantize_test {

/// Compares one quantized copy with the peer's arrays; returns true when all match.
template <class Format>
bool matches(const quantized_tensor<Format>& q, const std::vector<std::uint8_t>& expected_data,
             const std::vector<std::uint8_t>& expected_scales, float expected_amax, matrix_view<const float> source, const char* what) {
  const long data_diff = golden::first_code_difference(q, expected_data, source);
  const long scale_diff = golden::first_difference(golden::scale_bytes(q), expected_scales);
  EXPECT_EQ(data_diff, -1) << what << " data: first differing byte";
  EXPECT_EQ(scale_diff, -1) << what << " scales: first differing byte";
  EXPECT_EQ(q.amax(), expected_amax) << what << " amax";
  return data_diff == -1 && scale_diff == -1 && q.amax() == expected_amax;
}

/// Mode 1d (1x16 blocks) or 2d (16x16 tiles) by Format; every array's shape follows `shape`.
template <class Format>
bool check_case(const nlohmann::json& c) {
  golden::case_fields f(c, "nvfp4_quantize case",
                        {"shape", "input_bf16_as_f32", "data", "scale_e4m3", "data_t", "scale_t_e4m3", "amax_row", "amax_col"}, {"dist"});
  const auto [rows, cols] = f.shape("shape");
  const auto values = f.load_shaped<float>("input_bf16_as_f32", {rows, cols});
  // The peer quantized bf16 tensors: feed the same values as bf16 (exact), and as fp32 (must agree).
  const std::vector<bf16> values_bf16 = golden::bf16_values(values, "input_bf16_as_f32");
  // Two codes per byte, one E4M3 scale per 16 elements of a row (a 16x16 tile's on each of its rows).
  const auto data = f.load_shaped<std::uint8_t>("data", {rows, (cols + 1) / 2});
  const auto scales = f.load_shaped<std::uint8_t>("scale_e4m3", {rows, (cols + 15) / 16});
  const auto data_t = f.load_shaped<std::uint8_t>("data_t", {cols, (rows + 1) / 2});
  const auto scales_t = f.load_shaped<std::uint8_t>("scale_t_e4m3", {cols, (rows + 15) / 16});
  const float amax_row = f.number("amax_row"), amax_col = f.number("amax_col");

  const auto view = matrix_view<const bf16>::row_major(values_bf16.data(), rows, cols);
  const auto pair = quantize_rowwise_and_columnwise<Format>(view);
  const auto source = matrix_view<const float>::row_major(values.data(), rows, cols);
  bool ok = matches(pair.rowwise, data, scales, amax_row, source, "rowwise");
  ok = matches(pair.columnwise, data_t, scales_t, amax_col, source.transposed(), "columnwise") && ok;
  const auto from_fp32 = quantize<Format>(source);
  EXPECT_EQ(golden::data_bytes(from_fp32), golden::data_bytes(pair.rowwise)) << "fp32 and bf16 inputs disagree";
  ok = ok && golden::data_bytes(from_fp32) == golden::data_bytes(pair.rowwise);
  return f.finish() && ok;
}

const bool registered = golden::register_check("nvfp4_quantize 1d", check_case<nvfp4_1x16>) &&
                        golden::register_check("nvfp4_quantize 2d", check_case<nvfp4_16x16>);

TEST(GoldenNvfp4Quantize, Mode1dBitForBit) { golden::check_every_case("nvfp4_quantize 1d"); }
TEST(GoldenNvfp4Quantize, Mode2dBitForBit) { golden::check_every_case("nvfp4_quantize 2d"); }

}  // namespace golden_nvfp4_quantize_test
}  // namespace
}  // namespace nvfp4
