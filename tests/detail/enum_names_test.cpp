// Tests for nvfp4/detail/enum_names.hpp and the name table beside each enum: every value named
// once, names and values unique, the spellings the files and peers use (ModelOpt / compressed-
// tensors metadata, TransformerEngine's option strings, docs/python.md), and parse_name's error.
#include "nvfp4/detail/enum_names.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>

#include "nvfp4/gemm/fp8/mma_model.hpp"
#include "nvfp4/gemm/operands.hpp"
#include "nvfp4/io/checkpoint_formats.hpp"
#include "nvfp4/recipes/delayed_scaling.hpp"
#include "nvfp4/recipes/no_quantization.hpp"
#include "nvfp4/recipes/nvfp4_recipe.hpp"
#include "nvfp4/recipes/recipe_common.hpp"
#include "nvfp4/scaling/four_over_six_rules.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"
#include "nvfp4/scaling/quantize_options.hpp"
#include "nvfp4/scaling/quantizer_flavor.hpp"

namespace nvfp4 {
namespace {
namespace detail_enum_names_test {

// Compile-time: the lookups are constexpr, so a table can feed a constant.
static_assert(std::string_view(detail::name_of(gemm_mode::relaxed)) == "relaxed");
static_assert(detail::value_of<fp8_format>("e5m2") == fp8_format::e5m2);
static_assert(!detail::value_of<fp8_format>("E4M3").has_value());  // names are exact, case included

/// Every entry's name maps back to its value and its value to its name; no name or value twice.
template <class Enum>
void expect_table_consistent(std::size_t expected_size) {
  std::set<std::string> names;
  std::set<int> values;
  for (const auto& e : detail::enum_table<Enum>::entries) {
    EXPECT_TRUE(names.insert(e.name).second) << "name twice: " << e.name;
    EXPECT_TRUE(values.insert(static_cast<int>(e.value)).second) << "value twice: " << e.name;
    EXPECT_EQ(detail::value_of<Enum>(e.name), e.value) << e.name;
    EXPECT_STREQ(detail::name_of(e.value), e.name);
  }
  EXPECT_EQ(names.size(), expected_size);
}

TEST(EnumNames, EveryTableIsOneToOne) {
  expect_table_consistent<gemm_mode>(2);
  expect_table_consistent<rounding_mode>(2);
  expect_table_consistent<mx_scale_rule>(2);
  expect_table_consistent<quantized_axis>(2);
  expect_table_consistent<fp8_format>(2);
  expect_table_consistent<fp8_block_shape>(2);
  expect_table_consistent<fp8::mma::tensor_core>(2);
  expect_table_consistent<high_precision>(2);
  expect_table_consistent<io::checkpoint_format>(4);
  expect_table_consistent<quantizer_flavor>(5);
  // The recipes' options as the Python recipes take them.
  expect_table_consistent<recipe_format>(3);
  expect_table_consistent<tensor_role>(3);
  expect_table_consistent<four_over_six_scope>(4);
  expect_table_consistent<four_over_six_error>(2);
  expect_table_consistent<amax_compute_algorithm>(2);
}

// The spellings are fixed by files already written and by the Python API (docs/python.md,
// docs/file_format.md): a table edit that renames one must fail here.
TEST(EnumNames, SpellingsFilesAndUsersWrite) {
  EXPECT_STREQ(detail::name_of(gemm_mode::exact), "exact");
  EXPECT_STREQ(detail::name_of(rounding_mode::nearest_even), "nearest_even");
  EXPECT_STREQ(detail::name_of(rounding_mode::stochastic), "stochastic");
  EXPECT_STREQ(detail::name_of(mx_scale_rule::ocp_floor), "ocp_floor");
  EXPECT_STREQ(detail::name_of(mx_scale_rule::te_ceil), "te_ceil");
  EXPECT_STREQ(detail::name_of(quantized_axis::rowwise), "rowwise");
  EXPECT_STREQ(detail::name_of(quantized_axis::columnwise), "columnwise");
  EXPECT_STREQ(fp8_format_name(fp8_format::e4m3), "e4m3");
  EXPECT_STREQ(detail::name_of(fp8_block_shape::block_1x128), "1x128");
  EXPECT_STREQ(detail::name_of(fp8_block_shape::block_128x128), "128x128");
  EXPECT_STREQ(detail::name_of(fp8::mma::tensor_core::hopper), "hopper");
  EXPECT_STREQ(detail::name_of(fp8::mma::tensor_core::blackwell), "blackwell");
  EXPECT_STREQ(high_precision_name(high_precision::bf16), "bf16");
  // compressed-tensors' own quant_method spelling; the CLI's flavor spelling is an alias.
  EXPECT_STREQ(io::checkpoint_format_name(io::checkpoint_format::compressed_tensors), "compressed-tensors");
  EXPECT_EQ(io::parse_checkpoint_format("compressed_tensors"), io::checkpoint_format::compressed_tensors);
  EXPECT_EQ(io::parse_checkpoint_format("compressed-tensors"), io::checkpoint_format::compressed_tensors);
  EXPECT_EQ(io::parse_checkpoint_format("gguf"), io::checkpoint_format::gguf);
  EXPECT_FALSE(io::parse_checkpoint_format("safetensors").has_value());
  // The quantizer flavors as the CLI's --flavor takes them, "compressed-tensors" an alias.
  EXPECT_EQ(quantizer_flavor_name(quantizer_flavor::compressed_tensors), "compressed_tensors");
  EXPECT_EQ(parse_quantizer_flavor("compressed-tensors"), quantizer_flavor::compressed_tensors);
  EXPECT_EQ(parse_quantizer_flavor("ggml"), quantizer_flavor::ggml);
  EXPECT_FALSE(parse_quantizer_flavor("TE").has_value());
  // TE's recipe option strings (recipe.py's fields, docs/python.md); recipe_format_name keeps
  // TE's Format spelling for display.
  EXPECT_EQ(detail::value_of<recipe_format>("hybrid"), recipe_format::hybrid);
  EXPECT_STREQ(recipe_format_name(recipe_format::hybrid), "HYBRID");
  EXPECT_STREQ(tensor_role_name(tensor_role::grad_output), "grad_output");
  EXPECT_STREQ(detail::name_of(four_over_six_scope::activations), "activations");
  EXPECT_STREQ(detail::name_of(four_over_six_error::mse), "mse");
  EXPECT_STREQ(detail::name_of(amax_compute_algorithm::most_recent), "most_recent");
}

TEST(EnumNames, ParseNameRefusesAnUnknownNameListingTheAccepted) {
  EXPECT_EQ(detail::parse_name<fp8::mma::tensor_core>("blackwell", "core"), fp8::mma::tensor_core::blackwell);
  try {
    (void)detail::parse_name<gemm_mode>("fast", "mode");
    FAIL() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_EQ(std::string(e.what()), "nvfp4: mode must be one of exact, relaxed, not 'fast'");
  }
  EXPECT_EQ(detail::name_list<io::checkpoint_format>(" | "), "modelopt | compressed-tensors | gguf | torchao");
}

}  // namespace detail_enum_names_test
}  // namespace
}  // namespace nvfp4
