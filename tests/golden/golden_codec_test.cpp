// Golden test, kind `codec`: our E2M1/E4M3/E5M2/E8M0 encoders and decoders against ml_dtypes
// and PyTorch, bit for bit, over every array of every codec case. Each array is one tallied check.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "golden/golden_support.hpp"
#include "nvfp4/formats.hpp"

namespace nvfp4 {
namespace {

const std::string kKind = "codec";

/// True where the peer is known to differ from the rule we implement (see the golden README and
/// e8m0::from_float): ml_dtypes casts float subnormals in [2^-127, 1.5 x 2^-127) to 2^-126,
/// although 2^-127 (code 0) is nearer. Only there is its code 1 accepted for our code 0.
bool known_e8m0_subnormal_quirk(float x, std::uint8_t ours, std::uint8_t theirs) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  return bits >= 0x00400000u && bits < 0x00600000u && ours == 0 && theirs == 1;
}

/// The shared codec kind's `e5m2_rn_satfinite` comes from ml_dtypes, which writes 0x7E for a NaN;
/// the hardware's satfinite cvt writes 0x7F (an H100's cvt.rn.satfinite.e5m2x2.f32 for every NaN,
/// tests/formats/data/h100_nan_codes.json). The hardware is followed;
/// only that pair is let through, every other E5M2 input must match.
bool e5m2_nan_follows_the_hardware(float x, std::uint8_t ours, std::uint8_t theirs) {
  return std::isnan(x) && ours == 0x7F && theirs == 0x7E;
}

/// Encodes every input with `encode` and compares with the expected codes; records one check.
template <class Encode>
void check_encoder(const nlohmann::json& test_case, const std::string& input_field, const std::string& expected_field,
                   Encode encode) {
  if (!test_case.contains(expected_field)) return;
  const auto input = golden::load_as<float>(test_case, input_field);
  const auto expected = golden::load_as<std::uint8_t>(test_case, expected_field);
  ASSERT_EQ(input.size(), expected.size()) << expected_field;
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < input.size(); ++i) {
    const std::uint8_t got = encode(input[i]);
    const bool tolerated = (expected_field == "e8m0_mldtypes" && known_e8m0_subnormal_quirk(input[i], got, expected[i])) ||
                           (expected_field == "e5m2_rn_satfinite" && e5m2_nan_follows_the_hardware(input[i], got, expected[i]));
    if (got != expected[i] && !tolerated && mismatches++ < 5) {
      ADD_FAILURE() << expected_field << ": input " << input[i] << " (0x" << std::hex << std::bit_cast<std::uint32_t>(input[i])
                    << ") -> 0x" << int(got) << ", expected 0x" << int(expected[i]) << std::dec;
    }
  }
  EXPECT_EQ(mismatches, 0u) << expected_field << " over " << input.size() << " inputs";
  golden::tally::instance().record(kKind, mismatches == 0);
}

/// Decodes every code and compares float bits (any NaN matches any NaN).
template <class Decode>
void check_decoder(const nlohmann::json& test_case, const std::string& field, Decode decode) {
  if (!test_case.contains(field)) return;
  const auto expected = golden::load_as<float>(test_case, field);
  std::size_t mismatches = 0;
  for (std::size_t code = 0; code < expected.size(); ++code) {
    const float got = decode(static_cast<std::uint8_t>(code));
    const bool same = std::isnan(expected[code]) ? std::isnan(got)
                                                 : std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(expected[code]);
    if (!same) {
      ++mismatches;
      ADD_FAILURE() << field << ": code 0x" << std::hex << code << std::dec << " -> " << got << ", expected " << expected[code];
    }
  }
  golden::tally::instance().record(kKind, mismatches == 0);
}

TEST(GoldenCodec, EveryCaseBitForBit) {
  const auto cases = golden::cases_of(kKind);
  ASSERT_FALSE(cases.empty()) << "no codec case in " << golden::directory();
  for (const auto& c : cases) {
    SCOPED_TRACE(golden::describe(c));
    check_encoder(c, "e2m1_input", "e2m1_rn_satfinite", [](float x) { return e2m1::from_float(x).bits(); });
    check_encoder(c, "input", "e4m3_rn_satfinite", [](float x) { return e4m3::from_float(x).bits(); });
    check_encoder(c, "input", "e4m3_mldtypes",
                  [](float x) { return e4m3::from_float(x, overflow_policy::propagate).bits(); });
    check_encoder(c, "input", "e5m2_rn_satfinite", [](float x) { return e5m2::from_float(x).bits(); });
    check_encoder(c, "input", "e5m2_mldtypes",
                  [](float x) { return e5m2::from_float(x, overflow_policy::propagate).bits(); });
    check_encoder(c, "e8m0_input", "e8m0_mldtypes", [](float x) { return e8m0::from_float(x, overflow_policy::propagate).bits(); });
    check_encoder(c, "e4m3_torch_input", "e4m3_torch", [](float x) { return e4m3::from_float(x).bits(); });
    check_decoder(c, "decode_e2m1", [](std::uint8_t b) { return e2m1::from_bits(b).to_float(); });
    check_decoder(c, "decode_e4m3", [](std::uint8_t b) { return e4m3::from_bits(b).to_float(); });
    check_decoder(c, "decode_e5m2", [](std::uint8_t b) { return e5m2::from_bits(b).to_float(); });
    check_decoder(c, "decode_e8m0", [](std::uint8_t b) { return e8m0::from_bits(b).to_float(); });
  }
}

}  // namespace
}  // namespace nvfp4
