// Tests for nvfp4/io/safetensors.hpp: files whose header text is written by hand here, the
// writer's layout checked against the format's definition, and every malformed-file case.
#include "nvfp4/io/safetensors.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace nvfp4::io {
namespace {
namespace io_safetensors_test {

namespace fs = std::filesystem;

/// A safetensors image: the 8-byte little-endian length of `header`, `header`, then `buffer`.
std::vector<std::uint8_t> image_of(const std::string& header, const std::vector<std::uint8_t>& buffer) {
  std::vector<std::uint8_t> image(8 + header.size() + buffer.size());
  for (std::size_t i = 0; i < 8; ++i) image[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  std::memcpy(image.data() + 8, header.data(), header.size());
  if (!buffer.empty()) std::memcpy(image.data() + 8 + header.size(), buffer.data(), buffer.size());
  return image;
}

std::vector<std::uint8_t> float_bytes(std::vector<float> v) {
  std::vector<std::uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

errc code_of_parse(const std::vector<std::uint8_t>& image, std::string* message = nullptr) {
  try {
    parse_safetensors(image.data(), image.size(), "test.safetensors");
  } catch (const error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  return errc{};
}

TEST(Safetensors, ParsesAHandWrittenFile) {
  // Two tensors deliberately listed out of buffer order, and metadata.
  const std::string header = R"({"b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]},)"
                             R"("__metadata__":{"format":"pt","note":"hi"},)"
                             R"("a":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]}})";
  auto buffer = float_bytes({1.5f, -2});
  buffer.insert(buffer.end(), {7, 8, 9});
  const auto image = image_of(header, buffer);
  const safetensors_file f = parse_safetensors(image.data(), image.size());
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].name, "a");  // buffer order
  EXPECT_EQ(f.at("a").dtype, safetensors_dtype::f32);
  EXPECT_EQ(f.at("a").shape, (std::vector<std::int64_t>{2, 1}));
  EXPECT_EQ(f.at("a").bytes, float_bytes({1.5f, -2}));
  EXPECT_EQ(f.at("b").bytes, (std::vector<std::uint8_t>{7, 8, 9}));
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.metadata.at("note"), "hi");
  EXPECT_EQ(f.find("c"), nullptr);
  EXPECT_THROW(f.at("c"), error);
}

TEST(Safetensors, ScalarAndEmptyTensors) {
  const std::string header =
      R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"e":{"dtype":"BF16","shape":[0,5],"data_offsets":[4,4]}})";
  const auto image = image_of(header, float_bytes({3}));
  const safetensors_file f = parse_safetensors(image.data(), image.size());
  EXPECT_EQ(f.at("s").element_count(), 1);
  EXPECT_TRUE(f.at("e").bytes.empty());
}

TEST(Safetensors, WriterFollowsTheFormat) {
  safetensors_file f;
  f.metadata["format"] = "pt";
  f.add({"w", safetensors_dtype::f8_e4m3, {2, 3}, {1, 2, 3, 4, 5, 6}});
  f.add({"x", safetensors_dtype::f32, {}, float_bytes({0.25f})});
  const auto image = serialize_safetensors(f);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | image[static_cast<std::size_t>(i)];
  EXPECT_EQ(n % 8, 0u);  // the buffer starts 8-byte aligned
  ASSERT_EQ(image.size(), 8 + n + 10);
  const auto header = nlohmann::json::parse(image.begin() + 8, image.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  EXPECT_EQ(header["w"]["dtype"], "F8_E4M3");
  EXPECT_EQ(header["w"]["shape"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(header["w"]["data_offsets"], nlohmann::json::array({0, 6}));
  EXPECT_EQ(header["x"]["data_offsets"], nlohmann::json::array({6, 10}));
  EXPECT_EQ(header["x"]["shape"], nlohmann::json::array());
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  EXPECT_EQ(image[8 + n], 1);
  const auto back = parse_safetensors(image.data(), image.size());
  EXPECT_EQ(back.at("w").bytes, f.at("w").bytes);
  EXPECT_EQ(back.at("x").bytes, f.at("x").bytes);
}

TEST(Safetensors, AddRejectsBadTensors) {
  safetensors_file f;
  f.add({"w", safetensors_dtype::u8, {2}, {1, 2}});
  EXPECT_THROW(f.add({"w", safetensors_dtype::u8, {1}, {1}}), error);         // duplicate
  EXPECT_THROW(f.add({"v", safetensors_dtype::f32, {2}, {1, 2, 3}}), error);  // size
  EXPECT_THROW(f.add({"", safetensors_dtype::u8, {0}, {}}), error);
  EXPECT_THROW(f.add({"__metadata__", safetensors_dtype::u8, {0}, {}}), error);
  EXPECT_EQ(f.tensors.size(), 1u);
}

TEST(Safetensors, InvalidUtf8NameIsRejectedOnWrite) {
  safetensors_file f;
  f.add({std::string("\xff\xfe"), safetensors_dtype::u8, {1}, {1}});
  try {
    serialize_safetensors(f);
    FAIL() << "no throw";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
}

TEST(SafetensorsMalformed, EveryCaseIsReported) {
  const auto t = [](const std::string& body) { return std::string(R"({"t":)") + body + "}"; };
  const std::vector<std::uint8_t> four = {0, 0, 0, 0};
  struct bad_case {
    const char* what;
    std::vector<std::uint8_t> image;
    errc expected;
  };
  std::vector<bad_case> cases;
  cases.push_back({"empty", {}, errc::malformed_file});
  cases.push_back({"short", {1, 0, 0}, errc::malformed_file});
  cases.push_back({"header past end", {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'}, errc::malformed_file});
  cases.push_back({"oversized header", {0, 0, 0, 0, 0, 0, 0, 1, '{', '}'}, errc::malformed_file});
  cases.push_back({"header 100 MB + 1", {0x01, 0xE1, 0xF5, 0x05, 0, 0, 0, 0}, errc::malformed_file});
  cases.push_back({"not json", image_of("{nope", {}), errc::malformed_file});
  cases.push_back({"truncated json", image_of(R"({"t":{"dtype":"F32")", {}), errc::malformed_file});
  cases.push_back({"array header", image_of("[]", {}), errc::malformed_file});
  cases.push_back(
      {"duplicate name",
       image_of(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"t":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", {1, 2}),
       errc::malformed_file});
  cases.push_back({"metadata not object", image_of(R"({"__metadata__":[1]})", {}), errc::malformed_file});
  cases.push_back({"metadata value not string", image_of(R"({"__metadata__":{"a":1}})", {}), errc::malformed_file});
  cases.push_back({"entry not object", image_of(t("3"), {}), errc::malformed_file});
  cases.push_back({"no dtype", image_of(t(R"({"shape":[1],"data_offsets":[0,4]})"), four), errc::malformed_file});
  cases.push_back({"dtype not string", image_of(t(R"({"dtype":4,"shape":[1],"data_offsets":[0,4]})"), four), errc::malformed_file});
  cases.push_back({"unknown dtype", image_of(t(R"({"dtype":"F7","shape":[1],"data_offsets":[0,4]})"), four), errc::unsupported});
  cases.push_back({"no shape", image_of(t(R"({"dtype":"F32","data_offsets":[0,4]})"), four), errc::malformed_file});
  cases.push_back({"negative dim", image_of(t(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"), four), errc::malformed_file});
  cases.push_back({"fractional dim", image_of(t(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})"), four), errc::malformed_file});
  cases.push_back({"no offsets", image_of(t(R"({"dtype":"F32","shape":[1]})"), four), errc::malformed_file});
  cases.push_back({"three offsets", image_of(t(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4,4]})"), four), errc::malformed_file});
  cases.push_back({"negative offset", image_of(t(R"({"dtype":"F32","shape":[1],"data_offsets":[-4,0]})"), four), errc::malformed_file});
  cases.push_back({"backwards offsets", image_of(t(R"({"dtype":"U8","shape":[0],"data_offsets":[4,0]})"), four), errc::malformed_file});
  cases.push_back(
      {"past buffer (truncated)", image_of(t(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})"), four), errc::malformed_file});
  cases.push_back({"shape vs span", image_of(t(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})"), four), errc::malformed_file});
  cases.push_back({"dtype vs span", image_of(t(R"({"dtype":"F16","shape":[1],"data_offsets":[0,4]})"), four), errc::malformed_file});
  cases.push_back({"shape overflow", image_of(t(R"({"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,4]})"), four),
                   errc::malformed_file});
  cases.push_back(
      {"overlap",
       image_of(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", four),
       errc::malformed_file});
  cases.push_back(
      {"gap",
       image_of(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", four),
       errc::malformed_file});
  cases.push_back({"trailing bytes", image_of(t(R"({"dtype":"U8","shape":[3],"data_offsets":[0,3]})"), four), errc::malformed_file});
  for (const auto& c : cases) {
    std::string message;
    EXPECT_EQ(code_of_parse(c.image, &message), c.expected) << c.what << ": " << message;
    EXPECT_NE(message.find("test.safetensors"), std::string::npos) << c.what << ": the message names the file";
  }
  EXPECT_EQ(code_of_parse(image_of(t(R"({"dtype":"U8","shape":[4],"data_offsets":[0,4]})"), four)), errc{});
}

TEST(SafetensorsMalformed, TruncatingAValidFileIsAlwaysReported) {
  safetensors_file f;
  f.add({"a", safetensors_dtype::f32, {2, 2}, float_bytes({1, 2, 3, 4})});
  f.add({"b", safetensors_dtype::u8, {3}, {5, 6, 7}});
  const auto image = serialize_safetensors(f);
  for (std::size_t size = 0; size < image.size(); ++size) {
    const std::vector<std::uint8_t> cut(image.begin(), image.begin() + static_cast<std::ptrdiff_t>(size));
    EXPECT_EQ(code_of_parse(cut), errc::malformed_file) << size;
  }
  EXPECT_EQ(code_of_parse(image), errc{});
}

TEST(SafetensorsFiles, AtomicWriteAndRead) {
  const nvfp4::test::scoped_temp_dir temp;
  const fs::path& directory = temp.path();
  const fs::path path = directory / "m.safetensors";
  safetensors_file f;
  f.add({"a", safetensors_dtype::u8, {2}, {1, 2}});
  write_safetensors(path, f);
  EXPECT_EQ(read_safetensors(path).at("a").bytes, (std::vector<std::uint8_t>{1, 2}));
  safetensors_file bad;
  bad.tensors.push_back({"a", safetensors_dtype::f32, {2}, {1}});  // bypasses add(): inconsistent
  EXPECT_THROW(write_safetensors(path, bad), error);
  EXPECT_EQ(read_safetensors(path).at("a").bytes, (std::vector<std::uint8_t>{1, 2}));  // untouched
  int files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(directory)) ++files;
  EXPECT_EQ(files, 1);
  try {
    read_safetensors(directory / "missing.safetensors");
    FAIL() << "no throw";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::io_error);
  }
}

TEST(SafetensorsMalformed, NulDuplicateKeysAndInexactNumbersAreReportedWithTheirPlace) {
  const std::vector<std::uint8_t> four = {0, 0, 0, 0};
  const auto t = [](const std::string& shape) {
    return std::string(R"({"t":{"dtype":"U8","shape":)") + shape + R"(,"data_offsets":[0,4]}})";
  };
  struct bad_case {
    std::vector<std::uint8_t> image;
    std::string expected;
  };
  std::string nul_header = R"({"__metadata__":{"a":"1"}})";
  nul_header += std::string(1, '\0') + R"(,"t":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
  const std::vector<bad_case> cases = {
      {image_of(nul_header, four), "holds a NUL byte at offset 26"},
      {image_of(R"({"__metadata__":{"a":"1"},"__metadata__":{"b":"2"}})", {}), "key '__metadata__' twice"},
      {image_of(R"({"__metadata__":{"a":"1","a":"2"}})", {}), "key 'a' twice"},
      {image_of(R"({"t":{"dtype":"U8","dtype":"F32","shape":[4],"data_offsets":[0,4]}})", four), "key 'dtype' twice"},
      {image_of(t("[32.5]"), four), "shape entry 32.5"},
      {image_of(t("[4.0]"), four), "shape entry 4.0"},
      {image_of(t("[-4]"), four), "shape entry -4"},
      {image_of(t("[1.9e19]"), four), "shape entry 1.9e+19"},
      {image_of(t("[18446744073709551615]"), four), "shape entry 18446744073709551615"},
      {image_of(t("[2199023255552, 0]"), four), "shape entry 2199023255552"},  // 2^41
      {image_of(t("[1099511627776, 2, 0]"), four), "more than 1099511627776 elements"},
      {image_of(R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[0.0,4]}})", four), "data offset 0.0"},
  };
  for (const auto& c : cases) {
    std::string message;
    EXPECT_EQ(code_of_parse(c.image, &message), errc::malformed_file) << c.expected;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
  // A huge dimension beside a zero one, within the limit: a valid empty tensor.
  const auto empty_image = image_of(R"({"t":{"dtype":"F32","shape":[1099511627776,0],"data_offsets":[0,0]}})", {});
  const auto empty = parse_safetensors(empty_image.data(), empty_image.size());
  EXPECT_EQ(empty.at("t").element_count(), 0);
}

TEST(SafetensorsMalformed, AnNpyFileIsRecognised) {
  std::vector<std::uint8_t> npy = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0x76, 0};
  npy.resize(128, ' ');
  std::string message;
  EXPECT_EQ(code_of_parse(npy, &message), errc::malformed_file);
  EXPECT_NE(message.find("this is an .npy file, not a safetensors file"), std::string::npos) << message;
}

}  // namespace io_safetensors_test
}  // namespace
}  // namespace nvfp4::io
