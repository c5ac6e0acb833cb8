// End-to-end tests of the CLI against issue 34's bad-input and fault campaign: JSON nested 10^5
// levels in a header crashed every reading command (now status 18 and a short message), a 10 MB
// dtype was echoed whole, 10^5 tensors took minutes, a `convert` / `pack` into an existing
// checkpoint directory stopped by the file size limit left new shards beside old ones, files were
// written that the tool then refused to read (torchao's NaN scales for zeros, RHT or TE-ceil MX of
// FLT_MAX), float64 1e300 was "Inf", denormal-only input gave "SQNR 0.00 dB" silently, and "cannot
// open" gave no reason. Each case here failed before the fix. Issue 39's cases follow: convert
// wrote scales its readers refuse, lying configurations passed through, path errors came out raw
// (exit 1, a loop of links said "no such file"), a FIFO beside a checkpoint blocked --force, a
// 0-d array came back [1, 1], and inspect / dequantize held whole files and float copies.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cli_fixture.hpp"
#include "nvfp4/io/gguf.hpp"
#include "nvfp4/io/npy.hpp"
#include "nvfp4/io/quantized_checkpoint.hpp"
#include "nvfp4/scaling/quantize.hpp"

namespace nvfp4::test {
namespace {

class CliReliability : public Cli {
 protected:
  /// A safetensors file whose header is `json` (padded), with no data buffer.
  void write_header(const std::string& name, std::string json) const {
    json.append((8 - json.size() % 8) % 8, ' ');
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>(static_cast<std::uint64_t>(json.size()) >> (8 * i));
    write_raw(name, bytes + json);
  }
  void write_floats(const std::string& name, std::int64_t rows, std::int64_t cols, float value) const {
    const std::vector<float> v(static_cast<std::size_t>(rows * cols), value);
    io::write_npy(path(name), io::make_float32_array(v, {rows, cols}));
  }
  /// Every file under `dir` (relative name -> bytes).
  std::map<std::string, std::string> snapshot(const std::string& dir) const {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(path(dir)))
      if (e.is_regular_file()) out[fs::relative(e.path(), path(dir)).string()] = slurp(e.path());
    return out;
  }
  /// Names in the test directory that look like our temporaries.
  std::vector<std::string> temporaries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().find(".nvfp4-tmp.") != std::string::npos) out.push_back(e.path().filename().string());
    return out;
  }
};

std::string nested(int depth) {
  return std::string(static_cast<std::size_t>(depth), '[') + std::string(static_cast<std::size_t>(depth), ']');
}

TEST_F(CliReliability, DeepJsonNestingIsRefusedByEveryReaderWithAShortMessage) {
  write_header("shape.safetensors", R"({"w":{"dtype":"F32","shape":)" + nested(100'000) + R"(,"data_offsets":[0,0]}})");
  write_header("offsets.safetensors", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[)" + nested(50'000) + R"(,0]}})");
  for (const std::string file : {"shape.safetensors", "offsets.safetensors"}) {
    for (const std::string& command : {"inspect " + q(file), "dequantize " + q(file) + " " + q("out.npy"),
                                       "stats " + q(file) + " " + q(file), "convert " + q(file) + " " + q("out_dir") + " --to modelopt",
                                       "diff " + q(file) + " " + q(file), "gemm " + q(file) + " " + q(file)}) {
      const auto r = run(command);
      EXPECT_EQ(r.status, 18) << command << "\n" << r.err.substr(0, 500);
      EXPECT_LT(r.err.size(), 1000u) << command;
      EXPECT_NE(r.err.find("deeper than 64 levels"), std::string::npos) << command << "\n" << r.err.substr(0, 500);
    }
  }
  EXPECT_FALSE(fs::exists(path("out.npy")));
  EXPECT_FALSE(fs::exists(path("out_dir")));
  EXPECT_TRUE(temporaries().empty());
}

TEST_F(CliReliability, LongFileContentIsNotEchoedWhole) {
  write_header("dtype.safetensors", R"({"w":{"dtype":")" + std::string(10'000'000, 'X') + R"(","shape":[0],"data_offsets":[0,0]}})");
  const auto r = run("inspect " + q("dtype.safetensors"));
  EXPECT_EQ(r.status, 19) << r.err.substr(0, 500);
  EXPECT_LT(r.err.size(), 1000u);
  EXPECT_NE(r.err.find("(10000000 bytes)"), std::string::npos) << r.err.substr(0, 500);
}

TEST_F(CliReliability, ManyTensorsComeThroughEveryCommandWhole) {
  // 100,000 empty tensors (7 MB of header) and 5,000 quantized weights: quadratic code took
  // minutes on each command (a JSON parse, a name lookup per weight, a directory scan per file
  // written). The work's linearity is checked where it can be counted, in-process
  // (io/json_limits_test.cpp counts the entries each JSON lookup scans); here every command must
  // finish and give the whole answer: each tensor listed, compared, converted and read back.
  constexpr int n = 100'000;
  std::string json = "{";
  for (int i = 0; i < n; ++i)
    json += (i ? "," : "") + std::string("\"model.layers.") + std::to_string(i) + R"(.t":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
  write_header("many.safetensors", json + "}");
  const auto tensors_listed = [&](const std::string& file) {
    const auto r = run("inspect " + q(file) + " --json");
    EXPECT_EQ(r.status, 0) << file << "\n" << r.err.substr(0, 500);
    return r.status == 0 ? nlohmann::ordered_json::parse(r.out) : nlohmann::ordered_json::object();
  };
  auto listed = tensors_listed("many.safetensors");
  ASSERT_EQ(listed["tensors"].size(), static_cast<std::size_t>(n));
  EXPECT_EQ(listed["tensors"][n - 1]["name"], "model.layers." + std::to_string(n - 1) + ".t");
  const auto d = run("diff " + q("many.safetensors") + " " + q("many.safetensors"));
  EXPECT_EQ(d.status, 0) << d.err.substr(0, 500);
  EXPECT_NE(d.out.find("other tensors identical: " + std::to_string(n)), std::string::npos) << d.out.substr(0, 500);
  const auto to_modelopt = run("convert " + q("many.safetensors") + " " + q("many_dir") + " --to modelopt");
  ASSERT_EQ(to_modelopt.status, 0) << to_modelopt.err.substr(0, 500);
  EXPECT_EQ(io::read_safetensors(path("many_dir") / "model.safetensors").tensors.size(), static_cast<std::size_t>(n));
  const auto to_gguf = run("convert " + q("many.safetensors") + " " + q("many.gguf") + " --to gguf");
  ASSERT_EQ(to_gguf.status, 0) << to_gguf.err.substr(0, 500);
  EXPECT_EQ(io::read_gguf(path("many.gguf")).tensors.size(), static_cast<std::size_t>(n));
  // 5,000 quantized weights: listed, each dequantized to its own file with the library's values,
  // and written into shards of at most 4,000 bytes that read back whole.
  constexpr int weights_count = 5'000;
  io::safetensors_file weights;
  const std::vector<float> row(16, 1.0f);
  const auto one = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(row.data(), 1, 16));
  for (int i = 0; i < weights_count; ++i) io::add_quantized_tensor(weights, "model.layers." + std::to_string(i) + ".w", one);
  io::write_safetensors(path("weights.safetensors"), weights);
  EXPECT_EQ(tensors_listed("weights.safetensors")["quantized"].size(), static_cast<std::size_t>(weights_count));
  const auto all = run("dequantize " + q("weights.safetensors") + " " + q("all") + " --all");
  ASSERT_EQ(all.status, 0) << all.err.substr(0, 500);
  const auto expected = io::dequantize_tensor(io::read_safetensors(path("weights.safetensors")), "model.layers.0.w").values;
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(path("all"))) {
    ++files;
    EXPECT_EQ(io::read_npy(e.path()).as<float>(), expected) << e.path();
  }
  EXPECT_EQ(files, static_cast<std::size_t>(weights_count));
  const auto sharded = run("convert " + q("weights.safetensors") + " " + q("sharded") + " --to modelopt --max-shard-size 4000");
  ASSERT_EQ(sharded.status, 0) << sharded.err.substr(0, 500);
  EXPECT_GT(std::distance(fs::directory_iterator(path("sharded")), fs::directory_iterator{}), 10);  // shards, index, config
  EXPECT_EQ(tensors_listed("sharded")["quantized"].size(), static_cast<std::size_t>(weights_count));
}

TEST_F(CliReliability, ConvertIntoAnExistingDirectoryStoppedByTheFileSizeLimitLeavesItWhole) {
  write_floats("w.npy", 64, 256, 0.5f);
  ASSERT_EQ(run("pack " + q("src") + " layer0=" + q("w.npy") + " layer1=" + q("w.npy") + " layer2=" + q("w.npy")).status, 0);
  ASSERT_EQ(run("convert " + q("src") + " " + q("ckpt") + " --to modelopt --max-shard-size 9000").status, 0);
  const auto before = snapshot("ckpt");
  ASSERT_GT(before.size(), 3u);  // shards, the index, hf_quant_config.json
  // New content (other values): the scale shard and layer0..2's 8 KiB shards fit under the
  // 12 KiB limit (dash's ulimit counts 512-byte blocks), zbig's 16 KiB shard, written last,
  // does not: the old code left the new shards beside the old ones.
  write_floats("v.npy", 64, 256, -2.0f);
  write_floats("big.npy", 64, 512, 3.0f);
  ASSERT_EQ(run("pack " + q("src2") + " layer0=" + q("v.npy") + " layer1=" + q("v.npy") + " layer2=" + q("v.npy") + " zbig=" + q("big.npy"))
                .status,
            0);
  const auto r = run("convert " + q("src2") + " " + q("ckpt") + " --to modelopt --force --max-shard-size 9000", "ulimit -f 24;");
  EXPECT_EQ(r.status, 17) << r.err;
  EXPECT_EQ(snapshot("ckpt"), before);
  EXPECT_TRUE(temporaries().empty());
  EXPECT_EQ(run("inspect " + q("ckpt")).status, 0);
  // pack straight into it, stopped the same way.
  const auto p =
      run("pack " + q("ckpt") + " --force layer0=" + q("v.npy") + " zbig=" + q("big.npy") + " --max-shard-size 9000", "ulimit -f 24;");
  EXPECT_EQ(p.status, 17) << p.err;
  EXPECT_EQ(snapshot("ckpt"), before);
  EXPECT_TRUE(temporaries().empty());
  // A failed write to a new path leaves no directory.
  EXPECT_EQ(run("convert " + q("src2") + " " + q("fresh") + " --to modelopt --max-shard-size 9000", "ulimit -f 24;").status, 17);
  EXPECT_FALSE(fs::exists(path("fresh")));
  EXPECT_TRUE(temporaries().empty());
}

TEST_F(CliReliability, NothingIsWrittenThatTheToolCannotReadBack) {
  write_floats("zero.npy", 4, 32, 0.0f);
  write_floats("negzero.npy", 4, 32, -0.0f);
  write_floats("fmax.npy", 4, 32, FLT_MAX);
  struct bad_case {
    std::string args;
    int status;
    std::string message;
  };
  const std::vector<bad_case> cases = {
      {"zero.npy --flavor torchao", 11, "block scale 0 (row-major) is NaN"},
      {"negzero.npy --flavor torchao", 11, "block scale 0 (row-major) is NaN"},
      {"fmax.npy --rht", 20, "overflows"},
      {"fmax.npy --format mxfp4 --mx-rule te", 20, "the file would not read back"},
  };
  for (const auto& c : cases) {
    const auto r = run("quantize " + q(c.args.substr(0, c.args.find(' '))) + " " + q("out.safetensors") + c.args.substr(c.args.find(' ')));
    EXPECT_EQ(r.status, c.status) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(path("out.safetensors"))) << c.args;
  }
  // pack with torchao's rule: the same refusal, no checkpoint.
  const auto p = run("pack " + q("packed") + " layer0=" + q("zero.npy") + " --flavor torchao");
  EXPECT_EQ(p.status, 11) << p.err;
  EXPECT_NE(p.err.find("is NaN, which the checkpoint's readers refuse"), std::string::npos) << p.err;
  EXPECT_FALSE(fs::exists(path("packed")));
  EXPECT_TRUE(temporaries().empty());
  // The same tensors through the te rule and OCP's MX rule are written and read back.
  for (const std::string args : {"zero.npy", "fmax.npy --format mxfp4"}) {
    ASSERT_EQ(run("quantize " + q(args.substr(0, args.find(' '))) + " " + q("ok.safetensors") + " --force" +
                  (args.find(' ') == std::string::npos ? "" : args.substr(args.find(' '))))
                  .status,
              0)
        << args;
    EXPECT_EQ(run("dequantize " + q("ok.safetensors") + " " + q("ok.npy") + " --force").status, 0) << args;
  }
}

TEST_F(CliReliability, SmallerCases) {
  // A finite float64 beyond float's range is overflow, not "holds Inf".
  const std::vector<double> big(64, 1e300);
  io::npy_array a;
  a.dtype = io::npy_dtype::float64;
  a.shape = {2, 32};
  a.bytes.resize(big.size() * 8);
  std::memcpy(a.bytes.data(), big.data(), a.bytes.size());
  io::write_npy(path("big.npy"), a);
  const auto r = run("quantize " + q("big.npy") + " " + q("big.safetensors"));
  EXPECT_EQ(r.status, 20) << r.err;
  EXPECT_NE(r.err.find("finite but beyond float32's range"), std::string::npos) << r.err;
  // Denormal-only input quantizes to zeros (as on the GPU) and says so.
  write_floats("tiny.npy", 4, 32, 1e-40f);
  const auto t = run("quantize " + q("tiny.npy") + " " + q("tiny.safetensors"));
  EXPECT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.err.find("every non-zero element quantized to zero"), std::string::npos) << t.err;
  // "cannot open" says why.
  const auto m = run("stats " + q("missing.npy") + " " + q("missing.npy"));
  EXPECT_EQ(m.status, 17);
  EXPECT_NE(m.err.find("o such file or directory"), std::string::npos) << m.err;
  // 2^40 empty rows through every flavor: no loop over the rows (it would not finish), also in
  // the -O1 sanitizer build; the file written reads back with its shape.
  io::npy_array empty;
  empty.dtype = io::npy_dtype::float32;
  empty.shape = {std::int64_t{1} << 40, 0};
  io::write_npy(path("empty.npy"), empty);
  for (const std::string flavor : {"modelopt", "torchao", "compressed_tensors", "ggml"}) {
    const auto e = run("quantize " + q("empty.npy") + " " + q("empty.safetensors") + " --force --flavor " + flavor);
    EXPECT_EQ(e.status, 0) << flavor << "\n" << e.err.substr(0, 500);
    const auto back = run("dequantize " + q("empty.safetensors") + " " + q("empty_back.npy") + " --force");
    EXPECT_EQ(back.status, 0) << flavor << "\n" << back.err.substr(0, 500);
    if (back.status == 0) EXPECT_EQ(io::read_npy(path("empty_back.npy")).shape, empty.shape) << flavor;
  }
}

TEST_F(CliReliability, InspectAndDequantizeHoldOneTensorAtATime) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan's shadow memory and quarantine make resident memory no measure of the program's own";
#else
  // A 2048 x 16384 NVFP4 weight (16 MiB packed, 2 MiB of scales; 128 MiB dequantized) and a
  // 32 MiB U8 tensor. Issue 39: inspect read the file whole, copied every tensor, made a float
  // copy of the U8 one (4x) and of the dequantized weight (8x): 3.0 GB for a 288 MB file,
  // dequantize 6.6 GB. Now the peak is a small multiple of the largest tensor above the
  // program's own baseline.
  constexpr std::int64_t rows = 2048, cols = 16384;
  std::mt19937 random(7);
  io::safetensors_file big;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(rows * cols / 2)), scales(static_cast<std::size_t>(rows * cols / 16));
  for (auto& b : codes) b = static_cast<std::uint8_t>(random());
  for (auto& b : scales) b = static_cast<std::uint8_t>(0x20 + random() % 0x20);
  const float scale_2 = 0.01f;
  std::vector<std::uint8_t> scale_2_bytes(4);
  std::memcpy(scale_2_bytes.data(), &scale_2, 4);
  big.add({"W.weight", io::safetensors_dtype::u8, {rows, cols / 2}, std::move(codes)});
  big.add({"W.weight_scale", io::safetensors_dtype::f8_e4m3, {rows, cols / 16}, std::move(scales)});
  big.add({"W.weight_scale_2", io::safetensors_dtype::f32, {}, scale_2_bytes});
  io::write_safetensors(path("big.safetensors"), big);
  big = {};
  io::safetensors_file u8;
  u8.add({"x", io::safetensors_dtype::u8, {std::int64_t{32} << 20}, std::vector<std::uint8_t>(std::size_t{32} << 20, 7)});
  io::write_safetensors(path("u8.safetensors"), u8);
  u8 = {};
  io::safetensors_file tiny;
  tiny.add({"t", io::safetensors_dtype::u8, {1}, {1}});
  io::write_safetensors(path("tiny.safetensors"), tiny);
  const long baseline = run_measured({"inspect", path("tiny.safetensors").string()}).peak_rss_kib;
  const long mib = 1024;
  struct bounded_run {
    std::vector<std::string> args;
    long largest_tensor_mib;
  };
  for (const auto& c : {bounded_run{{"inspect", path("big.safetensors").string()}, 16},
                        bounded_run{{"dequantize", path("big.safetensors").string(), path("big.npy").string()}, 16},
                        bounded_run{{"inspect", path("u8.safetensors").string()}, 32}}) {
    const auto r = run_measured(c.args);
    EXPECT_EQ(r.status, 0) << c.args[0] << " " << c.args[1];
    EXPECT_LT(r.peak_rss_kib - baseline, 3 * c.largest_tensor_mib * mib)
        << c.args[0] << " " << c.args[1] << ": peak " << r.peak_rss_kib / mib << " MiB, baseline " << baseline / mib << " MiB";
  }
  // The values written are dequantize's own.
  const io::npy_array written = io::read_npy(path("big.npy"));
  const auto reference = io::dequantize_tensor(io::read_safetensors(path("big.safetensors")), "W");
  ASSERT_EQ(written.shape, reference.shape);
  EXPECT_EQ(std::memcmp(written.bytes.data(), reference.values.data(), written.bytes.size()), 0);
#endif
}

/// A GGUF file holding NVFP4 weight "w" [rows, 64] with the given scale bytes ([rows, 4]) and
/// tensor scale, written with the container writer alone (the checkpoint writer refuses bad
/// scales now), and `annotation` as the nvfp4_checkpoint key when given.
void write_raw_gguf(const fs::path& file, index_t rows, const std::vector<std::uint8_t>& scales, float decode,
                    const std::string& annotation = "") {
  io::gguf_file g;
  g.metadata.push_back(io::gguf_kv::u32_value("general.alignment", 32));
  if (!annotation.empty()) g.metadata.push_back(io::gguf_kv::string_value(io::checkpoint_annotation_key, annotation));
  io::gguf_tensor t;
  t.name = "w.weight";
  t.ne = {64, rows};
  t.type = io::ggml_type::nvfp4;
  t.bytes = io::encode_gguf_nvfp4(rows, 64, std::vector<std::uint8_t>(static_cast<std::size_t>(rows * 32), 0x22), scales);
  g.tensors.push_back(t);
  io::gguf_tensor s;
  s.name = "w.scale";
  s.ne = {1};
  s.type = io::ggml_type::f32;
  s.bytes.resize(4);
  std::memcpy(s.bytes.data(), &decode, 4);
  g.tensors.push_back(s);
  io::write_gguf(file, g);
}

TEST_F(CliReliability, ConvertRefusesWhatItsReadersRefuse) {
  struct bad_source {
    std::string name;
    std::vector<std::uint8_t> scales;
    float decode;
    int status;
    std::string message;
  };
  const std::vector<bad_source> sources = {
      {"nan.gguf", {0x38, 0x7F, 0x38, 0x38, 0x38, 0x38, 0x38, 0x38}, 0.01f, 18, "block scale (0, 1) is byte 127 (NaN)"},
      {"sign.gguf", {0x38, 0x38, 0x38, 0x38, 0x38, 0x38, 0xB8, 0x38}, 0.01f, 18, "block scale (1, 2) is byte 184 (sign bit set)"},
      {"negative.gguf", std::vector<std::uint8_t>(8, 0x38), -0.01f, 18, "the tensor scale (decode sense) is -0.00999999978"},
      {"overflow.gguf", std::vector<std::uint8_t>(8, 0x7E), std::ldexp(1.0f, 126), 20, "dequantized element (0, 0) overflows float"},
  };
  for (const auto& source : sources) {
    write_raw_gguf(path(source.name), 2, source.scales, source.decode);
    // The readers refuse it (with --accept-invalid-scales inspect reads the NaN and sign bits)...
    EXPECT_EQ(run("inspect " + q(source.name)).status, source.status) << source.name;
    // ...so no writer writes it: exit as the reader, the weight and the scale named, nothing written.
    for (const std::string to : {"modelopt", "compressed-tensors", "gguf", "torchao"}) {
      const std::string out = "out_" + to + (to == "gguf" ? ".gguf" : ".safetensors");
      const auto r = run("convert " + q(source.name) + " " + q(out) + " --to " + to);
      EXPECT_EQ(r.status, source.status) << source.name << " -> " << to << "\n" << r.err;
      EXPECT_NE(r.err.find("weight 'w': " + source.message), std::string::npos) << source.name << " -> " << to << "\n" << r.err;
      EXPECT_FALSE(fs::exists(path(out))) << source.name << " -> " << to;
    }
  }
  EXPECT_EQ(run("inspect " + q("nan.gguf") + " --accept-invalid-scales").status, 0);
  EXPECT_TRUE(temporaries().empty());
  // The same weight with valid scales converts and reads back.
  write_raw_gguf(path("good.gguf"), 2, std::vector<std::uint8_t>(8, 0x38), 0.01f);
  ASSERT_EQ(run("convert " + q("good.gguf") + " " + q("good") + " --to modelopt").status, 0);
  EXPECT_EQ(run("inspect " + q("good")).status, 0);
}

TEST_F(CliReliability, LyingConfigurationsAreRefusedAndNothingIsWritten) {
  // A GGUF annotation whose hf_quant_config says MXFP8 in groups of 7 for an NVFP4 weight: it was
  // copied into the ModelOpt output's hf_quant_config.json.
  const std::vector<std::uint8_t> scales(8, 0x38);
  write_raw_gguf(path("mxfp8.gguf"), 2, scales, 0.01f,
                 R"({"hf_quant_config": {"quantization": {"quant_algo": "MXFP8", "group_size": 7}}})");
  auto r = run("convert " + q("mxfp8.gguf") + " " + q("out") + " --to modelopt");
  EXPECT_EQ(r.status, 18) << r.err;
  EXPECT_NE(r.err.find("says quant_algo MXFP8, but weight 'w' is nvfp4"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("out")));
  write_raw_gguf(path("group7.gguf"), 2, scales, 0.01f,
                 R"({"hf_quant_config": {"quantization": {"quant_algo": "NVFP4", "group_size": 7}}})");
  r = run("convert " + q("group7.gguf") + " " + q("out") + " --to modelopt");
  EXPECT_EQ(r.status, 19) << r.err;
  EXPECT_NE(r.err.find("NVFP4 group_size 7 (16 is the format)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("out")));
  // exclude_modules naming a module stored quantized went into compressed-tensors' ignore list.
  write_floats("w.npy", 8, 64, 0.25f);
  ASSERT_EQ(run("pack " + q("mo") + " layer.q_proj=" + q("w.npy") + " layer.o_proj=" + q("w.npy")).status, 0);
  auto hf = nlohmann::json::parse(slurp(path("mo") / "hf_quant_config.json"));
  hf["quantization"]["exclude_modules"] = {"lm_head", "layer.o_*"};
  std::ofstream(path("mo") / "hf_quant_config.json") << hf.dump(4);
  r = run("convert " + q("mo") + " " + q("ct") + " --to compressed-tensors");
  EXPECT_EQ(r.status, 18) << r.err;
  EXPECT_NE(r.err.find("names 'layer.o_*', but module 'layer.o_proj' is stored quantized"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("ct")));
  // --fuse-scales over q / k / v of different in_features: one GEMM cannot take them.
  write_floats("k.npy", 8, 128, 0.5f);
  r = run("pack " + q("fused") + " a.q_proj=" + q("w.npy") + " a.k_proj=" + q("k.npy") + " --fuse-scales");
  EXPECT_EQ(r.status, 12) << r.err;
  EXPECT_NE(r.err.find("'a.q_proj' has 64 in_features but 'a.k_proj' has 128"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("fused")));
  EXPECT_TRUE(temporaries().empty());
}

TEST_F(CliReliability, PathsThatCannotBeOpenedGetTheSystemsReason) {
  write_floats("w.npy", 4, 32, 0.5f);
  // A module name over 255 bytes: NAME=FILE was tested as a path and threw a raw filesystem error.
  const std::string long_name(300, 'm');
  auto r = run("pack " + q("long") + " " + long_name + "=" + q("w.npy"));
  EXPECT_EQ(r.status, 0) << r.err;
  // A path longer than PATH_MAX, and a loop of symbolic links (it was "no such file").
  const std::string too_long = "'" + std::string(5000, 'x') + "'";
  fs::create_symlink("loop", path("loop"));
  struct failing {
    std::string args;
    std::string reason;
  };
  for (const auto& c :
       {failing{"inspect " + too_long, "File name too long"}, failing{"pack " + q("p1") + " " + too_long, "File name too long"},
        failing{"inspect " + q("loop"), "Too many levels of symbolic links"},
        failing{"pack " + q("p2") + " " + q("loop"), "Too many levels of symbolic links"},
        failing{"convert " + q("loop") + " " + q("p3") + " --to gguf", "Too many levels of symbolic links"},
        failing{"dequantize " + q("loop") + " " + q("p4.npy"), "Too many levels of symbolic links"}}) {
    r = run(c.args);
    EXPECT_EQ(r.status, 17) << c.args.substr(0, 60) << "\n" << r.err.substr(0, 300);
    EXPECT_NE(r.err.find(c.reason), std::string::npos) << c.args.substr(0, 60) << "\n" << r.err.substr(0, 300);
    EXPECT_EQ(r.err.find("filesystem error"), std::string::npos) << r.err.substr(0, 300);
  }
  for (const char* out : {"p1", "p2", "p3", "p4.npy"}) EXPECT_FALSE(fs::exists(path(out))) << out;
}

TEST_F(CliReliability, AFifoBesideACheckpointIsCarriedOverByForce) {
  write_floats("w.npy", 4, 32, 0.5f);
  ASSERT_EQ(run("pack " + q("ckpt") + " layer0=" + q("w.npy")).status, 0);
  ASSERT_EQ(::mkfifo(path("ckpt/pipe").c_str(), 0640), 0);
  fs::create_symlink("README", path("ckpt/link"));
  const auto r = run("pack " + q("ckpt") + " layer0=" + q("w.npy") + " --force");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(path("ckpt/pipe"))));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(path("ckpt/link"))));
  EXPECT_TRUE(temporaries().empty());
}

TEST_F(CliReliability, ZeroAndOneDimensionalArraysComeBackInTheirShape) {
  for (const auto& shape : {std::vector<std::int64_t>{}, std::vector<std::int64_t>{32}, std::vector<std::int64_t>{2, 3, 32}}) {
    std::vector<float> values(static_cast<std::size_t>(std::max<std::int64_t>(1, shape.empty() ? 1 : shape.size() == 1 ? 32 : 192)), 1.5f);
    io::write_npy(path("in.npy"), io::make_float32_array(values, shape));
    ASSERT_EQ(run("quantize " + q("in.npy") + " " + q("q.safetensors") + " --force").status, 0);
    ASSERT_EQ(run("dequantize " + q("q.safetensors") + " " + q("out.npy") + " --force").status, 0);
    const io::npy_array back = io::read_npy(path("out.npy"));
    EXPECT_EQ(back.shape, shape) << shape.size() << " dimensions";
    EXPECT_EQ(back.as<float>(), io::dequantize_tensor(io::read_safetensors(path("q.safetensors")), "W").values);
  }
}

TEST_F(CliReliability, StreamedJsonIsNlohmannsLayout) {
  // inspect --json prints each entry as it is made: the text must be exactly what dumping the
  // whole description gives.
  write_floats("w.npy", 4, 32, 0.5f);
  ASSERT_EQ(run("pack " + q("ckpt") + " a=" + q("w.npy") + " b=" + q("w.npy") + " --max-shard-size 64").status, 0);
  io::safetensors_file plain;
  plain.add({"x", io::safetensors_dtype::f32, {2}, std::vector<std::uint8_t>(8, 0)});
  io::write_safetensors(path("plain.safetensors"), plain);
  io::write_safetensors(path("empty.safetensors"), io::safetensors_file{});
  for (const std::string input : {"ckpt", "plain.safetensors", "empty.safetensors"}) {
    const auto r = run("inspect " + q(input) + " --json");
    ASSERT_EQ(r.status, 0) << input << "\n" << r.err;
    const auto parsed = nlohmann::ordered_json::parse(r.out);
    EXPECT_EQ(parsed.dump(2) + "\n", r.out) << input;
    EXPECT_EQ(parsed["checkpoint_format"], "modelopt");
  }
  const auto parsed = nlohmann::ordered_json::parse(run("inspect " + q("ckpt") + " --json").out);
  EXPECT_EQ(parsed["quantized"].size(), 2u);
  EXPECT_EQ(parsed["tensors"].size(), 6u);
  EXPECT_EQ(parsed["quantized"][0]["dequantized"]["count"], 128);
}

}  // namespace
}  // namespace nvfp4::test
