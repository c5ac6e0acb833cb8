// Tests for nvfp4/io/gguf.hpp: the container byte by byte (a file written out by hand from the
// format), round trips, every malformed case (bad magic / version / alignment, lying counts and
// sizes, offsets that leave gaps, overlap or run past the end, truncation at every length), the
// NVFP4 and MXFP4 block layouts on hand-placed elements, and the checkpoint mapping (side scales,
// refusal of types and shapes by name).
#include "nvfp4/io/gguf.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace nvfp4::io {
namespace {
namespace io_gguf_test {

void put_u32(std::vector<std::uint8_t>& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<std::uint8_t>& b, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put_str(std::vector<std::uint8_t>& b, const std::string& s) {
  put_u64(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

/// A GGUF v3 file written by hand: one u32 KV, one f32 [2] tensor, alignment 32.
std::vector<std::uint8_t> hand_file() {
  std::vector<std::uint8_t> b = {'G', 'G', 'U', 'F'};
  put_u32(b, 3);
  put_u64(b, 1);  // tensors
  put_u64(b, 1);  // kv
  put_str(b, "answer");
  put_u32(b, 4);  // u32
  put_u32(b, 42);
  put_str(b, "t");
  put_u32(b, 1);  // n_dims
  put_u64(b, 2);
  put_u32(b, 0);             // f32
  put_u64(b, 0);             // offset
  EXPECT_EQ(b.size(), 79u);  // 24 header + 22 key-value + 33 tensor info
  b.resize(96, 0);           // padded to the alignment
  const float v[2] = {1.5f, -2.0f};
  const auto* p = reinterpret_cast<const std::uint8_t*>(v);
  b.insert(b.end(), p, p + 8);
  b.resize(128, 0);  // the tensor padded to the alignment
  return b;
}

gguf_file parse(const std::vector<std::uint8_t>& b) { return parse_gguf(b.data(), b.size(), "t.gguf"); }

void expect_malformed(const std::vector<std::uint8_t>& b, const std::string& fragment) {
  try {
    (void)parse(b);
    ADD_FAILURE() << "accepted; expected an error saying '" << fragment << "'";
  } catch (const error& e) {
    EXPECT_TRUE(e.code() == errc::malformed_file || e.code() == errc::unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Gguf, HandWrittenFileParsesAndWritesBackIdentically) {
  const auto b = hand_file();
  const auto f = parse(b);
  EXPECT_EQ(f.version, 3u);
  ASSERT_EQ(f.metadata.size(), 1u);
  EXPECT_EQ(f.metadata[0].as_u32(), 42u);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].ne, (std::vector<std::int64_t>{2}));
  float v[2];
  std::memcpy(v, f.tensors[0].bytes.data(), 8);
  EXPECT_EQ(v[0], 1.5f);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(serialize_gguf(f), b);
}

TEST(Gguf, MagicVersionAndCounts) {
  auto b = hand_file();
  b[0] = 'X';
  expect_malformed(b, "magic");
  for (std::uint32_t version : {0u, 4u}) {
    b = hand_file();
    std::memcpy(b.data() + 4, &version, 4);
    expect_malformed(b, "version");
  }
  b = hand_file();
  std::uint32_t v1 = 1;
  std::memcpy(b.data() + 4, &v1, 4);
  expect_malformed(b, "version 1");
  std::uint32_t big = 0x03000000;  // version 3 written big-endian
  std::memcpy(b.data() + 4, &big, 4);
  expect_malformed(b, "big-endian");
  b = hand_file();
  const std::uint64_t lie = std::uint64_t{1} << 40;
  std::memcpy(b.data() + 8, &lie, 8);
  expect_malformed(b, "tensor count");
  b = hand_file();
  std::memcpy(b.data() + 16, &lie, 8);
  expect_malformed(b, "key-value count");
}

TEST(Gguf, TruncationAtEveryLengthIsAnError) {
  const auto b = hand_file();
  for (std::size_t n = 0; n < 104; ++n) {  // every cut before the tensor data ends
    const std::vector<std::uint8_t> cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(parse(cut), error) << n << " bytes";
  }
  // Cutting only the last tensor's alignment padding is fine, as in ggml.
  EXPECT_NO_THROW(parse(std::vector<std::uint8_t>(b.begin(), b.begin() + 104)));
}

TEST(Gguf, AlignmentKeyMustBeAU32PowerOfTwo) {
  for (const std::uint32_t align : {0u, 3u, 48u}) {
    gguf_file f = parse(hand_file());
    f.metadata.push_back(gguf_kv::u32_value("general.alignment", 16));
    auto b = serialize_gguf(f);
    // Patch the value in place (the writer refuses a bad alignment itself).
    const std::string key = "general.alignment";
    const auto it = std::search(b.begin(), b.end(), key.begin(), key.end());
    std::memcpy(&*(it + static_cast<std::ptrdiff_t>(key.size()) + 4), &align, 4);
    expect_malformed(b, "alignment");
  }
  gguf_file f = parse(hand_file());
  f.metadata.push_back(gguf_kv::string_value("general.alignmenX", "32"));  // the writer would refuse the real key
  auto text_alignment = serialize_gguf(f);
  *std::find(text_alignment.begin(), text_alignment.end(), std::uint8_t{'X'}) = 't';
  expect_malformed(text_alignment, "general.alignment is not a u32");
  // A valid other alignment lays the data out accordingly and round trips.
  f = parse(hand_file());
  f.metadata.push_back(gguf_kv::u32_value("general.alignment", 64));
  const auto b = serialize_gguf(f);
  EXPECT_EQ(b.size() % 64, 0u);
  EXPECT_EQ(serialize_gguf(parse(b)), b);
}

TEST(Gguf, TensorInfosAreChecked) {
  auto with_tensor = [](const std::string& name, std::vector<std::int64_t> ne, std::uint32_t type, std::uint64_t offset,
                        std::size_t data_bytes) {
    std::vector<std::uint8_t> b = {'G', 'G', 'U', 'F'};
    put_u32(b, 3);
    put_u64(b, 1);
    put_u64(b, 0);
    put_str(b, name);
    put_u32(b, static_cast<std::uint32_t>(ne.size()));
    for (auto d : ne) put_u64(b, static_cast<std::uint64_t>(d));
    put_u32(b, type);
    put_u64(b, offset);
    b.resize((b.size() + 31) / 32 * 32, 0);
    b.resize(b.size() + data_bytes, 0);
    return b;
  };
  EXPECT_NO_THROW(parse(with_tensor("w", {64, 2}, ggml_type::nvfp4, 0, 72)));
  expect_malformed(with_tensor(std::string(64, 'n'), {4}, ggml_type::f32, 0, 16), "longer than 63");
  expect_malformed(with_tensor("w", {1, 1, 1, 1, 1}, ggml_type::f32, 0, 4), "dimensions");
  expect_malformed(with_tensor("w", {-4}, ggml_type::f32, 0, 16), "negative");
  expect_malformed(with_tensor("w", {4}, 99, 0, 16), "type 99");
  expect_malformed(with_tensor("w", {4}, 4, 0, 16), "q4_2 (removed)");
  expect_malformed(with_tensor("w", {48, 1}, ggml_type::nvfp4, 0, 36), "whole number of 64-element blocks");
  expect_malformed(with_tensor("w", {4}, ggml_type::f32, 32, 48), "data offset 32, expected 0");
  expect_malformed(with_tensor("w", {64, 2}, ggml_type::nvfp4, 0, 71), "truncated");
  expect_malformed(with_tensor("w", {std::int64_t{1} << 40, std::int64_t{1} << 40}, ggml_type::f32, 0, 0), "tensor 'w'");
}

TEST(Gguf, OverlappingOrGappedTensorsAreRefused) {
  gguf_file f;
  for (const char* n : {"a", "b"}) {
    gguf_tensor t;
    t.name = n;
    t.ne = {3};
    t.type = ggml_type::f32;
    t.bytes.assign(12, 1);
    f.tensors.push_back(t);
  }
  auto b = serialize_gguf(f);
  EXPECT_NO_THROW(parse(b));
  // b's offset is 32 (12 bytes padded to 32); 16 would overlap a, 64 leave a gap.
  const std::string name = "b";
  for (const std::uint64_t offset : {std::uint64_t{16}, std::uint64_t{64}, std::uint64_t{1} << 60}) {
    auto bad = b;
    // the second tensor info ends with its offset: name(8+1) dims(4+8) type(4) offset(8)
    const std::size_t info = 4 + 4 + 8 + 8 + (8 + 1 + 4 + 8 + 4 + 8) + (8 + 1 + 4 + 8 + 4);
    std::memcpy(bad.data() + info, &offset, 8);
    expect_malformed(bad, "tensor 'b' has data offset");
  }
  f.tensors[1].name = "a";
  EXPECT_THROW(serialize_gguf(f), error);
}

TEST(Gguf, KeyValuesOfEveryTypeRoundTrip) {
  std::vector<std::uint8_t> b = {'G', 'G', 'U', 'F'};
  put_u32(b, 3);
  put_u64(b, 0);
  put_u64(b, 4);
  put_str(b, "s");
  put_u32(b, 8);
  put_str(b, "hello");
  put_str(b, "arr");
  put_u32(b, 9);
  put_u32(b, 8);  // array of strings
  put_u64(b, 2);
  put_str(b, "x");
  put_str(b, "yz");
  put_str(b, "flag");
  put_u32(b, 7);
  b.push_back(1);
  put_str(b, "f64");
  put_u32(b, 12);
  put_u64(b, 0x400921FB54442D18ull);
  const auto f = parse(b);
  EXPECT_EQ(f.find_kv("s")->as_string(), "hello");
  EXPECT_EQ(f.find_kv("arr")->count, 2u);
  EXPECT_EQ(serialize_gguf(f), b);
  auto bool2 = b;
  bool2[bool2.size() - 24] = 2;  // the bool's byte: after it come "f64" (8 + 3), its type (4), its value (8)
  expect_malformed(bool2, "bool");
  std::vector<std::uint8_t> nested = {'G', 'G', 'U', 'F'};
  put_u32(nested, 3);
  put_u64(nested, 0);
  put_u64(nested, 1);
  put_str(nested, "n");
  put_u32(nested, 9);
  put_u32(nested, 9);  // array of arrays
  put_u64(nested, 0);
  expect_malformed(nested, "array of type 9");
  std::vector<std::uint8_t> repeated = {'G', 'G', 'U', 'F'};
  put_u32(repeated, 3);
  put_u64(repeated, 0);
  put_u64(repeated, 2);
  for (int i = 0; i < 2; ++i) {
    put_str(repeated, "k");
    put_u32(repeated, 0);
    repeated.push_back(7);
  }
  expect_malformed(repeated, "appears twice");
}

TEST(Gguf, Nvfp4BlockLayoutByHand) {
  // One row of 64 elements: element c has code c % 16; scales 0x38..0x3B.
  const index_t rows = 1, cols = 64;
  std::vector<std::uint8_t> data(32), scales = {0x38, 0x39, 0x3A, 0x3B};
  for (index_t c = 0; c < cols; ++c) data[static_cast<std::size_t>(c / 2)] |= static_cast<std::uint8_t>((c % 16) << ((c & 1) * 4));
  const auto blocks = encode_gguf_nvfp4(rows, cols, data, scales);
  ASSERT_EQ(blocks.size(), 36u);
  EXPECT_EQ(blocks[0], 0x38);
  EXPECT_EQ(blocks[3], 0x3B);
  // qs byte 8s + j: element 16s + j low, 16s + j + 8 high; codes are c % 16 = j and j + 8.
  for (int s = 0; s < 4; ++s)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(blocks[static_cast<std::size_t>(4 + 8 * s + j)], j | ((j + 8) << 4)) << s << " " << j;
  std::vector<std::uint8_t> d2, s2;
  decode_gguf_nvfp4(rows, cols, blocks, d2, s2);
  EXPECT_EQ(d2, data);
  EXPECT_EQ(s2, scales);
  EXPECT_THROW(encode_gguf_nvfp4(1, 48, std::vector<std::uint8_t>(24), std::vector<std::uint8_t>(3)), error);
}

TEST(Gguf, Mxfp4BlockLayoutByHand) {
  const index_t rows = 2, cols = 32;
  std::vector<std::uint8_t> data(32), scales = {127, 130};
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c)
      data[static_cast<std::size_t>(r * 16 + c / 2)] |= static_cast<std::uint8_t>(((c + r) % 16) << ((c & 1) * 4));
  const auto blocks = encode_gguf_mxfp4(rows, cols, data, scales);
  ASSERT_EQ(blocks.size(), 34u);
  EXPECT_EQ(blocks[0], 127);
  EXPECT_EQ(blocks[17], 130);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(blocks[static_cast<std::size_t>(1 + j)], (j % 16) | (((j + 16) % 16) << 4));
  std::vector<std::uint8_t> d2, s2;
  decode_gguf_mxfp4(rows, cols, blocks, d2, s2);
  EXPECT_EQ(d2, data);
  EXPECT_EQ(s2, scales);
}

quantized_weight random_weight(const std::string& name, index_t rows, index_t cols, weight_format format, unsigned seed) {
  std::mt19937 rng(seed);
  quantized_weight w;
  w.name = name;
  w.format = format;
  w.rows = rows;
  w.cols = cols;
  w.data.resize(static_cast<std::size_t>(rows * w.data_cols()));
  w.scales.resize(static_cast<std::size_t>(rows * w.scale_cols()));
  for (auto& b : w.data) b = static_cast<std::uint8_t>(rng());
  for (auto& b : w.scales) b = static_cast<std::uint8_t>(rng() % 0x7E);
  if (format == weight_format::nvfp4) w.weight_scale = scale_pair::from_decode(0.00125f);
  return w;
}

TEST(Gguf, CheckpointsRoundTripWithSideScales) {
  checkpoint c;
  c.weights.push_back(random_weight("blk.0.attn_q", 8, 128, weight_format::nvfp4, 1));
  c.weights.back().input_scale = scale_pair::from_decode(0.0125f);
  c.weights.push_back(random_weight("blk.0.ffn_down", 4, 64, weight_format::mxfp4, 2));
  safetensors_tensor norm;
  norm.name = "blk.0.attn_norm.weight";
  norm.dtype = safetensors_dtype::bf16;
  norm.shape = {3, 2};
  norm.bytes.assign(12, 7);
  c.tensors.push_back(norm);
  c.metadata["format"] = "pt";
  const gguf_file g = checkpoint_to_gguf(c);
  ASSERT_NE(g.find("blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(g.find("blk.0.attn_q.weight")->type, ggml_type::nvfp4);
  EXPECT_EQ(g.find("blk.0.attn_q.weight")->ne, (std::vector<std::int64_t>{128, 8}));
  ASSERT_NE(g.find("blk.0.attn_q.scale"), nullptr);
  ASSERT_NE(g.find("blk.0.attn_q.input_scale"), nullptr);
  EXPECT_EQ(g.find("blk.0.attn_norm.weight")->ne, (std::vector<std::int64_t>{2, 3}));
  const auto image = serialize_gguf(g);
  const checkpoint back = checkpoint_from_gguf(parse_gguf(image.data(), image.size()), "x.gguf");
  ASSERT_EQ(back.weights.size(), 2u);
  EXPECT_EQ(back.weights[0], c.weights[0]);
  EXPECT_EQ(back.weights[1], c.weights[1]);
  ASSERT_EQ(back.tensors.size(), 1u);
  EXPECT_EQ(back.tensors[0].shape, norm.shape);
  EXPECT_EQ(back.metadata, c.metadata);  // carried in the annotation
}

TEST(Gguf, WhatGgufCannotHoldIsRefusedByName) {
  checkpoint c;
  c.weights.push_back(random_weight("w", 2, 48, weight_format::nvfp4, 3));
  try {
    (void)checkpoint_to_gguf(c);
    ADD_FAILURE();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::shape_mismatch);
    EXPECT_NE(std::string(e.what()).find("'w' has 48 columns"), std::string::npos) << e.what();
  }
  c.weights[0] = random_weight(std::string(60, 'm'), 2, 64, weight_format::nvfp4, 3);
  EXPECT_THROW(checkpoint_to_gguf(c), error);  // "....weight" is over 63 bytes
  c.weights.clear();
  safetensors_tensor u8;
  u8.name = "mask";
  u8.dtype = safetensors_dtype::u8;
  u8.shape = {4};
  u8.bytes.assign(4, 1);
  c.tensors.push_back(u8);
  try {
    (void)checkpoint_to_gguf(c);
    ADD_FAILURE();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("'mask' is U8"), std::string::npos) << e.what();
  }
  // Reading: a q4_K tensor is refused by name and type; so is a 3-D NVFP4 stack.
  gguf_file g;
  gguf_tensor t;
  t.name = "blk.0.ffn_up.weight";
  t.ne = {256, 1};
  t.type = 12;
  t.bytes.assign(144, 0);
  g.tensors.push_back(t);
  try {
    (void)checkpoint_from_gguf(g, "m.gguf");
    ADD_FAILURE();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("'blk.0.ffn_up.weight' is q4_K (12)"), std::string::npos) << e.what();
  }
  g.tensors[0] = {"experts.weight", {64, 2, 3}, ggml_type::nvfp4, std::vector<std::uint8_t>(36 * 6)};
  EXPECT_THROW(checkpoint_from_gguf(g, "m.gguf"), error);
}

TEST(Gguf, MissingScaleTensorReadsAsOne) {
  gguf_file g;
  g.tensors.push_back({"x.weight", {64, 1}, ggml_type::nvfp4, std::vector<std::uint8_t>(36, 0x38)});
  const auto c = checkpoint_from_gguf(g, "m.gguf");
  ASSERT_EQ(c.weights.size(), 1u);
  EXPECT_EQ(c.weights[0].weight_scale.decode, 1.0f);
  EXPECT_EQ(c.weights[0].name, "x");
}

}  // namespace io_gguf_test
}  // namespace
}  // namespace nvfp4::io
