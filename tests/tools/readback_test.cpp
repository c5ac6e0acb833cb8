// End-to-end tests of "everything it writes, it reads" (issue 30): every checkpoint `nvfp4 pack`
// and `nvfp4 convert` write, in each format, as a file or a (sharded) directory, is read back by
// inspect, dequantize (one tensor and --all), stats and diff with the values the library's own
// quantizer gives the source; files of other tools are named; outputs never clobber inputs and
// need --force to replace a file; pack's default exclusions, --include / --exclude,
// --fuse-scales and its warnings.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <random>

#include "cli_fixture.hpp"
#include "nvfp4/io/checkpoint_formats.hpp"
#include "nvfp4/io/file_format.hpp"
#include "nvfp4/io/npy.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"
#include "nvfp4/scaling/quantizer_flavor.hpp"

namespace nvfp4 {
namespace {

using test::Cli;
namespace fs = std::filesystem;

constexpr index_t kRows = 48, kCols = 128;  // K a multiple of 64: every format holds it

std::vector<float> normal_matrix(index_t rows, index_t cols, unsigned seed, float sigma = 0.02f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (auto& v : x) v = normal(rng);
  return x;
}

std::vector<float> read_floats(const fs::path& p) { return io::to_float32(io::read_npy(p)); }

/// What the library's quantizer makes of x: the values every reader must give back.
std::vector<float> expected_values(const std::vector<float>& x, index_t rows, index_t cols, bool mx = false,
                                   std::optional<float> shared_amax = std::nullopt) {
  const auto v = matrix_view<const float>::row_major(x.data(), rows, cols);
  if (mx) return dequantize(quantize<mxfp4>(v));
  return dequantize(quantize_nvfp4_flavor(v, quantizer_flavor::te, shared_amax));
}

class Readback : public Cli {
 protected:
  std::vector<float> save(const std::string& name, unsigned seed, float sigma = 0.02f) const {
    auto x = normal_matrix(kRows, kCols, seed, sigma);
    io::write_npy(path(name), io::make_float32_array(x, {kRows, kCols}));
    return x;
  }
  /// Dequantizes weight `w` of checkpoint `ckpt` with the CLI and returns its values.
  std::vector<float> cli_values(const std::string& ckpt, const std::string& w) const {
    const auto r = run("dequantize " + q(ckpt) + " " + q("v.npy") + " --force --name " + w);
    EXPECT_EQ(r.status, 0) << r.err;
    return read_floats(path("v.npy"));
  }
};

TEST_F(Readback, EveryFormatPackAndConvertWriteIsReadBackWithTheSourceValues) {
  const auto a = save("a.npy", 1), b = save("b.npy", 2, 0.5f);
  const auto want_a = expected_values(a, kRows, kCols), want_b = expected_values(b, kRows, kCols);
  struct target {
    std::string out, to, description;
  };
  const std::vector<target> targets = {
      {"mo.safetensors", "modelopt", "ModelOpt (safetensors file)"},
      {"mo_dir", "modelopt", "ModelOpt (directory)"},
      {"mo_sharded", "modelopt --max-shard-size 4000", "ModelOpt (sharded directory)"},
      {"ct.safetensors", "compressed-tensors", "compressed-tensors (safetensors file)"},
      {"ct_dir", "compressed-tensors", "compressed-tensors (directory)"},
      {"ct_sharded", "compressed-tensors --max-shard-size 4000", "compressed-tensors (sharded directory)"},
      {"m.gguf", "gguf", "GGUF"},
      {"ao.safetensors", "torchao", "torchao (safetensors file)"},
  };
  for (const bool via_convert : {false, true}) {
    for (const auto& t : targets) {
      SCOPED_TRACE(t.out + (via_convert ? " (convert)" : " (pack)"));
      fs::remove_all(path(t.out));
      if (via_convert) {
        ASSERT_EQ(run("pack " + q("src.safetensors") + " l.a=" + q("a.npy") + " l.b=" + q("b.npy") + " --quiet --force").status, 0);
        const auto r = run("convert " + q("src.safetensors") + " " + q(t.out) + " --to " + t.to);
        ASSERT_EQ(r.status, 0) << r.err;
      } else {
        const auto r = run("pack " + q(t.out) + " l.a=" + q("a.npy") + " l.b=" + q("b.npy") + " --quiet --to " + t.to);
        ASSERT_EQ(r.status, 0) << r.err;
      }
      EXPECT_EQ(io::detect_file(path(t.out)).description, t.description);
      EXPECT_EQ(cli_values(t.out, "l.a"), want_a);
      EXPECT_EQ(cli_values(t.out, "l.b"), want_b);
      // inspect names the format and lists both weights.
      const auto info = run("inspect --json " + q(t.out));
      ASSERT_EQ(info.status, 0) << info.err;
      const auto j = nlohmann::json::parse(info.out);
      EXPECT_EQ(j["format"], t.description);
      ASSERT_EQ(j["quantized"].size(), 2u);
      // stats against the source: the quantization error, and exact against the expected values.
      io::write_npy(path("want_b.npy"), io::make_float32_array(want_b, {kRows, kCols}));
      const auto s = run("stats --json " + q("want_b.npy") + " " + q(t.out) + " --name l.b");
      ASSERT_EQ(s.status, 0) << s.err;
      const auto sj = nlohmann::json::parse(s.out);
      EXPECT_TRUE(sj["exact"].get<bool>());
      EXPECT_EQ(sj["approx_format"], t.description);
      // --all, into safetensors and into a directory of .npy files.
      ASSERT_EQ(run("dequantize " + q(t.out) + " " + q("all.safetensors") + " --all --force --quiet").status, 0);
      const auto all = io::read_safetensors(path("all.safetensors"));
      std::vector<float> got(want_a.size());
      std::memcpy(got.data(), all.at("l.a.weight").bytes.data(), got.size() * 4);
      EXPECT_EQ(got, want_a);
      fs::remove_all(path("all_npy"));
      ASSERT_EQ(run("dequantize " + q(t.out) + " " + q("all_npy") + " --all --quiet").status, 0);
      EXPECT_EQ(read_floats(path("all_npy") / "l.b.weight.npy"), want_b);
      // diff against the source: the same bits.
      if (via_convert) {
        const auto d = run("diff " + q("src.safetensors") + " " + q(t.out) + " --json -");
        ASSERT_EQ(d.status, 0) << d.err;
        const auto dj = nlohmann::json::parse(d.out);
        EXPECT_EQ(dj["format_b"], t.description);
        for (const auto& w : dj["weights"]) {
          EXPECT_EQ(w["values_differ"], 0) << w.dump();
          EXPECT_EQ(w["codes_differ"], 0) << w.dump();
        }
      }
    }
  }
  // MXFP4 into the formats that hold it.
  for (const std::string& to : {std::string("modelopt"), std::string("gguf")}) {
    const std::string out = to == "gguf" ? "mx.gguf" : "mx.safetensors";
    ASSERT_EQ(run("pack " + q(out) + " l.a=" + q("a.npy") + " --format mxfp4 --quiet --to " + to).status, 0);
    EXPECT_EQ(cli_values(out, "l.a"), expected_values(a, kRows, kCols, /*mx=*/true)) << to;
  }
  // MXFP8 in ModelOpt's layout (quant_algo MXFP8), a file and a directory.
  for (const std::string out : {"mx8.safetensors", "mx8_dir"}) {
    ASSERT_EQ(run("pack " + q(out) + " l.a=" + q("a.npy") + " l.b=" + q("b.npy") + " --format mxfp8 --quiet").status, 0) << out;
    EXPECT_EQ(cli_values(out, "l.b"), dequantize(quantize<mxfp8>(matrix_view<const float>::row_major(b.data(), kRows, kCols)))) << out;
  }
  const auto hf = nlohmann::json::parse(test::slurp(path("mx8_dir") / "hf_quant_config.json"));
  EXPECT_EQ(hf["quantization"]["quant_algo"], "MXFP8");
  EXPECT_EQ(run("pack " + q("mx8.gguf") + " l.a=" + q("a.npy") + " --format mxfp8 --to gguf").status, 2);
  // Per-tensor FP8 in ModelOpt's layout (quant_algo FP8): TE's current scaling, read back.
  ASSERT_EQ(run("pack " + q("f8") + " l.a=" + q("a.npy") + " l.b=" + q("b.npy") + " --format fp8 --input-amax l.b=3 --quiet").status, 0);
  const auto f8 = quantize_fp8_current(matrix_view<const float>::row_major(b.data(), kRows, kCols), fp8_format::e4m3);
  std::vector<float> want_f8(b.size());
  dequantize(f8, matrix_view<float>::row_major(want_f8.data(), kRows, kCols));
  EXPECT_EQ(cli_values("f8", "l.b"), want_f8);
  const auto f8_file = io::read_safetensors(path("f8") / "model.safetensors");
  EXPECT_EQ(f8_file.at("l.b.weight").bytes, std::vector<std::uint8_t>(f8.codes().begin(), f8.codes().end()));
  float stored_scale = 0, stored_input = 0;
  std::memcpy(&stored_scale, f8_file.at("l.b.weight_scale").bytes.data(), 4);
  std::memcpy(&stored_input, f8_file.at("l.b.input_scale").bytes.data(), 4);
  EXPECT_EQ(stored_scale, f8.scale_inv()[0]);
  EXPECT_EQ(stored_input, 3.0f / 448.0f);
  EXPECT_EQ(nlohmann::json::parse(test::slurp(path("f8") / "hf_quant_config.json"))["quantization"]["quant_algo"], "FP8");
  const auto f8_info = run("inspect --json " + q("f8"));
  ASSERT_EQ(f8_info.status, 0) << f8_info.err;
  EXPECT_EQ(nlohmann::json::parse(f8_info.out)["quantized"][0]["format"], "fp8 e4m3 per-tensor");
  ASSERT_EQ(run("inspect " + q("f8")).status, 0);
  // convert and diff hold NVFP4 / MXFP4 weights only: MXFP8 and FP8 checkpoints are refused as
  // unsupported (exit 19), named for what they are, and nothing is written.
  for (const char* source : {"mx8_dir", "f8"}) {
    const auto converted = run(std::string("convert ") + q(source) + " " + q("converted") + " --to modelopt");
    EXPECT_EQ(converted.status, 19) << converted.err;
    EXPECT_NE(converted.err.find(std::string(source) == "f8" ? "is per-tensor FP8" : "is MXFP8"), std::string::npos) << converted.err;
    EXPECT_FALSE(std::filesystem::exists(path("converted")));
    const auto diffed = run(std::string("diff ") + q(source) + " " + q(source));
    EXPECT_EQ(diffed.status, 19) << diffed.err;
  }
  // `nvfp4 quantize` files of every format are read back too (16x16 tiles, MXFP8, RHT included).
  for (const std::string flags : {"", "--mode 2d", "--format mxfp8", "--rht --swizzle"}) {
    ASSERT_EQ(run("quantize " + q("a.npy") + " " + q("one.safetensors") + " --force --quiet " + flags).status, 0);
    const auto r = run("dequantize " + q("one.safetensors") + " " + q("v.npy") + " --force");
    ASSERT_EQ(r.status, 0) << flags << r.err;
    EXPECT_NE(r.out.find("ModelOpt (safetensors file)"), std::string::npos) << r.out;
  }
}

TEST_F(Readback, FilesOfOtherToolsAreNamedNotParsed) {
  save("x.npy", 3);
  struct foreign {
    std::string name, bytes, says;
    int status;
  };
  const std::vector<foreign> cases = {
      {"model.pt", std::string("PK\x03\x04", 4) + std::string(60, 'z'), "this is a ZIP archive", 19},
      {"old.bin", std::string("\x80\x02}q\x00", 5) + std::string(40, 'p'), "this is a Python pickle", 19},
      {"k.h5", std::string("\x89HDF\r\n\x1a\n", 8) + std::string(40, 'h'), "this is an HDF5 file", 19},
      {"config.json", "{\"architectures\": [\"LlamaForCausalLM\"]}", "this is a JSON file", 19},
      {"noise.bin", std::string(64, '\x07'), "this is a file of no format known here", 18},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    write_raw(c.name, c.bytes);
    for (const std::string& args :
         {"inspect " + q(c.name), "dequantize " + q(c.name) + " " + q("out.npy"), "stats " + q("x.npy") + " " + q(c.name),
          "diff " + q(c.name) + " " + q(c.name), "convert " + q(c.name) + " " + q("out.gguf") + " --to gguf"}) {
      const auto r = run(args);
      EXPECT_EQ(r.status, c.status) << args << "\n" << r.err;
      EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("supported: .npy arrays"), std::string::npos) << r.err;
    }
  }
  EXPECT_FALSE(fs::exists(path("out.npy")));
  EXPECT_FALSE(fs::exists(path("out.gguf")));
}

TEST_F(Readback, AnOutputThatIsAnInputIsRefusedAndTheInputKept) {
  save("x.npy", 4);
  const std::string original = test::slurp(path("x.npy"));
  fs::create_symlink("x.npy", path("soft.npy"));
  fs::create_hard_link(path("x.npy"), path("hard.npy"));
  for (const std::string out : {"x.npy", "soft.npy", "hard.npy"}) {
    for (const std::string force : {"", " --force"}) {
      const auto r = run("quantize " + q("x.npy") + " " + q(out) + force);
      EXPECT_EQ(r.status, 11) << out << force << r.err;
      EXPECT_NE(r.err.find("is the input"), std::string::npos) << r.err;
      EXPECT_EQ(test::slurp(path("x.npy")), original);
    }
  }
  ASSERT_EQ(run("quantize " + q("x.npy") + " " + q("q.safetensors") + " --quiet").status, 0);
  const std::string quantized = test::slurp(path("q.safetensors"));
  ASSERT_EQ(run("pack " + q("dir") + " w=" + q("x.npy") + " --quiet").status, 0);
  const std::vector<std::string> refused = {
      "dequantize " + q("q.safetensors") + " " + q("q.safetensors") + " --force",
      "convert " + q("q.safetensors") + " " + q("q.safetensors") + " --to gguf --force",
      "convert " + q("dir") + " " + q("dir/model.safetensors") + " --to modelopt --force",
      "convert " + q("dir/model.safetensors") + " " + q("dir") + " --to modelopt --force",
      "dequantize " + q("dir") + " " + q("dir") + " --all --force",
      "pack " + q("x.npy") + " w=" + q("x.npy") + " --force",
      "gemm " + q("x.npy") + " " + q("x.npy") + " " + q("x.npy") + " --force",
      "stats " + q("x.npy") + " " + q("x.npy") + " --json",  // stats writes nothing: allowed
  };
  for (std::size_t i = 0; i + 1 < refused.size(); ++i) {
    const auto r = run(refused[i]);
    EXPECT_EQ(r.status, 11) << refused[i] << "\n" << r.err;
    EXPECT_NE(r.err.find("is the input"), std::string::npos) << r.err;
  }
  EXPECT_EQ(run(refused.back()).status, 0);
  EXPECT_EQ(test::slurp(path("x.npy")), original);
  EXPECT_EQ(test::slurp(path("q.safetensors")), quantized);
  // An existing output needs --force; a refused run leaves it as it was.
  write_raw("old.npy", "old");
  auto r = run("dequantize " + q("q.safetensors") + " " + q("old.npy"));
  EXPECT_EQ(r.status, 17);
  EXPECT_NE(r.err.find("exists; pass --force"), std::string::npos) << r.err;
  EXPECT_EQ(test::slurp(path("old.npy")), "old");
  r = run("dequantize " + q("q.safetensors") + " " + q("old.npy") + " --force --quiet");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_floats(path("old.npy")).size(), static_cast<std::size_t>(kRows * kCols));
  write_raw("report.json", "keep");
  EXPECT_EQ(run("diff " + q("q.safetensors") + " " + q("dir") + " --json " + q("report.json")).status, 17);
  EXPECT_EQ(test::slurp(path("report.json")), "keep");
  expect_only_files({"dir", "hard.npy", "old.npy", "q.safetensors", "report.json", "soft.npy", "x.npy"});
}

TEST_F(Readback, PackLeavesTheHeadAndEmbeddingsOutAndFusesScalesOnRequest) {
  const auto q_w = save("q.npy", 5), k_w = save("k.npy", 6, 0.1f), v_w = save("v.npy", 7, 0.05f);
  save("head.npy", 8);
  save("emb.npy", 9);
  const std::string inputs = " l0.q_proj=" + q("q.npy") + " l0.k_proj=" + q("k.npy") + " l0.v_proj=" + q("v.npy") +
                             " lm_head=" + q("head.npy") + " model.embed_tokens=" + q("emb.npy");
  auto r = run("pack " + q("m") + inputs);
  ASSERT_EQ(r.status, 0) << r.err;
  // Each warning once: the default exclusions, the fused group with three scales, the hint.
  EXPECT_NE(r.err.find("left unquantized by default"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fused layers with different weight tensor scales"), std::string::npos) << r.err;
  for (const std::string w : {"left unquantized", "fused layers", "--fuse-scales"}) {
    const auto first = r.err.find(w);
    EXPECT_EQ(r.err.find(w, first + 1), std::string::npos) << "twice: " << w << "\n" << r.err;
  }
  auto c = io::read_checkpoint(path("m"));
  EXPECT_EQ(c.weights.size(), 3u);
  EXPECT_EQ(c.ignore, (std::vector<std::string>{"lm_head", "model.embed_tokens"}));
  ASSERT_NE(c.find_tensor("lm_head.weight"), nullptr);  // kept in float32
  EXPECT_EQ(c.find_tensor("lm_head.weight")->dtype, io::safetensors_dtype::f32);
  const auto hf = nlohmann::json::parse(test::slurp(path("m") / "hf_quant_config.json"));
  EXPECT_EQ(hf["quantization"]["exclude_modules"], nlohmann::json({"lm_head", "model.embed_tokens"}));
  // --quiet silences every warning.
  r = run("pack " + q("m2") + inputs + " --quiet");
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "");
  // --include brings the head back; --exclude adds a pattern (listed as given).
  ASSERT_EQ(run("pack " + q("m3") + inputs + " --include lm_head --exclude 'l0.v*' --quiet").status, 0);
  c = io::read_checkpoint(path("m3"));
  EXPECT_NE(c.find_weight("lm_head"), nullptr);
  EXPECT_EQ(c.find_weight("l0.v_proj"), nullptr);
  EXPECT_EQ(c.ignore, (std::vector<std::string>{"l0.v*", "model.embed_tokens"}));
  // --fuse-scales: one tensor scale for q/k/v, from the group's largest amax (k's), as
  // quantize_with_amax gives it; no fused-layer warning.
  r = run("pack " + q("fused.safetensors") + inputs + " --fuse-scales --to compressed-tensors");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("fused layers"), std::string::npos) << r.err;
  c = io::read_checkpoint(path("fused.safetensors"));
  ASSERT_EQ(c.weights.size(), 3u);
  const float group_amax = std::max({amax(matrix_view<const float>::row_major(q_w.data(), kRows, kCols)),
                                     amax(matrix_view<const float>::row_major(k_w.data(), kRows, kCols)),
                                     amax(matrix_view<const float>::row_major(v_w.data(), kRows, kCols))});
  for (const auto& w : c.weights) EXPECT_EQ(w.weight_scale, c.weights[0].weight_scale) << w.name;
  EXPECT_EQ(cli_values("fused.safetensors", "l0.q_proj"), expected_values(q_w, kRows, kCols, false, group_amax));
  EXPECT_EQ(cli_values("fused.safetensors", "l0.k_proj"), expected_values(k_w, kRows, kCols));  // k holds the amax
  EXPECT_EQ(run("pack " + q("mx.safetensors") + inputs + " --fuse-scales --format mxfp4").status, 2);
}

}  // namespace
}  // namespace nvfp4
