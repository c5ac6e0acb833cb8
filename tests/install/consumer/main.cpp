// A downstream program that quantizes a small matrix with the installed library.
#include <nvfp4/nvfp4.hpp>

#include <cstdio>
#include <vector>

int main() {
  std::vector<float> x(32 * 32);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) - 6.0f;
  const auto q = nvfp4::quantize<nvfp4::nvfp4_1x16>(nvfp4::matrix_view<const float>::row_major(x.data(), 32, 32));
  std::printf("consumer: amax %g, first scale 0x%02x\n", q.amax(), q.scales()[0].bits());
  return q.amax() == 6.0f ? 0 : 1;
}
