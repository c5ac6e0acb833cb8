// Tests for nvfp4/io/sharded_safetensors.hpp: a directory's shards and index written as Hugging
// Face writes them (names, index JSON), read back whole, and every inconsistency between the index
// and the shards refused with the tensor and file named.
#include "nvfp4/io/sharded_safetensors.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_support.hpp"

namespace nvfp4::io {
namespace {
namespace io_sharded_safetensors_test {

namespace fs = std::filesystem;

class ShardedSafetensors : public nvfp4::test::temp_dir_test {};

safetensors_file three_tensors() {
  safetensors_file f;
  for (const char* n : {"a", "b", "c"}) f.add({n, safetensors_dtype::u8, {100}, std::vector<std::uint8_t>(100, 1)});
  f.metadata["format"] = "pt";
  return f;
}

void expect_error(const fs::path& p, const std::string& fragment) {
  try {
    (void)read_safetensors_checkpoint(p);
    ADD_FAILURE() << "accepted; expected '" << fragment << "'";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST_F(ShardedSafetensors, WritesShardsAndAnIndexLikeHuggingFace) {
  write_safetensors_checkpoint(dir_, three_tensors(), 150);  // one 100-byte tensor per shard
  for (const char* n : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"})
    EXPECT_TRUE(fs::exists(dir_ / n)) << n;
  const auto bytes = read_file_bytes(dir_ / safetensors_index_name);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), R"({
  "metadata": {
    "total_size": 300
  },
  "weight_map": {
    "a": "model-00001-of-00003.safetensors",
    "b": "model-00002-of-00003.safetensors",
    "c": "model-00003-of-00003.safetensors"
  }
}
)");
  const auto back = read_safetensors_checkpoint(dir_);
  ASSERT_EQ(back.tensors.size(), 3u);
  EXPECT_EQ(back.metadata.at("format"), "pt");
  write_safetensors_checkpoint(dir_ / "one", three_tensors());
  EXPECT_TRUE(fs::exists(dir_ / "one" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir_ / "one" / safetensors_index_name));
}

TEST_F(ShardedSafetensors, IndexAndShardsMustAgree) {
  write_safetensors_checkpoint(dir_, three_tensors(), 150);
  auto index = read_json_file(dir_ / safetensors_index_name);
  const auto original = index;
  index["weight_map"]["b"] = "model-00001-of-00003.safetensors";
  write_json_file(dir_ / safetensors_index_name, index, 2);
  expect_error(dir_, "shard model-00002-of-00003.safetensors is in the directory but the index lists none");
  index = original;
  index["weight_map"]["d"] = "model-00003-of-00003.safetensors";
  write_json_file(dir_ / safetensors_index_name, index, 2);
  expect_error(dir_, "tensor 'd' is listed in model-00003-of-00003.safetensors but not there");
  index = original;
  index["weight_map"].erase("c");
  write_json_file(dir_ / safetensors_index_name, index, 2);
  expect_error(dir_, "shard model-00003-of-00003.safetensors is in the directory");
  index = original;
  index["weight_map"]["c"] = "model-00002-of-00003.safetensors";  // c's shard holds c, but the index says 2
  write_json_file(dir_ / safetensors_index_name, index, 2);
  expect_error(dir_, "shard model-00003-of-00003.safetensors is in the directory");
  index = original;
  index["weight_map"]["a"] = "model-00002-of-00003.safetensors";  // a and b swapped
  index["weight_map"]["b"] = "model-00001-of-00003.safetensors";
  write_json_file(dir_ / safetensors_index_name, index, 2);
  expect_error(dir_, "tensor 'a' is listed in shard model-00002-of-00003.safetensors");
  index = original;
  index["weight_map"]["c"] = "../etc/passwd";
  write_json_file(dir_ / safetensors_index_name, index, 2);
  expect_error(dir_, "not a plain file name");
  index = original;
  index["weight_map"]["c"] = "missing.safetensors";
  write_json_file(dir_ / safetensors_index_name, index, 2);
  EXPECT_THROW(read_safetensors_checkpoint(dir_), error);
  index = original;
  index.erase("weight_map");
  write_json_file(dir_ / safetensors_index_name, index, 2);
  expect_error(dir_, "no \"weight_map\"");
  // A truncated shard is the safetensors reader's error, naming the shard.
  write_json_file(dir_ / safetensors_index_name, original, 2);
  fs::resize_file(dir_ / "model-00002-of-00003.safetensors", 50);
  expect_error(dir_, "model-00002-of-00003.safetensors");
}

TEST_F(ShardedSafetensors, TensorsInTwoFilesAndAmbiguousDirectories) {
  write_safetensors(dir_ / "x.safetensors", three_tensors());
  write_safetensors(dir_ / "y.safetensors", three_tensors());
  expect_error(dir_, "2 .safetensors files");
  fs::remove(dir_ / "y.safetensors");
  EXPECT_EQ(read_safetensors_checkpoint(dir_).tensors.size(), 3u);  // the one file
}

}  // namespace io_sharded_safetensors_test
}  // namespace
}  // namespace nvfp4::io
