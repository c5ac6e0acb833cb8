// Tests for nvfp4/io/npy.hpp: .npy images built byte by byte here (v1/v2, C and Fortran order,
// every dtype conversion), the atomic writer, and every malformed-file case.
#include "nvfp4/io/npy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace nvfp4::io {
namespace {
namespace io_npy_test {

namespace fs = std::filesystem;

/// An .npy image with the given header dictionary text (padded like NumPy does) and payload.
std::vector<std::uint8_t> npy_image(const std::string& dict, const std::vector<std::uint8_t>& payload, int version = 1) {
  const std::size_t prefix = version == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  const std::uint8_t magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(version), 0};
  const std::size_t n = header.size();
  std::vector<std::uint8_t> image(prefix + n + payload.size());
  std::memcpy(image.data(), magic, 8);
  for (std::size_t i = 8; i < prefix; ++i) image[i] = static_cast<std::uint8_t>(n >> (8 * (i - 8)));
  std::memcpy(image.data() + prefix, header.data(), n);
  if (!payload.empty()) std::memcpy(image.data() + prefix + n, payload.data(), payload.size());
  return image;
}

template <class T>
std::vector<std::uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<std::uint8_t> out(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

errc code_of_parse(const std::vector<std::uint8_t>& image) {
  try {
    parse_npy(image.data(), image.size(), "test.npy");
  } catch (const error& e) {
    return e.code();
  }
  return errc{};
}

TEST(Npy, ParsesVersion1CorderFloat32) {
  const std::vector<float> values = {1, 2, 3, -4, 5.5f, 6};
  const auto image = npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", bytes_of(values));
  const npy_array a = parse_npy(image.data(), image.size());
  EXPECT_EQ(a.dtype, npy_dtype::float32);
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_FALSE(a.fortran_order);
  EXPECT_EQ(to_float32(a), values);
  EXPECT_EQ(matrix_shape_of(a).rows, 2);
  EXPECT_EQ(matrix_shape_of(a).cols, 3);
}

TEST(Npy, ParsesVersion2Header) {
  const std::vector<float> values = {7, 8};
  const auto image = npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", bytes_of(values), 2);
  const npy_array a = parse_npy(image.data(), image.size());
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(to_float32(a), values);
  EXPECT_EQ(matrix_shape_of(a).rows, 1);
  EXPECT_EQ(matrix_shape_of(a).cols, 2);
}

TEST(Npy, FortranOrderIsTransposedToCOrder) {
  // The 2x3 matrix [[1,2,3],[4,5,6]] in column-major order is 1,4,2,5,3,6.
  const auto image =
      npy_image("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", bytes_of(std::vector<float>{1, 4, 2, 5, 3, 6}));
  const npy_array a = parse_npy(image.data(), image.size());
  EXPECT_TRUE(a.fortran_order);
  EXPECT_EQ(to_float32(a), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Npy, FortranOrderThreeDimensions) {
  // Shape (2, 3, 4): Fortran linear index i + 2 j + 6 k holds the value 100 i + 10 j + k.
  std::vector<std::int32_t> fortran(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) fortran[static_cast<std::size_t>(i + 2 * j + 6 * k)] = 100 * i + 10 * j + k;
  const auto image = npy_image("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }", bytes_of(fortran));
  const npy_array c = to_c_order(parse_npy(image.data(), image.size()));
  EXPECT_FALSE(c.fortran_order);
  const auto values = c.as<std::int32_t>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(values[static_cast<std::size_t>(12 * i + 4 * j + k)], 100 * i + 10 * j + k);
  EXPECT_EQ(matrix_shape_of(c).rows, 6);
  EXPECT_EQ(matrix_shape_of(c).cols, 4);
}

TEST(Npy, HalfToFloatMatchesTheDefinitionForEveryCode) {
  for (std::uint32_t code = 0; code < 0x10000; ++code) {
    const int sign = (code >> 15) ? -1 : 1;
    const int exponent = (code >> 10) & 0x1F;
    const int mantissa = code & 0x3FF;
    const float got = half_to_float(static_cast<std::uint16_t>(code));
    if (exponent == 31) {
      if (mantissa == 0)
        EXPECT_EQ(got, sign * INFINITY) << code;
      else
        EXPECT_TRUE(std::isnan(got)) << code;
      continue;
    }
    const double expected = exponent == 0 ? sign * std::ldexp(mantissa, -24) : sign * std::ldexp(1024 + mantissa, exponent - 25);
    ASSERT_EQ(static_cast<double>(got), expected) << code;
    ASSERT_EQ(std::signbit(got), sign < 0) << code;
  }
}

TEST(Npy, Float16Bfloat16AndFloat64Convert) {
  const auto half = npy_image("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }",
                              bytes_of(std::vector<std::uint16_t>{0x3C00, 0xC000, 0x0001, 0x7BFF}));
  EXPECT_EQ(to_float32(parse_npy(half.data(), half.size())), (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), 65504.0f}));
  const auto bf =
      npy_image("{'descr': '<V2', 'fortran_order': False, 'shape': (3,), }", bytes_of(std::vector<std::uint16_t>{0x3F80, 0xC040, 0x4049}));
  EXPECT_EQ(to_float32(parse_npy(bf.data(), bf.size())), (std::vector<float>{1.0f, -3.0f, 3.140625f}));
  const auto f64 = npy_image("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
                             bytes_of(std::vector<double>{0.1, 1.0 + std::ldexp(1.0, -30)}));
  EXPECT_EQ(to_float32(parse_npy(f64.data(), f64.size())), (std::vector<float>{0.1f, 1.0f}));
}

TEST(Npy, IntegerArraysAreNotFloat) {
  const auto image = npy_image("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", bytes_of(std::vector<std::int32_t>{3}));
  try {
    to_float32(parse_npy(image.data(), image.size()));
    FAIL() << "no throw";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::dtype_mismatch);
  }
}

TEST(Npy, SerializeParseRoundTrip) {
  const std::vector<float> values = {0.5f, -1, 2, 3, 4, 5};
  for (const auto& shape : {std::vector<std::int64_t>{6}, {2, 3}, {1, 2, 3}, {}}) {
    const std::vector<float> used(values.begin(), values.begin() + (shape.empty() ? 1 : 6));
    const npy_array a = make_float32_array(used, shape);
    const auto image = serialize_npy(a);
    EXPECT_EQ(image.size() % 64, used.size() * 4 % 64);  // header padded to 64 bytes
    const npy_array b = parse_npy(image.data(), image.size());
    EXPECT_EQ(b.shape, shape);
    EXPECT_EQ(to_float32(b), used);
  }
}

TEST(Npy, SerializeRejectsInconsistentArray) {
  npy_array a;
  a.shape = {2, 2};
  a.bytes.resize(12);
  EXPECT_THROW(serialize_npy(a), error);
  EXPECT_THROW(make_float32_array(std::vector<float>(3), {2, 2}), error);
}

class NpyFiles : public nvfp4::test::temp_dir_test {};

TEST_F(NpyFiles, WriteReadRoundTripLeavesNoTemporaries) {
  const std::vector<float> values = {1, 2, 3, 4};
  write_npy(dir_ / "a.npy", make_float32_array(values, {2, 2}));
  EXPECT_EQ(to_float32(read_npy(dir_ / "a.npy")), values);
  int files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1);
}

TEST_F(NpyFiles, FailedWriteLeavesTheOldFile) {
  const fs::path path = dir_ / "a.npy";
  write_npy(path, make_float32_array(std::vector<float>{9}, {1}));
  npy_array bad;
  bad.shape = {4};
  bad.bytes.resize(3);
  EXPECT_THROW(write_npy(path, bad), error);
  EXPECT_EQ(to_float32(read_npy(path)), (std::vector<float>{9}));
  try {
    write_npy(dir_ / "missing_dir" / "b.npy", make_float32_array(std::vector<float>{1}, {1}));
    FAIL() << "no throw";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::io_error);
  }
  EXPECT_FALSE(fs::exists(dir_ / "missing_dir"));
}

TEST_F(NpyFiles, MissingFileAndDirectoryAreIoErrors) {
  for (const auto& p : {dir_ / "nope.npy", dir_}) {
    try {
      read_npy(p);
      FAIL() << "no throw";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::io_error) << e.what();
    }
  }
}

TEST(NpyMalformed, EveryCaseIsReported) {
  const auto good = npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", bytes_of(std::vector<float>{1, 2}));
  struct bad_case {
    const char* what;
    std::vector<std::uint8_t> image;
    errc expected;
  };
  std::vector<bad_case> cases;
  cases.push_back({"empty", {}, errc::malformed_file});
  cases.push_back({"bad magic", {'N', 'U', 'M', 'P', 'Y', 0, 1, 0, 0, 0, 0}, errc::malformed_file});
  auto v9 = good;
  v9[6] = 9;
  cases.push_back({"version 9", v9, errc::unsupported});
  cases.push_back({"v2 preamble truncated", {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0, 0}, errc::malformed_file});
  auto long_header = good;
  long_header[8] = 0xFF;
  long_header[9] = 0xFF;
  cases.push_back({"header past end", long_header, errc::malformed_file});
  cases.push_back({"truncated data", std::vector<std::uint8_t>(good.begin(), good.end() - 1), errc::malformed_file});
  cases.push_back({"not a dict", npy_image("'descr': '<f4'", {}), errc::malformed_file});
  cases.push_back({"no descr", npy_image("{'fortran_order': False, 'shape': (1,), }", {0, 0, 0, 0}), errc::malformed_file});
  cases.push_back({"no shape", npy_image("{'descr': '<f4', 'fortran_order': False, }", {0, 0, 0, 0}), errc::malformed_file});
  cases.push_back(
      {"bad order", npy_image("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", {0, 0, 0, 0}), errc::malformed_file});
  cases.push_back({"bad shape", npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (x,), }", {}), errc::malformed_file});
  cases.push_back({"unterminated shape", npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (1, }", {}), errc::malformed_file});
  cases.push_back(
      {"huge shape", npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999,), }", {}), errc::malformed_file});
  cases.push_back(
      {"huge product", npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (100000000, 100000000), }", {}), errc::malformed_file});
  cases.push_back({"big endian", npy_image("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", {0, 0, 0, 0}), errc::unsupported});
  cases.push_back({"complex dtype", npy_image("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", {}), errc::unsupported});
  for (const auto& c : cases) EXPECT_EQ(code_of_parse(c.image), c.expected) << c.what;
  EXPECT_EQ(code_of_parse(good), errc{});
}

std::string message_of_parse(const std::vector<std::uint8_t>& image) {
  try {
    parse_npy(image.data(), image.size(), "test.npy");
  } catch (const error& e) {
    return e.what();
  }
  return "";
}

TEST(Npy, HeaderDictionaryInAnyQuoteStyleAndSpacing) {
  const auto payload = bytes_of(std::vector<float>{1, 2});
  for (const std::string dict :
       {R"({"descr": "<f4", "fortran_order": False, "shape": (2,), })", R"({'shape':(2,),'fortran_order':False,'descr':'<f4'})",
        R"({ 'descr' : "<f4" , 'fortran_order' : False , 'shape' : ( 2 , ) })",
        R"({'descr': '<f4', 'fortran_order': False, 'shape': (2L,)})"}) {
    const auto image = npy_image(dict, payload);
    const std::string message = message_of_parse(image);
    ASSERT_EQ(message, "") << dict;
    EXPECT_EQ(to_float32(parse_npy(image.data(), image.size())), (std::vector<float>{1, 2})) << dict;
  }
}

TEST(NpyMalformed, HeaderLengthTextAndDataMustAgree) {
  const auto good = npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", bytes_of(std::vector<float>{1, 2}));
  // The header length field 8 bytes short: the last 8 header bytes (padding and '\n') would be
  // read as data, and the file would have 8 bytes to spare.
  auto short_length = good;
  short_length[8] = static_cast<std::uint8_t>(short_length[8] - 8);
  EXPECT_EQ(code_of_parse(short_length), errc::malformed_file);
  EXPECT_NE(message_of_parse(short_length).find("does not end in a newline"), std::string::npos) << message_of_parse(short_length);
  auto long_length = good;
  long_length[8] = static_cast<std::uint8_t>(long_length[8] + 8);
  EXPECT_EQ(code_of_parse(long_length), errc::malformed_file);
  auto trailing = good;
  trailing.push_back(0);
  EXPECT_NE(message_of_parse(trailing).find("trailing bytes"), std::string::npos) << message_of_parse(trailing);
  // A NUL (or any control byte) inside the header, with text after it.
  auto nul = good;
  nul[10 + 3] = 0;
  EXPECT_EQ(code_of_parse(nul), errc::malformed_file);
  EXPECT_NE(message_of_parse(nul).find("byte 0 at offset 13"), std::string::npos) << message_of_parse(nul);
  const std::vector<std::pair<std::string, std::string>> bad_dicts = {
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "names 'descr' twice"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '<f4', 'shape': (2,)}", "lacks 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", "text after the header dictionary"},
      {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,)}", "must be True or False"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", "',' or '}' expected"},
      {"{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,)}", "escape sequence"},
  };
  for (const auto& [dict, expected] : bad_dicts) {
    const auto image = npy_image(dict, bytes_of(std::vector<float>{1, 2}));
    EXPECT_EQ(code_of_parse(image), errc::malformed_file) << dict;
    EXPECT_NE(message_of_parse(image).find(expected), std::string::npos) << dict << ": " << message_of_parse(image);
  }
}

TEST(NpyMalformed, StructuredAndUnknownDtypesAreUnsupportedWithTheWholeDescription) {
  const auto structured = npy_image("{'descr': [('a', '<f4'), ('b', '<f4')], 'fortran_order': False, 'shape': (2,), }",
                                    bytes_of(std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(code_of_parse(structured), errc::unsupported);
  EXPECT_NE(message_of_parse(structured).find("[('a', '<f4'), ('b', '<f4')]"), std::string::npos) << message_of_parse(structured);
  const auto dates = npy_image("{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (1,), }", std::vector<std::uint8_t>(8));
  EXPECT_EQ(code_of_parse(dates), errc::unsupported);
  EXPECT_NE(message_of_parse(dates).find("'<M8[ns]'"), std::string::npos);
}

TEST(NpyMalformed, ShapesAboveTheLimitAreRefusedAndHugeEmptyOnesAreEmpty) {
  // (2^51, 0): one dimension above nvfp4::max_element_count.
  const auto huge = npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2251799813685248, 0), }", {});
  EXPECT_EQ(code_of_parse(huge), errc::malformed_file);
  EXPECT_NE(message_of_parse(huge).find("exceeds the limit"), std::string::npos) << message_of_parse(huge);
  // Rows of an N-D array seen as a matrix: 2^40 * 2 rows, even with zero columns.
  EXPECT_EQ(code_of_parse(npy_image("{'descr': '<f4', 'fortran_order': True, 'shape': (1099511627776, 2, 0), }", {})),
            errc::malformed_file);
  EXPECT_EQ(code_of_parse(npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999999,), }", {})),
            errc::malformed_file);
  // (2^40, 0) is a valid empty array: it converts at once.
  const auto empty = npy_image("{'descr': '<f4', 'fortran_order': True, 'shape': (1099511627776, 0), }", {});
  const npy_array a = parse_npy(empty.data(), empty.size());
  EXPECT_EQ(matrix_shape_of(a).rows, max_element_count);
  EXPECT_EQ(matrix_shape_of(a).cols, 0);
  EXPECT_TRUE(to_float32(a).empty());
  EXPECT_TRUE(to_c_order(a).bytes.empty());
}

TEST(Npy, RawTwoByteArraysAreBfloat16OnlyWhenTheCallerSaysSo) {
  // bf16 bits of 1, -3, 3.140625 saved by NumPy as a 2-byte void ('|V2') or as uint16.
  const auto bits = bytes_of(std::vector<std::uint16_t>{0x3F80, 0xC040, 0x4049});
  for (const std::string descr : {"|V2", "<u2", "<i2"}) {
    const auto image = npy_image("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (3,), }", bits);
    const npy_array raw = parse_npy(image.data(), image.size());
    if (descr != "<i2") {
      try {
        (void)to_float32(raw);
        ADD_FAILURE() << descr;
      } catch (const error& e) {
        EXPECT_EQ(e.code(), errc::dtype_mismatch);
        EXPECT_NE(std::string(e.what()).find("bfloat16 bits"), std::string::npos) << e.what();
      }
    }
    EXPECT_EQ(to_float32(reinterpret_as_bfloat16(raw)), (std::vector<float>{1.0f, -3.0f, 3.140625f})) << descr;
  }
  const auto half = npy_image("{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }", std::vector<std::uint8_t>{0, 0x3C});
  EXPECT_THROW((void)reinterpret_as_bfloat16(parse_npy(half.data(), half.size())), error);
}

TEST(NpyMalformed, ASafetensorsFileIsRecognised) {
  const std::string header = R"({"__metadata__":{"format":"pt"}})";
  std::vector<std::uint8_t> image(8 + header.size());
  image[0] = static_cast<std::uint8_t>(header.size());
  std::memcpy(image.data() + 8, header.data(), header.size());
  EXPECT_NE(message_of_parse(image).find("this is a safetensors file, not an .npy file"), std::string::npos) << message_of_parse(image);
}

TEST(Npy, ZeroDimensionalArraysRoundTrip) {
  // NumPy's 0-d array: shape (), one element.
  const float value = 2.5f;
  const npy_array a = make_float32_array(std::span<const float>(&value, 1), {});
  const auto image = serialize_npy(a);
  EXPECT_NE(std::string(image.begin(), image.end()).find("'shape': ()"), std::string::npos);
  const npy_array back = parse_npy(image.data(), image.size());
  EXPECT_TRUE(back.shape.empty());
  EXPECT_EQ(back.as<float>(), std::vector<float>{2.5f});
  EXPECT_EQ(to_float32(back), std::vector<float>{2.5f});
}

TEST_F(NpyFiles, StreamedFloat32WriteEqualsTheWholeArrayOrWritesNothing) {
  std::vector<float> values(100);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 7.5f;
  const std::vector<std::int64_t> shape = {4, 25};
  write_float32_npy(dir_ / "streamed.npy", shape, [&](const float_sink& sink) {
    for (std::size_t at = 0; at < values.size(); at += 30)
      sink(std::span<const float>(values.data() + at, std::min<std::size_t>(30, values.size() - at)));
  });
  write_npy(dir_ / "whole.npy", make_float32_array(values, shape));
  EXPECT_EQ(read_file_bytes(dir_ / "streamed.npy"), read_file_bytes(dir_ / "whole.npy"));
  // Too few or too many values: shape_mismatch, and no file (nor temporary) is left.
  for (const std::size_t count : {std::size_t{99}, std::size_t{101}}) {
    std::vector<float> wrong(count, 1.0f);
    try {
      write_float32_npy(dir_ / "wrong.npy", shape, [&](const float_sink& sink) { sink(wrong); });
      ADD_FAILURE() << "written, " << count;
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::shape_mismatch);
    }
  }
  // What the producer throws comes out unchanged, nothing written.
  EXPECT_THROW(write_float32_npy(dir_ / "thrown.npy", shape, [&](const float_sink&) { throw error(errc::overflow, "x"); }), error);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir_)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"streamed.npy", "whole.npy"}));
}

TEST_F(NpyFiles, HeaderAloneFromAFile) {
  const std::vector<float> values(12, 1.0f);
  write_npy(dir_ / "a.npy", make_float32_array(values, {3, 4}));
  const file_reader file(dir_ / "a.npy");
  const npy_header_info header = read_npy_header(file);
  EXPECT_EQ(header.shape, (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(header.dtype, npy_dtype::float32);
  EXPECT_EQ(header.data_bytes, 48u);
  EXPECT_EQ(header.data_offset + header.data_bytes, file.size());
  // The same checks as parse_npy: a truncated file is refused by its header.
  fs::resize_file(dir_ / "a.npy", file.size() - 1);
  EXPECT_THROW((void)read_npy_header(file_reader(dir_ / "a.npy")), error);
}

}  // namespace io_npy_test
}  // namespace
}  // namespace nvfp4::io
