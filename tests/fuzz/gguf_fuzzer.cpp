// libFuzzer harness for the GGUF reader (nvfp4/io/gguf.hpp) and the checkpoint mapping on top of
// it: any input must either parse or throw nvfp4::error; a parsed file must re-serialize to one
// that parses equal; reading it as a checkpoint and writing that back must succeed or throw
// nvfp4::error, never crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "nvfp4/io/gguf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nvfp4::io::gguf_file file;
  try {
    file = nvfp4::io::parse_gguf(data, size, "fuzz.gguf");
  } catch (const nvfp4::error&) {
    return 0;
  }
  const auto image = nvfp4::io::serialize_gguf(file);  // a parsed file always serializes
  const auto again = nvfp4::io::parse_gguf(image.data(), image.size(), "reserialized.gguf");
  if (again.version != file.version || again.metadata.size() != file.metadata.size() || again.tensors.size() != file.tensors.size())
    std::abort();
  for (std::size_t i = 0; i < file.tensors.size(); ++i)
    if (again.tensors[i].name != file.tensors[i].name || again.tensors[i].bytes != file.tensors[i].bytes ||
        again.tensors[i].ne != file.tensors[i].ne || again.tensors[i].type != file.tensors[i].type)
      std::abort();
  for (std::size_t i = 0; i < file.metadata.size(); ++i)
    if (again.metadata[i].key != file.metadata[i].key || again.metadata[i].raw != file.metadata[i].raw) std::abort();
  try {
    const auto checkpoint = nvfp4::io::checkpoint_from_gguf(file, "fuzz.gguf");
    (void)nvfp4::io::checkpoint_to_gguf(checkpoint);
  } catch (const nvfp4::error&) {
  }
  return 0;
}
