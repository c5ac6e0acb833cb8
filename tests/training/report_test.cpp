// tests/training/report_test.cpp: the charts of nvfp4/training/report.hpp: one colour per recipe
// name in every chart (the PyTorch studies' colours for their recipes), curves that stay visible
// when identical, tick labels without "-0".
#include "nvfp4/training/report.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {
namespace training_report_test {

using namespace nvfp4::training;

run_report make_run(const std::string& name, float start, float slope, long long steps = 60) {
  run_report r{name, name, {}};
  for (long long s = 0; s < steps; ++s) r.result.steps.push_back({.step = s, .loss = start - slope * static_cast<float>(s)});
  r.result.evals.push_back({.step = steps / 2, .loss = start - slope * static_cast<float>(steps / 2)});
  return r;
}

/// data-series name -> (data-color, data-style) of every series group of a chart.
std::map<std::string, std::pair<std::string, std::string>> series_of(const std::string& svg) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  const std::regex group("<g data-series='([^']*)' data-color='([^']*)' data-style='([^']*)'>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), group); it != std::sregex_iterator(); ++it)
    out[(*it)[1]] = {(*it)[2], (*it)[3]};
  return out;
}

/// The tick labels of a chart (text elements holding only a number).
std::vector<std::string> tick_labels(const std::string& svg) {
  std::vector<std::string> out;
  const std::regex text("<text[^>]*>(-?[0-9][0-9.e+-]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text); it != std::sregex_iterator(); ++it) out.push_back((*it)[1]);
  return out;
}

TEST(ReportTest, RecipeColoursAreThoseOfThePythonStudies) {
  // The peer: python/examples/study_report.py's RECIPE_COLOURS table, read from the source tree.
  std::ifstream file(std::string(NVFP4_SOURCE_DIR) + "/python/examples/study_report.py");
  ASSERT_TRUE(file) << "python/examples/study_report.py not found";
  std::stringstream text;
  text << file.rdbuf();
  const std::string source = text.str();
  const auto table = source.find("RECIPE_COLOURS = {");
  ASSERT_NE(table, std::string::npos);
  const std::string body = source.substr(table, source.find('}', table) - table);
  const std::regex entry("\"([a-z0-9_]+)\": \"(#[0-9a-fA-F]{6})\"");
  int checked = 0;
  for (auto it = std::sregex_iterator(body.begin(), body.end(), entry); it != std::sregex_iterator(); ++it, ++checked)
    EXPECT_EQ(recipe_color((*it)[1].str()), (*it)[2].str()) << (*it)[1];
  EXPECT_GE(checked, 6);
}

TEST(ReportTest, ColoursFollowNamesNotPositions) {
  // Every catalog recipe has a colour of its own.
  std::map<std::string, std::string> owner;
  for (const char* name : {"fp32", "bf16", "fp8_delayed", "fp8_current", "fp8_block", "mxfp8", "nvfp4", "nvfp4_no_rht", "nvfp4_no_sr",
                           "nvfp4_last_bf16", "nvfp4_cooldown", "nvfp4_4over6", "nvfp4_amax_q999", "nvfp4_fp8_states"}) {
    const auto [it, fresh] = owner.emplace(recipe_color(name), name);
    EXPECT_TRUE(fresh) << name << " shares " << it->first << " with " << it->second;
  }
  // The same run keeps its colour and style in the loss and the gap chart (where the baseline is
  // left out) and in a report that lists the runs in another order.
  const std::vector<run_report> runs{make_run("bf16", 3, 0.02f), make_run("nvfp4", 3.1f, 0.02f), make_run("mxfp8", 3.05f, 0.02f),
                                     make_run("my_variant", 3.2f, 0.02f)};
  const auto loss = series_of(loss_chart_svg(runs, "loss"));
  const auto gap = series_of(gap_chart_svg(runs, "bf16", "gap"));
  ASSERT_EQ(loss.size(), 4u);
  ASSERT_EQ(gap.size(), 3u);
  EXPECT_FALSE(gap.contains("bf16"));
  for (const auto& [name, style] : gap) EXPECT_EQ(style, loss.at(name)) << name;
  EXPECT_EQ(loss.at("bf16").first, "#1f77b4");
  EXPECT_EQ(loss.at("nvfp4").first, "#8c564b");
  EXPECT_EQ(loss.at("mxfp8").first, "#9467bd");
  const std::vector<run_report> reversed(runs.rbegin(), runs.rend());
  const auto other = series_of(loss_chart_svg(reversed, "loss"));
  for (const auto& [name, style] : other) EXPECT_EQ(style.first, loss.at(name).first) << name;
}

TEST(ReportTest, IdenticalCurvesStayDistinguishable) {
  // Two runs with the same losses: each must get its own dash pattern or symbol, and each its own
  // symbols placed at points of its own.
  const std::vector<run_report> runs{make_run("nvfp4", 3, 0.02f, 200), make_run("nvfp4_no_sr", 3, 0.02f, 200)};
  const std::string svg = loss_chart_svg(runs, "identical");
  const auto series = series_of(svg);
  ASSERT_EQ(series.size(), 2u);
  EXPECT_NE(series.at("nvfp4").second, series.at("nvfp4_no_sr").second);
  EXPECT_NE(nvfp4::training::detail::chart_dash(0), std::string(nvfp4::training::detail::chart_dash(1)));
  // The hollow symbols of the two series sit at different x positions.
  std::vector<std::string> groups;
  for (std::size_t at = svg.find("<g data-series="); at != std::string::npos; at = svg.find("<g data-series=", at + 1))
    groups.push_back(svg.substr(at, svg.find("</g>\n</g>", at) - at));
  ASSERT_EQ(groups.size(), 2u);
  auto first_symbol_x = [](const std::string& g) {
    const std::string symbols = g.substr(g.find("<g clip-path='url(#plot)'>"));
    std::smatch match;
    return std::regex_search(symbols, match, std::regex("(?:cx='|points=')([0-9.]+)")) ? match[1].str() : std::string();
  };
  EXPECT_FALSE(first_symbol_x(groups[0]).empty());
  EXPECT_NE(first_symbol_x(groups[0]), first_symbol_x(groups[1]));
}

TEST(ReportTest, NoMinusZeroTick) {
  // A y range from just below 0 up to 1: the first tick is at ceil(-0.25) * 0.2 = -0.0.
  chart_series s{"bf16", {1, 2, 3}, {-0.01, 0.5, 1.0}, {}, {}, {}, -1};
  const std::string svg = line_chart_svg({s}, {.title = "t", .x_label = "", .y_label = "", .note = ""});
  const auto labels = tick_labels(svg);
  ASSERT_FALSE(labels.empty());
  for (const auto& label : labels) EXPECT_NE(label, "-0") << svg;
  EXPECT_NE(std::find(labels.begin(), labels.end(), "0"), labels.end());
  // Also for a gap chart (zero line) whose data lie just below zero.
  chart_series g{"nvfp4", {0, 1, 2}, {-1e-3, -2e-3, -0.5e-3}, {}, {}, {}, -1};
  for (const auto& label : tick_labels(line_chart_svg({g}, {.title = "g", .x_label = "", .y_label = "", .note = "", .zero_line = true})))
    EXPECT_NE(label, "-0");
  EXPECT_EQ(nvfp4::training::detail::tick_label(-0.0, 0.2, 4), "0");
  EXPECT_EQ(nvfp4::training::detail::tick_label(-1e-17, 0.2, 4), "0");
  EXPECT_EQ(nvfp4::training::detail::tick_label(-0.2, 0.2, 4), "-0.2");
}

TEST(ReportTest, GapChartNeedsItsBaseline) {
  const std::vector<run_report> runs{make_run("nvfp4", 3, 0.02f)};
  EXPECT_THROW(gap_chart_svg(runs, "bf16", "gap"), nvfp4::error);
}

}  // namespace training_report_test
}  // namespace
