// Tests of nvfp4/recipes/recipe_fields.hpp: every recipe of the library's list describes its
// fields in a table whose rows name real, distinct members, and docs/api.md's row of each recipe
// struct ("TE's <class name>: ...") names every field of the table, so the reference cannot drift
// from the struct (the Python classes are made from the same tables: tests/python/test_recipe_table.py).
#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "nvfp4/recipes/recipe.hpp"

namespace nvfp4 {
namespace {
namespace recipes_recipe_fields_test {

std::string api_reference() {
  std::ifstream in(std::string(NVFP4_SOURCE_DIR) + "/docs/api.md");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The line of docs/api.md that documents the recipe struct of TE's class `name`.
std::string api_row_of(const std::string& api, const std::string& name) {
  std::istringstream lines(api);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("| `", 0) == 0 && line.find("| TE's " + name + ":") != std::string::npos) return line;
  return {};
}

TEST(RecipeFields, TablesNameDistinctFieldsAndApiMdListsThem) {
  const std::string api = api_reference();
  ASSERT_FALSE(api.empty()) << "docs/api.md not found under " << NVFP4_SOURCE_DIR;
  std::size_t described = 0;
  recipe_policies::for_each([&]<class P>(std::type_identity<P>) {
    using R = typename P::recipe_type;
    SCOPED_TRACE(P::name);
    std::set<std::string> names;
    std::set<std::ptrdiff_t> offsets;
    const R defaults{};
    for_each_field<R>([&](const auto& f) {
      EXPECT_TRUE(names.insert(f.name).second) << f.name << " twice";
      EXPECT_NE(std::string(f.what), "") << f.name;
      // Each row is its own member (no two names for one field).
      const auto offset = reinterpret_cast<const char*>(&(defaults.*(f.member))) - reinterpret_cast<const char*>(&defaults);
      EXPECT_TRUE(offsets.insert(offset).second) << f.name << " names a member another row names";
    });
    if (field_count<R>() == 0) return;  // no quantization: nothing to list
    ++described;
    const std::string row = api_row_of(api, P::name);
    ASSERT_FALSE(row.empty()) << "docs/api.md has no row '| `<struct>` | TE's " << P::name << ": ...'";
    for_each_field<R>([&](const auto& f) {
      EXPECT_NE(row.find("`" + std::string(f.name) + "`"), std::string::npos)
          << "docs/api.md's " << P::name << " row lacks `" << f.name << "`";
    });
  });
  EXPECT_EQ(described, 5u);  // every TE recipe of the list
}

// The check itself catches a missing field: a row without one is reported.
TEST(RecipeFields, TheCheckFindsAMissingField) {
  const std::string api = "| `float8_current_scaling` | TE's Float8CurrentScaling: `fp8_format` only |\n";
  const std::string row = api_row_of(api, "Float8CurrentScaling");
  ASSERT_FALSE(row.empty());
  std::size_t missing = 0;
  for_each_field<float8_current_scaling>([&](const auto& f) { missing += row.find("`" + std::string(f.name) + "`") == std::string::npos; });
  EXPECT_EQ(missing, field_count<float8_current_scaling>() - 1);
}

}  // namespace recipes_recipe_fields_test
}  // namespace
}  // namespace nvfp4
