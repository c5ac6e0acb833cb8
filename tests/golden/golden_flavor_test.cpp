// Golden test, kinds `nvfp4_flavor` and `checkpoint_layout`: each quantizer flavor against its
// project's own code, bit for bit (ModelOpt, torchao and compressed-tensors run with torch on an
// H100, ggml's C quantizer compiled from its sources; producers and versions in the golden
// README), and our checkpoint readers against files the peers' own writers made.
#include <gtest/gtest.h>

#include <bit>
#include <tuple>

#include "golden/golden_support.hpp"
#include "nvfp4/io/checkpoint_formats.hpp"
#include "nvfp4/scaling/quantizer_flavor.hpp"

namespace nvfp4 {
namespace {
namespace golden_flavor_test {

struct bf16_input {
  index_t rows = 0, cols = 0;
  std::vector<float> values;
  std::vector<bf16> as_bf16;
  matrix_view<const bf16> view() const { return matrix_view<const bf16>::row_major(as_bf16.data(), rows, cols); }
  matrix_view<const float> view_f32() const { return matrix_view<const float>::row_major(values.data(), rows, cols); }
};

bf16_input load_input(golden::case_fields& f) {
  bf16_input in;
  std::tie(in.rows, in.cols) = f.shape("shape");
  in.values = f.load_shaped<float>("input_bf16_as_f32", {in.rows, in.cols});
  in.as_bf16 = golden::bf16_values(in.values, "input_bf16_as_f32");
  return in;
}

index_t ceil_div(index_t a, index_t b) { return (a + b - 1) / b; }

/// ModelOpt, torchao, compressed-tensors: packed data, scale bytes and the stored tensor scale.
bool check_python_peer(const nlohmann::json& c, quantizer_flavor flavor) {
  // cuda_equals_cpu: whether the peer's CPU run gave the GPU's bytes (stored either way; the GPU's
  // rounding of amax / 2688 is the one the library follows, golden README).
  golden::case_fields f(c, "nvfp4_flavor case", {"shape", "input_bf16_as_f32", "data", "scale_e4m3", "tensor_scale"},
                        {"producer", "dist", "cuda_equals_cpu"});
  const auto in = load_input(f);
  const auto expected_data = f.load_shaped<std::uint8_t>("data", {in.rows, ceil_div(in.cols, 2)});
  const auto expected_scales = f.load_shaped<std::uint8_t>("scale_e4m3", {in.rows, ceil_div(in.cols, 16)});
  const float expected_scale = f.load_shaped<float>("tensor_scale", {1}).at(0);
  const auto q = quantize_nvfp4_flavor(in.view(), flavor);
  const long data_diff = golden::first_difference(golden::data_bytes(q), expected_data);
  const long scale_diff = golden::first_difference(golden::scale_bytes(q), expected_scales);
  const float stored = flavor == quantizer_flavor::compressed_tensors ? q.encode_scale() : q.decode_scale();
  EXPECT_EQ(data_diff, -1) << "first differing data byte";
  EXPECT_EQ(scale_diff, -1) << "first differing scale byte";
  EXPECT_EQ(std::bit_cast<std::uint32_t>(stored), std::bit_cast<std::uint32_t>(expected_scale))
      << "tensor scale " << stored << " vs " << expected_scale;
  const bool ok =
      data_diff == -1 && scale_diff == -1 && std::bit_cast<std::uint32_t>(stored) == std::bit_cast<std::uint32_t>(expected_scale);
  return f.finish() && ok;
}

/// ggml: our flavor through our GGUF block encoder against ggml's blocks, and our decoder of its
/// blocks against ggml's own dequantizer (every value exact, so bit for bit); MXFP4 blocks too
/// when the case holds them.
bool check_ggml(const nlohmann::json& c) {
  golden::case_fields f(c, "nvfp4_flavor ggml case", {"shape", "input_bf16_as_f32", "nvfp4_blocks", "nvfp4_dequantized", "mxfp4_blocks"},
                        {"producer", "dist"});
  const auto in = load_input(f);
  bool ok = true;
  const auto q = quantize_nvfp4_flavor(in.view(), quantizer_flavor::ggml);
  const auto expected = f.load_as<std::uint8_t>("nvfp4_blocks");
  const auto ours = io::encode_gguf_nvfp4(in.rows, in.cols, golden::data_bytes(q), golden::scale_bytes(q));
  const long diff = golden::first_difference(ours, expected);
  EXPECT_EQ(diff, -1) << "first differing NVFP4 block byte";
  ok = ok && diff == -1;

  std::vector<std::uint8_t> data, scales;
  io::decode_gguf_nvfp4(in.rows, in.cols, expected, data, scales);
  auto decoded = nvfp4_tensor::from_bytes(in.rows, in.cols, data, scales);
  const auto values = dequantize(decoded);
  const auto ggml_values = f.load_shaped<float>("nvfp4_dequantized", {in.rows, in.cols});
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < values.size(); ++i)
    mismatches += std::bit_cast<std::uint32_t>(values[i]) != std::bit_cast<std::uint32_t>(ggml_values[i]) &&
                  !(values[i] == 0.0f && ggml_values[i] == 0.0f);
  EXPECT_EQ(mismatches, 0u) << "dequantized values differing from ggml's dequantize_row_nvfp4";
  ok = ok && mismatches == 0;

  if (f.has("mxfp4_blocks")) {
    const auto mq = quantize_mxfp4_flavor(in.view(), quantizer_flavor::ggml);
    const auto expected_mx = f.load_as<std::uint8_t>("mxfp4_blocks");
    const auto ours_mx = io::encode_gguf_mxfp4(in.rows, in.cols, golden::data_bytes(mq), golden::scale_bytes(mq));
    const long mx_diff = golden::first_difference(ours_mx, expected_mx);
    EXPECT_EQ(mx_diff, -1) << "first differing MXFP4 block byte";
    ok = ok && mx_diff == -1;
  }
  return f.finish() && ok;
}

const bool flavor_registered =
    golden::register_check("nvfp4_flavor modelopt",
                           [](const nlohmann::json& c) { return check_python_peer(c, quantizer_flavor::modelopt); }) &&
    golden::register_check("nvfp4_flavor torchao",
                           [](const nlohmann::json& c) { return check_python_peer(c, quantizer_flavor::torchao); }) &&
    golden::register_check("nvfp4_flavor compressed_tensors",
                           [](const nlohmann::json& c) { return check_python_peer(c, quantizer_flavor::compressed_tensors); }) &&
    golden::register_check("nvfp4_flavor ggml", check_ggml);

TEST(GoldenFlavor, ModelOptMatchesItsProject) { golden::check_every_case("nvfp4_flavor modelopt"); }
TEST(GoldenFlavor, TorchaoMatchesItsProject) { golden::check_every_case("nvfp4_flavor torchao"); }
TEST(GoldenFlavor, CompressedTensorsMatchesItsProject) { golden::check_every_case("nvfp4_flavor compressed_tensors"); }
TEST(GoldenFlavor, GgmlMatchesItsProject) { golden::check_every_case("nvfp4_flavor ggml"); }

TEST(GoldenFlavor, Fp32AndBf16InputsAgreeWhereThePeerUpcasts) {
  // ModelOpt, torchao and ggml compute in fp32 whatever the weight dtype; compressed-tensors does
  // part of its arithmetic in the weight's dtype, so only the others must agree. (The inputs
  // only; the flavor tests above read and judge every field.)
  for (const char* mode : {"modelopt", "torchao", "ggml"})
    for (const auto& c : golden::cases_of(std::string("nvfp4_flavor ") + mode)) {
      SCOPED_TRACE(golden::describe(c));
      const auto array = io::read_npy(golden::directory() / c.at("input_bf16_as_f32").get<std::string>());
      const index_t rows = array.shape.at(0), cols = array.shape.at(1);
      const auto x = array.as<float>();
      std::vector<bf16> x16;
      for (float v : x) x16.push_back(bf16::from_float(v));
      const auto flavor = *parse_quantizer_flavor(mode);
      const auto as_bf16 = matrix_view<const bf16>::row_major(x16.data(), rows, cols);
      const auto as_f32 = matrix_view<const float>::row_major(x.data(), rows, cols);
      EXPECT_EQ(golden::data_bytes(quantize_nvfp4_flavor(as_bf16, flavor)), golden::data_bytes(quantize_nvfp4_flavor(as_f32, flavor)));
    }
}

/// A checkpoint file the peer's own writer made: read back to the peer's arrays, and written back
/// byte-identical (torchao: the same tensors and metadata text).
bool check_layout_case(const nlohmann::json& c, io::checkpoint_format expected_format) {
  golden::case_fields f(c, "checkpoint_layout case", {"file", "module", "data", "scale_e4m3", "tensor_scale"}, {"producer", "source_case"});
  const auto path = f.file("file");
  const std::string module = f.text("module");
  const auto data = f.load_as<std::uint8_t>("data");
  const auto scales = f.load_as<std::uint8_t>("scale_e4m3");
  const float tensor_scale = f.load_shaped<float>("tensor_scale", {1}).at(0);
  const auto format = io::detect_checkpoint_format(path);
  EXPECT_EQ(format, expected_format);
  const auto ckpt = io::read_checkpoint(path);
  const auto* w = ckpt.find_weight(module);
  bool ok = format == expected_format && w != nullptr && ckpt.tensors.size() == 1 && ckpt.tensors[0].name == "model.norm.weight";
  EXPECT_TRUE(ok) << "format, weight or the plain tensor not as the peer wrote them";
  if (w) {
    EXPECT_TRUE(ckpt.warnings.empty()) << ckpt.warnings.front();
    const float stored = format == io::checkpoint_format::compressed_tensors ? w->weight_scale.encode : w->weight_scale.decode;
    const bool same =
        w->data == data && w->scales == scales && std::bit_cast<std::uint32_t>(stored) == std::bit_cast<std::uint32_t>(tensor_scale);
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
  return f.finish() && ok;
}

const bool layout_registered =
    golden::register_check("checkpoint_layout modelopt",
                           [](const nlohmann::json& c) { return check_layout_case(c, io::checkpoint_format::modelopt); }) &&
    golden::register_check("checkpoint_layout torchao",
                           [](const nlohmann::json& c) { return check_layout_case(c, io::checkpoint_format::torchao); }) &&
    golden::register_check("checkpoint_layout compressed_tensors",
                           [](const nlohmann::json& c) { return check_layout_case(c, io::checkpoint_format::compressed_tensors); });

TEST(GoldenCheckpointLayout, ModelOptFileReadsBackToThePeersBits) { golden::check_every_case("checkpoint_layout modelopt"); }
TEST(GoldenCheckpointLayout, TorchaoFileReadsBackToThePeersBits) { golden::check_every_case("checkpoint_layout torchao"); }
TEST(GoldenCheckpointLayout, CompressedTensorsFileReadsBackToThePeersBits) {
  golden::check_every_case("checkpoint_layout compressed_tensors");
}

}  // namespace golden_flavor_test
}  // namespace
}  // namespace nvfp4
