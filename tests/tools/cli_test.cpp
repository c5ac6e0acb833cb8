// End-to-end tests of the `nvfp4` tool: runs the built binary on files created here and checks
// its outputs against direct library calls (bit for bit), its JSON reports, and its exit status
// and the absence of output files for every bad input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "nvfp4/gemm/fp4/gemm.hpp"
#include "nvfp4/io/npy.hpp"
#include "nvfp4/io/quantized_checkpoint.hpp"
#include "nvfp4/io/safetensors.hpp"
#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/transforms/hadamard.hpp"
#include "test_support.hpp"
#include "tools/cli_fixture.hpp"

namespace nvfp4 {
namespace {

namespace fs = std::filesystem;
using test::Cli;
using test::slurp;

std::vector<float> outlier_matrix(index_t rows, index_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (auto& v : x) v = normal(rng);
  x[5] = 30.0f;
  x[x.size() - 7] = -18.0f;
  return x;
}

std::vector<float> read_floats(const fs::path& p) { return io::to_float32(io::read_npy(p)); }

constexpr index_t kRows = 48, kCols = 64;

TEST_F(Cli, HelpForEveryCommand) {
  for (const std::string command : {"quantize", "dequantize", "inspect", "stats", "gemm"}) {
    const auto r = run(command + " --help");
    EXPECT_EQ(r.status, 0) << command;
    EXPECT_NE(r.out.find("usage: nvfp4 " + command), std::string::npos) << command << ": " << r.out;
    EXPECT_EQ(run("help " + command).out, r.out);
  }
  const auto main_help = run("--help");
  EXPECT_EQ(main_help.status, 0);
  EXPECT_NE(main_help.out.find("exit status"), std::string::npos);
  EXPECT_EQ(run("--version").status, 0);
}

TEST_F(Cli, UsageErrorsExitWithTwo) {
  io::write_npy(path("x.npy"), io::make_float32_array(outlier_matrix(kRows, kCols, 1), {kRows, kCols}));
  const std::string x = q("x.npy"), out = q("o.safetensors");
  for (const std::string& args :
       std::vector<std::string>{std::string(""), std::string("frobnicate"), "quantize " + x, "quantize " + x + " " + out + " extra",
                                "quantize " + x + " " + out + " --bogus", "quantize " + x + " " + out + " --format nvfp5",
                                "quantize " + x + " " + out + " --mode 3d", "quantize " + x + " " + out + " --sr --seed abc",
                                "quantize " + x + " " + out + " --seed 3", "quantize " + x + " " + out + " --format mxfp8 --sr",
                                "quantize " + x + " " + out + " --format mxfp4 --mode 2d", "quantize " + x + " " + out + " --name",
                                std::string("help nothing"), std::string("stats a.npy"), std::string("inspect")}) {
    const auto r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_FALSE(r.err.empty()) << args;
  }
  expect_only_files({"x.npy"});
}

struct mode_case {
  std::string flags;
  int format;  // 0 nvfp4 1x16, 1 nvfp4 16x16, 2 mxfp4, 3 mxfp8
  quantize_options options;
  bool rht = false;
};

template <class Format>
std::vector<float> library_roundtrip(const std::vector<float>& x, const quantize_options& options, bool rht,
                                     io::safetensors_file* stored_bytes) {
  const auto view = matrix_view<const float>::row_major(x.data(), kRows, kCols);
  if (!rht) {
    const auto q = quantize<Format>(view, options);
    if (stored_bytes) io::add_quantized_tensor(*stored_bytes, "W", q);
    return dequantize(q);
  }
  const auto t = hadamard_transform::te_default();
  std::vector<bf16> rotated(x.size());
  hadamard_rows(view, t, matrix_view<bf16>::row_major(rotated.data(), kRows, kCols));
  const auto q = quantize<Format>(matrix_view<const bf16>::row_major(rotated.data(), kRows, kCols), options);
  if (stored_bytes) io::add_quantized_tensor(*stored_bytes, "W", q);
  std::vector<float> restored = dequantize(q);
  std::vector<bf16> back(x.size());
  hadamard_rows(matrix_view<const float>::row_major(restored.data(), kRows, kCols), t,
                matrix_view<bf16>::row_major(back.data(), kRows, kCols), hadamard_direction::inverse);
  for (std::size_t i = 0; i < back.size(); ++i) restored[i] = back[i].to_float();
  return restored;
}

TEST_F(Cli, QuantizeDequantizeMatchesTheLibraryBitForBit) {
  const auto x = outlier_matrix(kRows, kCols, 2);
  io::write_npy(path("x.npy"), io::make_float32_array(x, {kRows, kCols}));
  quantize_options sr;
  sr.rounding = rounding_mode::stochastic;
  sr.seed = 1234;
  quantize_options te_rule;
  te_rule.mx_rule = mx_scale_rule::te_ceil;
  const std::vector<mode_case> cases = {
      {"", 0, {}},
      {"--mode 2d", 1, {}},
      {"--format mxfp4", 2, {}},
      {"--format mxfp4 --mx-rule te", 2, te_rule},
      {"--format mxfp8", 3, {}},
      {"--sr --seed 1234", 0, sr},
      {"--swizzle", 0, {}},
      {"--format mxfp4 --swizzle", 2, {}},
      {"--rht", 0, {}, true},
      {"--rht --mode 2d --sr --seed 1234", 1, sr, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.flags);
    const auto qr = run("quantize " + q("x.npy") + " " + q("w.safetensors") + " --force " + c.flags);
    ASSERT_EQ(qr.status, 0) << qr.err;
    EXPECT_NE(qr.out.find("SQNR"), std::string::npos);
    const auto dr = run("dequantize " + q("w.safetensors") + " " + q("back.npy") + " --force");
    ASSERT_EQ(dr.status, 0) << dr.err;
    io::safetensors_file expected_file;
    std::vector<float> expected;
    switch (c.format) {
      case 0:
        expected = library_roundtrip<nvfp4_1x16>(x, c.options, c.rht, &expected_file);
        break;
      case 1:
        expected = library_roundtrip<nvfp4_16x16>(x, c.options, c.rht, &expected_file);
        break;
      case 2:
        expected = library_roundtrip<mxfp4>(x, c.options, c.rht, &expected_file);
        break;
      default:
        expected = library_roundtrip<mxfp8>(x, c.options, c.rht, &expected_file);
        break;
    }
    const auto got = read_floats(path("back.npy"));
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * 4), 0);
    // The stored element bytes are the library's.
    const auto stored = io::read_safetensors(path("w.safetensors"));
    EXPECT_EQ(stored.at("W.weight").bytes, expected_file.at("W.weight").bytes);
    if (c.flags.find("--swizzle") == std::string::npos) {
      EXPECT_EQ(stored.at("W.weight_scale").bytes, expected_file.at("W.weight_scale").bytes);
    }
    expect_only_files({"x.npy", "w.safetensors", "back.npy"});
  }
}

TEST_F(Cli, ModelOptLayoutAndInspect) {
  const auto x = outlier_matrix(kRows, kCols, 3);
  io::write_npy(path("x.npy"), io::make_float32_array(x, {kRows, kCols}));
  ASSERT_EQ(run("quantize " + q("x.npy") + " " + q("w.safetensors") + " --name model.layers.0.mlp.down_proj --quiet").status, 0);
  const auto r = run("inspect --json " + q("w.safetensors"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto info = nlohmann::json::parse(r.out);
  EXPECT_EQ(info["kind"], "safetensors");
  std::map<std::string, nlohmann::json> tensors;
  for (const auto& t : info["tensors"]) tensors[t["name"].get<std::string>()] = t;
  const std::string w = "model.layers.0.mlp.down_proj";
  ASSERT_EQ(tensors.size(), 3u);
  EXPECT_EQ(tensors[w + ".weight"]["dtype"], "U8");
  EXPECT_EQ(tensors[w + ".weight"]["shape"], nlohmann::json::array({kRows, kCols / 2}));
  EXPECT_EQ(tensors[w + ".weight_scale"]["dtype"], "F8_E4M3");
  EXPECT_EQ(tensors[w + ".weight_scale"]["shape"], nlohmann::json::array({kRows, kCols / 16}));
  EXPECT_EQ(tensors[w + ".weight_scale_2"]["dtype"], "F32");
  EXPECT_EQ(tensors[w + ".weight_scale_2"]["shape"], nlohmann::json::array());
  EXPECT_NEAR(tensors[w + ".weight_scale_2"]["stats"]["max"].get<double>(), 30.0 / 2688, 1e-7);
  ASSERT_EQ(info["quantized"].size(), 1u);
  const auto& qt = info["quantized"][0];
  EXPECT_EQ(qt["format"], "nvfp4 1x16");
  EXPECT_EQ(qt["amax"], 30.0);
  // 4 bits + one 8-bit scale per 16 + a 32-bit tensor scale.
  EXPECT_NEAR(qt["bits_per_element"].get<double>(), 4.5 + 32.0 / (kRows * kCols), 1e-12);
  EXPECT_EQ(qt["dequantized"]["amax"], 30.0);  // the largest element is exactly representable: 6 * 448 * S_dec

  const auto text = run("inspect " + q("w.safetensors"));
  EXPECT_EQ(text.status, 0);
  EXPECT_NE(text.out.find("nvfp4 1x16"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("F8_E4M3"), std::string::npos);

  const auto npy = nlohmann::json::parse(run("inspect --json " + q("x.npy")).out);
  EXPECT_EQ(npy["dtype"], "<f4");
  EXPECT_EQ(npy["shape"], nlohmann::json::array({kRows, kCols}));
  EXPECT_EQ(npy["stats"]["amax"], 30.0);
  EXPECT_EQ(npy["stats"]["count"], kRows * kCols);
}

TEST_F(Cli, Float16BfloatAndNdInputs) {
  // float16 codes for 1, -2, 0.5, 3 and zeros: quantizing them is quantizing those floats.
  io::npy_array half;
  half.dtype = io::npy_dtype::float16;
  half.shape = {2, 2, 16};
  std::vector<std::uint16_t> codes(64, 0);
  codes[0] = 0x3C00;
  codes[1] = 0xC000;
  codes[17] = 0x3800;
  codes[40] = 0x4200;
  half.bytes.resize(128);
  std::memcpy(half.bytes.data(), codes.data(), 128);
  io::write_npy(path("h.npy"), half);
  ASSERT_EQ(run("quantize " + q("h.npy") + " " + q("h.safetensors") + " --quiet").status, 0);
  ASSERT_EQ(run("dequantize " + q("h.safetensors") + " " + q("h_back.npy") + " --quiet").status, 0);
  const auto back = io::read_npy(path("h_back.npy"));
  EXPECT_EQ(back.shape, (std::vector<std::int64_t>{2, 2, 16}));
  std::vector<float> as_float(64, 0.0f);
  as_float[0] = 1;
  as_float[1] = -2;
  as_float[17] = 0.5f;
  as_float[40] = 3;
  const auto expected = dequantize(quantize<nvfp4_1x16>(matrix_view<const float>::row_major(as_float.data(), 4, 16)));
  EXPECT_EQ(io::to_float32(back), expected);
  // Fortran order: the same matrix stored column-major gives the same file contents.
  const auto x = outlier_matrix(kRows, kCols, 4);
  io::npy_array fortran = io::make_float32_array(x, {kRows, kCols});
  for (index_t r = 0; r < kRows; ++r)
    for (index_t c = 0; c < kCols; ++c)
      std::memcpy(fortran.bytes.data() + 4 * (c * kRows + r), &x[static_cast<std::size_t>(r * kCols + c)], 4);
  fortran.fortran_order = true;
  io::write_npy(path("f.npy"), fortran);
  io::write_npy(path("c.npy"), io::make_float32_array(x, {kRows, kCols}));
  ASSERT_EQ(run("quantize " + q("f.npy") + " " + q("f.safetensors") + " --quiet").status, 0);
  ASSERT_EQ(run("quantize " + q("c.npy") + " " + q("c.safetensors") + " --quiet").status, 0);
  EXPECT_EQ(io::read_safetensors(path("f.safetensors")).at("W.weight").bytes,
            io::read_safetensors(path("c.safetensors")).at("W.weight").bytes);
}

TEST_F(Cli, StatsReportsHandComputedMetrics) {
  io::write_npy(path("a.npy"), io::make_float32_array(std::vector<float>{1, 2, 4, 0}, {2, 2}));
  io::write_npy(path("b.npy"), io::make_float32_array(std::vector<float>{1, 2.5f, 3, 0}, {2, 2}));
  io::write_npy(path("c.npy"), io::make_float32_array(std::vector<float>{1, 2.5f, 3, 0}, {4}));
  const auto r = run("stats --json " + q("a.npy") + " " + q("b.npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // errors 0, 0.5, -1, 0: noise 1.25 over 4, signal 21.
  EXPECT_DOUBLE_EQ(j["mse"].get<double>(), 1.25 / 4);
  EXPECT_DOUBLE_EQ(j["sqnr_db"].get<double>(), 10 * std::log10(21 / 1.25));
  EXPECT_DOUBLE_EQ(j["max_abs_error"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["max_rel_error"].get<double>(), 0.25);
  const auto same = nlohmann::json::parse(run("stats --json " + q("a.npy") + " " + q("a.npy")).out);
  EXPECT_TRUE(same["exact"].get<bool>());
  EXPECT_TRUE(same["sqnr_db"].is_null());
  EXPECT_EQ(run("stats " + q("a.npy") + " " + q("c.npy")).status, 12);  // shape_mismatch
  const auto text = run("stats " + q("a.npy") + " " + q("b.npy"));
  EXPECT_NE(text.out.find("sqnr_db"), std::string::npos);

  // A safetensors argument is dequantized first: stats against the CLI's own dequantized output is exact.
  const auto x = outlier_matrix(kRows, kCols, 5);
  io::write_npy(path("x.npy"), io::make_float32_array(x, {kRows, kCols}));
  ASSERT_EQ(run("quantize " + q("x.npy") + " " + q("x.safetensors") + " --quiet").status, 0);
  ASSERT_EQ(run("dequantize " + q("x.safetensors") + " " + q("x_back.npy") + " --quiet").status, 0);
  EXPECT_TRUE(nlohmann::json::parse(run("stats --json " + q("x_back.npy") + " " + q("x.safetensors")).out)["exact"].get<bool>());
  const auto vs_source = nlohmann::json::parse(run("stats --json " + q("x.npy") + " " + q("x.safetensors")).out);
  EXPECT_GT(vs_source["sqnr_db"].get<double>(), 10.0);
}

TEST_F(Cli, BadInputsFailCleanlyWithoutOutput) {
  const auto x = outlier_matrix(kRows, kCols, 6);
  io::write_npy(path("x.npy"), io::make_float32_array(x, {kRows, kCols}));
  const std::string good_image = slurp(path("x.npy"));
  write_raw("garbage.npy", "this is not an array");
  write_raw("truncated.npy", good_image.substr(0, good_image.size() - 10));
  write_raw("empty.npy", "");
  io::npy_array ints;
  ints.dtype = io::npy_dtype::int32;
  ints.shape = {4};
  ints.bytes.resize(16);
  io::write_npy(path("ints.npy"), ints);
  auto with_nan = x;
  with_nan[100] = std::nanf("");
  io::write_npy(path("nan.npy"), io::make_float32_array(with_nan, {kRows, kCols}));
  io::write_npy(path("odd.npy"), io::make_float32_array(std::vector<float>(3 * 20, 1.0f), {3, 20}));
  // An existing output must survive a failed run untouched, also one allowed to replace it.
  write_raw("keep.safetensors", "previous contents");

  struct bad {
    std::string args;
    int status;
  };
  const std::vector<bad> cases = {
      {"quantize " + q("missing.npy") + " " + q("keep.safetensors") + " --force", 17},
      {"quantize " + q("garbage.npy") + " " + q("keep.safetensors") + " --force", 18},
      {"quantize " + q("truncated.npy") + " " + q("keep.safetensors") + " --force", 18},
      {"quantize " + q("empty.npy") + " " + q("keep.safetensors") + " --force", 18},
      {"quantize " + q("ints.npy") + " " + q("keep.safetensors") + " --force", 16},
      {"quantize " + q("nan.npy") + " " + q("keep.safetensors") + " --force", 13},
      {"quantize " + q("odd.npy") + " " + q("keep.safetensors") + " --rht --force", 12},
      {"quantize " + q("x.npy") + " " + q("keep.safetensors"), 17},  // exists, no --force
      {"quantize " + q("x.npy") + " " + q("no_such_dir/out.safetensors"), 17},
      {"dequantize " + q("x.npy") + " " + q("out.npy"), 18},
      {"dequantize " + q("keep.safetensors") + " " + q("out.npy"), 18},
      {"inspect " + q("garbage.npy"), 18},
      {"inspect " + q("missing.npy"), 17},
      {"stats " + q("x.npy") + " " + q("truncated.npy"), 18},
  };
  for (const auto& c : cases) {
    const auto r = run(c.args);
    EXPECT_EQ(r.status, c.status) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find("nvfp4:"), std::string::npos) << c.args;
    EXPECT_EQ(slurp(path("keep.safetensors")), "previous contents");
  }
  expect_only_files({"x.npy", "garbage.npy", "truncated.npy", "empty.npy", "ints.npy", "nan.npy", "odd.npy", "keep.safetensors"});
}

TEST_F(Cli, MalformedSafetensorsAreRejected) {
  const auto x = outlier_matrix(kRows, kCols, 7);
  io::write_npy(path("x.npy"), io::make_float32_array(x, {kRows, kCols}));
  ASSERT_EQ(run("quantize " + q("x.npy") + " " + q("w.safetensors") + " --quiet").status, 0);
  const std::string image = slurp(path("w.safetensors"));
  write_raw("truncated.safetensors", image.substr(0, image.size() - 1));
  std::string huge = image;
  huge[7] = 0x40;  // header length ~2^62
  write_raw("huge.safetensors", huge);
  std::string bad_json = image;
  bad_json[8] = '[';
  write_raw("badjson.safetensors", bad_json);
  // Two quantized tensors and no --name: the tool asks which.
  io::safetensors_file two;
  const auto qx = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), kRows, kCols));
  io::add_quantized_tensor(two, "a", qx);
  io::add_quantized_tensor(two, "b", qx);
  io::write_safetensors(path("two.safetensors"), two);
  // A weight of the wrong dtype.
  io::safetensors_file wrong = io::read_safetensors(path("w.safetensors"));
  wrong.tensors[0].dtype = io::safetensors_dtype::i8;
  io::write_safetensors(path("wrong.safetensors"), wrong);

  for (const std::string f : {"truncated", "huge", "badjson"}) {
    EXPECT_EQ(run("dequantize " + q(f + ".safetensors") + " " + q("out.npy")).status, 18) << f;
    EXPECT_EQ(run("inspect " + q(f + ".safetensors")).status, 18) << f;
  }
  EXPECT_EQ(run("dequantize " + q("two.safetensors") + " " + q("out.npy")).status, 11);
  EXPECT_EQ(run("dequantize " + q("two.safetensors") + " " + q("out.npy") + " --name c").status, 11);
  EXPECT_EQ(run("dequantize " + q("wrong.safetensors") + " " + q("out.npy")).status, 16);
  EXPECT_FALSE(fs::exists(path("out.npy")));
  EXPECT_EQ(run("dequantize " + q("two.safetensors") + " " + q("out.npy") + " --name b --quiet").status, 0);
  EXPECT_EQ(read_floats(path("out.npy")), dequantize(qx));
}

TEST_F(Cli, GemmReportsErrorAndWritesTheProduct) {
  const index_t m = 32, n = 16, k = 64;
  const auto a = outlier_matrix(m, k, 8), b = outlier_matrix(n, k, 9);
  io::write_npy(path("a.npy"), io::make_float32_array(a, {m, k}));
  io::write_npy(path("b.npy"), io::make_float32_array(b, {n, k}));
  // Modes exact and relaxed are the library's gemm() bit for bit.
  const auto qa = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(a.data(), m, k));
  const auto qb = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(b.data(), n, k));
  for (const auto mode : {gemm_mode::exact, gemm_mode::relaxed}) {
    const std::string name = mode == gemm_mode::exact ? "exact" : "relaxed";
    ASSERT_EQ(run("gemm --quiet --force --mode " + name + " " + q("a.npy") + " " + q("b.npy") + " " + q("d.npy")).status, 0) << name;
    gemm_options options;
    options.mode = mode;
    EXPECT_EQ(io::to_float32(io::read_npy(path("d.npy"))), gemm(qa, qb, options)) << name;
  }
  // --b-kn: B given as [K, N] is quantized along K all the same.
  std::vector<float> b_kn(b.size());
  for (index_t r = 0; r < n; ++r)
    for (index_t c = 0; c < k; ++c) b_kn[static_cast<std::size_t>(c * n + r)] = b[static_cast<std::size_t>(r * k + c)];
  io::write_npy(path("b_kn.npy"), io::make_float32_array(b_kn, {k, n}));
  ASSERT_EQ(run("gemm --quiet --b-kn " + q("a.npy") + " " + q("b_kn.npy") + " " + q("d_kn.npy")).status, 0);
  EXPECT_EQ(io::to_float32(io::read_npy(path("d_kn.npy"))), gemm(qa, qb));

  const auto r = run("gemm --json --force --mode dequant " + q("a.npy") + " " + q("b.npy") + " " + q("d.npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["m"], m);
  EXPECT_EQ(j["n"], n);
  EXPECT_EQ(j["k"], k);
  EXPECT_GT(j["sqnr_db"].get<double>(), 10.0);
  const auto d = io::read_npy(path("d.npy"));
  EXPECT_EQ(d.shape, (std::vector<std::int64_t>{m, n}));
  // An independent oracle: the dequantized operands multiplied in double.
  const auto a_hat = dequantize(quantize<nvfp4_1x16>(matrix_view<const float>::row_major(a.data(), m, k)));
  const auto b_hat = dequantize(quantize<nvfp4_1x16>(matrix_view<const float>::row_major(b.data(), n, k)));
  const auto got = io::to_float32(d);
  for (index_t i = 0; i < m; ++i)
    for (index_t jn = 0; jn < n; ++jn) {
      double sum = 0, magnitude = 0;
      for (index_t kk = 0; kk < k; ++kk) {
        const double p = static_cast<double>(a_hat[static_cast<std::size_t>(i * k + kk)]) * b_hat[static_cast<std::size_t>(jn * k + kk)];
        sum += p;
        magnitude += std::fabs(p);
      }
      EXPECT_NEAR(got[static_cast<std::size_t>(i * n + jn)], sum, 1e-5 * magnitude + 1e-30) << i << "," << jn;
    }
  EXPECT_EQ(run("gemm " + q("a.npy") + " " + q("b.npy") + " --b-kn").status, 12);  // B read as [K = 16, N = 64]
}

// ---- exit statuses: one table, in the code, the help text and docs/cli.md ---------------------

/// The rows "| N | `name` ... |" of the exit status table of docs/cli.md.
std::map<int, std::string> documented_exit_statuses() {
  std::ifstream doc(std::string(NVFP4_SOURCE_DIR) + "/docs/cli.md");
  std::map<int, std::string> rows;
  std::string line;
  bool in_table = false;
  while (std::getline(doc, line)) {
    if (line.rfind("## Exit status", 0) == 0)
      in_table = true;
    else if (line.rfind("## ", 0) == 0)
      in_table = false;
    if (!in_table || line.rfind("| ", 0) != 0 || line.size() < 3 || !std::isdigit(static_cast<unsigned char>(line[2]))) continue;
    const int status = std::stoi(line.substr(2));
    const auto open = line.find('`'), close = line.find('`', open + 1);
    rows[status] = open == std::string::npos ? "" : line.substr(open + 1, close - open - 1);
  }
  return rows;
}

TEST_F(Cli, ExitStatusTableIsTheSameInDocsHelpAndCode) {
  const auto documented = documented_exit_statuses();
  std::map<int, std::string> expected = {{0, "ok"}, {1, "failure"}, {2, "usage"}};
  for (int code = static_cast<int>(errc::invalid_argument); code <= static_cast<int>(errc::overflow); ++code)
    expected[10 + code] = errc_name(static_cast<errc>(code));
  EXPECT_EQ(documented, expected) << "docs/cli.md's exit status table";
  const auto help = run("--help");
  for (const auto& [status, name] : expected) {
    char line[64];
    std::snprintf(line, sizeof line, "  %2d  %s", status, name.c_str());
    EXPECT_NE(help.out.find(line), std::string::npos) << line << "\n" << help.out;
  }
}

TEST_F(Cli, EveryFailureStatusTheToolProducesHasACase) {
  io::write_npy(path("x.npy"), io::make_float32_array(outlier_matrix(kRows, kCols, 11), {kRows, kCols}));
  io::write_npy(path("y.npy"), io::make_float32_array(outlier_matrix(kRows, kCols + 16, 12), {kRows, kCols + 16}));
  auto nan = outlier_matrix(kRows, kCols, 13);
  nan[7] = NAN;
  io::write_npy(path("nan.npy"), io::make_float32_array(nan, {kRows, kCols}));
  io::npy_array ints;
  ints.dtype = io::npy_dtype::int32;
  ints.shape = {16};
  ints.bytes.resize(64);
  io::write_npy(path("ints.npy"), ints);
  std::string big_endian = slurp(path("x.npy"));
  big_endian.replace(big_endian.find("<f4"), 3, ">f4");
  write_raw("big_endian.npy", big_endian);
  io::write_npy(path("huge.npy"), io::make_float32_array(std::vector<float>(16, 3e38f), {1, 16}));
  const std::vector<std::pair<std::string, int>> cases = {
      {"quantize " + q("x.npy"), 2},
      {"stats " + q("x.npy") + " " + q("x.npy") + " --name nothing", 0},
      {"dequantize " + q("w.safetensors") + " " + q("out.npy") + " --name V", 11},
      {"stats " + q("x.npy") + " " + q("y.npy"), 12},
      {"quantize " + q("nan.npy") + " " + q("out.safetensors"), 13},
      {"quantize " + q("ints.npy") + " " + q("out.safetensors"), 16},
      {"inspect " + q("missing.npy"), 17},
      {"inspect " + q("x.npy") + "x", 17},
      {"dequantize " + q("x.npy") + " " + q("out.npy"), 18},
      {"quantize " + q("big_endian.npy") + " " + q("out.safetensors"), 19},
      {"quantize --rht " + q("huge.npy") + " " + q("out.safetensors"), 20},
  };
  ASSERT_EQ(run("quantize --quiet " + q("x.npy") + " " + q("w.safetensors")).status, 0);
  for (const auto& [args, status] : cases) EXPECT_EQ(run(args).status, status) << args;
  expect_only_files({"x.npy", "y.npy", "nan.npy", "ints.npy", "big_endian.npy", "huge.npy", "w.safetensors"});
}

TEST_F(Cli, VersionNamesTheLibraryVersionAndTheCompiledIsa) {
  const auto r = run("--version");
  ASSERT_EQ(r.status, 0);
  // The test is built with the CLI's flags, so its compiled_isa is the CLI's.
  const std::string expected = "nvfp4 " + std::to_string(NVFP4_VERSION_MAJOR) + "." + std::to_string(NVFP4_VERSION_MINOR) + "." +
                               std::to_string(NVFP4_VERSION_PATCH) + "\nisa: " + isa_name(compiled_isa) +
                               "\nopenmp: " + (NVFP4_HAS_OPENMP ? "on" : "off") + "\n";
  EXPECT_EQ(r.out, expected);
}

TEST_F(Cli, HelpSaysHowWeightScale2IsComputed) {
  const auto help = run("quantize --help").out;
  EXPECT_NE(help.find("S_enc = fp32(2688 / amax)"), std::string::npos) << help;
  EXPECT_NE(help.find("1 ulp"), std::string::npos) << help;
  EXPECT_EQ(help.find("W.weight_scale_2 (F32 scalar, amax/2688)"), std::string::npos);
}

// ---- gemm: exact vs relaxed, and the same bits for any thread count ------------------------

TEST_F(Cli, GemmCountsElementsWhereExactAndRelaxedDifferAndIsThreadCountIndependent) {
  const index_t m = 70, n = 40, k = 256;  // 70 rows: two 64-row blocks of the fp32 product, one partial
  test::value_spread spread;
  spread.log2_spread = 6;  // many binades, so relaxed accumulation rounds differently somewhere
  const auto a = test::random_values(m * k, 21, spread), b = test::random_values(n * k, 22, spread);
  io::write_npy(path("a.npy"), io::make_float32_array(a, {m, k}));
  io::write_npy(path("b.npy"), io::make_float32_array(b, {n, k}));
  const auto qa = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(a.data(), m, k));
  const auto qb = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(b.data(), n, k));
  const auto exact = gemm(qa, qb, {.mode = gemm_mode::exact}), relaxed = gemm(qa, qb, {.mode = gemm_mode::relaxed});
  std::int64_t differing = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) differing += std::memcmp(&exact[i], &relaxed[i], 4) != 0;
  ASSERT_GT(differing, 0) << "the inputs should make the modes differ somewhere";
  for (const std::string mode : {"exact", "relaxed", "dequant"}) {
    std::string first_d, first_metrics;
    for (const int threads : {1, 2, 3}) {
      const auto r = run("gemm --json --force --mode " + mode + " " + q("a.npy") + " " + q("b.npy") + " " + q("d.npy"),
                         "OMP_NUM_THREADS=" + std::to_string(threads));
      ASSERT_EQ(r.status, 0) << r.err;
      auto j = nlohmann::json::parse(r.out);
      if (mode != "dequant") {
        EXPECT_EQ(j["compared_mode"], mode == "exact" ? "relaxed" : "exact");
        EXPECT_EQ(j["differing_elements"], differing);
      }
      for (const char* timing : {"quantize_ms", "gemm_ms", "fp32_gemm_ms"}) j.erase(timing);
      const std::string d = slurp(path("d.npy"));
      if (threads == 1) {
        first_d = d;
        first_metrics = j.dump();
      } else {
        EXPECT_EQ(d, first_d) << mode << ": D differs between 1 and " << threads << " threads";
        EXPECT_EQ(j.dump(), first_metrics) << mode << ": metrics differ between 1 and " << threads << " threads";
      }
    }
  }
  const auto text = run("gemm " + q("a.npy") + " " + q("b.npy"));
  EXPECT_NE(text.out.find("exact vs relaxed: " + std::to_string(differing) + " of " + std::to_string(m * n) + " elements differ"),
            std::string::npos)
      << text.out;
}

// ---- inputs and outputs -------------------------------------------------------------------

TEST_F(Cli, Bfloat16SavedAsRawTwoByteArraysWithInputDtype) {
  // bf16 bits of an outlier matrix, saved as '|V2' and as '<u2' (NumPy has no bf16 type).
  const auto x = outlier_matrix(kRows, kCols, 14);
  std::vector<bf16> as_bf16(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) as_bf16[i] = bf16::from_float(x[i]);
  for (const auto dtype : {io::npy_dtype::void2, io::npy_dtype::uint16}) {
    io::npy_array raw;
    raw.dtype = dtype;
    raw.shape = {kRows, kCols};
    raw.bytes.resize(as_bf16.size() * 2);
    std::memcpy(raw.bytes.data(), as_bf16.data(), raw.bytes.size());
    io::write_npy(path("raw.npy"), raw);
    EXPECT_EQ(run("quantize --force " + q("raw.npy") + " " + q("w.safetensors")).status, 16);
    ASSERT_EQ(run("quantize --quiet --force --input-dtype bf16 " + q("raw.npy") + " " + q("w.safetensors")).status, 0);
    const auto expected = quantize<nvfp4_1x16>(matrix_view<const bf16>::row_major(as_bf16.data(), kRows, kCols));
    const auto stored = io::read_safetensors(path("w.safetensors"));
    std::vector<std::uint8_t> expected_bytes;
    for (auto unit : expected.data()) expected_bytes.push_back(unit.bits());
    EXPECT_EQ(stored.at("W.weight").bytes, expected_bytes);
    const auto stats = nlohmann::json::parse(run("stats --json --input-dtype bf16 " + q("raw.npy") + " " + q("raw.npy")).out);
    EXPECT_TRUE(stats["exact"].get<bool>());
  }
}

TEST_F(Cli, OutputsThroughSymlinksAndNeverOverAReadOnlyFile) {
  io::write_npy(path("x.npy"), io::make_float32_array(outlier_matrix(kRows, kCols, 15), {kRows, kCols}));
  write_raw("real.safetensors", "old");
  fs::create_symlink("real.safetensors", path("link.safetensors"));
  ASSERT_EQ(run("quantize --quiet " + q("x.npy") + " " + q("link.safetensors")).status, 17);  // exists
  ASSERT_EQ(run("quantize --quiet --force " + q("x.npy") + " " + q("link.safetensors")).status, 0);
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(path("link.safetensors"))));
  EXPECT_NO_THROW((void)io::read_safetensors(path("real.safetensors")));
  write_raw("locked.safetensors", "keep");
  fs::permissions(path("locked.safetensors"), fs::perms::owner_read);
  const auto r = run("quantize --force " + q("x.npy") + " " + q("locked.safetensors"));
  EXPECT_EQ(r.status, 17);
  EXPECT_NE(r.err.find("read-only"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(path("locked.safetensors")), "keep");
  // Stopped by the file size limit (SIGXFSZ): an I/O error, and no temporary left behind.
  const auto limited = run("quantize " + q("x.npy") + " " + q("out.safetensors"), "ulimit -f 1;");
  EXPECT_EQ(limited.status, 17) << limited.err;
  expect_only_files({"x.npy", "real.safetensors", "link.safetensors", "locked.safetensors"});
}

TEST_F(Cli, InspectAlignsLongTensorNames) {
  io::safetensors_file file;
  file.add({"short", io::safetensors_dtype::f32, {2}, std::vector<std::uint8_t>(8)});
  file.add({"model.layers.31.self_attn.o_proj.weight_scale_inverse.long_name",
            io::safetensors_dtype::u8,
            {3, 5},
            std::vector<std::uint8_t>(15)});
  io::write_safetensors(path("t.safetensors"), file);
  const auto r = run("inspect " + q("t.safetensors"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<std::size_t> dtype_columns;
  while (std::getline(lines, line))
    for (const std::string dtype : {" dtype ", " F32 ", " U8 "})
      if (const auto at = line.find(dtype); at != std::string::npos && line.rfind("  ", 0) == 0) dtype_columns.push_back(at);
  ASSERT_EQ(dtype_columns.size(), 3u) << r.out;
  EXPECT_EQ(dtype_columns[0], dtype_columns[1]) << r.out;
  EXPECT_EQ(dtype_columns[0], dtype_columns[2]) << r.out;
}

}  // namespace
}  // namespace nvfp4
