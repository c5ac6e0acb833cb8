// libFuzzer harness for large inputs (issue 34), which the other harnesses' 16 KiB inputs cannot
// reach: the fuzzer's bytes are a recipe that expands into a big safetensors image (JSON nested
// up to 200,000 levels in a shape, the offsets, the metadata or our annotation; up to 100,000
// tensors; names, dtypes and metadata values up to 4 MB), fed to every JSON-reading layer: the
// safetensors parser and writer, the quantized-tensor reader, the ModelOpt, compressed-tensors and
// torchao readers, the annotation. Each must succeed or throw nvfp4::error with a message under
// 4 KiB, within libFuzzer's -timeout (a quadratic step shows as a time-out).
//
// Recipe: byte 0 picks the shape of the file (mod 8), bytes 1-3 a size (little endian, scaled per
// shape), the rest is a snippet spliced into the JSON (so mutations reach the parser's corners).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "nvfp4/io/compressed_tensors.hpp"
#include "nvfp4/io/json_limits.hpp"
#include "nvfp4/io/modelopt.hpp"
#include "nvfp4/io/quantized_checkpoint.hpp"
#include "nvfp4/io/safetensors.hpp"
#include "nvfp4/io/torchao.hpp"

namespace {

using namespace nvfp4;

std::string nested(std::size_t depth, const std::string& core) { return std::string(depth, '[') + core + std::string(depth, ']'); }

/// A safetensors image with header `json` and `buffer` bytes of data.
std::vector<std::uint8_t> image_of(std::string json, std::size_t buffer) {
  json.append((8 - json.size() % 8) % 8, ' ');
  std::vector<std::uint8_t> out(8 + json.size() + buffer, 0x11);
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(json.size()) >> (8 * i));
  std::copy(json.begin(), json.end(), out.begin() + 8);
  return out;
}

/// Escapes `s` as JSON string content (the snippet may hold quotes and control bytes).
std::string escaped(const std::string& s) {
  std::string out;
  for (const unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c < 0x20) {
      out += ' ';
      continue;
    }
    out += static_cast<char>(c);
  }
  return out;
}

std::vector<std::uint8_t> expand(const std::uint8_t* data, std::size_t size) {
  const int shape = data[0] % 8;
  const std::uint32_t n = data[1] | (data[2] << 8) | (static_cast<std::uint32_t>(data[3]) << 16);  // 0 .. 2^24 - 1
  const std::string snippet(reinterpret_cast<const char*>(data + 4), size - 4);
  const std::string weight = R"("w.weight":{"dtype":"U8","shape":[1,8],"data_offsets":[0,8]},)"
                             R"("w.weight_scale":{"dtype":"F8_E4M3","shape":[1,1],"data_offsets":[8,9]},)"
                             R"("w.weight_scale_2":{"dtype":"F32","shape":[],"data_offsets":[9,13]})";
  switch (shape) {
    case 0:  // a shape nested deep, the snippet at the bottom
      return image_of(R"({"t":{"dtype":"F32","shape":)" + nested(n % 200'000, snippet) + R"(,"data_offsets":[0,0]}})", 0);
    case 1:  // data_offsets nested deep
      return image_of(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[)" + nested(n % 200'000, snippet) + R"(,0]}})", 0);
    case 2: {  // many empty tensors, the snippet in every name
      std::string json = "{";
      const std::string piece = escaped(snippet.substr(0, 16));
      for (std::uint32_t i = 0; i < n % 100'000; ++i)
        json += (i ? "," : "") + std::string("\"") + piece + std::to_string(i) + R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
      return image_of(json + "}", 0);
    }
    case 3:  // a long dtype
      return image_of(R"({"t":{"dtype":")" + escaped(snippet) + std::string(n % 4'000'000, 'X') + R"(","shape":[0],"data_offsets":[0,0]}})",
                      0);
    case 4:  // a long tensor name, missing from the buffer's tiling
      return image_of(
          R"({")" + std::string(n % 4'000'000, 'n') + escaped(snippet) + R"(":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8);
    case 5:  // our per-tensor metadata nested deep
      return image_of(R"({"__metadata__":{"nvfp4.w":")" + escaped(R"({"format":"nvfp4","block":)" + nested(n % 200'000, snippet) + "}") +
                          "\"}," + weight + "}",
                      13);
    case 6:  // the annotation nested deep
      return image_of(R"({"__metadata__":{"nvfp4_checkpoint":")" + escaped(R"({"model_config":)" + nested(n % 200'000, snippet) + "}") +
                          "\"}," + weight + "}",
                      13);
    default:  // torchao's tensor_names nested deep
      return image_of(R"({"__metadata__":{"tensor_names":")" + escaped(nested(n % 200'000, snippet)) + "\"}," + weight + "}", 13);
  }
}

void check_message(const error& e) {
  if (std::string(e.what()).size() > 4096) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const std::vector<std::uint8_t> image = expand(data, size);
  io::safetensors_file file;
  try {
    file = io::parse_safetensors(image.data(), image.size(), "large.safetensors");
  } catch (const error& e) {
    check_message(e);
    return 0;
  }
  try {
    const auto again = io::serialize_safetensors(file);
    (void)io::parse_safetensors(again.data(), again.size(), "again.safetensors");
  } catch (const error& e) {
    check_message(e);
  }
  for (const auto& name : io::quantized_tensor_names(file)) {
    try {
      (void)io::dequantize_tensor(file, name);
    } catch (const error& e) {
      check_message(e);
    }
  }
  for (int reader = 0; reader < 3; ++reader) {
    try {
      if (reader == 0) (void)io::modelopt_from_safetensors(file, "large");
      if (reader == 1) (void)io::compressed_tensors_from_safetensors(file, "large");
      if (reader == 2) (void)io::torchao_from_safetensors(file, "large");
    } catch (const error& e) {
      check_message(e);
    }
  }
  return 0;
}
