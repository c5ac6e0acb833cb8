// Tests for nvfp4/io/json_limits.hpp and the readers that use it (issue 34 item 1): JSON nested
// 10^5 levels deep in a safetensors header, a config or our metadata is refused without a crash
// (it overflowed the stack while the message was built), every message stays short whatever the
// file holds (a 10 MB dtype, a 100 KB shape entry), and headers of many tensors are read and
// written in time linear in their size (40,000 tensors took 15 s before).
#include "nvfp4/io/json_limits.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "nvfp4/io/checkpoint.hpp"
#include "nvfp4/io/safetensors.hpp"
#include "nvfp4/io/sharded_safetensors.hpp"
#include "nvfp4/io/torchao.hpp"
#include "test_support.hpp"

namespace nvfp4::io {
namespace {
namespace io_json_limits_test {

/// A safetensors image whose header is `json` (padded), with no data buffer.
std::vector<std::uint8_t> image_of(std::string json) {
  json.append((8 - json.size() % 8) % 8, ' ');
  std::vector<std::uint8_t> out(8 + json.size());
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(json.size()) >> (8 * i));
  std::copy(json.begin(), json.end(), out.begin() + 8);
  return out;
}

std::string nested(int depth) {
  return std::string(static_cast<std::size_t>(depth), '[') + std::string(static_cast<std::size_t>(depth), ']');
}

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
  for (const std::string& json :
       {R"({"w":{"dtype":")" + huge + R"(","shape":[0],"data_offsets":[0,0]}})",
        R"({"w":{"dtype":"F32","shape":[")" + huge + R"("],"data_offsets":[0,0]}})",
        R"({")" + huge + R"(":{"dtype":"F32","shape":[1],"data_offsets":[0,0]}})",
        R"({"w":{"dtype":"F32","shape":[)" + std::string(200'000, '1').insert(0, "[").append("]") + R"(],"data_offsets":[0,0]}})"}) {
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

TEST(JsonLimits, ManyTensorsAreReadAndWrittenWhole) {
  // 100,000 empty tensors: 7 MB of header. Quadratic code took minutes; linear takes about a
  // second on a loaded 2-core machine. No clock here (speed is for the benchmarks): CTest's
  // per-test time-out (tests/CMakeLists.txt) is what stops a quadratic regression.
  constexpr int n = 100'000;
  std::string json = "{";
  for (int i = 0; i < n; ++i)
    json += (i ? "," : "") + std::string("\"model.layers.") + std::to_string(i) + R"(.t":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
  json += "}";
  const auto image = image_of(json);
  const safetensors_file file = parse_safetensors(image.data(), image.size(), "many.safetensors");
  ASSERT_EQ(file.tensors.size(), static_cast<std::size_t>(n));
  const auto bytes = serialize_safetensors(file);
  EXPECT_EQ(parse_safetensors(bytes.data(), bytes.size()).tensors.size(), static_cast<std::size_t>(n));
  // The error for a missing name lists a few names, not 100,000.
  try {
    (void)file.at("absent");
    ADD_FAILURE() << "found";
  } catch (const error& e) {
    EXPECT_LT(std::string(e.what()).size(), 600u);
  }
}

/// An ordered_json whose objects count how many entries their lookups scan: ordered_map finds a
/// key by scanning its vector, so a parser that inserts each key through operator[] / emplace
/// does n^2 / 2 scans for an object of n keys (issue 39: a shard index of 80,000 entries took
/// 117 s). The count is the work itself, so the test needs no clock.
std::size_t entries_scanned = 0;

template <class Key, class T, class IgnoredLess = std::less<Key>, class Allocator = std::allocator<std::pair<const Key, T>>>
struct scan_counting_map : nlohmann::ordered_map<Key, T, IgnoredLess, Allocator> {
  using base = nlohmann::ordered_map<Key, T, IgnoredLess, Allocator>;
  using base::base;
  T& operator[](const Key& key) {
    entries_scanned += this->size();
    return base::operator[](key);
  }
  template <class... Args>
  auto emplace(Args&&... args) {
    entries_scanned += this->size();
    return base::emplace(std::forward<Args>(args)...);
  }
  template <class K>
  auto find(const K& key) {
    entries_scanned += this->size();
    return base::find(key);
  }
  template <class K>
  auto find(const K& key) const {
    entries_scanned += this->size();
    return base::find(key);
  }
};
using scan_counting_json = nlohmann::basic_json<scan_counting_map>;

TEST(JsonLimits, ParsingAnOrderedObjectDoesNoScanPerKey) {
  // 4,000 keys, one object nested in each: a scan per key would be 8 million entries.
  constexpr std::size_t n = 4'000;
  std::string text = "{";
  for (std::size_t i = 0; i < n; ++i)
    text += (i ? "," : "") + std::string("\"k") + std::to_string(i) + "\":{\"a\":" + std::to_string(i) + ",\"b\":[1]}";
  text += "}";
  for (const auto duplicates : {duplicate_keys::refuse, duplicate_keys::keep_last}) {
    entries_scanned = 0;
    const auto parsed = parse_json_bounded<scan_counting_json>(text, "index", duplicates);
    EXPECT_LE(entries_scanned, 4 * n);
    ASSERT_EQ(parsed.size(), n);
    // In the text's order, every value where it was.
    std::size_t i = 0;
    for (const auto& [key, value] : parsed.items()) {
      ASSERT_EQ(key, "k" + std::to_string(i));
      ASSERT_EQ(value.size(), 2u);
      ASSERT_EQ(value.begin().key(), "a");
      ASSERT_EQ(value.begin().value().template get<std::size_t>(), i);
      ++i;
    }
  }
}

TEST(JsonLimits, KeepLastKeepsTheFirstPlaceAndTheLastValue) {
  // As Python's json.loads: {"a": 1, "b": 2, "a": 3} is {"a": 3, "b": 2}, keys in that order.
  const auto ordered =
      parse_json_bounded<nlohmann::ordered_json>(R"({"a": 1, "b": {"x": [1, {"y": null}]}, "a": 3})", "doc", duplicate_keys::keep_last);
  EXPECT_EQ(ordered.dump(), R"({"a":3,"b":{"x":[1,{"y":null}]}})");
  const auto sorted = parse_json_bounded<nlohmann::json>(R"({"b": 1.5, "a": "s", "b": -2, "c": true})", "doc", duplicate_keys::keep_last);
  EXPECT_EQ(sorted.dump(), R"({"a":"s","b":-2,"c":true})");
  // A repeated empty key is a repeated key too.
  EXPECT_THROW((void)parse_json_bounded(R"({"": 1, "": 2})", "doc"), error);
  // Scalars and arrays at the root, and every number kind, as nlohmann parses them.
  for (const std::string text : {"[1, -2, 3.5, 18446744073709551615, \"s\", false, null, {}]", "7", "\"x\"", "{}", "[]"})
    EXPECT_EQ(parse_json_bounded(text, "doc"), nlohmann::json::parse(text)) << text;
}

TEST(JsonLimits, RootMembersCanBeHandedOverOneByOne) {
  std::vector<std::pair<std::string, nlohmann::json>> members;
  const auto rest =
      parse_json_bounded<nlohmann::json>(R"({"w": {"shape": [1, 2]}, "n": 3, "m": {}})", "doc", duplicate_keys::refuse,
                                         [&](std::string&& key, nlohmann::json&& value) { members.emplace_back(key, value); });
  EXPECT_TRUE(rest.is_object() && rest.empty());
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].first, "w");
  EXPECT_EQ(members[0].second, nlohmann::json::parse(R"({"shape": [1, 2]})"));
  EXPECT_EQ(members[1].second, 3);
  EXPECT_EQ(members[2].second, nlohmann::json::object());
  // A repeated root key is still refused; a root that is not an object is returned whole.
  EXPECT_THROW((void)parse_json_bounded<nlohmann::json>(R"({"n": 1, "n": 2})", "doc", duplicate_keys::refuse,
                                                        [](std::string&&, nlohmann::json&&) {}),
               error);
  EXPECT_EQ(parse_json_bounded<nlohmann::json>("[1]", "doc", duplicate_keys::refuse, [](std::string&&, nlohmann::json&&) {}),
            nlohmann::json::parse("[1]"));
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

}  // namespace io_json_limits_test
}  // namespace
}  // namespace nvfp4::io
