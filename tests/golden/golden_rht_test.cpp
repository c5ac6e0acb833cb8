// Golden test, kind `nvfp4_quantize`, mode 1d_rht: TransformerEngine's reference quantizer with
// the random Hadamard transform on the columnwise copy (docs/numerics_spec.md §4). (a) our RHT of x against
// the peer's rht_col_input (at most 1 bf16 ulp, at most 1e-5 of all elements differing: the peer
// accumulates in fp32 before its one bf16 rounding); (b) quantizing the peer's rht_col_input gives
// data_t, scale_t_e4m3 and amax_col bit for bit; (c) the rowwise copy is the plain 1x16 of x.
#include <gtest/gtest.h>

#include <bit>
#include <cstdlib>

#include "golden/golden_support.hpp"
#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/transforms/hadamard.hpp"

namespace nvfp4 {
namespace {
namespace golden_rht_test {

/// Distance in bf16 ulps between two finite bf16 values (±0 are the same value).
int ulp_distance(bf16 a, bf16 b) {
  auto ordered = [](bf16 v) {
    const int magnitude = v.bits() & 0x7FFF;
    return (v.bits() & 0x8000) ? -magnitude : magnitude;
  };
  return std::abs(ordered(a) - ordered(b));
}

bool check_quantized(const nvfp4_tensor& q, const std::vector<std::uint8_t>& data, const std::vector<std::uint8_t>& scales,
                     float expected_amax, matrix_view<const float> source, const char* what) {
  const long data_diff = golden::first_code_difference(q, data, source);
  const long scale_diff = golden::first_difference(golden::scale_bytes(q), scales);
  EXPECT_EQ(data_diff, -1) << what << " data: first differing byte";
  EXPECT_EQ(scale_diff, -1) << what << " scales: first differing byte";
  EXPECT_EQ(q.amax(), expected_amax) << what << " amax";
  return data_diff == -1 && scale_diff == -1 && q.amax() == expected_amax;
}

/// Elements of the peer's RHT output that ours differs from (by one bf16 ulp), over all cases.
long rht_differing = 0, rht_total = 0;

bool check_case(const nlohmann::json& c) {
  golden::case_fields f(
      c, "nvfp4_quantize 1d_rht case",
      {"shape", "input_bf16_as_f32", "rht_col_input_bf16_as_f32", "data", "scale_e4m3", "data_t", "scale_t_e4m3", "amax_row", "amax_col"},
      {"dist"});
  const auto [rows, cols] = f.shape("shape");
  const auto x = f.load_shaped<float>("input_bf16_as_f32", {rows, cols});
  const auto peer_rht = f.load_shaped<float>("rht_col_input_bf16_as_f32", {cols, rows});
  const auto data = f.load_shaped<std::uint8_t>("data", {rows, (cols + 1) / 2});
  const auto scales = f.load_shaped<std::uint8_t>("scale_e4m3", {rows, (cols + 15) / 16});
  const auto data_t = f.load_shaped<std::uint8_t>("data_t", {cols, (rows + 1) / 2});
  const auto scales_t = f.load_shaped<std::uint8_t>("scale_t_e4m3", {cols, (rows + 15) / 16});
  const float amax_row = f.number("amax_row"), amax_col = f.number("amax_col");
  const std::vector<bf16> x_bf16 = golden::bf16_values(x, "input_bf16_as_f32");
  const auto x_view = matrix_view<const bf16>::row_major(x_bf16.data(), rows, cols);
  const auto x_float = matrix_view<const float>::row_major(x.data(), rows, cols);

  // (a) our RHT(xᵀ) against the peer's, element by element.
  const columnwise_rht ours = rht_columnwise(x_view);
  bool ok = ours.rows == cols && ours.cols == rows && peer_rht.size() == ours.values.size();
  EXPECT_TRUE(ok) << "rht shape";
  long case_differing = 0;
  int worst_ulps = 0;
  for (std::size_t i = 0; ok && i < peer_rht.size(); ++i) {
    const int d = ulp_distance(ours.values[i], bf16::from_float(peer_rht[i]));
    worst_ulps = std::max(worst_ulps, d);
    case_differing += d != 0;
  }
  EXPECT_LE(worst_ulps, 1) << "RHT differs from the peer's by more than one bf16 ulp";
  ok = ok && worst_ulps <= 1;
  rht_differing += case_differing;
  rht_total += static_cast<long>(peer_rht.size());
  // The fp32 path agrees with the bf16 path (the values are the same).
  EXPECT_EQ(rht_columnwise(x_float).values, ours.values);

  // (b) the peer's RHT output quantized columnwise: data_t, scale_t_e4m3, amax_col.
  const std::vector<bf16> peer_bf16 = golden::bf16_values(peer_rht, "rht_col_input_bf16_as_f32");
  const auto peer_view = matrix_view<const bf16>::row_major(peer_bf16.data(), cols, rows);
  const auto peer_float = matrix_view<const float>::row_major(peer_rht.data(), cols, rows);
  const auto columnwise = quantize<nvfp4_1x16>(peer_view, {.axis = quantized_axis::columnwise});
  ok = check_quantized(columnwise, data_t, scales_t, amax_col, peer_float, "columnwise") && ok;
  if (case_differing == 0) {  // then our fused path must give the same bytes
    const auto fused = quantize_columnwise_rht(x_view);
    EXPECT_EQ(golden::data_bytes(fused), golden::data_bytes(columnwise));
    EXPECT_EQ(golden::scale_bytes(fused), golden::scale_bytes(columnwise));
    EXPECT_EQ(fused.amax(), columnwise.amax());
  }

  // (c) the rowwise copy: plain 1x16 of x with the rowwise amax.
  const auto rowwise = quantize<nvfp4_1x16>(x_view);
  ok = check_quantized(rowwise, data, scales, amax_row, x_float, "rowwise") && ok;
  return f.finish() && ok;
}

const bool registered = golden::register_check("nvfp4_quantize 1d_rht", check_case);

TEST(GoldenRht, Mode1dRht) {
  golden::check_every_case("nvfp4_quantize 1d_rht");
  // docs/numerics_spec.md §4: the exact-sum rule differs from the peer's fp32 accumulation in at most 1e-5
  // of the elements (measured: a handful in ~750k, all one ulp).
  EXPECT_LE(static_cast<double>(rht_differing), 1e-5 * static_cast<double>(rht_total)) << rht_differing << " of " << rht_total;
  std::printf("1d_rht: RHT differs from the peer's in %ld of %ld elements (1 ulp each)\n", rht_differing, rht_total);
}

}  // namespace golden_rht_test
}  // namespace
}  // namespace nvfp4
