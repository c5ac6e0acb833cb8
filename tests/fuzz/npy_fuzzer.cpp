// libFuzzer harness for the .npy reader (nvfp4/io/npy.hpp): any input must either parse or throw
// nvfp4::error; a parsed array must convert (or refuse with dtype_mismatch / overflow), reorder
// and re-serialize to an equal array.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "nvfp4/io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nvfp4::io::npy_array array;
  try {
    array = nvfp4::io::parse_npy(data, size, "fuzz.npy");
  } catch (const nvfp4::error&) {
    return 0;
  }
  try {
    (void)nvfp4::io::to_float32(array);
  } catch (const nvfp4::error& e) {
    // Only non-float dtypes, and float64 values beyond float32's range, may refuse.
    if (e.code() != nvfp4::errc::dtype_mismatch && e.code() != nvfp4::errc::overflow) std::abort();
  }
  const nvfp4::io::npy_array c_order = nvfp4::io::to_c_order(array);
  const auto image = nvfp4::io::serialize_npy(c_order);
  const auto again = nvfp4::io::parse_npy(image.data(), image.size(), "reserialized.npy");
  if (again.bytes != c_order.bytes || again.shape != c_order.shape || again.dtype != c_order.dtype) std::abort();
  return 0;
}
