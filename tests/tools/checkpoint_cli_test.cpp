// End-to-end tests of `nvfp4 pack`, `nvfp4 convert`, `nvfp4 diff` and `nvfp4 quantize --flavor`:
// the built binary on files made here, its outputs checked against the library (bit for bit),
// and for every refusal its exit status, its message, and that nothing was written.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "nvfp4/io/checkpoint_formats.hpp"
#include "nvfp4/io/npy.hpp"
#include "nvfp4/scaling/quantizer_flavor.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {

namespace fs = std::filesystem;

class CheckpointCli : public nvfp4::test::temp_dir_test {
 protected:
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
  const auto expected = io::make_quantized_weight(
      "l0.q_proj", quantize_nvfp4_flavor(matrix_view<const float>::row_major(q.data(), 32, 64), quantizer_flavor::modelopt));
  EXPECT_EQ(w->data, expected.data);
  EXPECT_EQ(w->scales, expected.scales);
  EXPECT_EQ(w->weight_scale.decode, expected.weight_scale.decode);
  ASSERT_TRUE(w->input_scale.has_value());
  EXPECT_EQ(w->input_scale->decode, flavor_rules::modelopt_weight_scale_2(4.5f));
  const auto hf = io::read_json_file(p("model") + "/hf_quant_config.json");
  EXPECT_EQ(hf["quantization"]["exclude_modules"], nlohmann::ordered_json({"lm_head"}));
  EXPECT_EQ(c.ignore, std::vector<std::string>{"lm_head"});
}

TEST_F(CheckpointCli, PackOneFileWithInputScalesAndHfQuantConfigBeside) {
  // Issue 15 item 7: several weights in one ModelOpt-style file, each with its input_scale, and
  // hf_quant_config.json beside it; ModelOpt's own arithmetic (zero block -> scale 1.0,
  // weight_scale_2 = amax * fp32(1/2688), as its GPU division computes amax / 2688).
  auto a = save_weight("a.npy", 16, 64, 7);
  for (int c = 0; c < 16; ++c) a[static_cast<std::size_t>(c)] = 0.0f;  // row 0's first block is all zero
  a[100] = -8.25f;                                                     // the tensor amax
  io::write_npy(p("a.npy"), io::make_float32_array(a, {16, 64}));
  save_weight("b.npy", 32, 32, 8);
  std::string out;
  ASSERT_EQ(run("pack out.safetensors x.a_proj=a.npy x.b_proj=b.npy --flavor modelopt --input-amax x.a_proj=8.25 "
                "--input-amax x.b_proj=3 --ignore lm_head --hf-quant-config --quiet",
                &out),
            0)
      << out;
  const auto file = io::read_safetensors(p("out.safetensors"));
  const auto scalar_bits = [&](const std::string& name) {
    const auto* t = file.find(name);
    EXPECT_NE(t, nullptr) << name;
    if (!t) return std::uint32_t{0};
    EXPECT_EQ(t->dtype, io::safetensors_dtype::f32) << name;
    EXPECT_TRUE(t->shape.empty()) << name;  // a 0-D scalar, as ModelOpt stores it
    std::uint32_t bits = 0;
    std::memcpy(&bits, t->bytes.data(), 4);
    return bits;
  };
  const float inv_2688 = 1.0f / 2688.0f;
  EXPECT_EQ(scalar_bits("x.a_proj.weight_scale_2"), std::bit_cast<std::uint32_t>(8.25f * inv_2688));
  EXPECT_NE(8.25f * inv_2688, 8.25f / 2688.0f);  // the CPU's division would store the other value
  EXPECT_EQ(scalar_bits("x.a_proj.input_scale"), std::bit_cast<std::uint32_t>(8.25f * inv_2688));
  EXPECT_EQ(scalar_bits("x.b_proj.input_scale"), std::bit_cast<std::uint32_t>(3.0f * inv_2688));
  const auto* data = file.find("x.a_proj.weight");
  const auto* scale = file.find("x.a_proj.weight_scale");
  ASSERT_NE(data, nullptr);
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(data->dtype, io::safetensors_dtype::u8);
  EXPECT_EQ(data->shape, (std::vector<std::int64_t>{16, 32}));
  EXPECT_EQ(scale->dtype, io::safetensors_dtype::f8_e4m3);
  EXPECT_EQ(scale->shape, (std::vector<std::int64_t>{16, 4}));
  EXPECT_EQ(scale->bytes[0], 0x38);  // the zero block's scale is 1.0, not 0
  for (int i = 0; i < 8; ++i) EXPECT_EQ(data->bytes[static_cast<std::size_t>(i)], 0) << i;
  const auto hf = io::read_json_file(p("hf_quant_config.json"));
  EXPECT_EQ(hf["quantization"]["quant_algo"], "NVFP4");
  EXPECT_EQ(hf["quantization"]["group_size"], 16);
  EXPECT_EQ(hf["quantization"]["exclude_modules"], nlohmann::ordered_json({"lm_head"}));
  EXPECT_TRUE(hf["producer"].contains("name"));
  // Read back: both weights, bit for bit what the library's ModelOpt flavor makes.
  const auto c = io::read_checkpoint(p("out.safetensors"));
  ASSERT_EQ(c.weights.size(), 2u);
  const auto expected = io::make_quantized_weight(
      "x.a_proj", quantize_nvfp4_flavor(matrix_view<const float>::row_major(a.data(), 16, 64), quantizer_flavor::modelopt));
  EXPECT_EQ(c.find_weight("x.a_proj")->data, expected.data);
  EXPECT_EQ(c.find_weight("x.a_proj")->scales, expected.scales);
}

TEST_F(CheckpointCli, MalformedInputsAreRefusedAndNothingIsWritten) {
  save_weight("w.npy", 16, 64, 9);
  ASSERT_EQ(run("pack m.safetensors w=w.npy --quiet"), 0);
  ASSERT_EQ(run("convert m.safetensors g.gguf --to gguf --quiet"), 0);
  const auto st = io::read_file_bytes(p("m.safetensors"));
  const auto gg = io::read_file_bytes(p("g.gguf"));
  const auto save = [&](const std::string& name, const std::vector<std::uint8_t>& bytes) {
    std::ofstream(p(name), std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  };
  auto lying = st;
  lying[0] = 0xFF;  // the header length now runs past the end of the file
  auto dtype = st;
  const std::string text(st.begin(), st.end());
  const auto at = text.find("F8_E4M3");
  ASSERT_NE(at, std::string::npos);
  dtype[at + 5] = 'X';  // "F8_E4X3": same length, a dtype no safetensors writer knows
  auto magic = gg;
  magic[0] = 'X';
  auto future = gg;
  future[4] = 9;  // a version after 3: malformed, as ggml refuses it
  auto old = gg;
  old[4] = 1;  // version 1: a valid file ggml no longer reads
  struct bad_case {
    const char* name;
    std::vector<std::uint8_t> bytes;
    int status;
  };
  const std::vector<bad_case> cases = {
      {"truncated.safetensors", std::vector<std::uint8_t>(st.begin(), st.begin() + static_cast<std::ptrdiff_t>(st.size() - 7)), 18},
      {"lying.safetensors", lying, 18},
      {"dtype.safetensors", dtype, 19},
      {"magic.gguf", magic, 18},
      {"future.gguf", future, 18},
      {"old.gguf", old, 19},
      {"past_end.gguf", std::vector<std::uint8_t>(gg.begin(), gg.begin() + static_cast<std::ptrdiff_t>(gg.size() - 40)), 18},
  };
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.name);
    save(bad.name, bad.bytes);
    const std::string in = bad.name;
    const bool gguf = in.ends_with(".gguf");
    const auto before = std::distance(fs::directory_iterator(dir_), fs::directory_iterator());
    std::string out;
    EXPECT_EQ(run("convert " + in + " out" + (gguf ? " --to modelopt" : ".gguf --to gguf"), &out), bad.status) << out;
    EXPECT_NE(out.find(in), std::string::npos) << "names the file: " << out;
    EXPECT_FALSE(fs::exists(p("out")));
    EXPECT_FALSE(fs::exists(p("out.gguf")));
    EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), before) << "no temporary left";
    EXPECT_EQ(run("diff " + in + " m.safetensors", &out), bad.status) << out;
  }
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
  ASSERT_EQ(run("pack out.safetensors bf16.safetensors --ignore 'lm_*' --flavor compressed_tensors --to compressed-tensors", &out), 0)
      << out;
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
    ASSERT_EQ(run("convert " + mid + " back.safetensors --to modelopt --quiet --force", &out), 0) << out;
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
  // A NaN scale byte: --strict refuses it as a warning; without --strict the writer refuses it
  // too, since the readers would refuse the output (issue 39 item 10: it was written, exit 0).
  // The source is laid out by modelopt_to_safetensors, which checks nothing (write_checkpoint
  // refuses such a weight now).
  auto c = io::read_checkpoint(p("m.safetensors"));
  c.weights[0].scales[0] = 0x7F;
  io::write_safetensors(p("nan.safetensors"), io::modelopt_to_safetensors(c, /*annotate_configs=*/true));
  EXPECT_EQ(run("convert nan.safetensors s.gguf --to gguf --strict", &out), 18);
  EXPECT_NE(out.find("NaN"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(p("s.gguf")));
  EXPECT_EQ(run("convert nan.safetensors s.gguf --to gguf", &out), 18) << out;
  EXPECT_NE(out.find("weight 'a.q': block scale (0, 0) is byte 127 (NaN)"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(p("s.gguf")));
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
