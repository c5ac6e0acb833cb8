// nvfp4/training/line_chart.hpp: SVG line charts of training runs (each series keeps its colour by
// name, a dash pattern and symbols of its own, so that no curve hides another) and the colour of a
// recipe, the same in every chart. Plain SVG, no third-party plotting; training/report.hpp draws
// its loss and gap charts with it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nvfp4/training/detail/report_text.hpp"

namespace nvfp4::training {

/// One line of a chart; NaN values leave a gap. Markers (`marker_x`, `marker_y`) are drawn as
/// filled symbols without a line (validation points, say).
struct chart_series {
  std::string label;
  std::vector<double> x, y;
  std::vector<double> marker_x, marker_y;
  std::string color;  ///< empty: recipe_color(label)
  int style = -1;     ///< dashes, symbol and where the symbols sit; -1: the series' position in the chart
};

struct chart_options {
  std::string title, x_label, y_label, note;
  double y_min = NAN, y_max = NAN;  ///< NaN: from the data
  bool zero_line = false;
};

/// The colour of a recipe (or any run) by name, the same in every chart of every report. The six
/// recipes the PyTorch studies plot (python/examples/study_report.py, RECIPE_COLOURS) get the same
/// colours there and here (matplotlib's tab10); the other catalog recipes get the rest of tab10,
/// then tab20b's dark shades; any other name a colour from its hash (stable, never its position).
inline std::string recipe_color(std::string_view name) {
  static const std::map<std::string, std::string, std::less<>> table{{"bf16", "#1f77b4"},
                                                                     {"fp8_delayed", "#ff7f0e"},
                                                                     {"fp8_current", "#2ca02c"},
                                                                     {"fp8_block", "#d62728"},
                                                                     {"mxfp8", "#9467bd"},
                                                                     {"nvfp4", "#8c564b"},
                                                                     {"fp32", "#7f7f7f"},
                                                                     {"nvfp4_no_rht", "#e377c2"},
                                                                     {"nvfp4_no_sr", "#bcbd22"},
                                                                     {"nvfp4_last_bf16", "#17becf"},
                                                                     {"nvfp4_cooldown", "#393b79"},
                                                                     {"nvfp4_4over6", "#637939"},
                                                                     {"nvfp4_amax_q999", "#843c39"},
                                                                     {"nvfp4_fp8_states", "#7b4173"}};
  if (const auto it = table.find(name); it != table.end()) return it->second;
  static const char* const others[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                                       "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#843c39", "#7b4173"};
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return others[h % std::size(others)];
}
namespace detail {

/// A "nice" tick step (1, 2 or 5 times a power of ten) for about `count` ticks over `range`.
inline double tick_step(double range, int count) {
  if (!(range > 0)) return 1;
  const double raw = range / count;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / power;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * power;
}
/// Dash patterns by style (solid first): a curve lying on another still shows through the gaps.
inline const char* chart_dash(int style) {
  static const char* const dashes[] = {"", "7 3", "2 3", "9 3 2 3"};
  return dashes[style % 4];
}

/// The SVG of symbol `style % 8` (circle, square, triangle up, diamond, triangle down, plus,
/// cross, star) centred on (x, y) with radius r.
inline std::string chart_symbol(int style, double x, double y, double r, const std::string& stroke, const std::string& fill) {
  std::ostringstream o;
  o.precision(6);
  const std::string paint = "' fill='" + fill + "' stroke='" + stroke + "' stroke-width='1.2'/>";
  auto poly = [&](std::initializer_list<std::pair<double, double>> points) {
    o << "<polygon points='";
    for (const auto& [dx, dy] : points) o << x + dx * r << ',' << y + dy * r << ' ';
    o << paint;
  };
  switch (style % 8) {
    case 0:
      o << "<circle cx='" << x << "' cy='" << y << "' r='" << r << paint;
      break;
    case 1:
      poly({{-0.85, -0.85}, {0.85, -0.85}, {0.85, 0.85}, {-0.85, 0.85}});
      break;
    case 2:
      poly({{0, -1.1}, {1, 0.8}, {-1, 0.8}});
      break;
    case 3:
      poly({{0, -1.2}, {1, 0}, {0, 1.2}, {-1, 0}});
      break;
    case 4:
      poly({{0, 1.1}, {1, -0.8}, {-1, -0.8}});
      break;
    case 5:
      poly({{-0.3, -1},
            {0.3, -1},
            {0.3, -0.3},
            {1, -0.3},
            {1, 0.3},
            {0.3, 0.3},
            {0.3, 1},
            {-0.3, 1},
            {-0.3, 0.3},
            {-1, 0.3},
            {-1, -0.3},
            {-0.3, -0.3}});
      break;
    case 6:
      poly({{-1, -0.6},
            {-0.6, -1},
            {0, -0.4},
            {0.6, -1},
            {1, -0.6},
            {0.4, 0},
            {1, 0.6},
            {0.6, 1},
            {0, 0.4},
            {-0.6, 1},
            {-1, 0.6},
            {-0.4, 0}});
      break;
    default:
      poly({{0, -1.2}, {0.3, -0.4}, {1.15, -0.4}, {0.45, 0.15}, {0.7, 1}, {0, 0.5}, {-0.7, 1}, {-0.45, 0.15}, {-1.15, -0.4}, {-0.3, -0.4}});
  }
  return o.str();
}

/// A tick label: `digits` significant digits, never "-0" (a tick at -0.0 or a rounding residue of
/// zero prints as 0).
inline std::string tick_label(double t, double step, int digits) {
  if (std::fabs(t) < 1e-9 * step) t = 0;
  return number(t + 0.0, digits);  // + 0.0 turns -0.0 into +0.0
}

}  // namespace detail

/// A line chart as a standalone SVG document. Each series: its colour (by name), a dash pattern
/// and a symbol (by style) placed at points of its own, so that no curve hides another, even an
/// identical one. Each series sits in a <g data-series=... data-color=... data-style=...> element.
inline std::string line_chart_svg(const std::vector<chart_series>& series, const chart_options& options) {
  constexpr int width = 980, height = 540, left = 92, right = 250, top = 48, bottom = 56;
  const int plot_w = width - left - right, plot_h = height - top - bottom;
  double x_min = INFINITY, x_max = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const auto& s : series) {
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      x_min = std::min(x_min, s.x[i]), x_max = std::max(x_max, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]), y_hi = std::max(y_hi, s.y[i]);
    }
    for (std::size_t i = 0; i < s.marker_x.size(); ++i)
      if (std::isfinite(s.marker_y[i])) y_lo = std::min(y_lo, s.marker_y[i]), y_hi = std::max(y_hi, s.marker_y[i]);
  }
  if (!std::isfinite(x_min)) x_min = 0, x_max = 1, y_lo = 0, y_hi = 1;
  if (std::isfinite(options.y_min)) y_lo = options.y_min;
  if (std::isfinite(options.y_max)) y_hi = options.y_max;
  if (options.zero_line) y_lo = std::min(y_lo, 0.0), y_hi = std::max(y_hi, 0.0);
  if (!(y_hi > y_lo)) y_hi = y_lo + 1;
  if (!(x_max > x_min)) x_max = x_min + 1;
  const double pad = 0.04 * (y_hi - y_lo);
  y_lo -= pad, y_hi += pad;
  auto px = [&](double x) { return left + (x - x_min) / (x_max - x_min) * plot_w; };
  auto py = [&](double y) { return top + (y_hi - y) / (y_hi - y_lo) * plot_h; };
  std::ostringstream svg;
  svg.precision(6);
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
      << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n";
  svg << "<defs><clipPath id='plot'><rect x='" << left << "' y='" << top << "' width='" << plot_w << "' height='" << plot_h
      << "'/></clipPath></defs>\n";
  svg << "<text x='" << left << "' y='24' font-size='16' font-weight='bold'>" << detail::xml_escape(options.title) << "</text>\n";
  if (!options.note.empty()) svg << "<text x='" << left << "' y='40' fill='#555'>" << detail::xml_escape(options.note) << "</text>\n";
  // Grid and ticks, at whole multiples of the step (k · step, not a running sum).
  const double ys = detail::tick_step(y_hi - y_lo, 8), xs = detail::tick_step(x_max - x_min, 10);
  for (double k = std::ceil(y_lo / ys); k * ys <= y_hi; k += 1) {
    const double t = k * ys;
    svg << "<line x1='" << left << "' x2='" << left + plot_w << "' y1='" << py(t) << "' y2='" << py(t) << "' stroke='#e5e5e5'/><text x='"
        << left - 6 << "' y='" << py(t) + 4 << "' text-anchor='end'>" << detail::tick_label(t, ys, 4) << "</text>\n";
  }
  for (double k = std::ceil(x_min / xs); k * xs <= x_max; k += 1) {
    const double t = k * xs;
    svg << "<line x1='" << px(t) << "' x2='" << px(t) << "' y1='" << top << "' y2='" << top + plot_h << "' stroke='#f0f0f0'/><text x='"
        << px(t) << "' y='" << top + plot_h + 16 << "' text-anchor='middle'>" << detail::tick_label(t, xs, 6) << "</text>\n";
  }
  svg << "<rect x='" << left << "' y='" << top << "' width='" << plot_w << "' height='" << plot_h << "' fill='none' stroke='#333'/>\n";
  if (options.zero_line)
    svg << "<line x1='" << left << "' x2='" << left + plot_w << "' y1='" << py(0) << "' y2='" << py(0)
        << "' stroke='#000' stroke-width='1.2'/>\n";
  svg << "<text x='" << left + plot_w / 2 << "' y='" << height - 14 << "' text-anchor='middle'>" << detail::xml_escape(options.x_label)
      << "</text>\n<text transform='translate(18," << top + plot_h / 2 << ") rotate(-90)' text-anchor='middle'>"
      << detail::xml_escape(options.y_label) << "</text>\n";
  // Lines, symbols and the legend. Earlier series are drawn wider, so a later one lying exactly
  // on top leaves the earlier one's edges (and its dashes' gaps) visible.
  int max_style = 0;
  for (std::size_t k = 0; k < series.size(); ++k)
    max_style = std::max(max_style, series[k].style < 0 ? static_cast<int>(k) : series[k].style);
  const int spread = max_style + 1;
  for (std::size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    const int style = s.style < 0 ? static_cast<int>(k) : s.style;
    const std::string color = s.color.empty() ? recipe_color(s.label) : s.color;
    const std::string dash_pattern = detail::chart_dash(style);
    const std::string dash = dash_pattern.empty() ? "" : " stroke-dasharray='" + dash_pattern + "'";
    const double stroke_width = std::max(1.2, 2.8 - 0.3 * static_cast<double>(k));
    svg << "<g data-series='" << detail::xml_escape(s.label) << "' data-color='" << color << "' data-style='" << style << "'>\n";
    std::string path;
    bool pen_down = false;
    std::size_t finite = 0;
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) {
        pen_down = false;
        continue;
      }
      ++finite;
      path += (pen_down ? " L" : " M") + detail::number(px(s.x[i]), 6) + " " + detail::number(py(s.y[i]), 6);
      pen_down = true;
    }
    if (!path.empty())
      svg << "<path clip-path='url(#plot)' fill='none' stroke='" << color << "' stroke-width='" << stroke_width << "' stroke-opacity='0.9'"
          << dash << " d='" << path << "'/>\n";
    // Hollow symbols on the line: about ten per curve, each series at its own phase (every point
    // when a curve has few).
    const std::size_t every = finite <= 12 ? 1 : std::max<std::size_t>(1, s.x.size() / 10);
    const std::size_t phase = every == 1 ? 0 : (static_cast<std::size_t>(style) * every / static_cast<std::size_t>(spread)) % every;
    svg << "<g clip-path='url(#plot)'>";
    for (std::size_t i = phase; i < s.x.size(); i += every)
      if (std::isfinite(s.y[i])) svg << detail::chart_symbol(style, px(s.x[i]), py(s.y[i]), 3.5, color, "white");
    svg << "</g>\n";
    // Filled symbols: the markers (validation points), larger for the series drawn earlier, so
    // that equal points of several series show as nested symbols rather than the last one.
    const double marker_r = 4.0 + 1.0 * static_cast<double>(std::min<std::size_t>(series.size() - 1 - k, 6));
    for (std::size_t i = 0; i < s.marker_x.size(); ++i)
      if (std::isfinite(s.marker_y[i]))
        svg << detail::chart_symbol(style, px(s.marker_x[i]), py(s.marker_y[i]), marker_r, "white", color) << "\n";
    const int ly = top + 14 + static_cast<int>(k) * 20;
    svg << "<line x1='" << left + plot_w + 10 << "' x2='" << left + plot_w + 50 << "' y1='" << ly - 4 << "' y2='" << ly - 4 << "' stroke='"
        << color << "' stroke-width='2.2'" << dash << "/>" << detail::chart_symbol(style, left + plot_w + 30, ly - 4, 3.5, color, "white")
        << "<text x='" << left + plot_w + 56 << "' y='" << ly << "'>" << detail::xml_escape(s.label) << "</text>\n</g>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace nvfp4::training
