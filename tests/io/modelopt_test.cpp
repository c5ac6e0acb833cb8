// Tests for nvfp4/io/modelopt.hpp: the tensor layout written out by hand from ModelOpt's export
// (names, dtypes, shapes, scalar scales), hf_quant_config.json and config.json as ModelOpt writes
// them, and the reader's refusals (unsupported algorithms, odd K, missing parts).
#include "nvfp4/io/modelopt.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_support.hpp"

namespace nvfp4::io {
namespace {
namespace io_modelopt_test {

namespace fs = std::filesystem;

checkpoint one_weight() {
  checkpoint c;
  quantized_weight w;
  w.name = "model.layers.0.mlp.down_proj";
  w.rows = 4;
  w.cols = 32;
  w.data.assign(64, 0x5A);
  w.scales.assign(8, 0x40);
  w.weight_scale = scale_pair::from_decode(0.001f);
  w.input_scale = scale_pair::from_decode(0.01f);
  c.weights.push_back(w);
  return c;
}

TEST(ModelOpt, TensorLayout) {
  const auto f = modelopt_to_safetensors(one_weight(), false);
  const auto& weight = f.at("model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(weight.dtype, safetensors_dtype::u8);
  EXPECT_EQ(weight.shape, (std::vector<std::int64_t>{4, 16}));
  const auto& scale = f.at("model.layers.0.mlp.down_proj.weight_scale");
  EXPECT_EQ(scale.dtype, safetensors_dtype::f8_e4m3);
  EXPECT_EQ(scale.shape, (std::vector<std::int64_t>{4, 2}));
  for (const char* s : {"weight_scale_2", "input_scale"}) {
    const auto& t = f.at(std::string("model.layers.0.mlp.down_proj.") + s);
    EXPECT_EQ(t.dtype, safetensors_dtype::f32);
    EXPECT_TRUE(t.shape.empty()) << s;  // a 0-dim scalar, as torch saves it
  }
  float v;
  std::memcpy(&v, f.at("model.layers.0.mlp.down_proj.weight_scale_2").bytes.data(), 4);
  EXPECT_EQ(v, 0.001f);
  // safetensors' order: F32 first, then F8_E4M3, then U8.
  EXPECT_EQ(f.tensors.front().dtype, safetensors_dtype::f32);
  EXPECT_EQ(f.tensors.back().dtype, safetensors_dtype::u8);
  const auto back = modelopt_from_safetensors(f, "m");
  ASSERT_EQ(back.weights.size(), 1u);
  EXPECT_EQ(back.weights[0], one_weight().weights[0]);
}

TEST(ModelOpt, HfQuantConfigAsModelOptWritesIt) {
  auto c = one_weight();
  c.ignore = {"lm_head", "model.layers.0.mlp.gate*"};
  const auto hf = detail_modelopt::make_hf_quant_config(c);
  EXPECT_EQ(hf.dump(4), R"({
    "producer": {
        "name": "nvfp4",
        "version": ")" + std::to_string(NVFP4_VERSION_MAJOR) +
                            "." + std::to_string(NVFP4_VERSION_MINOR) + "." + std::to_string(NVFP4_VERSION_PATCH) + R"("
    },
    "quantization": {
        "quant_algo": "NVFP4",
        "kv_cache_quant_algo": null,
        "group_size": 16,
        "exclude_modules": [
            "lm_head",
            "model.layers.0.mlp.gate*"
        ]
    }
})");
  // config.json's quantization_config, as convert_hf_quant_config_format derives it.
  const auto q = detail_modelopt::config_json_quantization(hf);
  EXPECT_EQ(q["quant_method"], "modelopt");
  EXPECT_EQ(q["quant_algo"], "NVFP4");
  EXPECT_EQ(q["config_groups"]["group_0"]["weights"]["num_bits"], 4);
  EXPECT_EQ(q["ignore"], hf["quantization"]["exclude_modules"]);
}

class ModelOptFiles : public nvfp4::test::temp_dir_test {};

TEST_F(ModelOptFiles, ConfigsAreReadAndChecked) {
  write_modelopt(dir_ / "m", one_weight());
  auto hf = read_json_file(dir_ / "m" / "hf_quant_config.json");
  hf["quantization"]["exclude_modules"] = {"lm_head"};
  write_json_file(dir_ / "m" / "hf_quant_config.json", hf, 4);
  EXPECT_EQ(read_modelopt(dir_ / "m").ignore, std::vector<std::string>{"lm_head"});
  hf["quantization"]["quant_algo"] = "FP8";
  write_json_file(dir_ / "m" / "hf_quant_config.json", hf, 4);
  try {
    (void)read_modelopt(dir_ / "m");
    ADD_FAILURE();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("quant_algo FP8"), std::string::npos);
  }
  hf["quantization"]["quant_algo"] = "NVFP4";
  hf["quantization"]["group_size"] = 32;
  write_json_file(dir_ / "m" / "hf_quant_config.json", hf, 4);
  EXPECT_THROW(read_modelopt(dir_ / "m"), error);
}

TEST_F(ModelOptFiles, WhatTheLayoutCannotHoldIsRefused) {
  auto c = one_weight();
  c.weights[0].cols = 31;
  c.weights[0].scales.assign(8, 0x40);
  try {
    write_modelopt(dir_ / "odd.safetensors", c);
    ADD_FAILURE();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::shape_mismatch);
    EXPECT_NE(std::string(e.what()).find("31 columns"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(dir_ / "odd.safetensors"));
  // An NVFP4 weight without weight_scale_2, or with a scale that is not one F32 value.
  auto f = modelopt_to_safetensors(one_weight(), false);
  std::erase_if(f.tensors, [](const safetensors_tensor& t) { return t.name.ends_with("weight_scale_2"); });
  EXPECT_THROW(modelopt_from_safetensors(f, "m"), error);
  f = modelopt_to_safetensors(one_weight(), false);
  for (auto& t : f.tensors)
    if (t.name.ends_with("input_scale")) {
      t.dtype = safetensors_dtype::bf16;
      t.bytes.resize(2);
    }
  try {
    (void)modelopt_from_safetensors(f, "m.safetensors");
    ADD_FAILURE();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::dtype_mismatch);
    EXPECT_NE(std::string(e.what()).find("input_scale' is not one F32 value (BF16"), std::string::npos) << e.what();
  }
}

}  // namespace io_modelopt_test
}  // namespace
}  // namespace nvfp4::io
