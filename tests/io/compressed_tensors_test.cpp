// Tests for nvfp4/io/compressed_tensors.hpp: the nvfp4-pack-quantized layout written out by hand
// from compressed-tensors' compressor (names, dtypes, the [1]-shaped global scales in the encode
// sense), its config.json, and the reader's refusals.
#include "nvfp4/io/compressed_tensors.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_support.hpp"

namespace nvfp4::io {
namespace {
namespace io_compressed_tensors_test {

namespace fs = std::filesystem;

checkpoint one_weight() {
  checkpoint c;
  quantized_weight w;
  w.name = "model.layers.0.self_attn.o_proj";
  w.rows = 2;
  w.cols = 32;
  w.data.assign(32, 0x3C);
  w.scales.assign(4, 0x44);
  w.weight_scale = scale_pair::from_encode(67.5f);
  w.input_scale = scale_pair::from_encode(16.0f);
  c.weights.push_back(w);
  c.ignore = {"lm_head"};
  return c;
}

void expect_error(const safetensors_file& f, errc code, const std::string& fragment) {
  try {
    (void)compressed_tensors_from_safetensors(f, "ct.safetensors");
    ADD_FAILURE() << "accepted; expected '" << fragment << "'";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(CompressedTensors, TensorLayout) {
  const auto f = compressed_tensors_to_safetensors(one_weight(), false);
  const std::string p = "model.layers.0.self_attn.o_proj.";
  EXPECT_EQ(f.at(p + "weight_packed").dtype, safetensors_dtype::u8);
  EXPECT_EQ(f.at(p + "weight_packed").shape, (std::vector<std::int64_t>{2, 16}));
  EXPECT_EQ(f.at(p + "weight_scale").dtype, safetensors_dtype::f8_e4m3);
  EXPECT_EQ(f.at(p + "weight_scale").shape, (std::vector<std::int64_t>{2, 2}));
  for (const char* s : {"weight_global_scale", "input_global_scale"}) {
    EXPECT_EQ(f.at(p + s).dtype, safetensors_dtype::f32);
    EXPECT_EQ(f.at(p + s).shape, (std::vector<std::int64_t>{1})) << s;
  }
  float g;
  std::memcpy(&g, f.at(p + "weight_global_scale").bytes.data(), 4);
  EXPECT_EQ(g, 67.5f);  // the encode sense: 1 / ModelOpt's weight_scale_2
  const auto back = compressed_tensors_from_safetensors(f, "ct");
  ASSERT_EQ(back.weights.size(), 1u);
  EXPECT_EQ(back.weights[0], one_weight().weights[0]);
  EXPECT_FALSE(f.metadata.contains(checkpoint_annotation_key));  // nothing CT cannot hold here
}

TEST(CompressedTensors, ConfigAsTheLibraryWritesIt) {
  const auto q = compressed_tensors_quantization_config(one_weight());
  EXPECT_EQ(q["quant_method"], "compressed-tensors");
  EXPECT_EQ(q["format"], "nvfp4-pack-quantized");
  EXPECT_EQ(q["quantization_status"], "compressed");
  EXPECT_EQ(q["ignore"], nlohmann::ordered_json({"lm_head"}));
  const auto& g = q["config_groups"]["group_0"];
  EXPECT_EQ(g["weights"]["strategy"], "tensor_group");
  EXPECT_EQ(g["weights"]["group_size"], 16);
  EXPECT_EQ(g["input_activations"]["dynamic"], "local");
  auto no_input = one_weight();
  no_input.weights[0].input_scale.reset();
  EXPECT_TRUE(compressed_tensors_quantization_config(no_input)["config_groups"]["group_0"]["input_activations"].is_null());
}

TEST(CompressedTensors, MalformedLayoutsAreRefused) {
  const std::string p = "model.layers.0.self_attn.o_proj.";
  auto f = compressed_tensors_to_safetensors(one_weight(), false);
  std::erase_if(f.tensors, [&](const safetensors_tensor& t) { return t.name == p + "weight_global_scale"; });
  expect_error(f, errc::malformed_file, "has weight_packed but no weight_global_scale");
  f = compressed_tensors_to_safetensors(one_weight(), false);
  for (auto& t : f.tensors)
    if (t.name == p + "weight_scale") t.dtype = safetensors_dtype::u8;  // wrong dtype string
  expect_error(f, errc::dtype_mismatch, "weight_scale is U8 [2, 2], expected F8_E4M3");
  f = compressed_tensors_to_safetensors(one_weight(), false);
  for (auto& t : f.tensors)
    if (t.name == p + "weight_scale") {
      t.shape = {2, 1};
      t.bytes.resize(2);
    }
  expect_error(f, errc::shape_mismatch, "needs [2, 2]");
  f = compressed_tensors_to_safetensors(one_weight(), false);
  f.add({p + "weight_zero_point", safetensors_dtype::f8_e4m3, {2, 2}, std::vector<std::uint8_t>(4)});
  expect_error(f, errc::unsupported, "asymmetric");
}

TEST(CompressedTensors, DirectoryConfigIsChecked) {
  const nvfp4::test::scoped_temp_dir temp;
  const fs::path dir = temp / "ckpt";
  write_compressed_tensors(dir, one_weight());
  const auto c = read_compressed_tensors(dir);
  EXPECT_EQ(c.ignore, std::vector<std::string>{"lm_head"});
  EXPECT_TRUE(c.model_config.is_null());  // config.json held only quantization_config
  auto config = read_json_file(dir / "config.json");
  config["quantization_config"]["format"] = "pack-quantized";
  write_json_file(dir / "config.json", config, 2);
  EXPECT_THROW(read_compressed_tensors(dir), error);
  config["quantization_config"]["quant_method"] = "gptq";
  write_json_file(dir / "config.json", config, 2);
  EXPECT_THROW(read_compressed_tensors(dir), error);
}

}  // namespace io_compressed_tensors_test
}  // namespace
}  // namespace nvfp4::io
