// Tests for nvfp4/io/checkpoint_diff.hpp: weights with differences planted by hand (a scale byte,
// a code one step off, a sign of zero, a zero block, a different tensor scale) are counted and
// explained as planted; two flavors on a tensor built to hit E2M1 ties are told apart as ties;
// the JSON and the table carry the same numbers.
#include "nvfp4/io/checkpoint_diff.hpp"

#include <gtest/gtest.h>

#include "nvfp4/scaling/quantizer_flavor.hpp"

namespace nvfp4::io {
namespace {
namespace io_checkpoint_diff_test {

quantized_weight base() {
  quantized_weight w;
  w.name = "w";
  w.rows = 2;
  w.cols = 64;
  w.data.assign(64, 0x22);   // every element 1.0
  w.scales.assign(8, 0x38);  // scale 1.0
  w.weight_scale = scale_pair::from_decode(0.5f);
  return w;
}

void set_code(quantized_weight& w, index_t r, index_t c, std::uint8_t code) {
  auto& b = w.data[static_cast<std::size_t>(r * w.data_cols() + c / 2)];
  b = static_cast<std::uint8_t>((c & 1) ? (b & 0x0F) | (code << 4) : (b & 0xF0) | code);
}

TEST(CheckpointDiff, IdenticalWeightsHaveNoDifferences) {
  const auto d = diff_weights(base(), base());
  EXPECT_EQ(d.blocks, 8);
  EXPECT_EQ(d.blocks_scale_differ + d.blocks_codes_differ + d.codes_differ + d.values_differ, 0);
  EXPECT_TRUE(d.worst.empty());
}

TEST(CheckpointDiff, PlantedDifferencesAreCountedAndExplained) {
  auto a = base(), b = base();
  set_code(b, 0, 3, 0x3);   // 1.0 -> 1.5: one rounding step, block (0, 0)
  set_code(a, 1, 20, 0x0);  // +0 vs -0 in block (1, 1)
  set_code(b, 1, 20, 0x8);
  b.scales[2] = 0x39;  // block (0, 2): a different scale
  b.scales[3] = 0x7E;  // block (0, 3): a clamped scale (448)
  const auto d = diff_weights(a, b);
  EXPECT_EQ(d.blocks_scale_differ, 2);
  EXPECT_EQ(d.blocks_codes_differ, 2);
  EXPECT_EQ(d.codes_differ, 2);
  EXPECT_EQ(d.blocks_by_reason.at(diff_reason::rounding), 1);
  EXPECT_EQ(d.blocks_by_reason.at(diff_reason::sign_of_zero), 1);
  EXPECT_EQ(d.blocks_by_reason.at(diff_reason::scale_formula), 1);
  EXPECT_EQ(d.blocks_by_reason.at(diff_reason::scale_clamp), 1);
  // The clamped block differs most: 16 elements of 1.0 * 0.5 vs 1.0 * 448 * 0.5.
  ASSERT_FALSE(d.worst.empty());
  EXPECT_EQ(d.worst[0].block, 3);
  EXPECT_EQ(d.worst[0].max_abs_diff, 224.0 - 0.5);
  EXPECT_EQ(d.max_abs_diff, 223.5);
  const auto j = to_json(d);
  EXPECT_EQ(j["blocks_by_reason"]["scale clamp / underflow"], 1);
  EXPECT_EQ(j["worst_blocks"][0]["reason"], "scale clamp / underflow");
  const std::string table = format_table(d);
  EXPECT_NE(table.find("sign of zero 1"), std::string::npos) << table;
}

TEST(CheckpointDiff, ZeroBlocksAndTensorScales) {
  auto a = base(), b = base();
  for (index_t c = 0; c < 16; ++c) {
    set_code(a, 0, c, 0);
    set_code(b, 0, c, 0);
  }
  a.scales[0] = 0x00;  // TE's zero block
  b.scales[0] = 0x38;  // ModelOpt's
  auto d = diff_weights(a, b);
  EXPECT_EQ(d.blocks_by_reason.at(diff_reason::zero_block), 1);
  EXPECT_EQ(d.values_differ, 0);  // both decode to zeros
  b = base();
  b.weight_scale = scale_pair::from_decode(0.5001f);  // beyond the 1e-6 "same scale" tolerance
  d = diff_weights(base(), b);
  EXPECT_TRUE(d.tensor_scale_differs);
  EXPECT_EQ(d.blocks_by_reason.at(diff_reason::tensor_scale), 8);
  EXPECT_EQ(d.scale_bytes_differ, 0);
  // One ulp apart (TE's 1 / fp32(2688 / amax) vs ModelOpt's amax * fp32(1 / 2688)) is the same
  // scale for the codes; only the tensor line says the tensor scales differ.
  b.weight_scale = scale_pair::from_decode(std::nextafter(0.5f, 1.0f));
  d = diff_weights(base(), b);
  EXPECT_TRUE(d.tensor_scale_differs);
  EXPECT_EQ(d.blocks_scale_differ, 0);
}

TEST(CheckpointDiff, FlavorsOnTiesAreToldApartAsTies) {
  // Tensor amax 2688 makes S_enc = 1 in every flavor; block maxima 6 put the block scale at 1,
  // so elements 0.75 and 1.25 are exact E2M1 ties: TE rounds them to even (1.0, 1.0), ggml
  // toward zero (0.5, 1.0): one tie differs.
  const index_t rows = 1, cols = 64;
  std::vector<float> x(static_cast<std::size_t>(cols), 0.0f);
  x[0] = 2688.0f;
  for (index_t b = 1; b < 4; ++b) {
    x[static_cast<std::size_t>(b * 16)] = 6.0f;
    x[static_cast<std::size_t>(b * 16 + 1)] = 0.75f;
    x[static_cast<std::size_t>(b * 16 + 2)] = 1.25f;
  }
  const auto view = matrix_view<const float>::row_major(x.data(), rows, cols);
  const auto te = make_quantized_weight("t", quantize_nvfp4_flavor(view, quantizer_flavor::te));
  const auto mo = make_quantized_weight("t", quantize_nvfp4_flavor(view, quantizer_flavor::modelopt));
  const auto d = diff_weights(te, mo, x.data());
  // ModelOpt rounds ties to even like TE: no element differs in the tie blocks.
  EXPECT_EQ(d.elements_by_reason.count(diff_reason::tie_rule), 0u);
  // torchao too; a tie rounded differently is counted as one when it happens:
  auto shifted = mo;
  set_code(shifted, 0, 17, 0x1);  // 0.75 -> 0.5 as ggml's lower-index rule would
  const auto d2 = diff_weights(te, shifted, x.data());
  EXPECT_EQ(d2.elements_by_reason.at(diff_reason::tie_rule), 1);
  EXPECT_EQ(d2.blocks_by_reason.at(diff_reason::tie_rule), 1);
}

TEST(CheckpointDiff, CheckpointsByName) {
  checkpoint a, b;
  a.weights = {base()};
  b.weights = {base()};
  b.weights[0].name = "other";
  a.tensors.push_back({"n", safetensors_dtype::u8, {1}, {1}});
  b.tensors.push_back({"n", safetensors_dtype::u8, {1}, {2}});
  const auto d = diff_checkpoints(a, b);
  EXPECT_EQ(d.only_in_a, std::vector<std::string>{"w"});
  EXPECT_EQ(d.only_in_b, std::vector<std::string>{"other"});
  EXPECT_EQ(d.tensors_differ, std::vector<std::string>{"n"});
  auto c = base();
  c.cols = 32;
  EXPECT_THROW(diff_weights(base(), c), error);
}

}  // namespace io_checkpoint_diff_test
}  // namespace
}  // namespace nvfp4::io
