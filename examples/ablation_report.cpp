// examples/ablation_report.cpp: the sweep a numerics engineer asks for first. Every combination
// of block size (16, 32), scale format (E4M3 + FP32 tensor scale, or E8M0), RHT on/off, RN vs SR
// and 1-D vs 2-D blocks, over several distributions; written to reports/ as JSON, CSV and two SVG
// plots (a heatmap of SQNR with its colour bar, and the effect of each choice: the mean over the
// configurations of the other choices, with the smallest and largest change).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "example_support.hpp"
#include "nvfp4/io/file_bytes.hpp"
#include "nvfp4/nvfp4.hpp"

namespace {

constexpr const char* usage = R"(usage: ablation_report [--rows N] [--cols N] [--seed S] [--out DIR]
Quantizes rows x cols tensors of five distributions to FP4 (E2M1) with every combination of
block size 16/32, E4M3/E8M0 scales, RHT on/off, RN/SR rounding and 1-D/2-D blocks, and writes
DIR/ablation.json, DIR/ablation.csv, DIR/ablation_sqnr.svg and DIR/ablation_effects.svg.
defaults: --rows 256 --cols 1024 --seed 1 --out reports   (cols must be a multiple of 32)
)";

struct config {
  int block = 16;          // 16 or 32
  bool e4m3_scale = true;  // E4M3 block scales + FP32 tensor scale (NVFP4-style), else E8M0 (MX-style)
  bool rht = false;        // TE's 16-point RHT on each row block, inverted after dequantizing
  bool stochastic = false;
  bool two_d = false;  // block x block tiles instead of 1 x block
  std::string label() const {
    return std::to_string(two_d ? block : 1) + "x" + std::to_string(block) + (e4m3_scale ? " E4M3" : " E8M0") + (rht ? " RHT" : "") +
           (stochastic ? " SR" : " RN");
  }
};

struct result {
  std::string distribution;
  config setting;
  nvfp4::error_report error;
  double bits_per_element = 0;
};

/// Quantize + dequantize with a block format chosen at compile time. 32x32 tiles are beyond the
/// fast path's panel, so they run on the scalar reference (bit-identical, just slower).
template <class Format, class T>
std::vector<float> roundtrip(nvfp4::matrix_view<const T> x, const nvfp4::quantize_options& options) {
  if constexpr (Format::block_rows <= 16)
    return nvfp4::dequantize(nvfp4::quantize<Format>(x, options));
  else
    return nvfp4::dequantize(nvfp4::reference::quantize<Format>(x, options));
}

template <class Scale, class T>
std::vector<float> roundtrip_for(const config& c, nvfp4::matrix_view<const T> x, const nvfp4::quantize_options& options) {
  using nvfp4::block_format;
  using nvfp4::e2m1;
  if (c.block == 16) {
    return c.two_d ? roundtrip<block_format<e2m1, Scale, 16, 16>>(x, options) : roundtrip<block_format<e2m1, Scale, 1, 16>>(x, options);
  }
  return c.two_d ? roundtrip<block_format<e2m1, Scale, 32, 32>>(x, options) : roundtrip<block_format<e2m1, Scale, 1, 32>>(x, options);
}

std::vector<float> run_config(const config& c, const std::vector<float>& x, long long rows, long long cols, unsigned seed) {
  nvfp4::quantize_options options;
  options.rounding = c.stochastic ? nvfp4::rounding_mode::stochastic : nvfp4::rounding_mode::nearest_even;
  options.seed = seed;
  const auto view = nvfp4::matrix_view<const float>::row_major(x.data(), rows, cols);
  auto quantize_any = [&](auto source) {
    return c.e4m3_scale ? roundtrip_for<nvfp4::ue4m3>(c, source, options) : roundtrip_for<nvfp4::e8m0>(c, source, options);
  };
  if (!c.rht) return quantize_any(view);
  const auto transform = nvfp4::hadamard_transform::te_default();
  std::vector<nvfp4::bf16> rotated(x.size()), back(x.size());
  nvfp4::hadamard_rows(view, transform, nvfp4::matrix_view<nvfp4::bf16>::row_major(rotated.data(), rows, cols));
  std::vector<float> restored = quantize_any(nvfp4::matrix_view<const nvfp4::bf16>::row_major(rotated.data(), rows, cols));
  nvfp4::hadamard_rows(nvfp4::matrix_view<const float>::row_major(restored.data(), rows, cols), transform,
                       nvfp4::matrix_view<nvfp4::bf16>::row_major(back.data(), rows, cols), nvfp4::hadamard_direction::inverse);
  for (std::size_t i = 0; i < back.size(); ++i) restored[i] = back[i].to_float();
  return restored;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '<')
      out += "&lt;";
    else if (ch == '>')
      out += "&gt;";
    else if (ch == '&')
      out += "&amp;";
    else
      out += ch;
  }
  return out;
}

/// A color from a blue (low) - yellow (high) ramp for t in [0, 1].
std::string ramp(double t) {
  t = std::clamp(t, 0.0, 1.0);
  const double r = 40 + t * (250 - 40), g = 60 + t * (220 - 60), b = 160 + t * (60 - 160);
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", static_cast<int>(r), static_cast<int>(g), static_cast<int>(b));
  return buf;
}

/// Heatmap: one row per configuration, one column per distribution, SQNR written in each cell.
std::string heatmap_svg(const std::vector<result>& results, const std::vector<std::string>& distributions,
                        const std::vector<config>& configs) {
  const int cell_w = 110, cell_h = 18, left = 190, top = 60;
  double lo = 1e9, hi = -1e9;
  for (const auto& r : results) {
    lo = std::min(lo, r.error.sqnr_db);
    hi = std::max(hi, r.error.sqnr_db);
  }
  std::ostringstream svg;
  const int grid_right = left + cell_w * static_cast<int>(distributions.size());
  const int width = grid_right + 110;
  const int height = top + cell_h * static_cast<int>(configs.size()) + 30;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
      << "' font-family='sans-serif' font-size='11'>\n<rect width='100%' height='100%' fill='white'/>\n"
      << "<text x='10' y='20' font-size='14' font-weight='bold'>FP4 (E2M1) SQNR in dB: configuration x distribution</text>\n";
  for (std::size_t d = 0; d < distributions.size(); ++d)
    svg << "<text x='" << left + cell_w * static_cast<int>(d) + cell_w / 2 << "' y='" << top - 8 << "' text-anchor='middle'>"
        << xml_escape(distributions[d]) << "</text>\n";
  for (std::size_t c = 0; c < configs.size(); ++c) {
    const int y = top + cell_h * static_cast<int>(c);
    svg << "<text x='" << left - 6 << "' y='" << y + 13 << "' text-anchor='end'>" << xml_escape(configs[c].label()) << "</text>\n";
    for (std::size_t d = 0; d < distributions.size(); ++d) {
      const result& r = results[d * configs.size() + c];
      const int x = left + cell_w * static_cast<int>(d);
      svg << "<rect x='" << x << "' y='" << y << "' width='" << cell_w - 2 << "' height='" << cell_h - 2 << "' fill='"
          << ramp(hi > lo ? (r.error.sqnr_db - lo) / (hi - lo) : 0.5) << "'/>";
      char value[32];
      std::snprintf(value, sizeof value, "%.2f", r.error.sqnr_db);
      svg << "<text x='" << x + cell_w / 2 << "' y='" << y + 12 << "' text-anchor='middle'>" << value << "</text>\n";
    }
  }
  // The colour bar: the ramp from the lowest SQNR (bottom) to the highest (top), with dB ticks.
  const int bar_x = grid_right + 16, bar_w = 18, bar_h = cell_h * static_cast<int>(configs.size()) - 2, steps = 64;
  svg << "<text x='" << bar_x << "' y='" << top - 8 << "'>SQNR dB</text>\n";
  for (int i = 0; i < steps; ++i) {
    const double y0 = top + bar_h * (1.0 - (i + 1.0) / steps);
    svg << "<rect x='" << bar_x << "' y='" << y0 << "' width='" << bar_w << "' height='" << bar_h / static_cast<double>(steps) + 0.5
        << "' fill='" << ramp((i + 0.5) / steps) << "'/>";
  }
  svg << "\n<rect x='" << bar_x << "' y='" << top << "' width='" << bar_w << "' height='" << bar_h << "' fill='none' stroke='#333'/>\n";
  const double span = hi > lo ? hi - lo : 1.0;
  const double step = span > 12 ? 4 : span > 6 ? 2 : span > 3 ? 1 : 0.5;
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9; t += step) {
    const double y = top + bar_h * (1.0 - (hi > lo ? (t - lo) / span : 0.5));
    char label[32];
    std::snprintf(label, sizeof label, "%g", t + 0.0);  // + 0.0: never "-0"
    svg << "<line x1='" << bar_x + bar_w << "' x2='" << bar_x + bar_w + 4 << "' y1='" << y << "' y2='" << y << "' stroke='#333'/><text x='"
        << bar_x + bar_w + 7 << "' y='" << y + 4 << "'>" << label << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

/// What one choice does to the SQNR of one distribution: the mean, smallest and largest change
/// over the pairs of configurations that differ only in that choice.
struct effect {
  double mean = 0, min = 0, max = 0;
  int pairs = 0;
};

/// A fixed colour per distribution (by name, not position), the same in every chart.
std::string distribution_color(const std::string& name) {
  static const std::map<std::string, std::string> table{{"normal", "#4c72b0"},
                                                        {"normal+outliers", "#dd8452"},
                                                        {"student-t(3)", "#55a868"},
                                                        {"uniform", "#c44e52"},
                                                        {"log-normal", "#8172b3"}};
  const auto it = table.find(name);
  return it != table.end() ? it->second : "#937860";
}

/// Grouped bars: for each choice, the mean SQNR change it makes over the configurations of the
/// other choices (one bar per distribution), with a whisker from the smallest to the largest
/// change, so the average does not hide how much the other choices matter.
std::string effects_svg(const std::vector<std::pair<std::string, std::vector<effect>>>& effects,
                        const std::vector<std::string>& distributions) {
  const int group_w = 170, bar_w = 26, left = 60, top = 64, plot_h = 300;
  double extent = 1;
  for (const auto& [name, values] : effects)
    for (const effect& v : values) extent = std::max({extent, std::fabs(v.min), std::fabs(v.max)});
  extent = std::ceil(extent);
  const int tick_every = extent > 12 ? 4 : extent > 6 ? 2 : 1;
  const double zero_y = top + plot_h / 2.0, scale = (plot_h / 2.0) / extent;
  const int pairs = effects.empty() || effects.front().second.empty() ? 0 : effects.front().second.front().pairs;
  std::ostringstream svg;
  const int width = left + group_w * static_cast<int>(effects.size()) + 180;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << top + plot_h + 60
      << "' font-family='sans-serif' font-size='11'>\n<rect width='100%' height='100%' fill='white'/>\n"
      << "<text x='10' y='20' font-size='14' font-weight='bold'>SQNR change of each choice, averaged over the " << pairs
      << " configurations of the other choices (dB; positive = better)</text>\n"
      << "<text x='10' y='38' fill='#555'>bar: mean over the " << pairs
      << " pairs of configurations that differ only in that choice; whisker: the smallest to the largest change of a pair</text>\n";
  for (int tick = -static_cast<int>(extent); tick <= static_cast<int>(extent); ++tick) {
    if (tick % tick_every != 0) continue;
    const double y = zero_y - tick * scale;
    svg << "<line x1='" << left << "' x2='" << width - 180 << "' y1='" << y << "' y2='" << y << "' stroke='"
        << (tick == 0 ? "#000" : "#ddd") << "'/><text x='" << left - 6 << "' y='" << y + 4 << "' text-anchor='end'>" << tick << "</text>\n";
  }
  svg << "<text transform='translate(16," << zero_y << ") rotate(-90)' text-anchor='middle'>SQNR change (dB)</text>\n";
  int group = 0;
  for (const auto& [name, values] : effects) {
    const int x0 = left + group_w * group + 10;
    for (std::size_t d = 0; d < values.size(); ++d) {
      const effect& v = values[d];
      const double y = v.mean >= 0 ? zero_y - v.mean * scale : zero_y;
      const double xc = x0 + bar_w * static_cast<double>(d) + (bar_w - 3) / 2.0;
      svg << "<rect x='" << x0 + bar_w * static_cast<int>(d) << "' y='" << y << "' width='" << bar_w - 3 << "' height='"
          << std::fabs(v.mean) * scale << "' fill='" << distribution_color(distributions[d]) << "'><title>" << xml_escape(name) << ", "
          << xml_escape(distributions[d]) << ": mean " << v.mean << " dB over " << v.pairs << " pairs (" << v.min << " to " << v.max
          << ")</title></rect>";
      svg << "<line x1='" << xc << "' x2='" << xc << "' y1='" << zero_y - v.max * scale << "' y2='" << zero_y - v.min * scale
          << "' stroke='#222'/><line x1='" << xc - 4 << "' x2='" << xc + 4 << "' y1='" << zero_y - v.max * scale << "' y2='"
          << zero_y - v.max * scale << "' stroke='#222'/><line x1='" << xc - 4 << "' x2='" << xc + 4 << "' y1='" << zero_y - v.min * scale
          << "' y2='" << zero_y - v.min * scale << "' stroke='#222'/>\n";
    }
    svg << "<text x='" << x0 + bar_w * static_cast<int>(values.size()) / 2 << "' y='" << top + plot_h + 20 << "' text-anchor='middle'>"
        << xml_escape(name) << "</text><text x='" << x0 + bar_w * static_cast<int>(values.size()) / 2 << "' y='" << top + plot_h + 34
        << "' text-anchor='middle' fill='#555'>(mean of " << (values.empty() ? 0 : values.front().pairs) << " pairs)</text>\n";
    ++group;
  }
  for (std::size_t d = 0; d < distributions.size(); ++d) {
    const int y = top + 20 * static_cast<int>(d);
    svg << "<rect x='" << width - 170 << "' y='" << y << "' width='12' height='12' fill='" << distribution_color(distributions[d])
        << "'/><text x='" << width - 152 << "' y='" << y + 10 << "'>" << xml_escape(distributions[d]) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  nvfp4::io::write_file_atomically(path, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

}  // namespace

int main(int argc, char** argv) {
  const examples::flags flags(argc, argv, usage);
  examples::print_kernels();
  const long long rows = flags.integer("rows", 256), cols = flags.integer("cols", 1024);
  const auto seed = static_cast<unsigned>(flags.integer("seed", 1));
  const std::filesystem::path out_dir = flags.text("out", "reports");
  if (rows % 32 != 0 || cols % 32 != 0 || rows == 0) {
    std::fprintf(stderr, "--rows and --cols must be positive multiples of 32\n");
    return 2;
  }
  const long long n = rows * cols;
  const std::vector<std::pair<std::string, std::function<std::vector<float>()>>> sources = {
      {"normal", [&] { return examples::normal_with_outliers(n, seed, n + 1); }},
      {"normal+outliers", [&] { return examples::normal_with_outliers(n, seed); }},
      {"student-t(3)", [&] { return examples::student_t(n, seed, 3.0f); }},
      {"uniform", [&] { return examples::uniform(n, seed); }},
      {"log-normal", [&] { return examples::log_normal(n, seed); }},
  };
  std::vector<config> configs;
  for (int block : {16, 32})
    for (bool two_d : {false, true})
      for (bool e4m3 : {true, false})
        for (bool rht : {false, true})
          for (bool sr : {false, true}) configs.push_back({block, e4m3, rht, sr, two_d});

  std::vector<std::string> distributions;
  std::vector<result> results;
  try {
    for (const auto& [name, generate] : sources) {
      distributions.push_back(name);
      const std::vector<float> x = generate();
      for (const auto& c : configs) {
        const std::vector<float> restored = run_config(c, x, rows, cols, seed);
        const double area = c.two_d ? c.block * c.block : c.block;
        results.push_back({name, c, nvfp4::compare(x, restored), 4 + 8 / area + (c.e4m3_scale ? 32.0 / static_cast<double>(n) : 0)});
      }
    }

    // Effect of each choice, per distribution: over every pair of configurations that differ only
    // in it, the change from "off" to "on" (mean, smallest, largest).
    std::vector<std::pair<std::string, std::vector<effect>>> effects;
    const std::vector<std::tuple<std::string, std::function<bool(const config&)>, std::function<config(config)>>> choices = {
        {"E4M3 vs E8M0 scale", [](const config& c) { return c.e4m3_scale; }, [](config c) { return c.e4m3_scale = !c.e4m3_scale, c; }},
        {"block 16 vs 32", [](const config& c) { return c.block == 16; }, [](config c) { return c.block = c.block == 16 ? 32 : 16, c; }},
        {"RHT on vs off", [](const config& c) { return c.rht; }, [](config c) { return c.rht = !c.rht, c; }},
        {"SR vs RN", [](const config& c) { return c.stochastic; }, [](config c) { return c.stochastic = !c.stochastic, c; }},
        {"2-D vs 1-D", [](const config& c) { return c.two_d; }, [](config c) { return c.two_d = !c.two_d, c; }},
    };
    std::map<std::string, std::size_t> index_of;
    for (std::size_t c = 0; c < configs.size(); ++c) index_of[configs[c].label()] = c;
    for (const auto& [choice, is_on, flip] : choices) {
      std::vector<effect> per_distribution;
      for (std::size_t d = 0; d < distributions.size(); ++d) {
        effect e{0, INFINITY, -INFINITY, 0};
        for (std::size_t c = 0; c < configs.size(); ++c) {
          if (!is_on(configs[c])) continue;
          const std::size_t partner = index_of.at(flip(configs[c]).label());
          const double change = results[d * configs.size() + c].error.sqnr_db - results[d * configs.size() + partner].error.sqnr_db;
          e.mean += change, e.min = std::min(e.min, change), e.max = std::max(e.max, change), ++e.pairs;
        }
        e.mean /= e.pairs;
        per_distribution.push_back(e);
      }
      effects.emplace_back(choice, std::move(per_distribution));
    }

    std::filesystem::create_directories(out_dir);
    nlohmann::ordered_json json;
    json["rows"] = rows;
    json["cols"] = cols;
    json["seed"] = seed;
    json["element_format"] = "E2M1";
    json["results"] = nlohmann::ordered_json::array();
    std::ostringstream csv;
    csv << "distribution,block_rows,block_cols,scale,rht,rounding,sqnr_db,mse,max_abs_error,cosine_similarity,bits_per_element\n";
    for (const auto& r : results) {
      const config& c = r.setting;
      json["results"].push_back({{"distribution", r.distribution},
                                 {"block", {c.two_d ? c.block : 1, c.block}},
                                 {"scale", c.e4m3_scale ? "E4M3+FP32" : "E8M0"},
                                 {"rht", c.rht},
                                 {"rounding", c.stochastic ? "SR" : "RN"},
                                 {"sqnr_db", r.error.sqnr_db},
                                 {"mse", r.error.mse},
                                 {"max_abs_error", r.error.max_abs_error},
                                 {"cosine_similarity", r.error.cosine_similarity},
                                 {"bits_per_element", r.bits_per_element}});
      char line[512];
      std::snprintf(line, sizeof line, "%s,%d,%d,%s,%d,%s,%.4f,%.6e,%.6e,%.8f,%.5f\n", r.distribution.c_str(), c.two_d ? c.block : 1,
                    c.block, c.e4m3_scale ? "E4M3+FP32" : "E8M0", c.rht ? 1 : 0, c.stochastic ? "SR" : "RN", r.error.sqnr_db, r.error.mse,
                    r.error.max_abs_error, r.error.cosine_similarity, r.bits_per_element);
      csv << line;
    }
    // mean_effect_db: per choice, the mean change per distribution (as before); effect_db: with
    // the spread over the pairs of configurations.
    for (const auto& [choice, values] : effects) {
      for (std::size_t d = 0; d < values.size(); ++d) {
        json["mean_effect_db"][choice].push_back(values[d].mean);
        json["effect_db"][choice][distributions[d]] = {
            {"mean", values[d].mean}, {"min", values[d].min}, {"max", values[d].max}, {"pairs", values[d].pairs}};
      }
    }
    write_text(out_dir / "ablation.json", json.dump(2) + "\n");
    write_text(out_dir / "ablation.csv", csv.str());
    write_text(out_dir / "ablation_sqnr.svg", heatmap_svg(results, distributions, configs));
    write_text(out_dir / "ablation_effects.svg", effects_svg(effects, distributions));
  } catch (const nvfp4::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }

  std::printf("FP4 ablation over %zu configurations x %zu distributions, [%lld x %lld] each\n\n", configs.size(), distributions.size(),
              rows, cols);
  std::printf("%-22s", "configuration (SQNR dB)");
  for (const auto& d : distributions) std::printf(" %15s", d.c_str());
  std::printf("\n");
  for (std::size_t c = 0; c < configs.size(); ++c) {
    std::printf("%-22s", configs[c].label().c_str());
    for (std::size_t d = 0; d < distributions.size(); ++d) std::printf(" %15.2f", results[d * configs.size() + c].error.sqnr_db);
    std::printf("\n");
  }
  std::printf("\nwrote %s/{ablation.json, ablation.csv, ablation_sqnr.svg, ablation_effects.svg}\n", out_dir.string().c_str());
  return 0;
}
