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

/// Distance in bf16 ulps between two finite bf16 values (±0 are the same value).
int ulp_distance(bf16 a, bf16 b) {
  auto ordered = [](bf16 v) {
    const int magnitude = v.bits() & 0x7FFF;
    return (v.bits() & 0x8000) ? -magnitude : magnitude;
  };
  return std::abs(ordered(a) - ordered(b));
}

bool check_quantized(const nvfp4_tensor& q, const nlohmann::json& c, const char* data_field, const char* scale_field,
                     float expected_amax, matrix_view<const float> source) {
  const long data_diff = golden::first_code_difference(q, golden::load_as<std::uint8_t>(c, data_field), source);
  const long scale_diff = golden::first_difference(golden::scale_bytes(q), golden::load_as<std::uint8_t>(c, scale_field));
  EXPECT_EQ(data_diff, -1) << data_field << ": first differing byte";
  EXPECT_EQ(scale_diff, -1) << scale_field << ": first differing byte";
  EXPECT_EQ(q.amax(), expected_amax) << data_field;
  return data_diff == -1 && scale_diff == -1 && q.amax() == expected_amax;
}

TEST(GoldenRht, Mode1dRht) {
  const auto cases = golden::cases_of("nvfp4_quantize");
  long differing = 0, total = 0;
  int checked = 0;
  for (const auto& c : cases) {
    if (c.at("mode") != "1d_rht") continue;
    SCOPED_TRACE(golden::describe(c));
    const auto input = golden::load(c, "input_bf16_as_f32");
    const index_t rows = input.shape.at(0), cols = input.shape.at(1);
    const auto x = input.as<float>();
    std::vector<bf16> x_bf16;
    for (float v : x) x_bf16.push_back(bf16::from_float(v));
    const auto x_view = matrix_view<const bf16>::row_major(x_bf16.data(), rows, cols);
    const auto x_float = matrix_view<const float>::row_major(x.data(), rows, cols);

    // (a) our RHT(xᵀ) against the peer's, element by element.
    const auto peer_rht = golden::load_as<float>(c, "rht_col_input_bf16_as_f32");
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
    differing += case_differing;
    total += static_cast<long>(peer_rht.size());
    // The fp32 path agrees with the bf16 path (the values are the same).
    EXPECT_EQ(rht_columnwise(x_float).values, ours.values);

    // (b) the peer's RHT output quantized columnwise: data_t, scale_t_e4m3, amax_col.
    std::vector<bf16> peer_bf16;
    for (float v : peer_rht) peer_bf16.push_back(bf16::from_float(v));
    const auto peer_view = matrix_view<const bf16>::row_major(peer_bf16.data(), cols, rows);
    const auto peer_float = matrix_view<const float>::row_major(peer_rht.data(), cols, rows);
    const auto columnwise = quantize<nvfp4_1x16>(peer_view, {.axis = quantized_axis::columnwise});
    ok = check_quantized(columnwise, c, "data_t", "scale_t_e4m3", c.at("amax_col").get<float>(), peer_float) && ok;
    if (case_differing == 0) {  // then our fused path must give the same bytes
      const auto fused = quantize_columnwise_rht(x_view);
      EXPECT_EQ(golden::data_bytes(fused), golden::data_bytes(columnwise));
      EXPECT_EQ(golden::scale_bytes(fused), golden::scale_bytes(columnwise));
      EXPECT_EQ(fused.amax(), columnwise.amax());
    }

    // (c) the rowwise copy: plain 1x16 of x with the rowwise amax.
    const auto rowwise = quantize<nvfp4_1x16>(x_view);
    ok = check_quantized(rowwise, c, "data", "scale_e4m3", c.at("amax_row").get<float>(), x_float) && ok;
    golden::tally::instance().record("nvfp4_quantize 1d_rht", ok);
    ++checked;
  }
  EXPECT_GT(checked, 0);
  // docs/numerics_spec.md §4: the exact-sum rule differs from the peer's fp32 accumulation in at most 1e-5
  // of the elements (measured: a handful in ~750k, all one ulp).
  EXPECT_LE(static_cast<double>(differing), 1e-5 * static_cast<double>(total)) << differing << " of " << total;
  std::printf("1d_rht: RHT differs from the peer's in %ld of %ld elements (1 ulp each)\n", differing, total);
}

}  // namespace
}  // namespace nvfp4
