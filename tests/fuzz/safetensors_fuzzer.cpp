// libFuzzer harness for the safetensors reader (nvfp4/io/safetensors.hpp) and the quantized
// checkpoint layer on top of it: any input must either parse or throw nvfp4::error; a parsed
// file must re-serialize to one that parses equal; every quantized tensor found must describe
// and dequantize or throw nvfp4::error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "nvfp4/io/quantized_checkpoint.hpp"
#include "nvfp4/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nvfp4::io::safetensors_file file;
  try {
    file = nvfp4::io::parse_safetensors(data, size, "fuzz.safetensors");
  } catch (const nvfp4::error&) {
    return 0;
  }
  try {
    const auto image = nvfp4::io::serialize_safetensors(file);
    const auto again = nvfp4::io::parse_safetensors(image.data(), image.size(), "reserialized.safetensors");
    if (again.tensors.size() != file.tensors.size() || again.metadata != file.metadata) std::abort();
    for (const auto& t : file.tensors) {
      const auto* u = again.find(t.name);
      if (!u || u->bytes != t.bytes || u->shape != t.shape || u->dtype != t.dtype) std::abort();
    }
  } catch (const nvfp4::error& e) {
    // Only names or metadata that are not valid UTF-8 may fail to serialize.
    if (e.code() != nvfp4::errc::invalid_argument) std::abort();
  }
  for (const auto& name : nvfp4::io::quantized_tensor_names(file)) {
    try {
      (void)nvfp4::io::dequantize_tensor(file, name);
    } catch (const nvfp4::error&) {
    }
  }
  return 0;
}
