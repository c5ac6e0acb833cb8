// Tests for nvfp4/io/quantized_checkpoint.hpp: the ModelOpt tensor layout (names, dtypes, shapes
// written out by hand from the format), bit-exact store/load for every format, a hand-made
// ModelOpt file without our metadata dequantized by hand, and inconsistent files.
#include "nvfp4/io/quantized_checkpoint.hpp"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace nvfp4::io {
namespace {
namespace io_quantized_checkpoint_test {

std::vector<float> outlier_matrix(index_t rows, index_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (auto& v : x) v = normal(rng);
  x[3] = 40.0f;
  x[x.size() / 2] = -25.0f;
  return x;
}

template <class Format>
class CheckpointRoundTrip : public ::testing::Test {};
using all_formats = ::testing::Types<nvfp4_1x16, nvfp4_16x16, mxfp4, mxfp8>;
TYPED_TEST_SUITE(CheckpointRoundTrip, all_formats);

TYPED_TEST(CheckpointRoundTrip, StoreSerializeParseLoadIsBitExact) {
  using Format = TypeParam;
  for (const bool swizzle : {false, true}) {
    const index_t rows = 40, cols = 96;
    const auto x = outlier_matrix(rows, cols, 7);
    const auto q = quantize<Format>(matrix_view<const float>::row_major(x.data(), rows, cols));
    safetensors_file file;
    store_options options;
    options.swizzle = swizzle;
    add_quantized_tensor(file, "layer.0.w", q, options);
    const auto image = serialize_safetensors(file);
    const safetensors_file back = parse_safetensors(image.data(), image.size());

    // The layout, from the ModelOpt convention.
    const auto& weight = back.at("layer.0.w.weight");
    const auto& scale = back.at("layer.0.w.weight_scale");
    const index_t block = Format::has_tensor_scale ? 16 : 32;
    EXPECT_EQ(weight.dtype, Format::is_fp4 ? safetensors_dtype::u8 : safetensors_dtype::f8_e4m3);
    EXPECT_EQ(weight.shape, (std::vector<std::int64_t>{rows, Format::is_fp4 ? cols / 2 : cols}));
    EXPECT_EQ(scale.dtype, Format::has_tensor_scale ? safetensors_dtype::f8_e4m3 : safetensors_dtype::u8);
    if (swizzle)
      EXPECT_EQ(scale.shape, (std::vector<std::int64_t>{128, block == 16 ? 8 : 4}));  // 6 or 3 scale columns, padded to 4
    else
      EXPECT_EQ(scale.shape, (std::vector<std::int64_t>{rows, cols / block}));
    if constexpr (Format::has_tensor_scale) {
      const auto& scale_2 = back.at("layer.0.w.weight_scale_2");
      EXPECT_EQ(scale_2.dtype, safetensors_dtype::f32);
      EXPECT_TRUE(scale_2.shape.empty());
      float s2;
      std::memcpy(&s2, scale_2.bytes.data(), 4);
      const float amax = 40.0f;  // the planted outlier
      EXPECT_NEAR(s2, amax / 2688.0f, 1e-6f * amax / 2688.0f);
    } else {
      EXPECT_EQ(back.find("layer.0.w.weight_scale_2"), nullptr);
    }
    EXPECT_EQ(back.metadata.at("format"), "pt");

    const auto loaded = load_quantized_tensor<Format>(back, "layer.0.w");
    ASSERT_EQ(loaded.rows(), rows);
    ASSERT_EQ(loaded.cols(), cols);
    for (std::size_t i = 0; i < q.data().size(); ++i) ASSERT_EQ(loaded.data()[i].bits(), q.data()[i].bits()) << i;
    for (std::size_t i = 0; i < q.scales().size(); ++i) ASSERT_EQ(loaded.scales()[i].bits(), q.scales()[i].bits()) << i;
    EXPECT_EQ(loaded.decode_scale(), q.decode_scale());
    EXPECT_EQ(loaded.amax(), q.amax());
    const restored_tensor restored = dequantize_tensor(back, "layer.0.w");
    EXPECT_EQ(restored.shape, (std::vector<std::int64_t>{rows, cols}));
    EXPECT_EQ(restored.values, dequantize(q));

    const auto info = describe_quantized_tensor(back, "layer.0.w");
    EXPECT_TRUE(info.has_metadata);
    EXPECT_EQ(info.swizzled, swizzle);
    EXPECT_EQ(quantized_tensor_names(back), std::vector<std::string>{"layer.0.w"});
  }
}

TEST(Checkpoint, OddColumnsAndNdShape) {
  const index_t rows = 6, cols = 21;
  const auto x = outlier_matrix(rows, cols, 3);
  const auto q = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), rows, cols));
  safetensors_file file;
  store_options options;
  options.source_shape = {2, 3, 21};
  add_quantized_tensor(file, "w", q, options);
  EXPECT_EQ(file.at("w.weight").shape, (std::vector<std::int64_t>{6, 11}));
  EXPECT_EQ(file.at("w.weight_scale").shape, (std::vector<std::int64_t>{6, 2}));
  const auto restored = dequantize_tensor(file, "w");
  EXPECT_EQ(restored.shape, (std::vector<std::int64_t>{2, 3, 21}));
  EXPECT_EQ(restored.values, dequantize(q));
}

TEST(Checkpoint, HandMadeModelOptFileWithoutMetadata) {
  // One row of 16 NVFP4 elements: codes 0..15 (nibble pairs 0x10, 0x32, ...), block scale
  // E4M3 0x40 = 2.0, tensor decode scale 0.25. x = e2m1(code) * 2 * 0.25.
  safetensors_file file;
  std::vector<std::uint8_t> packed;
  for (int i = 0; i < 8; ++i) packed.push_back(static_cast<std::uint8_t>((2 * i) | ((2 * i + 1) << 4)));
  file.add({"m.weight", safetensors_dtype::u8, {1, 8}, packed});
  file.add({"m.weight_scale", safetensors_dtype::f8_e4m3, {1, 1}, {0x40}});
  std::vector<std::uint8_t> quarter(4);
  const float decode = 0.25f;
  std::memcpy(quarter.data(), &decode, 4);
  file.add({"m.weight_scale_2", safetensors_dtype::f32, {}, quarter});
  const float e2m1_values[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  const auto restored = dequantize_tensor(file, "m");
  ASSERT_EQ(restored.values.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(restored.values[static_cast<std::size_t>(i)], e2m1_values[i] * 0.5f) << i;
  const auto info = describe_quantized_tensor(file, "m");
  EXPECT_FALSE(info.has_metadata);
  EXPECT_EQ(info.format, stored_format::nvfp4_1x16);
  EXPECT_EQ(info.amax, 0.25f * 2688.0f);

  // MXFP8 by hand: E4M3 0x38 = 1.0, 0xC0 = -2.0; E8M0 scale 128 = 2^1.
  safetensors_file mx;
  std::vector<std::uint8_t> elements(32, 0);
  elements[0] = 0x38;
  elements[31] = 0xC0;
  mx.add({"e.weight", safetensors_dtype::f8_e4m3, {1, 32}, elements});
  mx.add({"e.weight_scale", safetensors_dtype::u8, {1, 1}, {128}});
  const auto mx_restored = dequantize_tensor(mx, "e");
  EXPECT_EQ(mx_restored.values[0], 2.0f);
  EXPECT_EQ(mx_restored.values[31], -4.0f);
  EXPECT_EQ(mx_restored.values[5], 0.0f);
}

errc code_of(const safetensors_file& file, const std::string& name) {
  try {
    dequantize_tensor(file, name);
  } catch (const error& e) {
    return e.code();
  }
  return errc{};
}

TEST(Checkpoint, InconsistentFilesAreReported) {
  const index_t rows = 16, cols = 32;
  const auto x = outlier_matrix(rows, cols, 5);
  const auto q = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), rows, cols));
  safetensors_file good;
  add_quantized_tensor(good, "w", q);
  EXPECT_EQ(code_of(good, "w"), errc{});
  EXPECT_EQ(code_of(good, "v"), errc::invalid_argument);

  auto without = [&](const std::string& name) {
    safetensors_file f = good;
    std::erase_if(f.tensors, [&](const safetensors_tensor& t) { return t.name == name; });
    return f;
  };
  EXPECT_EQ(code_of(without("w.weight_scale_2"), "w"), errc::malformed_file);
  EXPECT_EQ(code_of(without("w.weight"), "w"), errc::malformed_file);  // metadata without data

  auto changed = [&](auto&& edit) {
    safetensors_file f = good;
    edit(f);
    return f;
  };
  auto tensor = [](safetensors_file& f, const std::string& name) -> safetensors_tensor& {
    for (auto& t : f.tensors)
      if (t.name == name) return t;
    throw std::logic_error("missing");
  };
  EXPECT_EQ(code_of(changed([&](auto& f) { tensor(f, "w.weight").dtype = safetensors_dtype::i8; }), "w"), errc::dtype_mismatch);
  EXPECT_EQ(code_of(changed([&](auto& f) { tensor(f, "w.weight_scale").dtype = safetensors_dtype::u8; }), "w"), errc::dtype_mismatch);
  EXPECT_EQ(code_of(changed([&](auto& f) { tensor(f, "w.weight").shape = {32, 8}; }), "w"), errc::shape_mismatch);
  EXPECT_EQ(code_of(changed([&](auto& f) { tensor(f, "w.weight_scale").shape = {1, 32}; }), "w"), errc::shape_mismatch);
  EXPECT_EQ(code_of(changed([&](auto& f) { tensor(f, "w.weight").shape = {256}; }), "w"), errc::shape_mismatch);
  EXPECT_EQ(code_of(changed([&](auto& f) { tensor(f, "w.weight_scale_2").dtype = safetensors_dtype::i32; }), "w"), errc::dtype_mismatch);
  EXPECT_EQ(code_of(changed([](auto& f) { f.metadata["nvfp4.w"] = "{not json"; }), "w"), errc::malformed_file);
  EXPECT_EQ(code_of(changed([](auto& f) { f.metadata["nvfp4.w"] = R"({"format":"nvfp4"})"; }), "w"), errc::malformed_file);
  EXPECT_EQ(code_of(changed([](auto& f) {
                      f.metadata["nvfp4.w"] =
                          R"({"format":"nvfp5","block":[1,16],"rows":16,"cols":32,"shape":[16,32],"scale_layout":"compact","amax":1})";
                    }),
                    "w"),
            errc::unsupported);
  EXPECT_EQ(code_of(changed([](auto& f) {
                      f.metadata["nvfp4.w"] =
                          R"({"format":"nvfp4","block":[1,16],"rows":16,"cols":32,"shape":[4,32],"scale_layout":"compact","amax":1})";
                    }),
                    "w"),
            errc::malformed_file);
  EXPECT_EQ(code_of(changed([](auto& f) {
                      f.metadata["nvfp4.w"] =
                          R"({"format":"nvfp4","block":[1,16],"rows":16,"cols":32,"shape":[16,32],"scale_layout":"zigzag","amax":1})";
                    }),
                    "w"),
            errc::malformed_file);
  // Asking for the wrong format.
  EXPECT_THROW(load_quantized_tensor<mxfp4>(good, "w"), error);
  // Adding the same name twice leaves the file as it was.
  safetensors_file twice = good;
  EXPECT_THROW(add_quantized_tensor(twice, "w", q), error);
  EXPECT_EQ(twice.tensors.size(), good.tensors.size());
}

std::pair<errc, std::string> error_of(const safetensors_file& file, const std::string& name, const load_options& options = {}) {
  try {
    dequantize_tensor(file, name, options);
  } catch (const error& e) {
    return {e.code(), e.what()};
  }
  return {errc{}, ""};
}

/// Our metadata for a [rows, cols] NVFP4 1x16 tensor "w", with `field` replaced by `value` (raw
/// JSON text) when given.
std::string metadata_text(index_t rows, index_t cols, const std::string& field = "", const std::string& value = "",
                          const std::string& layout = "compact", const std::string& rht = "none") {
  std::map<std::string, std::string> fields = {{"format", R"("nvfp4")"},
                                               {"block", "[1,16]"},
                                               {"rows", std::to_string(rows)},
                                               {"cols", std::to_string(cols)},
                                               {"shape", "[" + std::to_string(rows) + "," + std::to_string(cols) + "]"},
                                               {"scale_layout", "\"" + layout + "\""},
                                               {"rht", "\"" + rht + "\""},
                                               {"rounding", R"("nearest_even")"},
                                               {"seed", "0"},
                                               {"amax", "1.5"}};
  if (!field.empty()) fields[field] = value;
  std::string text = "{";
  for (const auto& [k, v] : fields) {
    if (text.size() > 1) text += ',';
    text += '"';
    text += k;
    text += "\":";
    text += v;
  }
  return text + "}";
}

/// A file holding "w" = an NVFP4 2 x 32 tensor (every element code 0x1 = 0.5, scales 0x38 = 1)
/// with weight_scale_2 `decode`, with our metadata or without (ModelOpt layout).
safetensors_file small_file(float decode, bool with_metadata = true,
                            std::vector<std::uint8_t> scales = std::vector<std::uint8_t>(4, 0x38)) {
  safetensors_file f;
  f.add({"w.weight", safetensors_dtype::u8, {2, 16}, std::vector<std::uint8_t>(32, 0x11)});
  f.add({"w.weight_scale", safetensors_dtype::f8_e4m3, {2, 2}, std::move(scales)});
  std::vector<std::uint8_t> bytes(4);
  std::memcpy(bytes.data(), &decode, 4);
  f.add({"w.weight_scale_2", safetensors_dtype::f32, {}, bytes});
  if (with_metadata) f.metadata["nvfp4.w"] = metadata_text(2, 32);
  return f;
}

TEST(CheckpointMalformed, MetadataNumbersMustBeExactIntegersInRange) {
  safetensors_file f = small_file(0.25f);
  ASSERT_EQ(error_of(f, "w").first, errc{});
  const std::vector<std::tuple<std::string, std::string, std::string>> bad = {
      {"rows", "32.5", "metadata 'rows' is 32.5"},
      {"rows", "2.0", "metadata 'rows' is 2.0"},
      {"rows", "-2", "metadata 'rows' is -2"},
      {"rows", "1.9e19", "metadata 'rows' is 1.9e+19"},
      {"rows", "\"2\"", "metadata 'rows' is \"2\""},
      {"cols", "9223372036854775807", "metadata 'cols' is 9223372036854775807"},
      {"shape", "[2,32.5]", "metadata 'shape' entry is 32.5"},
      {"block", "[1,16.5]", "metadata 'block' entry is 16.5"},
      {"seed", "0.5", "metadata 'seed' is 0.5"},
      {"amax", "-1", "metadata 'amax' is -1"},
      {"amax", "1e39", "metadata 'amax' is 1e+39"},
      {"amax", "\"big\"", "metadata 'amax' is \"big\""},
      {"rounding", "\"up\"", "metadata 'rounding' is 'up'"},
  };
  for (const auto& [field, value, expected] : bad) {
    f.metadata["nvfp4.w"] = metadata_text(2, 32, field, value);
    const auto [code, what] = error_of(f, "w");
    EXPECT_EQ(code, errc::malformed_file) << field << " = " << value;
    EXPECT_NE(what.find(expected), std::string::npos) << what;
  }
  // rows x cols above the limit, and a key twice in the metadata object.
  f.metadata["nvfp4.w"] = metadata_text(std::int64_t{1} << 30, std::int64_t{1} << 30);
  EXPECT_NE(error_of(f, "w").second.find("more than 1099511627776 elements"), std::string::npos) << error_of(f, "w").second;
  f.metadata["nvfp4.w"] = metadata_text(2, 32).insert(1, "\"rows\":2,");
  EXPECT_NE(error_of(f, "w").second.find("key 'rows' twice"), std::string::npos) << error_of(f, "w").second;
}

TEST(CheckpointMalformed, ShapesOfAHandBuiltFileAreCheckedWithoutOverflow) {
  // A ModelOpt-style weight [0, 2^62] (cols would be 2^63) and [0, 2^40]: refused, not wrapped.
  for (const std::int64_t cols : {std::int64_t{1} << 62, std::int64_t{1} << 40}) {
    safetensors_file f;
    f.tensors.push_back({"w.weight", safetensors_dtype::u8, {0, cols}, {}});
    f.tensors.push_back({"w.weight_scale", safetensors_dtype::f8_e4m3, {0, 0}, {}});
    f.tensors.push_back({"w.weight_scale_2", safetensors_dtype::f32, {}, std::vector<std::uint8_t>(4)});
    const auto [code, what] = error_of(f, "w");
    EXPECT_EQ(code, errc::malformed_file) << cols;
    EXPECT_EQ(what.find("-"), std::string::npos) << "no negative size in: " << what;
  }
}

TEST(CheckpointEmpty, HugeRowsOfNoColumnsDequantizeAtOnce) {
  // rows = 2^40, cols = 0, with RHT and with the 128x4 layout: an empty result at once.
  const index_t rows = max_element_count;
  for (const auto& [layout, rht] :
       {std::pair<std::string, std::string>{"compact", "te16_rows"}, {"128x4", "none"}, {"128x4", "te16_rows"}}) {
    safetensors_file f;
    f.add({"w.weight", safetensors_dtype::u8, {rows, 0}, {}});
    f.add({"w.weight_scale", safetensors_dtype::f8_e4m3, {rows, 0}, {}});
    std::vector<std::uint8_t> one(4);
    const float decode = 1.0f;
    std::memcpy(one.data(), &decode, 4);
    f.add({"w.weight_scale_2", safetensors_dtype::f32, {}, one});
    f.metadata["nvfp4.w"] = metadata_text(rows, 0, "", "", layout, rht);
    const auto restored = dequantize_tensor(f, "w");
    EXPECT_EQ(restored.shape, (std::vector<std::int64_t>{rows, 0})) << layout << " " << rht;
    EXPECT_TRUE(restored.values.empty());
  }
}

TYPED_TEST(CheckpointRoundTrip, EmptyTensorsInThe128x4LayoutReadBack) {
  // An empty scale matrix pads to nothing: the writer stores it in its own shape and the reader
  // expects exactly that (the fuzzer found a writer that padded 2^40 - 2 empty rows to 2^40).
  using Format = TypeParam;
  const float unused = 0.0f;
  for (const auto& [rows, cols] : {std::pair<index_t, index_t>{0, 64}, {300, 0}, {max_element_count - 2, 0}}) {
    const auto q = quantize<Format>(matrix_view<const float>::row_major(&unused, rows, cols));
    safetensors_file file;
    store_options swizzled;
    swizzled.swizzle = true;
    add_quantized_tensor(file, "w", q, swizzled);
    EXPECT_EQ(file.at("w.weight_scale").shape, (std::vector<std::int64_t>{rows, q.scale_cols()}));
    const auto image = serialize_safetensors(file);
    const auto restored = dequantize_tensor(parse_safetensors(image.data(), image.size()), "w");
    EXPECT_EQ(restored.shape, (std::vector<std::int64_t>{rows, cols}));
    EXPECT_TRUE(restored.values.empty());
  }
}

TEST(CheckpointMalformed, InvalidScalesAreRefusedUnlessAskedForAndNamed) {
  const load_options forensic{.accept_invalid_scales = true};
  for (const bool with_metadata : {true, false}) {
    SCOPED_TRACE(with_metadata ? "ours" : "ModelOpt layout");
    for (const float decode : {NAN, INFINITY, -0.25f, -0.0f}) {
      const auto f = small_file(decode, with_metadata);
      const auto [code, what] = error_of(f, "w");
      EXPECT_EQ(code, errc::malformed_file) << decode;
      EXPECT_NE(what.find("w.weight_scale_2 is"), std::string::npos) << what;
      EXPECT_NE(what.find("--accept-invalid-scales"), std::string::npos) << what;
      const auto read = dequantize_tensor(f, "w", forensic);
      EXPECT_EQ(std::isnan(read.values[0]), std::isnan(decode));  // 0.5 * 1 * decode
      if (!std::isnan(decode)) {
        EXPECT_EQ(read.values[0], 0.5f * decode);
      }
    }
    // Block scale (1, 0) is NaN (0x7F), or has its sign bit set (0xB8: 1.0 to us, -1.0 to PyTorch).
    for (const std::uint8_t code_byte : {std::uint8_t{0x7F}, std::uint8_t{0xFF}, std::uint8_t{0xB8}}) {
      std::vector<std::uint8_t> scales(4, 0x38);
      scales[2] = code_byte;
      const auto f = small_file(0.25f, with_metadata, scales);
      const auto [code, what] = error_of(f, "w");
      EXPECT_EQ(code, errc::malformed_file);
      EXPECT_NE(what.find("block scale (1, 0) of w.weight_scale is byte " + std::to_string(code_byte)), std::string::npos) << what;
      const auto read = dequantize_tensor(f, "w", forensic);
      EXPECT_EQ(std::isnan(read.values[32]), code_byte != 0xB8) << int{code_byte};
    }
  }
  // MX: E8M0 0xFF is NaN.
  safetensors_file mx;
  mx.add({"e.weight", safetensors_dtype::f8_e4m3, {1, 32}, std::vector<std::uint8_t>(32, 0x38)});
  mx.add({"e.weight_scale", safetensors_dtype::u8, {1, 1}, {0xFF}});
  EXPECT_NE(error_of(mx, "e").second.find("block scale (0, 0) of e.weight_scale is byte 255 (NaN)"), std::string::npos)
      << error_of(mx, "e").second;
  EXPECT_TRUE(std::isnan(dequantize_tensor(mx, "e", forensic).values[0]));
}

template <class Format>
void expect_te_ceil_edge(float at_edge, float below_edge, std::uint8_t scale_byte, std::uint8_t top_code, std::uint8_t below_code) {
  // A block of 32 equal values: TE's ceil rule gives scale 2^(scale_byte - 127); the element
  // rounds up to the next code at `at_edge` (a tie, to even) and its decoded value is 2^128.
  for (const float x : {at_edge, below_edge}) {
    const std::vector<float> v(32, x);
    const auto q = quantize<Format>(matrix_view<const float>::row_major(v.data(), 1, 32), {.mx_rule = mx_scale_rule::te_ceil});
    EXPECT_EQ(q.scales()[0].bits(), scale_byte) << x;
    const std::uint8_t code = x == at_edge ? top_code : below_code;
    if constexpr (Format::is_fp4)
      EXPECT_EQ(q.data()[0].bits(), static_cast<std::uint8_t>(code | (code << 4))) << x;
    else
      EXPECT_EQ(q.data()[0].bits(), code) << x;
    safetensors_file file;
    if (x == at_edge) {
      // Such a tensor is not stored: the file would not read back (issue 34 item 4).
      EXPECT_EQ(dequantize(q)[0], std::numeric_limits<float>::infinity());
      try {
        add_quantized_tensor(file, "w", q);
        ADD_FAILURE() << "stored";
      } catch (const error& e) {
        EXPECT_EQ(e.code(), errc::overflow);
        const std::string what = e.what();
        EXPECT_NE(what.find("not storing tensor 'w': the file would not read back"), std::string::npos) << what;
        EXPECT_NE(what.find("tensor 'w': dequantized element (0, 0) overflows float"), std::string::npos) << what;
      }
      EXPECT_TRUE(file.tensors.empty());
      EXPECT_TRUE(file.metadata.empty());
    } else {
      add_quantized_tensor(file, "w", q);
      EXPECT_TRUE(std::isfinite(dequantize_tensor(file, "w").values[0]));
    }
  }
}

TEST(CheckpointMalformed, TeCeilBlocksAtFloatsTopAreTesCodesButNotStored) {
  // MXFP4: amax 1.75 * 2^127 / 6 -> scale 2^126 (byte 253); 3.5 ties to 4 (E2M1 0x6); just below
  // it rounds to 3 (0x5).
  expect_te_ceil_edge<mxfp4>(0x1.cp+127f, 0x1.bffffep+127f, 253, 0x6, 0x5);
  // MXFP8: amax 1.9375 * 2^127 / 448 -> scale 2^120 (byte 247); 248 ties to 256 (E4M3 0x78); just
  // below it rounds to 240 (0x77).
  expect_te_ceil_edge<mxfp8>(0x1.fp+127f, 0x1.effffep+127f, 247, 0x78, 0x77);
}

TEST(CheckpointMalformed, ValuesTooLargeForFloatOrForTheInverseRhtAreOverflowErrors) {
  // weight_scale_2 = 2^126 (finite): 0.5 * 1 * 2^126 = 2^125 per element; with RHT recorded, the
  // inverse transform of 16 equal values puts 4 * 2^125 = 2^127 in output 0 (fits bf16)...
  auto f = small_file(std::ldexp(1.0f, 126));
  f.metadata["nvfp4.w"] = metadata_text(2, 32, "", "", "compact", "te16_rows");
  EXPECT_EQ(error_of(f, "w").first, errc{});
  // ...but with block scales 448 (0x7E) the elements are 224 * 2^126 > float's max: overflow.
  auto g = small_file(std::ldexp(1.0f, 126), true, std::vector<std::uint8_t>(4, 0x7E));
  const auto [code, what] = error_of(g, "w");
  EXPECT_EQ(code, errc::overflow);
  EXPECT_NE(what.find("tensor 'w': dequantized element (0, 0) overflows float"), std::string::npos) << what;
  // weight_scale_2 = 2^124 and scales 8 (0x50): elements 2^126, finite; the inverse RHT makes
  // 4 * 2^126 = 2^128, beyond bf16.
  auto h = small_file(std::ldexp(1.0f, 124), true, std::vector<std::uint8_t>(4, 0x50));
  h.metadata["nvfp4.w"] = metadata_text(2, 32, "", "", "compact", "te16_rows");
  const auto [code_h, what_h] = error_of(h, "w");
  EXPECT_EQ(code_h, errc::overflow);
  EXPECT_NE(what_h.find("tensor 'w': inverse RHT of the dequantized values: hadamard input: the Hadamard transform of finite values "
                        "overflows bf16 at row 0, columns 0..15"),
            std::string::npos)
      << what_h;
}

TEST(CheckpointWriter, RefusesWhatItsReaderWouldRefuse) {
  const std::vector<float> v(32, 1.0f);
  const auto x = matrix_view<const float>::row_major(v.data(), 1, 32);
  safetensors_file file;
  // An empty name wrote ".weight", which no reader finds (load_checkpoint returned {}).
  EXPECT_THROW(add_quantized_tensor(file, "", quantize<nvfp4_1x16>(x)), error);
  // A NaN amax was written as null and refused on load.
  auto q = quantize<nvfp4_1x16>(x);
  q.set_tensor_scale(NAN, q.encode_scale(), q.decode_scale());
  EXPECT_THROW(add_quantized_tensor(file, "nan_amax", q), error);
  // A NaN tensor scale (weight_scale_2).
  auto r = quantize<nvfp4_1x16>(x);
  r.set_tensor_scale(r.amax(), NAN, NAN);
  EXPECT_THROW(add_quantized_tensor(file, "nan_scale", r), error);
  // RHT of FLT_MAX: the stored codes are TE's, their inverse RHT overflows bf16.
  const std::vector<float> big(32, FLT_MAX);
  try {
    add_quantized_tensor(file, "rht", quantize<nvfp4_1x16>(matrix_view<const float>::row_major(big.data(), 1, 32)), {.rht = true});
    ADD_FAILURE() << "stored";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::overflow) << e.what();
  }
  EXPECT_TRUE(file.tensors.empty());
  EXPECT_TRUE(file.metadata.empty());
  add_quantized_tensor(file, "fine", quantize<nvfp4_1x16>(x));
  EXPECT_EQ(file.tensors.size(), 3u);
}

// dequantize_tensor_in_pieces (issue 39 item 13: inspect and dequantize held the whole float
// tensor, 8x the packed bytes): pieces of every size give, concatenated, the whole tensor's
// values as nvfp4::dequantize computes them, and the same errors at the same elements.
template <class Format>
class CheckpointPieces : public ::testing::Test {};
TYPED_TEST_SUITE(CheckpointPieces, all_formats);

/// The values handed over piece by piece, concatenated, with the size of each piece.
std::pair<std::vector<float>, std::vector<std::size_t>> in_pieces(const safetensors_file& file, const std::string& name, index_t piece,
                                                                  const load_options& options = {}) {
  std::pair<std::vector<float>, std::vector<std::size_t>> out;
  (void)dequantize_tensor_in_pieces(
      file, name, options,
      [&](std::span<const float> v) {
        out.first.insert(out.first.end(), v.begin(), v.end());
        out.second.push_back(v.size());
      },
      piece);
  return out;
}

TYPED_TEST(CheckpointPieces, ConcatenatedPiecesAreTheWholeTensor) {
  using Format = TypeParam;
  for (const bool swizzle : {false, true})
    for (const index_t cols : {index_t{96}, index_t{97}}) {
      const index_t rows = 37;
      const auto x = outlier_matrix(rows, cols, 11);
      const auto q = quantize<Format>(matrix_view<const float>::row_major(x.data(), rows, cols));
      safetensors_file file;
      add_quantized_tensor(file, "w", q, {.swizzle = swizzle});
      const std::vector<float> whole = dequantize(q);
      // 1 and 7: row by row with columns cut at 32; 97: one row per piece; 500: whole rows.
      for (const index_t piece : {index_t{1}, index_t{7}, index_t{32}, index_t{97}, index_t{500}, dequantize_piece_elements}) {
        const auto [values, sizes] = in_pieces(file, "w", piece);
        EXPECT_EQ(values, whole) << "piece " << piece << " cols " << cols << " swizzle " << swizzle;
        for (const std::size_t n : sizes) EXPECT_LE(n, static_cast<std::size_t>(std::max<index_t>(piece, std::max<index_t>(32, cols))));
      }
      EXPECT_EQ(dequantize_tensor(file, "w").values, whole);
    }
}

TEST(CheckpointPieces, RhtPiecesAreTheWholeInverseTransform) {
  const index_t rows = 9, cols = 64;
  const auto x = outlier_matrix(rows, cols, 5);
  std::vector<bf16> rotated(x.size());
  hadamard_rows(matrix_view<const float>::row_major(x.data(), rows, cols), hadamard_transform::te_default(),
                matrix_view<bf16>::row_major(rotated.data(), rows, cols));
  const auto q = quantize<nvfp4_1x16>(matrix_view<const bf16>::row_major(rotated.data(), rows, cols));
  safetensors_file file;
  add_quantized_tensor(file, "w", q, {.rht = true});
  // The whole tensor's inverse transform, computed here directly.
  const std::vector<float> stored = dequantize(q);
  std::vector<bf16> back(stored.size());
  hadamard_rows(matrix_view<const float>::row_major(stored.data(), rows, cols), hadamard_transform::te_default(),
                matrix_view<bf16>::row_major(back.data(), rows, cols), hadamard_direction::inverse);
  std::vector<float> whole(back.size());
  for (std::size_t i = 0; i < back.size(); ++i) whole[i] = back[i].to_float();
  for (const index_t piece : {index_t{1}, index_t{40}, index_t{64}, index_t{200}, dequantize_piece_elements})
    EXPECT_EQ(in_pieces(file, "w", piece).first, whole) << piece;
}

TEST(CheckpointPieces, ErrorsNameTheSameElementWhateverThePieces) {
  // Block scales 448 of a 2^126 tensor scale in row 1 only: the first overflowing element is (1, 16).
  auto f = small_file(std::ldexp(1.0f, 126), true, std::vector<std::uint8_t>{0x38, 0x38, 0x38, 0x7E});
  for (const index_t piece : {index_t{1}, index_t{32}, index_t{64}}) {
    try {
      (void)in_pieces(f, "w", piece);
      ADD_FAILURE() << "no error, piece " << piece;
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::overflow);
      EXPECT_NE(std::string(e.what()).find("dequantized element (1, 16) overflows float"), std::string::npos) << e.what();
    }
  }
  // An inverse RHT that overflows bf16 in row 1 only (scales 8 there, tiny in row 0), named in
  // the tensor's coordinates whatever piece it fell in.
  auto h = small_file(std::ldexp(1.0f, 124), true, std::vector<std::uint8_t>{0x08, 0x08, 0x50, 0x08});
  h.metadata["nvfp4.w"] = metadata_text(2, 32, "", "", "compact", "te16_rows");
  for (const index_t piece : {index_t{1}, index_t{32}, index_t{64}}) {
    try {
      (void)in_pieces(h, "w", piece);
      ADD_FAILURE() << "no error, piece " << piece;
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::overflow);
      EXPECT_NE(std::string(e.what()).find("tensor 'w': inverse RHT of the dequantized values: hadamard input: the Hadamard transform "
                                           "of finite values overflows bf16 at row 1, columns 0..15"),
                std::string::npos)
          << e.what();
    }
  }
  // A NaN block scale: refused before any piece is handed over.
  auto n = small_file(0.25f, true, std::vector<std::uint8_t>{0x38, 0x38, 0x38, 0x7F});
  std::size_t handed = 0;
  EXPECT_THROW((void)dequantize_tensor_in_pieces(
                   n, "w", {}, [&](std::span<const float>) { ++handed; }, 32),
               error);
  EXPECT_EQ(handed, 0u);
}

TEST(Checkpoint, ZeroDimensionalSourceComesBackWithNoDimensions) {
  // A 0-d array is one element, quantized as a 1 x 1 matrix; its shape [] is recorded and given
  // back (it came back as [1, 1]); a 1-D one keeps its one dimension.
  const float one = 3.0f;
  const auto q = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(&one, 1, 1));
  safetensors_file file;
  add_quantized_tensor(file, "scalar", q, {.source_shape = std::vector<std::int64_t>{}});
  add_quantized_tensor(file, "vector", q, {.source_shape = std::vector<std::int64_t>{1}});
  add_quantized_tensor(file, "matrix", q);
  EXPECT_EQ(dequantize_tensor(file, "scalar").shape, std::vector<std::int64_t>{});
  EXPECT_EQ(dequantize_tensor(file, "scalar").values, dequantize(q));
  EXPECT_EQ(dequantize_tensor(file, "vector").shape, std::vector<std::int64_t>{1});
  EXPECT_EQ(dequantize_tensor(file, "matrix").shape, (std::vector<std::int64_t>{1, 1}));
  // A recorded [] must be one element.
  file.metadata["nvfp4.matrix"] = metadata_text(1, 1, "shape", "[]");
  EXPECT_EQ(dequantize_tensor(file, "matrix").shape, std::vector<std::int64_t>{});
}

}  // namespace io_quantized_checkpoint_test
}  // namespace
}  // namespace nvfp4::io
