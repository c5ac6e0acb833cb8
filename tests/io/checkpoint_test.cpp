// Tests for nvfp4/io/checkpoint.hpp: the two senses of a tensor scale and the annotation that
// keeps an unstored one exact, the load-time checks (byte counts, sign bits and NaN in scale
// bytes, padding nibbles, fused layers with different scales), safetensors' own tensor order and
// the annotation that keeps a source's order through a writer that sorts.
#include "nvfp4/io/checkpoint.hpp"

#include "nvfp4/scaling/quantize.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace nvfp4::io {
namespace {
namespace io_checkpoint_test {

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
  c.tensors = {norm, kv};                                       // safetensors would put the F32 tensor first
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
  w.data[16] = 0xF1;   // row 0's last byte: high nibble is padding
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
    EXPECT_NE(std::string(e.what()).find("f.safetensors: tensor 'w': block scales: 5 bytes, the shape [2, 33] needs 2 x 3"),
              std::string::npos)
        << e.what();
  }
  warnings.clear();
  auto bad_scale = weight("s", 1, 16, 0.0f);
  check_weight_on_load(bad_scale, "f", warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("not a positive finite"), std::string::npos);
}

TEST(Checkpoint, FusedLayersWithDifferentScalesAreReported) {
  checkpoint c;
  for (const char* leaf : {"q_proj", "k_proj", "v_proj", "o_proj"})
    c.weights.push_back(weight(std::string("l0.attn.") + leaf, 1, 16, 0.5f));
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

/// The code and message require_readable_weight / check_configs throw, or errc{} when they pass.
template <class Check>
std::pair<errc, std::string> refusal(const Check& check) {
  try {
    check();
  } catch (const error& e) {
    return {e.code(), e.what()};
  }
  return {errc{}, ""};
}

TEST(Checkpoint, WritersRefuseWhatTheReadersRefuse) {
  // Issue 39: convert wrote NaN / sign-bit scale bytes with a warning, then inspect refused the output.
  const auto ok = weight("w", 2, 32, 0.01f);
  EXPECT_EQ(refusal([&] { require_readable_weight(ok, "w"); }).first, errc{});
  auto nan = ok;
  nan.scales[3] = 0x7F;
  auto [code, what] = refusal([&] { require_readable_weight(nan, "writer"); });
  EXPECT_EQ(code, errc::malformed_file);
  EXPECT_NE(what.find("writer: weight 'w': block scale (1, 1) is byte 127 (NaN)"), std::string::npos) << what;
  auto sign = ok;
  sign.scales[0] = 0x80;  // -0: PyTorch reads a negative scale
  std::tie(code, what) = refusal([&] { require_readable_weight(sign, "writer"); });
  EXPECT_EQ(code, errc::malformed_file);
  EXPECT_NE(what.find("block scale (0, 0) is byte 128 (sign bit set)"), std::string::npos) << what;
  for (const float decode : {-0.01f, NAN, INFINITY, -0.0f}) {
    const auto bad = weight("w", 2, 32, decode);
    EXPECT_EQ(refusal([&] { require_readable_weight(bad, "writer"); }).first, errc::malformed_file) << decode;
  }
  EXPECT_EQ(refusal([&] { require_readable_weight(weight("w", 2, 32, 0.0f), "writer"); }).first, errc{});  // +0 reads back (zeros)
  auto mx = ok;
  mx.format = weight_format::mxfp4;
  mx.scales.assign(static_cast<std::size_t>(mx.rows * mx.scale_cols()), 127);
  EXPECT_EQ(refusal([&] { require_readable_weight(mx, "writer"); }).first, errc{});
  mx.scales[1] = 0xFF;
  EXPECT_EQ(refusal([&] { require_readable_weight(mx, "writer"); }).first, errc::malformed_file);
  // Scales 448 with a tensor scale of 2^126: element (0, 0), 0.5 (code 1), is 224 x 2^126.
  auto huge = weight("w", 2, 32, std::ldexp(1.0f, 126));
  huge.scales.assign(huge.scales.size(), 0x7E);
  std::tie(code, what) = refusal([&] { require_readable_weight(huge, "writer"); });
  EXPECT_EQ(code, errc::overflow);
  EXPECT_NE(what.find("dequantized element (0, 0) overflows float"), std::string::npos) << what;
  // The same scales with the element 0 everywhere but one small block: nothing overflows.
  auto near = huge;
  std::fill(near.data.begin(), near.data.end(), 0);
  EXPECT_EQ(refusal([&] { require_readable_weight(near, "writer"); }).first, errc{});
  // The check agrees with the reader element by element: the first element that overflows.
  near.data[static_cast<std::size_t>(1 * near.data_cols() + 5)] = 0x10;  // (1, 11): code 1 -> 0.5
  std::tie(code, what) = refusal([&] { require_readable_weight(near, "writer"); });
  EXPECT_NE(what.find("dequantized element (1, 11) overflows float"), std::string::npos) << what;
}

TEST(Checkpoint, ConfigurationsMustDescribeTheirWeights) {
  checkpoint c;
  c.weights.push_back(weight("model.layers.0.q_proj", 2, 32, 0.01f));
  c.weights.push_back(weight("model.layers.0.o_proj", 2, 32, 0.01f));
  EXPECT_EQ(refusal([&] { check_configs(c, "x"); }).first, errc{});
  const auto with_config = [&](const char* json) {
    checkpoint d = c;
    d.hf_quant_config = nlohmann::ordered_json::parse(json);
    return refusal([&] { check_configs(d, "x"); });
  };
  EXPECT_EQ(with_config(R"({"quantization": {"quant_algo": "NVFP4", "group_size": 16}})").first, errc{});
  EXPECT_EQ(with_config(R"({"quantization": {"quant_algo": "NVFP4"}})").first, errc{});
  auto [code, what] = with_config(R"({"quantization": {"quant_algo": "MXFP8", "group_size": 7}})");
  EXPECT_EQ(code, errc::malformed_file);
  EXPECT_NE(what.find("says quant_algo MXFP8, but weight 'model.layers.0.q_proj' is nvfp4"), std::string::npos) << what;
  std::tie(code, what) = with_config(R"({"quantization": {"quant_algo": "NVFP4", "group_size": 7}})");
  EXPECT_EQ(code, errc::unsupported);
  EXPECT_NE(what.find("NVFP4 group_size 7 (16 is the format)"), std::string::npos) << what;
  EXPECT_EQ(with_config(R"({"quantization": {"quant_algo": "MXFP4", "group_size": 32}})").first, errc::malformed_file);
  EXPECT_EQ(with_config(R"({"quantization": {"quant_algo": "NVFP4", "group_size": "16"}})").first, errc::unsupported);
  EXPECT_EQ(with_config(R"({"producer": {}})").first, errc::malformed_file);
  EXPECT_EQ(
      with_config(
          R"({"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": {"model.layers.0.q_proj": {"quant_algo": "NVFP4", "group_size": 16}}}})")
          .first,
      errc{});
  EXPECT_EQ(
      with_config(
          R"({"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": {"model.layers.0.q_proj": {"quant_algo": "MXFP4", "group_size": 32}}}})")
          .first,
      errc::malformed_file);
  // An MXFP8 / FP8 config with no NVFP4 or MXFP4 weight (pack --format mxfp8 / fp8) is theirs.
  checkpoint plain;
  plain.hf_quant_config = nlohmann::ordered_json::parse(R"({"quantization": {"quant_algo": "MXFP8", "group_size": 32}})");
  EXPECT_EQ(refusal([&] { check_configs(plain, "x"); }).first, errc{});
  // The ignore list names no weight stored quantized, exactly or by a pattern.
  const auto with_ignore = [&](std::vector<std::string> ignore) {
    checkpoint d = c;
    d.ignore = std::move(ignore);
    return refusal([&] { check_configs(d, "x"); });
  };
  EXPECT_EQ(with_ignore({"lm_head", "*embed*", "model.layers.1.*", "re:.*q_proj"}).first, errc{});
  std::tie(code, what) = with_ignore({"lm_head", "model.layers.0.o_proj"});
  EXPECT_EQ(code, errc::malformed_file);
  EXPECT_NE(what.find("names 'model.layers.0.o_proj', but that module is stored quantized"), std::string::npos) << what;
  std::tie(code, what) = with_ignore({"*.q_pro[j]"});
  EXPECT_EQ(code, errc::malformed_file);
  EXPECT_NE(what.find("names '*.q_pro[j]', but module 'model.layers.0.q_proj' is stored quantized"), std::string::npos) << what;
}

}  // namespace io_checkpoint_test
}  // namespace
}  // namespace nvfp4::io
