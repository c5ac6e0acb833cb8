// A downstream program that uses the installed library through Eigen (nvfp4::eigen).
#include <nvfp4/interop/eigen.hpp>
#include <nvfp4/interop/eigen_gemm.hpp>

#include <cstdio>

int main() {
  // A column-major Eigen matrix goes in without a copy; every row repeats ±(0.5, 1, 2, 3, 4, 6):
  // E2M1 values under one block scale (448), so dequantize gives x back up to S_dec = fp32(1/448).
  const float values[6] = {0.5f, 1.0f, 2.0f, 3.0f, 4.0f, 6.0f};
  Eigen::MatrixXf x(16, 64);
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    for (Eigen::Index c = 0; c < x.cols(); ++c) x(r, c) = values[c % 6] * (r % 2 ? -1.0f : 1.0f);
  const auto q = nvfp4::eigen::quantize<nvfp4::nvfp4_1x16>(x);
  const nvfp4::eigen::row_major_matrix_f32 back = nvfp4::eigen::dequantize(q);
  const nvfp4::error_report e = nvfp4::eigen::compare(x, back);
  // x · xᵀ in the scaled domain (no alpha), exact tensor-core model: rows r and s give
  // ±448² Σ_c values[c % 6]² = ±448² (10 · 66.25 + 14.25), exact in fp32.
  nvfp4::gemm_options no_alpha;
  no_alpha.apply_alpha = false;
  const nvfp4::eigen::row_major_matrix_f32 d = nvfp4::eigen::gemm<nvfp4::nvfp4_1x16>(x, x.transpose(), no_alpha);
  const float expected = 448.0f * 448.0f * 676.75f;
  std::printf("consumer (%s kernels, Eigen %d.%d.%d): max |err| %g, d(0,0) = %g, d(0,1) = %g\n", nvfp4::isa_name(nvfp4::compiled_isa),
              EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, e.max_abs_error, d(0, 0), d(0, 1));
  const bool ok = e.max_abs_error <= 1e-6 && d(0, 0) == expected && d(0, 1) == -expected;
  return ok ? 0 : 1;
}
