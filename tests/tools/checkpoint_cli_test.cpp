// End-to-end tests of `nvfp4 pack`, `nvfp4 convert`, `nvfp4 diff` and `nvfp4 quantize --flavor`:
// the built binary on files made here, its outputs checked against the library (bit for bit),
// and for every refusal its exit status, its message, and that nothing was written.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "nvfp4/io/checkpoint_formats.hpp"
#include "nvfp4/io/npy.hpp"
#include "nvfp4/scaling/quantizer_flavor.hpp"

namespace nvfp4 {
namespace {

namespace fs = std::filesystem;

class CheckpointCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nvfp4_ckpt_cli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string p(const std::string& name) const { return (dir_ / name).string(); }

  /// Runs the CLI with `args` in the test directory; returns the exit status, stdout + stderr in `output`.
  int run(const std::string& args, std::string* output = nullptr) const {
    const std::string log = p("log.txt");
    const std::string command = "cd '" + dir_.string() + "' && '" + NVFP4_CLI_PATH + "' " + args + " >'" + log + "' 2>&1";
    const int raw = std::system(command.c_str());
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    if (output) *output = text.str();
    fs::remove(log);
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  }

  std::vector<float> save_weight(const std::string& name, index_t rows, index_t cols, unsigned seed) const {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> x(static_cast<std::size_t>(rows * cols));
    for (auto& v : x) v = normal(rng);
    io::write_npy(p(name), io::make_float32_array(x, {rows, cols}));
    return x;
  }

  fs::path dir_;
};

TEST_F(CheckpointCli, PackWritesModelOptWithInputScaleAndConfig) {
  const auto q = save_weight("q.npy", 32, 64, 1);
  save_weight("o.npy", 64, 32, 2);
  std::string out;
  ASSERT_EQ(run("pack model l0.q_proj=q.npy l0.o_proj=o.npy --flavor modelopt --input-amax l0.q_proj=4.5 --ignore lm_head", &out), 0)
      << out;
  const auto c = io::read_checkpoint(p("model"));
  ASSERT_EQ(c.weights.size(), 2u);
  const auto* w = c.find_weight("l0.q_proj");
  ASSERT_NE(w, nullptr);
  // Bit for bit what the library's ModelOpt flavor makes.
  const auto expected = io::make_quantized_weight("l0.q_proj", quantize_nvfp4_flavor(matrix_view<const float>::row_major(q.data(), 32, 64),
                                                                                     quantizer_flavor::modelopt));
  EXPECT_EQ(w->data, expected.data);
  EXPECT_EQ(w->scales, expected.scales);
  EXPECT_EQ(w->weight_scale.decode, expected.weight_scale.decode);
  ASSERT_TRUE(w->input_scale.has_value());
  EXPECT_EQ(w->input_scale->decode, flavor_rules::modelopt_weight_scale_2(4.5f));
  const auto hf = io::read_json_file(p("model") + "/hf_quant_config.json");
  EXPECT_EQ(hf["quantization"]["exclude_modules"], nlohmann::ordered_json({"lm_head"}));
  EXPECT_EQ(c.ignore, std::vector<std::string>{"lm_head"});
}

TEST_F(CheckpointCli, PackQuantizesAnUnquantizedCheckpoint) {
  io::safetensors_file model;
  std::vector<std::uint8_t> bf16_bytes(2 * 32 * 64);
  for (std::size_t i = 0; i < bf16_bytes.size(); i += 2) bf16_bytes[i + 1] = 0x3c;  // 0.0078125
  model.add({"model.layers.0.mlp.up_proj.weight", io::safetensors_dtype::bf16, {32, 64}, bf16_bytes});
  model.add({"lm_head.weight", io::safetensors_dtype::bf16, {32, 64}, bf16_bytes});
  model.add({"model.norm.weight", io::safetensors_dtype::bf16, {64}, std::vector<std::uint8_t>(128, 0x3f)});
  io::write_safetensors(p("bf16.safetensors"), model);
  std::string out;
  ASSERT_EQ(run("pack out.safetensors bf16.safetensors --ignore lm_head --flavor compressed_tensors --to compressed-tensors", &out), 0) << out;
  const auto c = io::read_checkpoint(p("out.safetensors"));
  ASSERT_EQ(c.weights.size(), 1u);
  EXPECT_EQ(c.weights[0].name, "model.layers.0.mlp.up_proj");
  EXPECT_EQ(c.tensors.size(), 2u);  // lm_head kept unquantized, the norm kept
}

TEST_F(CheckpointCli, ConvertRoundTripsAndRefusesByName) {
  save_weight("q.npy", 32, 64, 3);
  save_weight("n.npy", 8, 48, 4);
  ASSERT_EQ(run("pack m.safetensors a.q=q.npy --quiet"), 0);
  const auto original = io::read_file_bytes(p("m.safetensors"));
  for (const char* to : {"compressed-tensors", "gguf", "torchao"}) {
    SCOPED_TRACE(to);
    const std::string mid = std::string("mid_") + to + (std::string(to) == "gguf" ? ".gguf" : ".safetensors");
    std::string out;
    ASSERT_EQ(run("convert m.safetensors " + mid + " --to " + to, &out), 0) << out;
    ASSERT_EQ(run("convert " + mid + " back.safetensors --to modelopt --quiet", &out), 0) << out;
    EXPECT_EQ(io::read_file_bytes(p("back.safetensors")), original);
  }
  // K = 48: GGUF's NVFP4 blocks hold 64; refused by name, exit 12 (shape_mismatch), nothing written.
  ASSERT_EQ(run("pack n.safetensors narrow=n.npy --quiet"), 0);
  std::string out;
  EXPECT_EQ(run("convert n.safetensors n.gguf --to gguf", &out), 12);
  EXPECT_NE(out.find("'narrow' has 48 columns"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(p("n.gguf")));
  EXPECT_EQ(run("convert n.safetensors x --to nothing", &out), 2);
  EXPECT_EQ(run("convert missing.safetensors x.gguf --to gguf", &out), 17);
  // --strict turns warnings (here: a NaN scale byte) into a refusal.
  auto c = io::read_checkpoint(p("m.safetensors"));
  c.weights[0].scales[0] = 0x7F;
  io::write_checkpoint(p("nan.safetensors"), io::checkpoint_format::modelopt, c);
  EXPECT_EQ(run("convert nan.safetensors s.gguf --to gguf --strict", &out), 18);
  EXPECT_NE(out.find("NaN"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(p("s.gguf")));
  EXPECT_EQ(run("convert nan.safetensors s.gguf --to gguf", &out), 0) << out;
  EXPECT_NE(out.find("warning"), std::string::npos);
}

TEST_F(CheckpointCli, DiffReportsFlavorsAndCheckpoints) {
  save_weight("w.npy", 64, 128, 5);
  std::string out;
  ASSERT_EQ(run("diff w.npy --flavors te,modelopt,ggml --json report.json", &out), 0) << out;
  EXPECT_NE(out.find("te vs modelopt"), std::string::npos) << out;
  EXPECT_NE(out.find("te vs ggml"), std::string::npos) << out;
  std::ifstream in(p("report.json"));
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j["comparisons"].size(), 2u);
  EXPECT_EQ(j["comparisons"][1]["b"], "ggml");
  EXPECT_TRUE(j["comparisons"][1]["tensor_scale"]["differs"].get<bool>());  // ggml has no tensor scale
  ASSERT_EQ(run("pack a.safetensors w=w.npy --quiet"), 0);
  ASSERT_EQ(run("pack b.safetensors w=w.npy --flavor modelopt --quiet"), 0);
  ASSERT_EQ(run("diff a.safetensors b.safetensors --json -", &out), 0) << out;
  const auto d = nlohmann::json::parse(out);
  EXPECT_EQ(d["weights"][0]["name"], "w");
  EXPECT_EQ(run("diff w.npy --flavors te", &out), 2);
}

TEST_F(CheckpointCli, QuantizeFlavorIsTheLibrarysFlavor) {
  const auto x = save_weight("w.npy", 16, 64, 6);
  std::string out;
  ASSERT_EQ(run("quantize w.npy w.safetensors --flavor torchao --quiet", &out), 0) << out;
  const auto c = io::read_checkpoint(p("w.safetensors"));
  const auto expected = quantize_nvfp4_flavor(matrix_view<const float>::row_major(x.data(), 16, 64), quantizer_flavor::torchao);
  ASSERT_EQ(c.weights.size(), 1u);
  EXPECT_EQ(c.weights[0].scales, io::make_quantized_weight("W", expected).scales);
  EXPECT_EQ(run("quantize w.npy x.safetensors --flavor modelopt --mode 2d", &out), 2);
  EXPECT_EQ(run("quantize w.npy x.safetensors --flavor nobody", &out), 2);
  EXPECT_FALSE(fs::exists(p("x.safetensors")));
}

}  // namespace
}  // namespace nvfp4
