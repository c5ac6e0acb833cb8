// Tests for nvfp4/io/torchao.hpp: the layout torchao's safetensors support writes for an
// NVFP4Tensor (tensor names, metadata text byte for byte as Python's json.dumps writes it),
// swizzled and compact scales, and the reader's refusals.
#include "nvfp4/io/torchao.hpp"

#include <gtest/gtest.h>

namespace nvfp4::io {
namespace {
namespace io_torchao_test {

checkpoint one_weight(index_t rows = 130, index_t cols = 64) {
  checkpoint c;
  quantized_weight w;
  w.name = "layers.0.ffn";
  w.rows = rows;
  w.cols = cols;
  w.data.assign(static_cast<std::size_t>(rows * cols / 2), 0x42);
  w.scales.resize(static_cast<std::size_t>(rows * cols / 16));
  for (std::size_t i = 0; i < w.scales.size(); ++i) w.scales[i] = static_cast<std::uint8_t>(0x20 + i % 64);
  w.weight_scale = scale_pair::from_decode(0.002f);
  c.weights.push_back(w);
  c.tensors.push_back({"norm.weight", safetensors_dtype::bf16, {2}, {1, 2, 3, 4}});
  return c;
}

TEST(Torchao, LayoutAndMetadataAsTorchaoWritesThem) {
  const auto f = torchao_to_safetensors(one_weight());
  const auto& q = f.at("layers.0.ffn._weight_qdata");  // "M.weight" -> "M._weight_qdata"
  EXPECT_EQ(q.dtype, safetensors_dtype::u8);
  EXPECT_EQ(q.shape, (std::vector<std::int64_t>{130, 32}));
  const auto& s = f.at("layers.0.ffn._weight_scale");
  EXPECT_EQ(s.dtype, safetensors_dtype::f8_e4m3);
  EXPECT_EQ(s.shape, (std::vector<std::int64_t>{64, 16}));  // ceil(130/128)*32, ceil(64/64)*16
  EXPECT_TRUE(f.at("layers.0.ffn._weight_per_tensor_scale").shape.empty());
  EXPECT_EQ(f.metadata.at("tensor_names"), R"(["layers.0.ffn.weight", "norm.weight"])");
  EXPECT_EQ(
      f.metadata.at("layers.0.ffn.weight"),
      R"({"_type": "NVFP4Tensor", "_data": {"is_swizzled_scales": true, "use_triton_kernel": false, "act_quant_kwargs": null, )"
      R"("block_size": 16, "orig_dtype": {"_type": "torch.dtype", "_data": "bfloat16"}}, "_tensor_data_names": ["per_tensor_scale", "qdata", "scale"]})");
  EXPECT_EQ(f.metadata.at("norm.weight"), R"({"_type": "Tensor"})");
  const auto back = torchao_from_safetensors(f, "ao");
  ASSERT_EQ(back.weights.size(), 1u);
  EXPECT_EQ(back.weights[0], one_weight().weights[0]);
  EXPECT_EQ(back.tensors.size(), 1u);
  const auto compact = torchao_to_safetensors(one_weight(), {.swizzled_scales = false});
  EXPECT_EQ(compact.at("layers.0.ffn._weight_scale").shape, (std::vector<std::int64_t>{130, 4}));
  EXPECT_EQ(torchao_from_safetensors(compact, "ao").weights[0], one_weight().weights[0]);
}

TEST(Torchao, PythonJsonEscapesAsPythonDoes) {
  EXPECT_EQ(detail_torchao::python_json(nlohmann::ordered_json("a\"b\\c\u00e9\U0001F600")), R"("a\"b\\c\u00e9\ud83d\ude00")");
  EXPECT_EQ(detail_torchao::python_json(nlohmann::ordered_json::array()), "[]");
}

void expect_error(const safetensors_file& f, const std::string& fragment) {
  try {
    (void)torchao_from_safetensors(f, "ao.safetensors");
    ADD_FAILURE() << "accepted; expected '" << fragment << "'";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Torchao, MalformedFilesAreRefused) {
  auto f = torchao_to_safetensors(one_weight());
  f.metadata.erase("tensor_names");
  expect_error(f, "no \"tensor_names\"");
  f = torchao_to_safetensors(one_weight());
  f.metadata["layers.0.ffn.weight"] = R"({"_type": "MXTensor", "_data": {}})";
  expect_error(f, "is a torchao MXTensor");
  f = torchao_to_safetensors(one_weight());
  for (auto& t : f.tensors)
    if (t.name.ends_with("_weight_scale")) {
      t.shape = {130, 4};
      t.bytes.resize(520);
    }
  expect_error(f, "expected F8_E4M3 [64, 16] (swizzled)");
  f = torchao_to_safetensors(one_weight());
  f.add({"stray", safetensors_dtype::u8, {1}, {0}});
  expect_error(f, "'stray' belongs to no entry");
  // Non-zero bytes in the swizzled padding are reported, not silently kept.
  f = torchao_to_safetensors(one_weight());
  for (auto& t : f.tensors)
    if (t.name.ends_with("_weight_scale")) t.bytes.back() = 0x38;
  const auto c = torchao_from_safetensors(f, "ao");
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("padding of its 128x4 tiles"), std::string::npos);
}

TEST(Torchao, WhatTheLayoutCannotHoldIsRefused) {
  EXPECT_THROW(torchao_to_safetensors(one_weight(4, 40)), error);  // K % 16
  auto c = one_weight();
  c.weights[0].format = weight_format::mxfp4;
  c.weights[0].scales.resize(c.weights[0].scales.size() / 2);
  EXPECT_THROW(torchao_to_safetensors(c), error);
}

}  // namespace io_torchao_test
}  // namespace
}  // namespace nvfp4::io
