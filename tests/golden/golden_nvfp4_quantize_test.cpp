// Golden test, kind `nvfp4_quantize`, modes 1d and 2d: our quantizer against TransformerEngine's
// reference quantizer (NVFP4QuantizerRef), bit for bit: packed data, E4M3 scale bytes, columnwise
// data and scales, and both amax values. Mode 1d_rht is checked by golden_rht_test.cpp.
#include <gtest/gtest.h>

#include <bit>

#include "golden/golden_support.hpp"
#include "nvfp4/scaling/quantize.hpp"

namespace nvfp4 {
namespace {

/// Compares one quantized copy with the peer's arrays; returns true when all match.
template <class Format>
bool matches(const quantized_tensor<Format>& q, const nlohmann::json& c, const char* data_field, const char* scale_field,
             float expected_amax, matrix_view<const float> source) {
  const auto expected_data = golden::load_as<std::uint8_t>(c, data_field);
  const auto expected_scales = golden::load_as<std::uint8_t>(c, scale_field);
  const long data_diff = golden::first_code_difference(q, expected_data, source);
  const long scale_diff = golden::first_difference(golden::scale_bytes(q), expected_scales);
  EXPECT_EQ(data_diff, -1) << data_field << ": first differing byte";
  EXPECT_EQ(scale_diff, -1) << scale_field << ": first differing byte";
  EXPECT_EQ(q.amax(), expected_amax) << data_field;
  return data_diff == -1 && scale_diff == -1 && q.amax() == expected_amax;
}

template <class Format>
bool check_case(const nlohmann::json& c) {
  const auto x = golden::load(c, "input_bf16_as_f32");
  const index_t rows = x.shape.at(0), cols = x.shape.at(1);
  const auto values = x.as<float>();
  // The peer quantized bf16 tensors: feed the same values as bf16 (exact), and as fp32 (must agree).
  std::vector<bf16> values_bf16;
  for (float v : values) values_bf16.push_back(bf16::from_float(v));
  EXPECT_EQ(bf16::from_float(values[0]).to_float(), values[0]) << "input is not bf16-exact";
  const auto view = matrix_view<const bf16>::row_major(values_bf16.data(), rows, cols);
  const auto pair = quantize_rowwise_and_columnwise<Format>(view);
  const auto source = matrix_view<const float>::row_major(values.data(), rows, cols);
  bool ok = matches(pair.rowwise, c, "data", "scale_e4m3", c.at("amax_row").get<float>(), source);
  ok = matches(pair.columnwise, c, "data_t", "scale_t_e4m3", c.at("amax_col").get<float>(), source.transposed()) && ok;

  const auto from_fp32 = quantize<Format>(source);
  EXPECT_EQ(golden::data_bytes(from_fp32), golden::data_bytes(pair.rowwise)) << "fp32 and bf16 inputs disagree";
  return ok;
}

TEST(GoldenNvfp4Quantize, Modes1dAnd2dBitForBit) {
  const auto cases = golden::cases_of("nvfp4_quantize");
  ASSERT_FALSE(cases.empty());
  int checked = 0;
  for (const auto& c : cases) {
    const std::string mode = c.at("mode");
    if (mode != "1d" && mode != "2d") continue;
    SCOPED_TRACE(golden::describe(c));
    const bool ok = mode == "1d" ? check_case<nvfp4_1x16>(c) : check_case<nvfp4_16x16>(c);
    golden::tally::instance().record("nvfp4_quantize " + mode, ok);
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace nvfp4
