// nvfp4/recipes/recipe_fields.hpp: a recipe's fields described once. Each recipe struct gives its
// table, `static constexpr auto fields()`: a tuple of rows (the Python attribute name, the member,
// whether TE's recipe class has the field, one line on what it does). The Python binding makes
// each recipe class from its table (python/bind_nn.cpp), and tests check docs/api.md
// (tests/recipes/recipe_fields_test.cpp) and nvfp4.torch's TE-compatible recipe classes
// (tests/python/test_recipe_table.py) against it, so the forms cannot drift apart.
#pragma once

#include <cstddef>
#include <tuple>
#include <utility>

namespace nvfp4 {

/// Whether TE's recipe class has the field, or it is this library's (a seed, a research switch).
enum class field_origin { te, library };

/// One row of a recipe's field table.
template <class Recipe, class T>
struct recipe_field {
  using recipe_type = Recipe;
  using value_type = T;
  const char* name;     ///< the field's name: TE's where TE has it, the Python attribute
  T Recipe::*member;    ///< where it lives in the struct
  field_origin origin;  ///< TE's field, or the library's
  const char* what;     ///< what it does, one line (the Python property's doc)
};

/// A row of the table (deduces the recipe and value types).
template <class Recipe, class T>
constexpr recipe_field<Recipe, T> field_row(const char* name, T Recipe::*member, field_origin origin, const char* what) {
  return {name, member, origin, what};
}

/// A recipe struct that describes its fields.
template <class R>
concept described_recipe = requires {
  std::tuple_size<decltype(R::fields())>::value;
};

/// Calls f(row) for each row of R's table, in the table's order.
template <described_recipe R, class F>
constexpr void for_each_field(F&& f) {
  std::apply([&](const auto&... row) { (f(row), ...); }, R::fields());
}

/// The number of rows of R's table.
template <described_recipe R>
constexpr std::size_t field_count() {
  return std::tuple_size_v<decltype(R::fields())>;
}

}  // namespace nvfp4
