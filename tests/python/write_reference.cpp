// tests/python/write_reference.cpp: writes results of the C++ API (every quantization mode, the
// RHT, the GEMMs, the FP8 quantizers and GEMMs, the metrics, the Linear layer) for one deterministic input into a directory, so that
// test_same_bytes_as_cpp.py can check that the Python module produces the very same bytes.
// usage: python_reference_writer <directory>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "nvfp4/gemm/fp4/gemm.hpp"
#include "nvfp4/gemm/fp8/gemm.hpp"
#include "nvfp4/io/npy.hpp"
#include "nvfp4/io/quantized_checkpoint.hpp"
#include "nvfp4/nn/amax_percentile.hpp"
#include "nvfp4/nvfp4.hpp"

namespace {

using namespace nvfp4;
constexpr index_t rows = 64, cols = 256, b_rows = 48;

/// N(0, 1) with every 97th element an outlier 30-60x larger.
std::vector<float> input(index_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * (i % 97 == 5 ? 30.0f + static_cast<float>(i % 31) : 1.0f);
  return x;
}

template <class T>
io::npy_array array_of(const std::vector<T>& values, io::npy_dtype dtype, index_t r, index_t c) {
  io::npy_array a;
  a.dtype = dtype;
  a.shape = {r, c};
  a.bytes.resize(values.size() * sizeof(T));
  std::memcpy(a.bytes.data(), values.data(), a.bytes.size());
  return a;
}

std::vector<std::uint16_t> bits_of(const std::vector<bf16>& values) {
  std::vector<std::uint16_t> out;
  for (bf16 v : values) out.push_back(v.bits());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: python_reference_writer <directory>\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  try {
    std::filesystem::create_directories(dir);
    const std::vector<float> x = input(rows * cols, 1), b = input(b_rows * cols, 2);
    std::vector<bf16> x_bf16;
    for (float v : x) x_bf16.push_back(bf16::from_float(v));
    const auto xv = matrix_view<const float>::row_major(x.data(), rows, cols);
    const auto xb = matrix_view<const bf16>::row_major(x_bf16.data(), rows, cols);
    const auto bv = matrix_view<const float>::row_major(b.data(), b_rows, cols);
    io::write_npy(dir / "x.npy", array_of(x, io::npy_dtype::float32, rows, cols));
    io::write_npy(dir / "x_bf16.npy", array_of(bits_of(x_bf16), io::npy_dtype::uint16, rows, cols));
    io::write_npy(dir / "b.npy", array_of(b, io::npy_dtype::float32, b_rows, cols));

    // Every mode, stored as a checkpoint (its byte layout is documented in docs/cli.md).
    quantize_options sr, te_ceil, columnwise;
    sr.rounding = rounding_mode::stochastic;
    sr.seed = 7;
    te_ceil.mx_rule = mx_scale_rule::te_ceil;
    columnwise.axis = quantized_axis::columnwise;
    // how each was made, recorded in the file's metadata
    auto stored = [](quantize_options made_with, bool swizzle = false, bool rht = false) {
      io::store_options o;
      o.quantize = made_with;
      o.swizzle = swizzle;
      o.rht = rht;
      return o;
    };
    io::safetensors_file file;
    const auto q1 = quantize<nvfp4_1x16>(xv);
    io::add_quantized_tensor(file, "nvfp4_1x16", q1);
    io::add_quantized_tensor(file, "nvfp4_16x16", quantize<nvfp4_16x16>(xv));
    io::add_quantized_tensor(file, "mxfp4_ocp", quantize<mxfp4>(xv));
    io::add_quantized_tensor(file, "mxfp4_te", quantize<mxfp4>(xv, te_ceil), stored(te_ceil));
    io::add_quantized_tensor(file, "mxfp8", quantize<mxfp8>(xv));
    io::add_quantized_tensor(file, "mxfp8_te", quantize<mxfp8>(xb, te_ceil), stored(te_ceil));
    io::add_quantized_tensor(file, "nvfp4_sr", quantize<nvfp4_1x16>(xv, sr), stored(sr));
    io::add_quantized_tensor(file, "nvfp4_from_bf16", quantize<nvfp4_1x16>(xb));
    io::add_quantized_tensor(file, "nvfp4_amax_100", quantize_with_amax<nvfp4_1x16>(xv, 100.0f));
    io::add_quantized_tensor(file, "swizzled", q1, stored({}, true));
    const auto pair = quantize_rowwise_and_columnwise<nvfp4_1x16>(xv);
    io::add_quantized_tensor(file, "pair_columnwise", pair.columnwise, stored(columnwise));
    io::add_quantized_tensor(file, "columnwise_rht", quantize_columnwise_rht(xb), stored(columnwise, false, true));
    std::vector<bf16> rotated(x.size());
    hadamard_rows(xv, hadamard_transform::te_default(), matrix_view<bf16>::row_major(rotated.data(), rows, cols));
    io::add_quantized_tensor(file, "rowwise_rht", quantize<nvfp4_1x16>(matrix_view<const bf16>::row_major(rotated.data(), rows, cols)),
                             stored({}, false, true));
    io::write_safetensors(dir / "reference.safetensors", file);

    // The RHT: TE's 16-point one and a random 64-point one (seed 3), as bf16 bits.
    io::write_npy(dir / "rht16.npy", array_of(bits_of(rotated), io::npy_dtype::uint16, rows, cols));
    std::vector<bf16> rotated64(x.size());
    hadamard_rows(xv, hadamard_transform::random(64, 3), matrix_view<bf16>::row_major(rotated64.data(), rows, cols));
    io::write_npy(dir / "rht64_seed3.npy", array_of(bits_of(rotated64), io::npy_dtype::uint16, rows, cols));

    // GEMMs: x (NVFP4 1x16) times b (NVFP4 16x16), exact and relaxed, fp32 and bf16 out; MXFP4.
    const auto qb = quantize<nvfp4_16x16>(bv);
    gemm_options relaxed;
    relaxed.mode = gemm_mode::relaxed;
    io::write_npy(dir / "gemm_exact.npy", array_of(gemm(q1, qb), io::npy_dtype::float32, rows, b_rows));
    io::write_npy(dir / "gemm_relaxed.npy", array_of(gemm(q1, qb, relaxed), io::npy_dtype::float32, rows, b_rows));
    std::vector<bf16> d_bf16(static_cast<std::size_t>(rows * b_rows));
    gemm(q1, qb, matrix_view<bf16>::row_major(d_bf16.data(), rows, b_rows));
    io::write_npy(dir / "gemm_exact_bf16.npy", array_of(bits_of(d_bf16), io::npy_dtype::uint16, rows, b_rows));
    io::write_npy(dir / "gemm_mxfp4.npy", array_of(gemm(quantize<mxfp4>(xv), quantize<mxfp4>(bv)), io::npy_dtype::float32, rows, b_rows));

    // FP8: codes and scale_inv of each quantizer, then the FP8 GEMMs on them (C++ defaults unless named).
    auto write_fp8 = [&](const char* name, const fp8_tensor& t) {
      const std::vector<std::uint8_t> codes(t.codes().begin(), t.codes().end());
      const std::vector<float> scale_inv(t.scale_inv().begin(), t.scale_inv().end());
      io::write_npy(dir / (std::string("fp8_") + name + "_codes.npy"), array_of(codes, io::npy_dtype::uint8, t.rows(), t.cols()));
      io::write_npy(dir / (std::string("fp8_") + name + "_scale_inv.npy"),
                    array_of(scale_inv, io::npy_dtype::float32, t.scale_rows(), t.scale_cols()));
    };
    const fp8_tensor x_current = quantize_fp8_current(xv, fp8_format::e4m3);
    const fp8_tensor b_current = quantize_fp8_current(bv, fp8_format::e4m3);
    const fp8_tensor b_e5m2_pow2 = quantize_fp8_current(bv, fp8_format::e5m2, {.power_2_scale = true});
    const fp8_tensor x_scaled = quantize_fp8_with_scale(xb, fp8_format::e4m3, 3.0f);
    const fp8_tensor x_1x128 = quantize_fp8_blockwise(xv, fp8_format::e4m3, fp8_block_shape::block_1x128);
    const fp8_tensor b_128x128 = quantize_fp8_blockwise(bv, fp8_format::e4m3, fp8_block_shape::block_128x128);
    write_fp8("x_current", x_current);
    write_fp8("b_current", b_current);
    write_fp8("b_e5m2_pow2", b_e5m2_pow2);
    write_fp8("x_scaled", x_scaled);
    write_fp8("x_1x128", x_1x128);
    write_fp8("b_128x128", b_128x128);
    std::vector<float> d(static_cast<std::size_t>(rows * b_rows));
    const auto dv = matrix_view<float>::row_major(d.data(), rows, b_rows);
    fp8_gemm(x_current, b_current, dv);
    io::write_npy(dir / "fp8_gemm_current.npy", array_of(d, io::npy_dtype::float32, rows, b_rows));
    fp8_gemm(x_current, b_e5m2_pow2, dv);  // E4M3 x E5M2 (TE's HYBRID dgrad / wgrad pairing)
    io::write_npy(dir / "fp8_gemm_hybrid.npy", array_of(d, io::npy_dtype::float32, rows, b_rows));
    fp8_gemm(x_1x128, b_128x128, dv);
    io::write_npy(dir / "fp8_gemm_blockwise.npy", array_of(d, io::npy_dtype::float32, rows, b_rows));
    const std::vector<float> bias = input(b_rows, 4);
    fp8_gemm_options blackwell;
    blackwell.core = fp8::mma::tensor_core::blackwell;
    blackwell.promotion_interval = 0;
    blackwell.bias = bias;
    std::vector<bf16> d_fp8_bf16(static_cast<std::size_t>(rows * b_rows));
    fp8_gemm(x_current, b_current, matrix_view<bf16>::row_major(d_fp8_bf16.data(), rows, b_rows), blackwell);
    io::write_npy(dir / "fp8_bias.npy", array_of(bias, io::npy_dtype::float32, 1, b_rows));
    io::write_npy(dir / "fp8_gemm_blackwell_bias_bf16.npy", array_of(bits_of(d_fp8_bf16), io::npy_dtype::uint16, rows, b_rows));
    fp8_gemm_options relaxed8;
    relaxed8.mode = gemm_mode::relaxed;
    fp8_gemm(x_current, b_current, dv, relaxed8);
    io::write_npy(dir / "fp8_gemm_relaxed.npy", array_of(d, io::npy_dtype::float32, rows, b_rows));
    fp8_mma(x_current, b_current, {}, dv);
    io::write_npy(dir / "fp8_mma.npy", array_of(d, io::npy_dtype::float32, rows, b_rows));
    const auto mx_x = quantize<mxfp8>(xv), mx_b = quantize<mxfp8>(bv);
    mxfp8_gemm(mx_x, mx_b, dv);
    io::write_npy(dir / "mxfp8_gemm.npy", array_of(d, io::npy_dtype::float32, rows, b_rows));
    fp8_gemm_options plain;
    plain.promotion_interval = 0;
    mxfp8_mma(mx_x, mx_b, {}, dv, plain);
    io::write_npy(dir / "mxfp8_mma_plain.npy", array_of(d, io::npy_dtype::float32, rows, b_rows));

    // The Linear layer under the NVFP4 recipe: W = b, forward x, backward dy (seed 5).
    const std::vector<float> dy = input(rows * b_rows, 3);
    nn::linear_options layer_options;
    layer_options.seed = 5;
    nn::linear layer(cols, b_rows, nvfp4_block_scaling{}, layer_options);
    std::copy(b.begin(), b.end(), layer.weight().begin());
    const std::vector<float> y = layer.forward(xv);
    const std::vector<float> dx = layer.backward(matrix_view<const float>::row_major(dy.data(), rows, b_rows));
    const std::vector<float> dw(layer.weight_grad().begin(), layer.weight_grad().end());
    io::write_npy(dir / "linear_dy.npy", array_of(dy, io::npy_dtype::float32, rows, b_rows));
    io::write_npy(dir / "linear_y.npy", array_of(y, io::npy_dtype::float32, rows, b_rows));
    io::write_npy(dir / "linear_dx.npy", array_of(dx, io::npy_dtype::float32, rows, cols));
    io::write_npy(dir / "linear_dw.npy", array_of(dw, io::npy_dtype::float32, b_rows, cols));
    // The same layer with the 0.99-quantile as the amax of activations and gradients.
    layer_options.nvfp4_amax = nn::percentile_amax_rule(0.99);
    nn::linear quantile_layer(cols, b_rows, nvfp4_block_scaling{}, layer_options);
    std::copy(b.begin(), b.end(), quantile_layer.weight().begin());
    io::write_npy(dir / "linear_q99_y.npy", array_of(quantile_layer.forward(xv), io::npy_dtype::float32, rows, b_rows));
    io::write_npy(dir / "linear_q99_dx.npy", array_of(quantile_layer.backward(matrix_view<const float>::row_major(dy.data(), rows, b_rows)),
                                                      io::npy_dtype::float32, rows, cols));

    // Metrics of the 1x16 round trip, in the order of error_report's fields.
    const std::vector<float> restored = dequantize(q1);
    io::write_npy(dir / "dequantized_1x16.npy", array_of(restored, io::npy_dtype::float32, rows, cols));
    const error_report e = compare(x, restored);
    const std::vector<double> metrics = {e.mse, e.rmse, e.sqnr_db, e.max_abs_error, e.max_rel_error, e.cosine_similarity};
    io::npy_array m;
    m.dtype = io::npy_dtype::float64;
    m.shape = {6};
    m.bytes.resize(6 * 8);
    std::memcpy(m.bytes.data(), metrics.data(), m.bytes.size());
    io::write_npy(dir / "metrics_1x16.npy", m);
  } catch (const nvfp4::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
