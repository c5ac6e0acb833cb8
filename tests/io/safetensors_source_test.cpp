// Tests for nvfp4/io/safetensors_source.hpp: a checkpoint opened by its headers alone, its tensors
// read one at a time, the same tensors and the same refusals as read_safetensors_checkpoint
// (issue 39 item 13: inspect and dequantize read files whole and copied every tensor).
#include "nvfp4/io/safetensors_source.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nvfp4/io/sharded_safetensors.hpp"
#include "test_support.hpp"

namespace nvfp4::io {
namespace {
namespace io_safetensors_source_test {

namespace fs = std::filesystem;

class SafetensorsSource : public nvfp4::test::temp_dir_test {};

safetensors_file some_tensors() {
  safetensors_file f;
  f.add({"a", safetensors_dtype::u8, {3}, {1, 2, 3}});
  f.add({"b", safetensors_dtype::f32, {1}, {0, 0, 128, 63}});
  f.add({"empty", safetensors_dtype::f16, {0, 4}, {}});
  f.metadata["format"] = "pt";
  return f;
}

void expect_same(const safetensors_file& a, const safetensors_file& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].name, b.tensors[i].name);
    EXPECT_EQ(a.tensors[i].dtype, b.tensors[i].dtype);
    EXPECT_EQ(a.tensors[i].shape, b.tensors[i].shape);
    EXPECT_EQ(a.tensors[i].bytes, b.tensors[i].bytes);
  }
  EXPECT_EQ(a.metadata, b.metadata);
}

TEST_F(SafetensorsSource, OpensByTheHeaderAndReadsATensorWhenAsked) {
  write_safetensors(dir_ / "m.safetensors", some_tensors());
  const auto source = safetensors_source::open(dir_ / "m.safetensors");
  ASSERT_EQ(source.entries().size(), 3u);
  EXPECT_EQ(source.metadata().at("format"), "pt");
  const auto* b = source.find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->size, 4u);
  EXPECT_EQ(source.find("absent"), nullptr);
  // The data is read at load(), not at open(): bytes changed since are what load() sees.
  {
    std::fstream file(dir_ / "m.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(b->offset));
    file.put(0x55);
  }
  EXPECT_EQ(source.load(*b).bytes[0], 0x55);
  // A file cut short since it was opened: io_error naming it, not a short tensor.
  fs::resize_file(dir_ / "m.safetensors", b->offset);
  try {
    (void)source.load(*b);
    ADD_FAILURE() << "loaded";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::io_error);
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

TEST_F(SafetensorsSource, LoadsWhatIsAskedForAndNothingElse) {
  write_safetensors(dir_ / "m.safetensors", some_tensors());
  const auto source = safetensors_source::open(dir_ / "m.safetensors");
  const std::string names[] = {"b", "absent", "a"};
  const std::string keys[] = {"format", "other"};
  const safetensors_file part = source.load(names, keys);
  ASSERT_EQ(part.tensors.size(), 2u);
  EXPECT_EQ(part.tensors[0].name, "b");
  EXPECT_EQ(part.tensors[1].name, "a");
  EXPECT_EQ(part.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  expect_same(source.load_all(), read_safetensors(dir_ / "m.safetensors"));
}

TEST_F(SafetensorsSource, ImagesAndFilesInMemoryGiveTheSameTensors) {
  const safetensors_file f = some_tensors();
  const auto image = serialize_safetensors(f);
  expect_same(safetensors_source::of_image(image, "x").load_all(), parse_safetensors(image.data(), image.size()));
  expect_same(safetensors_source::of_file(f).load_all(), f);
  // A bad image is refused as parse_safetensors refuses it.
  std::vector<std::uint8_t> cut(image.begin(), image.end() - 1);
  EXPECT_THROW((void)safetensors_source::of_image(cut, "x"), error);
}

TEST_F(SafetensorsSource, ShardsAreReadInTheirOrderOneFileAtATime) {
  safetensors_file f;
  for (int i = 0; i < 40; ++i)
    f.add({"t" + std::to_string(i), safetensors_dtype::u8, {8}, std::vector<std::uint8_t>(8, static_cast<std::uint8_t>(i))});
  write_safetensors_checkpoint(dir_ / "sharded", f, 16);  // 2 tensors per shard: 20 shards
  ASSERT_TRUE(fs::exists(dir_ / "sharded" / safetensors_index_name));
  const auto source = safetensors_source::open(dir_ / "sharded");
  EXPECT_EQ(source.parts().size(), 20u);
  expect_same(source.load_all(), read_safetensors_checkpoint(dir_ / "sharded"));
  // Out of order too (each load reopens the shard it needs).
  for (int i = 39; i >= 0; --i)
    EXPECT_EQ(source.load(*source.find("t" + std::to_string(i))).bytes, std::vector<std::uint8_t>(8, static_cast<std::uint8_t>(i)));
}

TEST_F(SafetensorsSource, RefusesWhatTheWholeReaderRefuses) {
  // A directory with two .safetensors files and neither model.safetensors nor an index.
  write_safetensors(dir_ / "x.safetensors", some_tensors());
  write_safetensors(dir_ / "y.safetensors", some_tensors());
  EXPECT_THROW((void)safetensors_source::open(dir_), error);
  // A missing file, a directory given as a shard, an .npy file.
  EXPECT_THROW((void)safetensors_source::open(dir_ / "missing.safetensors"), error);
  try {
    (void)safetensors_source::open(dir_ / "missing.safetensors");
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::io_error);
  }
  std::ofstream(dir_ / "a.npy", std::ios::binary) << std::string("\x93NUMPY\x01\x00", 8);
  try {
    (void)safetensors_source::open(dir_ / "a.npy");
    ADD_FAILURE() << "opened";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::malformed_file);
    EXPECT_NE(std::string(e.what()).find("this is an .npy file"), std::string::npos) << e.what();
  }
}

}  // namespace io_safetensors_source_test
}  // namespace
}  // namespace nvfp4::io
