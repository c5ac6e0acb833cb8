// Tests for nvfp4/io/checkpoint_formats.hpp: format detection, and the round trips the converter
// promises: a ModelOpt checkpoint (file, or directory with shards, index, hf_quant_config.json and
// config.json) converted to compressed-tensors, GGUF and torchao and back has identical bytes;
// each of those converted to ModelOpt and back holds the same bits; what a target cannot hold is
// refused, naming the tensor, before anything is written.
#include "nvfp4/io/checkpoint_formats.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <vector>

#include "nvfp4/scaling/quantizer_flavor.hpp"
#include "test_support.hpp"

namespace nvfp4::io {
namespace {
namespace io_checkpoint_formats_test {

namespace fs = std::filesystem;

class CheckpointFormats : public nvfp4::test::temp_dir_test {
 protected:
  fs::path path(const std::string& n) const { return dir_ / n; }
};

std::vector<float> weights(index_t rows, index_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (auto& v : x) v = bf16::from_float(normal(rng)).to_float();
  x[7] = 0.9f;
  return x;
}

/// A small model as ModelOpt would export it: NVFP4 q/k/v/o with one input scale, an MXFP4
/// expert, a bf16 norm, an F32 KV-cache scale.
checkpoint small_model(quantizer_flavor flavor = quantizer_flavor::modelopt) {
  checkpoint c;
  const char* names[] = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.v_proj",
                         "model.layers.0.self_attn.o_proj"};
  unsigned seed = 1;
  for (const char* n : names) {
    const auto x = weights(64, 128, seed++);
    c.weights.push_back(make_quantized_weight(n, quantize_nvfp4_flavor(matrix_view<const float>::row_major(x.data(), 64, 128), flavor)));
  }
  c.weights[0].input_scale = scale_pair::from_decode(flavor_rules::modelopt_weight_scale_2(3.5f));
  safetensors_tensor norm;
  norm.name = "model.layers.0.input_layernorm.weight";
  norm.dtype = safetensors_dtype::bf16;
  norm.shape = {128};
  norm.bytes.assign(256, 0x3f);
  c.tensors.push_back(norm);
  c.metadata["format"] = "pt";
  return c;
}

std::vector<std::uint8_t> bytes(const fs::path& p) { return read_file_bytes(p); }

TEST_F(CheckpointFormats, ModelOptFileRoundTripsThroughEveryFormatByteForByte) {
  const checkpoint c = small_model();
  write_modelopt(path("model.safetensors"), c);
  const auto original = bytes(path("model.safetensors"));
  EXPECT_EQ(detect_checkpoint_format(path("model.safetensors")), checkpoint_format::modelopt);
  const std::pair<checkpoint_format, std::string> targets[] = {{checkpoint_format::compressed_tensors, "ct.safetensors"},
                                                               {checkpoint_format::gguf, "m.gguf"},
                                                               {checkpoint_format::torchao, "ao.safetensors"}};
  for (const auto& [format, name] : targets) {
    SCOPED_TRACE(checkpoint_format_name(format));
    write_checkpoint(path(name), format, read_checkpoint(path("model.safetensors")));
    EXPECT_EQ(detect_checkpoint_format(path(name)), format);
    const checkpoint middle = read_checkpoint(path(name));
    EXPECT_TRUE(middle.warnings.empty() || middle.warnings[0].find("fused") != std::string::npos);
    write_checkpoint(path("back.safetensors"), checkpoint_format::modelopt, middle);
    EXPECT_EQ(bytes(path("back.safetensors")), original);
  }
}

TEST_F(CheckpointFormats, ModelOptDirectoryWithShardsAndConfigsRoundTrips) {
  checkpoint c = small_model();
  c.ignore = {"lm_head"};
  c.model_config = nlohmann::ordered_json::parse(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 128})");
  write_modelopt(path("mo"), c, {.max_shard_bytes = 10000});  // forces several shards
  ASSERT_TRUE(fs::exists(path("mo") / "model.safetensors.index.json"));
  ASSERT_TRUE(fs::exists(path("mo") / "model-00001-of-00002.safetensors") || fs::exists(path("mo") / "model-00001-of-00003.safetensors"));
  const auto hf = read_json_file(path("mo") / "hf_quant_config.json");
  EXPECT_EQ(hf["quantization"]["quant_algo"], "NVFP4");
  EXPECT_EQ(hf["quantization"]["group_size"], 16);
  EXPECT_EQ(hf["quantization"]["exclude_modules"], nlohmann::ordered_json({"lm_head"}));
  const auto config = read_json_file(path("mo") / "config.json");
  EXPECT_EQ(config["quantization_config"]["quant_method"], "modelopt");
  EXPECT_EQ(config["quantization_config"]["ignore"], nlohmann::ordered_json({"lm_head"}));
  std::map<std::string, std::vector<std::uint8_t>> original;
  for (const auto& e : fs::directory_iterator(path("mo"))) original[e.path().filename().string()] = bytes(e.path());

  for (const auto format : {checkpoint_format::compressed_tensors, checkpoint_format::gguf, checkpoint_format::torchao}) {
    SCOPED_TRACE(checkpoint_format_name(format));
    const fs::path middle = format == checkpoint_format::gguf ? path("m.gguf") : path(std::string("mid_") + checkpoint_format_name(format));
    write_checkpoint(middle, format, read_checkpoint(path("mo")), {.max_shard_bytes = 10000});
    const fs::path back = path(std::string("back_") + checkpoint_format_name(format));
    write_checkpoint(back, checkpoint_format::modelopt, read_checkpoint(middle), {.max_shard_bytes = 10000});
    std::map<std::string, std::vector<std::uint8_t>> again;
    for (const auto& e : fs::directory_iterator(back)) again[e.path().filename().string()] = bytes(e.path());
    EXPECT_EQ(again.size(), original.size());
    for (const auto& [name, content] : original) EXPECT_TRUE(again[name] == content) << name << " differs";
  }
  // compressed-tensors' own directory: config.json with its quantization_config.
  const auto ct = read_json_file(path("mid_compressed-tensors") / "config.json");
  EXPECT_EQ(ct["quantization_config"]["quant_method"], "compressed-tensors");
  EXPECT_EQ(ct["quantization_config"]["format"], "nvfp4-pack-quantized");
  EXPECT_EQ(ct["quantization_config"]["ignore"], nlohmann::ordered_json({"lm_head"}));
  EXPECT_EQ(ct["hidden_size"], 128);
}

TEST_F(CheckpointFormats, OtherFormatsKeepTheirBitsThroughModelOpt) {
  // compressed-tensors stores the encode sense: a TE-quantized tensor's S_enc is not always the
  // fp32 reciprocal of its S_dec; through ModelOpt (decode sense) it must come back exactly.
  checkpoint c = small_model(quantizer_flavor::te);
  bool some_not_reciprocal = false;
  for (float amax = 1.0f; amax < 2.0f && !some_not_reciprocal; amax += 0.001f) {
    const tensor_scale s = nvfp4_tensor_scale(amax);
    if (1.0f / s.decode != s.encode) {
      c.weights[1].weight_scale = {s.decode, s.encode};
      some_not_reciprocal = true;
    }
  }
  ASSERT_TRUE(some_not_reciprocal);
  for (const auto format : {checkpoint_format::compressed_tensors, checkpoint_format::gguf, checkpoint_format::torchao}) {
    SCOPED_TRACE(checkpoint_format_name(format));
    const std::string name = format == checkpoint_format::gguf ? "x.gguf" : "x.safetensors";
    write_checkpoint(path(name), format, c);
    const auto written = bytes(path(name));
    const checkpoint first = read_checkpoint(path(name));
    write_checkpoint(path("mo.safetensors"), checkpoint_format::modelopt, first);
    write_checkpoint(path(name), format, read_checkpoint(path("mo.safetensors")));
    EXPECT_EQ(bytes(path(name)), written) << "the file written back differs";
    const checkpoint second = read_checkpoint(path(name));
    ASSERT_EQ(second.weights.size(), c.weights.size());
    for (const auto& w : c.weights) {  // files list weights in their tensor order, not ours
      const auto* again = second.find_weight(w.name);
      ASSERT_NE(again, nullptr) << w.name;
      EXPECT_TRUE(*again == w) << w.name;
    }
    EXPECT_EQ(second.tensors.size(), c.tensors.size());
  }
}

TEST_F(CheckpointFormats, RefusalsNameTheTensorAndWriteNothing) {
  checkpoint c = small_model();
  quantized_weight mx = make_quantized_weight("model.layers.0.mlp.experts.0.w1",
                                              quantize<mxfp4>(matrix_view<const float>::row_major(weights(8, 64, 9).data(), 8, 64)));
  c.weights.push_back(mx);
  for (const auto format : {checkpoint_format::compressed_tensors, checkpoint_format::torchao}) {
    try {
      write_checkpoint(path("out.safetensors"), format, c);
      ADD_FAILURE() << checkpoint_format_name(format) << " accepted MXFP4";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::unsupported);
      EXPECT_NE(std::string(e.what()).find("experts.0.w1' is MXFP4"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(path("out.safetensors")));
  }
  c.weights.pop_back();
  const auto x = weights(4, 48, 3);
  c.weights.push_back(make_quantized_weight("narrow", quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), 4, 48))));
  try {
    write_checkpoint(path("out.gguf"), checkpoint_format::gguf, c);
    ADD_FAILURE();
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("'narrow' has 48 columns"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path("out.gguf")));
  c.weights.back().rht = true;
  EXPECT_THROW(write_checkpoint(path("out.safetensors"), checkpoint_format::compressed_tensors, c), error);
  EXPECT_FALSE(fs::exists(path("out.safetensors")));
}

TEST_F(CheckpointFormats, ReadsWhatNvfp4QuantizeWrites) {
  // `nvfp4 quantize --swizzle` files: our metadata, 128x4 scales; read as the compact layout.
  const auto x = weights(40, 64, 5);
  const auto q = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), 40, 64));
  safetensors_file f;
  store_options options;
  options.swizzle = true;
  add_quantized_tensor(f, "w", q, options);
  write_safetensors(path("q.safetensors"), f);
  const checkpoint c = read_checkpoint(path("q.safetensors"));
  ASSERT_EQ(c.weights.size(), 1u);
  EXPECT_EQ(c.weights[0], make_quantized_weight("w", q));
  EXPECT_TRUE(c.metadata.contains("format"));
  EXPECT_FALSE(c.metadata.contains("nvfp4.w"));  // re-derived, not carried
}

TEST_F(CheckpointFormats, DetectionAndUnreadablePaths) {
  EXPECT_THROW(detect_checkpoint_format(path("missing")), error);
  fs::create_directories(path("empty"));
  EXPECT_THROW(read_checkpoint(path("empty")), error);
  write_checkpoint(path("g.gguf"), checkpoint_format::gguf, small_model());
  EXPECT_EQ(detect_checkpoint_format(path("g.gguf")), checkpoint_format::gguf);
  EXPECT_EQ(parse_checkpoint_format("compressed_tensors"), checkpoint_format::compressed_tensors);
  EXPECT_FALSE(parse_checkpoint_format("safetensors").has_value());
}

}  // namespace io_checkpoint_formats_test
}  // namespace
}  // namespace nvfp4::io
