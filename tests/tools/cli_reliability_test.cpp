// End-to-end tests of the CLI against issue 34's bad-input and fault campaign: JSON nested 10^5
// levels in a header crashed every reading command (now status 18 and a short message), a 10 MB
// dtype was echoed whole, 10^5 tensors took minutes, a `convert` / `pack` into an existing
// checkpoint directory stopped by the file size limit left new shards beside old ones, files were
// written that the tool then refused to read (torchao's NaN scales for zeros, RHT or TE-ceil MX of
// FLT_MAX), float64 1e300 was "Inf", denormal-only input gave "SQNR 0.00 dB" silently, and "cannot
// open" gave no reason. Each case here failed before the fix.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cli_fixture.hpp"
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

std::string nested(int depth) { return std::string(static_cast<std::size_t>(depth), '[') + std::string(static_cast<std::size_t>(depth), ']'); }

TEST_F(CliReliability, DeepJsonNestingIsRefusedByEveryReaderWithAShortMessage) {
  write_header("shape.safetensors", R"({"w":{"dtype":"F32","shape":)" + nested(100'000) + R"(,"data_offsets":[0,0]}})");
  write_header("offsets.safetensors", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[)" + nested(50'000) + R"(,0]}})");
  for (const std::string file : {"shape.safetensors", "offsets.safetensors"}) {
    for (const std::string& command : {"inspect " + q(file), "dequantize " + q(file) + " " + q("out.npy"), "stats " + q(file) + " " + q(file),
                                       "convert " + q(file) + " " + q("out_dir") + " --to modelopt", "diff " + q(file) + " " + q(file),
                                       "gemm " + q(file) + " " + q(file)}) {
      const auto r = run(command);
      EXPECT_EQ(r.status, 18) << command << "\n" << r.err.substr(0, 500);
      EXPECT_LT(r.err.size(), 1000u) << command;
      EXPECT_NE(r.err.find("deeper than 64 levels"), std::string::npos) << command << "\n" << r.err.substr(0, 500);
      EXPECT_LT(r.seconds, 30.0);
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

TEST_F(CliReliability, ManyTensorsAreHandledInSeconds) {
  // 100,000 empty tensors (7 MB of header): quadratic code took minutes on each command.
  std::string json = "{";
  for (int i = 0; i < 100'000; ++i)
    json += (i ? "," : "") + std::string("\"model.layers.") + std::to_string(i) + R"(.t":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
  write_header("many.safetensors", json + "}");
  for (const std::string& command : {"inspect " + q("many.safetensors"), "diff " + q("many.safetensors") + " " + q("many.safetensors"),
                                     "convert " + q("many.safetensors") + " " + q("many_dir") + " --to modelopt",
                                     "convert " + q("many.safetensors") + " " + q("many.gguf") + " --to gguf"}) {
    const auto r = run(command);
    EXPECT_EQ(r.status, 0) << command << "\n" << r.err.substr(0, 500);
    EXPECT_LT(r.seconds, 30.0) << command;
  }
  // 5,000 quantized weights: a name lookup per weight, and a directory scan per file written,
  // made inspect, dequantize --all and sharded writes quadratic (5,000: 16 s for dequantize
  // --all; 10,000: 17 s to inspect).
  io::safetensors_file weights;
  const std::vector<float> row(16, 1.0f);
  const auto one = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(row.data(), 1, 16));
  for (int i = 0; i < 5'000; ++i) io::add_quantized_tensor(weights, "model.layers." + std::to_string(i) + ".w", one);
  io::write_safetensors(path("weights.safetensors"), weights);
  for (const std::string& command : {"inspect " + q("weights.safetensors"), "dequantize " + q("weights.safetensors") + " " + q("all") + " --all",
                                     "convert " + q("weights.safetensors") + " " + q("sharded") + " --to modelopt --max-shard-size 4000",
                                     "inspect " + q("sharded")}) {
    const auto r = run(command);
    EXPECT_EQ(r.status, 0) << command << "\n" << r.err.substr(0, 500);
    EXPECT_LT(r.seconds, 10.0) << command;
  }
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
  ASSERT_EQ(run("pack " + q("src2") + " layer0=" + q("v.npy") + " layer1=" + q("v.npy") + " layer2=" + q("v.npy") + " zbig=" + q("big.npy")).status, 0);
  const auto r = run("convert " + q("src2") + " " + q("ckpt") + " --to modelopt --force --max-shard-size 9000", "ulimit -f 24;");
  EXPECT_EQ(r.status, 17) << r.err;
  EXPECT_EQ(snapshot("ckpt"), before);
  EXPECT_TRUE(temporaries().empty());
  EXPECT_EQ(run("inspect " + q("ckpt")).status, 0);
  // pack straight into it, stopped the same way.
  const auto p = run("pack " + q("ckpt") + " --force layer0=" + q("v.npy") + " zbig=" + q("big.npy") + " --max-shard-size 9000", "ulimit -f 24;");
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
  // 2^40 empty rows through every flavor: at once, also in the -O1 sanitizer build.
  io::npy_array empty;
  empty.dtype = io::npy_dtype::float32;
  empty.shape = {std::int64_t{1} << 40, 0};
  io::write_npy(path("empty.npy"), empty);
  for (const std::string flavor : {"modelopt", "torchao", "compressed_tensors", "ggml"}) {
    const auto e = run("quantize " + q("empty.npy") + " " + q("empty.safetensors") + " --force --flavor " + flavor);
    EXPECT_LT(e.seconds, 10.0) << flavor;
  }
}

}  // namespace
}  // namespace nvfp4::test
