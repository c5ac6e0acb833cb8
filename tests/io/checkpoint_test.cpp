// Tests for nvfp4/io/checkpoint.hpp: the two senses of a tensor scale and the annotation that
// keeps an unstored one exact, the load-time checks (byte counts, sign bits and NaN in scale
// bytes, padding nibbles, fused layers with different scales), safetensors' own tensor order and
// the annotation that keeps a source's order through a writer that sorts.
#include "nvfp4/io/checkpoint.hpp"

#include "nvfp4/scaling/quantize.hpp"

#include <gtest/gtest.h>

#include <bit>

namespace nvfp4::io {
namespace {

quantized_weight weight(const std::string& name, index_t rows, index_t cols, float decode) {
  quantized_weight w;
  w.name = name;
  w.rows = rows;
  w.cols = cols;
  w.data.assign(static_cast<std::size_t>(rows * w.data_cols()), 0x21);
  w.scales.assign(static_cast<std::size_t>(rows * w.scale_cols()), 0x38);
  w.weight_scale = scale_pair::from_decode(decode);
  return w;
}

/// A decode value whose fp32 reciprocal does not give back the encode value TE pairs with it.
scale_pair non_reciprocal_pair() {
  for (float amax = 1.0f; amax < 2.0f; amax += 0.001f) {
    const tensor_scale s = nvfp4_tensor_scale(amax);
    if (1.0f / s.decode != s.encode) return {s.decode, s.encode};
  }
  ADD_FAILURE() << "no such amax in [1, 2)";
  return {};
}

TEST(Checkpoint, ScalePairSenses) {
  const auto d = scale_pair::from_decode(0.25f);
  EXPECT_EQ(d.encode, 4.0f);
  const auto e = scale_pair::from_encode(67.5f);
  EXPECT_EQ(e.decode, 1.0f / 67.5f);
  EXPECT_FALSE(d == e);
}

TEST(Checkpoint, AnnotationKeepsTheUnstoredSenseExactly) {
  checkpoint c;
  c.weights.push_back(weight("a", 2, 32, 0.5f));  // reciprocal pair: nothing to annotate
  c.weights.push_back(weight("b", 2, 32, 0.5f));
  c.weights[1].weight_scale = non_reciprocal_pair();
  const auto a = make_annotation(c, /*stored_decode=*/true, false, false);
  ASSERT_TRUE(a.contains("scale_bits"));
  EXPECT_FALSE(a["scale_bits"].contains("a"));
  ASSERT_TRUE(a["scale_bits"].contains("b"));
  // A reader that stored only the decode sense gets the encode sense back from it.
  checkpoint read = c;
  read.weights[1].weight_scale = scale_pair::from_decode(c.weights[1].weight_scale.decode);
  apply_annotation(read, a.dump(), /*stored_decode=*/true);
  EXPECT_EQ(read.weights[1].weight_scale, c.weights[1].weight_scale);
  // If the stored value was edited since, the annotation no longer applies.
  checkpoint edited = c;
  edited.weights[1].weight_scale = scale_pair::from_decode(0.125f);
  apply_annotation(edited, a.dump(), true);
  EXPECT_EQ(edited.weights[1].weight_scale, scale_pair::from_decode(0.125f));
  // A broken annotation is a warning.
  apply_annotation(edited, "{not json", true);
  ASSERT_EQ(edited.warnings.size(), 1u);
}

TEST(Checkpoint, AnnotationCarriesConfigsOnlyWhenAsked) {
  checkpoint c;
  c.ignore = {"lm_head"};
  c.metadata["format"] = "pt";
  c.model_config = {{"hidden_size", 8}};
  EXPECT_TRUE(make_annotation(c, true, false, false).empty());
  const auto a = make_annotation(c, true, true, true);
  checkpoint back;
  apply_annotation(back, a.dump(), true);
  EXPECT_EQ(back.ignore, c.ignore);
  EXPECT_EQ(back.metadata, c.metadata);
  EXPECT_EQ(back.model_config, c.model_config);
}

TEST(Checkpoint, AnnotationKeepsTheSourceOrderForSortingWriters) {
  checkpoint c;
  c.weights = {weight("z.q", 2, 32, 0.5f), weight("a.k", 2, 32, 0.5f)};  // not by name, as in a GGUF file
  safetensors_tensor norm{"norm", safetensors_dtype::bf16, {2}, {0, 0, 0, 0}};
  safetensors_tensor kv{"kv_scale", safetensors_dtype::f32, {}, {0, 0, 0, 0}};
  c.tensors = {norm, kv};  // safetensors would put the F32 tensor first
  EXPECT_TRUE(make_annotation(c, true, false, false).empty());  // GGUF and torchao keep order themselves
  const auto a = make_annotation(c, true, false, false, /*with_order=*/true);
  EXPECT_EQ(a["weight_order"], nlohmann::ordered_json({"z.q", "a.k"}));
  EXPECT_EQ(a["tensor_order"], nlohmann::ordered_json({"norm", "kv_scale"}));
  // Read back from a sorted file: listed names in their order, others after as they were.
  checkpoint read;
  read.weights = {weight("a.k", 2, 32, 0.5f), weight("new", 2, 32, 0.5f), weight("z.q", 2, 32, 0.5f)};
  read.tensors = {kv, norm};
  apply_annotation(read, a.dump(), true);
  ASSERT_EQ(read.weights.size(), 3u);
  EXPECT_EQ(read.weights[0].name, "z.q");
  EXPECT_EQ(read.weights[1].name, "a.k");
  EXPECT_EQ(read.weights[2].name, "new");
  EXPECT_EQ(read.tensors[0].name, "norm");
  // Already in the sorted writers' order: nothing to say.
  checkpoint sorted;
  sorted.weights = {weight("a.k", 2, 32, 0.5f), weight("z.q", 2, 32, 0.5f)};
  sorted.tensors = {kv, norm};
  EXPECT_TRUE(make_annotation(sorted, true, false, false, true).empty());
}

TEST(Checkpoint, LoadChecksCountsAndWarnsOfSuspiciousScales) {
  std::vector<std::string> warnings;
  auto w = weight("w", 2, 33, 0.5f);  // odd K: a padding nibble per row
  w.data[16] = w.data[33] = 0x01;     // the rows' last bytes, padding zero
  EXPECT_NO_THROW(check_weight_on_load(w, "f", warnings));
  EXPECT_TRUE(warnings.empty());
  w.data[16] = 0xF1;  // row 0's last byte: high nibble is padding
  w.scales[0] = 0xB8;  // sign bit
  w.scales[1] = 0x7F;  // NaN
  check_weight_on_load(w, "f", warnings);
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_NE(warnings[0].find("sign bit"), std::string::npos);
  EXPECT_NE(warnings[1].find("NaN"), std::string::npos);
  EXPECT_NE(warnings[2].find("padding nibble"), std::string::npos);
  w.scales.pop_back();
  try {
    check_weight_on_load(w, "f.safetensors", warnings);
    ADD_FAILURE();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::malformed_file);
    EXPECT_NE(std::string(e.what()).find("f.safetensors: tensor 'w': block scales: 5 bytes, the shape [2, 33] needs 2 x 3"), std::string::npos) << e.what();
  }
  warnings.clear();
  auto bad_scale = weight("s", 1, 16, 0.0f);
  check_weight_on_load(bad_scale, "f", warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("not a positive finite"), std::string::npos);
}

TEST(Checkpoint, FusedLayersWithDifferentScalesAreReported) {
  checkpoint c;
  for (const char* leaf : {"q_proj", "k_proj", "v_proj", "o_proj"}) c.weights.push_back(weight(std::string("l0.attn.") + leaf, 1, 16, 0.5f));
  c.weights.push_back(weight("l0.mlp.gate_proj", 1, 16, 0.5f));
  c.weights.push_back(weight("l0.mlp.up_proj", 1, 16, 0.25f));
  c.weights.push_back(weight("l1.mlp.up_proj", 1, 16, 0.75f));  // another layer: not fused with l0
  std::vector<std::string> warnings;
  check_fused_scales(c, warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("l0.mlp.gate_proj 0.5, l0.mlp.up_proj 0.25"), std::string::npos) << warnings[0];
  c.weights[1].weight_scale = scale_pair::from_decode(0.125f);
  warnings.clear();
  check_fused_scales(c, warnings);
  EXPECT_EQ(warnings.size(), 2u);
}

TEST(Checkpoint, SafetensorsOrderIsDtypeThenName) {
  std::vector<safetensors_tensor> t(5);
  t[0] = {"b.weight", safetensors_dtype::u8, {}, {}};
  t[1] = {"a.weight_scale", safetensors_dtype::f8_e4m3, {}, {}};
  t[2] = {"z.norm", safetensors_dtype::bf16, {}, {}};
  t[3] = {"a.weight", safetensors_dtype::u8, {}, {}};
  t[4] = {"a.weight_scale_2", safetensors_dtype::f32, {}, {}};
  sort_like_safetensors(t);
  std::vector<std::string> names;
  for (const auto& x : t) names.push_back(x.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a.weight_scale_2", "z.norm", "a.weight_scale", "a.weight", "b.weight"}));
}

TEST(Checkpoint, QuantizedTensorsConvertBothWays) {
  std::vector<float> x(64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 30.0f;
  const auto q = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), 2, 32));
  const auto w = make_quantized_weight("m", q);
  EXPECT_EQ(w.weight_scale.decode, q.decode_scale());
  const auto back = to_nvfp4_tensor(w);
  EXPECT_EQ(dequantize(back), dequantize(q));
  EXPECT_THROW(to_mxfp4_tensor(w), error);
}

}  // namespace
}  // namespace nvfp4::io
