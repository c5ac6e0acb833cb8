// The golden manifest as a whole: every case has a check in golden_test (a kind, or a mode of
// one, that no check knows fails here instead of being skipped), the manifest holds no field of
// its own that nothing reads, and every registered check refuses a case holding a field it does
// not understand, naming the field (golden_support.hpp, case_fields).
#include <gtest/gtest.h>

#include "golden/golden_support.hpp"

namespace nvfp4 {
namespace {
namespace golden_manifest_test {

TEST(GoldenManifest, EveryCaseHasACheck) {
  const auto& cases = golden::manifest().at("cases");
  ASSERT_TRUE(cases.is_array());
  std::map<std::string, int> unhandled;
  for (const auto& c : cases) {
    ASSERT_TRUE(c.is_object() && c.contains("kind") && c.at("kind").is_string()) << "a case without a kind: " << c.dump().substr(0, 200);
    if (!golden::checks().count(golden::label_of(c))) unhandled[golden::label_of(c)]++;
  }
  for (const auto& [label, n] : unhandled)
    ADD_FAILURE() << n << " case(s) of '" << label << "': no check of golden_test knows this kind (or this mode of it); refusing them";
}

TEST(GoldenManifest, HoldsNoFieldNothingReads) {
  for (const auto& [key, value] : golden::manifest().items())
    EXPECT_TRUE(golden::manifest_fields().count(key)) << "manifest field '" << key << "' is not one golden_test understands";
}

TEST(GoldenManifest, EveryCheckRefusesAFieldItDoesNotKnow) {
  int checked = 0;
  for (const auto& [label, check] : golden::checks()) {
    const auto cases = golden::cases_of(label);
    if (cases.empty()) continue;
    auto c = cases.front();
    c["field_no_check_knows"] = true;
    const std::string message = golden::refusal_of(c, check);
    EXPECT_NE(message.find("field 'field_no_check_knows' is not one this check understands"), std::string::npos)
        << label << ": " << (message.empty() ? "ran the case" : "refused it with: " + message);
    ++checked;
  }
  if (golden::shipped()) {
    EXPECT_EQ(checked, static_cast<int>(golden::checks().size())) << "a registered label with no shipped case";
  }
}

}  // namespace golden_manifest_test
}  // namespace
}  // namespace nvfp4
