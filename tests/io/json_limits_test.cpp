// Tests for nvfp4/io/json_limits.hpp and the readers that use it (issue 34 item 1): JSON nested
// 10^5 levels deep in a safetensors header, a config or our metadata is refused without a crash
// (it overflowed the stack while the message was built), every message stays short whatever the
// file holds (a 10 MB dtype, a 100 KB shape entry), and headers of many tensors are read and
// written in time linear in their size (40,000 tensors took 15 s before).
#include "nvfp4/io/json_limits.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nvfp4/io/checkpoint.hpp"
#include "nvfp4/io/safetensors.hpp"
#include "nvfp4/io/sharded_safetensors.hpp"
#include "nvfp4/io/torchao.hpp"
#include "test_support.hpp"

namespace nvfp4::io {
namespace {

/// A safetensors image whose header is `json` (padded), with no data buffer.
std::vector<std::uint8_t> image_of(std::string json) {
  json.append((8 - json.size() % 8) % 8, ' ');
  std::vector<std::uint8_t> out(8 + json.size());
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(json.size()) >> (8 * i));
  std::copy(json.begin(), json.end(), out.begin() + 8);
  return out;
}

std::string nested(int depth) { return std::string(static_cast<std::size_t>(depth), '[') + std::string(static_cast<std::size_t>(depth), ']'); }

/// The error parse_safetensors throws for `json`; fails the test when it parses.
error parse_error(const std::string& json) {
  const auto image = image_of(json);
  try {
    (void)parse_safetensors(image.data(), image.size(), "x.safetensors");
  } catch (const error& e) {
    return e;
  }
  ADD_FAILURE() << "accepted";
  return error(errc::invalid_argument, "");
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(JsonLimits, ClipKeepsShortTextAndCutsLongTextAtACharacter) {
  EXPECT_EQ(clip_for_message("model.layers.0.weight"), "model.layers.0.weight");
  EXPECT_EQ(clip_for_message("a\nb\x01"), "a?b?");
  const std::string clipped = clip_for_message(std::string(10'000'000, 'X'));
  EXPECT_LT(clipped.size(), 300u);
  EXPECT_NE(clipped.find("(10000000 bytes)"), std::string::npos) << clipped;
  // 'é' is two bytes; a cut after 3 bytes of "ééé..." would split the second one.
  std::string accents;
  for (int i = 0; i < 10; ++i) accents += "\xc3\xa9";
  EXPECT_EQ(clip_for_message(accents, 3).substr(0, 2), "\xc3\xa9");
  EXPECT_EQ(clip_for_message(accents, 3).substr(2, 3), "...");
}

TEST(JsonLimits, DepthAtTheLimitParsesOneMoreIsRefused) {
  EXPECT_NO_THROW((void)parse_json_bounded(nested(json_max_depth), "doc"));
  try {
    (void)parse_json_bounded(nested(json_max_depth + 1), "doc");
    ADD_FAILURE() << "accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::malformed_file);
    EXPECT_NE(std::string(e.what()).find("deeper than 64 levels"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)parse_json_bounded(R"({"a": 1, "a": 2})", "doc"), error);
  EXPECT_EQ(parse_json_bounded(R"({"a": 1, "a": 2})", "doc", duplicate_keys::keep_last)["a"], 2);
  EXPECT_THROW((void)parse_json_bounded(std::string("{\"a\": 1}\0{", 10), "doc"), error);
  EXPECT_THROW((void)parse_json_bounded("{\"a\": ", "doc"), error);
}

TEST(JsonLimits, DeeplyNestedShapeOrOffsetsAreRefusedWithAShortMessage) {
  for (const int depth : {100, 10'000, 100'000}) {
    for (const std::string& json : {R"({"w":{"dtype":"F32","shape":)" + nested(depth) + R"(,"data_offsets":[0,0]}})",
                                    R"({"w":{"dtype":"F32","shape":[)" + nested(depth) + R"(],"data_offsets":[0,0]}})",
                                    R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[)" + nested(depth) + R"(,0]}})"}) {
      const error e = parse_error(json);
      EXPECT_EQ(e.code(), errc::malformed_file);
      EXPECT_LT(std::string(e.what()).size(), 400u) << depth;
    }
  }
}

TEST(JsonLimits, LongFileContentIsClippedInMessages) {
  const std::string huge(1'000'000, 'X');
  for (const std::string& json : {R"({"w":{"dtype":")" + huge + R"(","shape":[0],"data_offsets":[0,0]}})",
                                  R"({"w":{"dtype":"F32","shape":[")" + huge + R"("],"data_offsets":[0,0]}})",
                                  R"({")" + huge + R"(":{"dtype":"F32","shape":[1],"data_offsets":[0,0]}})",
                                  R"({"w":{"dtype":"F32","shape":[)" + std::string(200'000, '1').insert(0, "[").append("]") +
                                      R"(],"data_offsets":[0,0]}})"}) {
    const error e = parse_error(json);
    EXPECT_LT(std::string(e.what()).size(), 600u) << std::string(e.what()).substr(0, 600);
  }
  // A shape of a million dimensions, its byte count wrong: the shape is shown in part.
  std::string dims = "1";
  for (int i = 1; i < 1'000'000; ++i) dims += ",1";
  const error e = parse_error(R"({"w":{"dtype":"F32","shape":[)" + dims + R"(],"data_offsets":[0,0]}})");
  EXPECT_LT(std::string(e.what()).size(), 600u);
  EXPECT_NE(std::string(e.what()).find("1000000 dimensions"), std::string::npos) << e.what();
}

TEST(JsonLimits, ManyTensorsAreReadAndWrittenInLinearTime) {
  // 100,000 empty tensors: 7 MB of header. Quadratic code took minutes; linear takes about a
  // second on a loaded 2-core machine (more under the sanitizers, well within the bound).
  constexpr int n = 100'000;
  std::string json = "{";
  for (int i = 0; i < n; ++i) json += (i ? "," : "") + std::string("\"model.layers.") + std::to_string(i) + R"(.t":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
  json += "}";
  const auto image = image_of(json);
  auto start = std::chrono::steady_clock::now();
  const safetensors_file file = parse_safetensors(image.data(), image.size(), "many.safetensors");
  EXPECT_LT(seconds_since(start), 30.0);
  ASSERT_EQ(file.tensors.size(), static_cast<std::size_t>(n));
  start = std::chrono::steady_clock::now();
  const auto bytes = serialize_safetensors(file);
  EXPECT_LT(seconds_since(start), 30.0);
  EXPECT_EQ(parse_safetensors(bytes.data(), bytes.size()).tensors.size(), static_cast<std::size_t>(n));
  // The error for a missing name lists a few names, not 100,000.
  try {
    (void)file.at("absent");
    ADD_FAILURE() << "found";
  } catch (const error& e) {
    EXPECT_LT(std::string(e.what()).size(), 600u);
  }
}

TEST(JsonLimits, OtherJsonReadersAreBounded) {
  const nvfp4::test::scoped_temp_dir temp;
  const std::filesystem::path& dir = temp.path();
  { std::ofstream(dir / "config.json") << "{\"a\": " << nested(100'000) << "}"; }
  EXPECT_THROW((void)read_json_file(dir / "config.json"), error);
  // Our annotation nested too deep is a warning, as any malformed annotation.
  checkpoint c;
  apply_annotation(c, "{\"model_config\": " + nested(100'000) + "}", true);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_TRUE(c.model_config.is_null());
  // torchao's tensor_names.
  safetensors_file f;
  f.metadata["tensor_names"] = nested(100'000);
  EXPECT_THROW((void)torchao_from_safetensors(f, "t.safetensors"), error);
}

}  // namespace
}  // namespace nvfp4::io
