// A downstream program that quantizes a small matrix with the installed library (core only).
#include <nvfp4/nvfp4.hpp>

#include <cstdio>
#include <vector>

int main() {
  // Integers -6..6: amax 6, so S_enc = 2688 / 6 = 448 and a block whose max is 6 gets the scale
  // 6 * 448 / 6 = 448 (UE4M3 0x7E); its elements are then rounded as they are: 5 lies halfway
  // between the E2M1 values 4 and 6 and goes to 4 (even mantissa). Dequantized, an element is
  // (element * 448) * S_dec with S_dec = fp32(1 / 448), which is not exact.
  std::vector<float> x(32 * 32);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) - 6.0f;
  const auto view = nvfp4::matrix_view<const float>::row_major(x.data(), 32, 32);
  const auto q = nvfp4::quantize<nvfp4::nvfp4_1x16>(view);
  const std::vector<float> back = nvfp4::dequantize(q);
  std::printf("consumer (%s kernels): amax %g, first scale 0x%02x, x[11] = %g -> %g\n", nvfp4::isa_name(nvfp4::compiled_isa), q.amax(),
              q.scales()[0].bits(), x[11], back[11]);
  const float decode = 1.0f / 448.0f;
  const bool ok =
      q.amax() == 6.0f && q.scales()[0].bits() == 0x7E && back[0] == (-6.0f * 448.0f) * decode && back[11] == (4.0f * 448.0f) * decode;
  return ok ? 0 : 1;
}
