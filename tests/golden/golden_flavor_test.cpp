// Golden test, kinds `nvfp4_flavor` and `checkpoint_layout`: each quantizer flavor against its
// project's own code, bit for bit (ModelOpt, torchao and compressed-tensors run with torch on an
// H100, ggml's C quantizer compiled from its sources; producers and versions in the golden
// README), and our checkpoint readers against files the peers' own writers made.
#include <gtest/gtest.h>

#include <bit>

#include "golden/golden_support.hpp"
#include "nvfp4/io/checkpoint_formats.hpp"
#include "nvfp4/scaling/quantizer_flavor.hpp"

namespace nvfp4 {
namespace {

struct bf16_input {
  index_t rows = 0, cols = 0;
  std::vector<float> values;
  std::vector<bf16> as_bf16;
  matrix_view<const bf16> view() const { return matrix_view<const bf16>::row_major(as_bf16.data(), rows, cols); }
  matrix_view<const float> view_f32() const { return matrix_view<const float>::row_major(values.data(), rows, cols); }
};

bf16_input load_input(const nlohmann::json& c) {
  const auto x = golden::load(c, "input_bf16_as_f32");
  bf16_input in;
  in.rows = x.shape.at(0);
  in.cols = x.shape.at(1);
  in.values = x.as<float>();
  for (float v : in.values) in.as_bf16.push_back(bf16::from_float(v));
  return in;
}

/// ModelOpt, torchao, compressed-tensors: packed data, scale bytes and the stored tensor scale.
bool check_python_peer(const nlohmann::json& c, quantizer_flavor flavor) {
  const auto in = load_input(c);
  const auto q = quantize_nvfp4_flavor(in.view(), flavor);
  const auto expected_data = golden::load_as<std::uint8_t>(c, "data");
  const auto expected_scales = golden::load_as<std::uint8_t>(c, "scale_e4m3");
  const float expected_scale = golden::load_as<float>(c, "tensor_scale").at(0);
  const long data_diff = golden::first_difference(golden::data_bytes(q), expected_data);
  const long scale_diff = golden::first_difference(golden::scale_bytes(q), expected_scales);
  const float stored = flavor == quantizer_flavor::compressed_tensors ? q.encode_scale() : q.decode_scale();
  EXPECT_EQ(data_diff, -1) << "first differing data byte";
  EXPECT_EQ(scale_diff, -1) << "first differing scale byte";
  EXPECT_EQ(std::bit_cast<std::uint32_t>(stored), std::bit_cast<std::uint32_t>(expected_scale))
      << "tensor scale " << stored << " vs " << expected_scale;
  return data_diff == -1 && scale_diff == -1 && std::bit_cast<std::uint32_t>(stored) == std::bit_cast<std::uint32_t>(expected_scale);
}

/// ggml: our flavor through our GGUF block encoder against ggml's blocks, and our decoder of its
/// blocks against ggml's own dequantizer (every value exact, so bit for bit).
bool check_ggml(const nlohmann::json& c) {
  const auto in = load_input(c);
  bool ok = true;
  const auto q = quantize_nvfp4_flavor(in.view(), quantizer_flavor::ggml);
  const auto expected = golden::load_as<std::uint8_t>(c, "nvfp4_blocks");
  const auto ours = io::encode_gguf_nvfp4(in.rows, in.cols, golden::data_bytes(q), golden::scale_bytes(q));
  const long diff = golden::first_difference(ours, expected);
  EXPECT_EQ(diff, -1) << "first differing NVFP4 block byte";
  ok = ok && diff == -1;

  std::vector<std::uint8_t> data, scales;
  io::decode_gguf_nvfp4(in.rows, in.cols, expected, data, scales);
  auto decoded = nvfp4_tensor::from_bytes(in.rows, in.cols, data, scales);
  const auto values = dequantize(decoded);
  const auto ggml_values = golden::load_as<float>(c, "nvfp4_dequantized");
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < values.size(); ++i)
    mismatches += std::bit_cast<std::uint32_t>(values[i]) != std::bit_cast<std::uint32_t>(ggml_values[i]) &&
                  !(values[i] == 0.0f && ggml_values[i] == 0.0f);
  EXPECT_EQ(mismatches, 0u) << "dequantized values differing from ggml's dequantize_row_nvfp4";
  ok = ok && mismatches == 0;

  if (c.contains("mxfp4_blocks")) {
    const auto mq = quantize_mxfp4_flavor(in.view(), quantizer_flavor::ggml);
    const auto expected_mx = golden::load_as<std::uint8_t>(c, "mxfp4_blocks");
    const auto ours_mx = io::encode_gguf_mxfp4(in.rows, in.cols, golden::data_bytes(mq), golden::scale_bytes(mq));
    const long mx_diff = golden::first_difference(ours_mx, expected_mx);
    EXPECT_EQ(mx_diff, -1) << "first differing MXFP4 block byte";
    ok = ok && mx_diff == -1;
  }
  return ok;
}

TEST(GoldenFlavor, EachFlavorMatchesItsProject) {
  const auto cases = golden::cases_of("nvfp4_flavor");
  // The shipped archive has them; another directory (NVFP4_GOLDEN_DIR) may not.
  if (golden::directory() == NVFP4_DEFAULT_GOLDEN_DIR) {
    ASSERT_FALSE(cases.empty());
  }
  if (cases.empty()) GTEST_SKIP() << "no nvfp4_flavor cases in " << golden::directory();
  for (const auto& c : cases) {
    SCOPED_TRACE(golden::describe(c));
    const std::string mode = c.at("mode");
    const auto flavor = parse_quantizer_flavor(mode);
    ASSERT_TRUE(flavor.has_value()) << mode;
    const bool ok = *flavor == quantizer_flavor::ggml ? check_ggml(c) : check_python_peer(c, *flavor);
    golden::tally::instance().record("nvfp4_flavor " + mode, ok);
  }
}

TEST(GoldenFlavor, Fp32AndBf16InputsAgreeWhereThePeerUpcasts) {
  // ModelOpt, torchao and ggml compute in fp32 whatever the weight dtype; compressed-tensors does
  // part of its arithmetic in the weight's dtype, so only the others must agree.
  const auto cases = golden::cases_of("nvfp4_flavor");
  if (cases.empty()) GTEST_SKIP();
  for (const auto& c : cases) {
    const std::string mode = c.at("mode");
    if (mode == "compressed_tensors") continue;
    const auto in = load_input(c);
    const auto flavor = *parse_quantizer_flavor(mode);
    EXPECT_EQ(golden::data_bytes(quantize_nvfp4_flavor(in.view(), flavor)), golden::data_bytes(quantize_nvfp4_flavor(in.view_f32(), flavor)))
        << golden::describe(c);
  }
}

TEST(GoldenCheckpointLayout, PeerWrittenFilesReadBackToThePeersBits) {
  const auto cases = golden::cases_of("checkpoint_layout");
  if (golden::directory() == NVFP4_DEFAULT_GOLDEN_DIR) {
    ASSERT_FALSE(cases.empty());
  }
  if (cases.empty()) GTEST_SKIP() << "no checkpoint_layout cases in " << golden::directory();
  for (const auto& c : cases) {
    SCOPED_TRACE(golden::describe(c) + " " + c.at("file").get<std::string>());
    const auto path = golden::directory() / c.at("file").get<std::string>();
    const std::string mode = c.at("mode");
    const auto format = io::detect_checkpoint_format(path);
    const auto expected_format = mode == "modelopt" ? io::checkpoint_format::modelopt
                                 : mode == "torchao" ? io::checkpoint_format::torchao
                                                     : io::checkpoint_format::compressed_tensors;
    EXPECT_EQ(format, expected_format);
    const auto ckpt = io::read_checkpoint(path);
    const auto* w = ckpt.find_weight(c.at("module").get<std::string>());
    bool ok = w != nullptr && ckpt.tensors.size() == 1 && ckpt.tensors[0].name == "model.norm.weight";
    EXPECT_TRUE(ok) << "weight or the plain tensor missing";
    if (w) {
      EXPECT_TRUE(ckpt.warnings.empty()) << ckpt.warnings.front();
      const float stored = mode == "compressed_tensors" ? w->weight_scale.encode : w->weight_scale.decode;
      const bool same = w->data == golden::load_as<std::uint8_t>(c, "data") && w->scales == golden::load_as<std::uint8_t>(c, "scale_e4m3") &&
                        std::bit_cast<std::uint32_t>(stored) == std::bit_cast<std::uint32_t>(golden::load_as<float>(c, "tensor_scale").at(0));
      EXPECT_TRUE(same) << "bits differ from the peer's arrays";
      ok = ok && same;
      // Written back in the same format, the file is byte-identical to what the peer wrote (for
      // torchao the metadata's key order is the writer's hash order, so compare the tensors).
      const auto original = io::read_file_bytes(path);
      if (format == io::checkpoint_format::modelopt) {
        const auto again = io::serialize_safetensors(io::modelopt_to_safetensors(ckpt, false));
        EXPECT_EQ(again, original);
        ok = ok && again == original;
      } else if (format == io::checkpoint_format::compressed_tensors) {
        const auto again = io::serialize_safetensors(io::compressed_tensors_to_safetensors(ckpt, false));
        EXPECT_EQ(again, original);
        ok = ok && again == original;
      } else {
        const auto again = io::torchao_to_safetensors(ckpt);
        const auto peer = io::read_safetensors(path);
        bool tensors_equal = again.tensors.size() == peer.tensors.size();
        for (std::size_t i = 0; tensors_equal && i < peer.tensors.size(); ++i)
          tensors_equal = again.tensors[i].name == peer.tensors[i].name && again.tensors[i].bytes == peer.tensors[i].bytes &&
                          again.tensors[i].dtype == peer.tensors[i].dtype && again.tensors[i].shape == peer.tensors[i].shape;
        EXPECT_TRUE(tensors_equal);
        EXPECT_EQ(again.metadata, peer.metadata) << "metadata text differs from torchao's";
        ok = ok && tensors_equal && again.metadata == peer.metadata;
      }
    }
    golden::tally::instance().record("checkpoint_layout " + mode, ok);
  }
}

}  // namespace
}  // namespace nvfp4
