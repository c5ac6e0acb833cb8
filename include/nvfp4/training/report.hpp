// nvfp4/training/report.hpp: writes training runs side by side: loss curves as CSV and JSON, SVG
// line charts (loss vs step for every run, the gap to a baseline run; drawn by
// training/line_chart.hpp, included here), a Markdown summary table and the per-layer logs. Plain
// text and SVG, no third-party plotting.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/training/detail/report_text.hpp"
#include "nvfp4/training/line_chart.hpp"
#include "nvfp4/training/trainer.hpp"

namespace nvfp4::training {

/// One run of a comparison: a name, what it is, and what the trainer recorded.
struct run_report {
  std::string name;
  std::string description;
  train_result result;
};

namespace detail {

/// Bias-corrected exponential moving average of the finite values (NaN where none so far).
inline std::vector<double> smoothed(const std::vector<double>& y, double alpha) {
  std::vector<double> out(y.size(), NAN);
  double average = 0, weight = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (std::isfinite(y[i])) {
      average = alpha * average + (1 - alpha) * y[i];
      weight = alpha * weight + (1 - alpha);
    }
    if (weight > 0) out[i] = average / weight;
  }
  return out;
}
}  // namespace detail

/// The training losses of a run by step (NaN for skipped steps).
inline std::vector<double> loss_curve(const train_result& r) {
  std::vector<double> y;
  for (const auto& s : r.steps) y.push_back(s.skipped ? NAN : static_cast<double>(s.loss));
  return y;
}

/// Loss vs step for every run: EMA-smoothed training loss (lines) and validation loss (dots). The
/// y range leaves out the first 10% of the steps, where every run starts from the same high loss.
inline std::string loss_chart_svg(const std::vector<run_report>& runs, const std::string& title, double smoothing = 0.9) {
  std::vector<chart_series> series;
  double y_min = INFINITY, y_max = -INFINITY;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const auto& run = runs[k];
    chart_series s{run.name, {}, detail::smoothed(loss_curve(run.result), smoothing), {}, {}, {}, static_cast<int>(k)};
    for (const auto& st : run.result.steps) s.x.push_back(static_cast<double>(st.step + 1));
    for (std::size_t i = s.y.size() / 10; i < s.y.size(); ++i)
      if (std::isfinite(s.y[i])) y_min = std::min(y_min, s.y[i]), y_max = std::max(y_max, s.y[i]);
    for (const auto& e : run.result.evals) {
      s.marker_x.push_back(static_cast<double>(e.step));
      s.marker_y.push_back(e.loss);
      if (std::isfinite(e.loss)) y_min = std::min(y_min, static_cast<double>(e.loss));
    }
    series.push_back(std::move(s));
  }
  return line_chart_svg(series, {.title = title,
                                 .x_label = "step",
                                 .y_label = "loss (nats per prediction)",
                                 .note = "lines: training loss, EMA " + detail::number(smoothing, 3) + "; filled symbols: validation loss",
                                 .y_min = std::isfinite(y_min) ? y_min : NAN,
                                 .y_max = std::isfinite(y_max) ? y_max : NAN});
}

/// Smoothed training loss of every run minus that of `baseline`, by step (positive: worse).
inline std::string gap_chart_svg(const std::vector<run_report>& runs, const std::string& baseline, const std::string& title,
                                 double smoothing = 0.95) {
  const auto base = std::find_if(runs.begin(), runs.end(), [&](const run_report& r) { return r.name == baseline; });
  nvfp4::detail::require(base != runs.end(), errc::invalid_argument, "gap chart: no run named '" + baseline + "'");
  const auto reference = detail::smoothed(loss_curve(base->result), smoothing);
  std::vector<chart_series> series;
  double lo = INFINITY, hi = -INFINITY;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const auto& run = runs[k];
    if (run.name == baseline) continue;
    const auto y = detail::smoothed(loss_curve(run.result), smoothing);
    chart_series s{run.name, {}, {}, {}, {}, {}, static_cast<int>(k)};  // the style of the loss chart
    for (std::size_t i = 0; i < y.size() && i < reference.size(); ++i) {
      s.x.push_back(static_cast<double>(i + 1));
      s.y.push_back(y[i] - reference[i]);
      if (i >= y.size() / 10 && std::isfinite(s.y.back())) lo = std::min(lo, s.y.back()), hi = std::max(hi, s.y.back());
    }
    series.push_back(std::move(s));
  }
  return line_chart_svg(series, {.title = title,
                                 .x_label = "step",
                                 .y_label = "loss − " + baseline + " loss",
                                 .note = "EMA " + detail::number(smoothing, 3) + " of the training loss; above 0: worse than " + baseline,
                                 .y_min = std::isfinite(lo) ? lo : NAN,
                                 .y_max = std::isfinite(hi) ? hi : NAN,
                                 .zero_line = true});
}

/// Long-format loss curves: one row per run and step (validation loss on the steps it was taken).
inline void write_loss_csv(std::ostream& out, const std::vector<run_report>& runs) {
  out << "run,step,train_loss,val_loss,grad_norm,lr_scale,loss_scale,skipped,seconds\n";
  for (const auto& run : runs) {
    std::map<long long, float> val;
    for (const auto& e : run.result.evals) val[e.step] = e.loss;
    for (const auto& s : run.result.steps) {
      const auto it = val.find(s.step + 1);
      out << detail::csv_field(run.name) << ',' << s.step + 1 << ',' << detail::number(s.loss, 7) << ','
          << (it != val.end() ? detail::number(it->second, 7) : "") << ',' << detail::number(s.grad_norm) << ','
          << detail::number(s.lr_scale) << ',' << detail::number(s.loss_scale) << ',' << (s.skipped ? 1 : 0) << ','
          << detail::number(s.seconds) << '\n';
    }
  }
}

/// Per-layer logs of every run: amax of each tensor and the weight-gradient norm.
inline void write_layer_log_csv(std::ostream& out, const std::vector<run_report>& runs) {
  out << "run,step,layer,model_layer,engine,activation_amax,weight_amax,output_amax,gradient_amax,weight_gradient_norm\n";
  for (const auto& run : runs)
    for (const auto& s : run.result.layer_log)
      out << detail::csv_field(run.name) << ',' << s.step << ',' << detail::csv_field(s.layer) << ',' << s.layer_index << ',' << s.engine
          << ',' << detail::number(s.activation_amax) << ',' << detail::number(s.weight_amax) << ',' << detail::number(s.output_amax) << ','
          << detail::number(s.gradient_amax) << ',' << detail::number(s.weight_gradient_norm) << '\n';
}

/// Everything as one JSON document: `settings` (key -> text), then per run its summary, curves,
/// validation points and NaN events.
inline void write_json(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& settings,
                       const std::vector<run_report>& runs) {
  out << "{\n  \"settings\": {";
  for (std::size_t i = 0; i < settings.size(); ++i)
    out << (i ? ", " : "") << detail::json_string(settings[i].first) << ": " << detail::json_string(settings[i].second);
  out << "},\n  \"runs\": [\n";
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const auto& run = runs[k];
    const auto& r = run.result;
    out << "    {\"name\": " << detail::json_string(run.name) << ", \"description\": " << detail::json_string(run.description)
        << ",\n     \"final_train_loss\": " << detail::json_number(r.final_train_loss())
        << ", \"final_val_loss\": " << detail::json_number(r.final_val_loss())
        << ", \"val_perplexity\": " << detail::json_number(std::exp(static_cast<double>(r.final_val_loss())))
        << ", \"tokens_per_second\": " << detail::json_number(r.tokens_per_second) << ", \"weight_bytes\": " << r.weight_bytes
        << ", \"optimizer_bytes\": " << r.optimizer_bytes << ", \"diverged\": " << (r.diverged ? "true" : "false")
        << ",\n     \"train_loss\": [";
    for (std::size_t i = 0; i < r.steps.size(); ++i)
      out << (i ? ", " : "") << detail::json_number(r.steps[i].skipped ? NAN : r.steps[i].loss);
    out << "],\n     \"validation\": [";
    for (std::size_t i = 0; i < r.evals.size(); ++i)
      out << (i ? ", " : "") << "{\"step\": " << r.evals[i].step << ", \"loss\": " << detail::json_number(r.evals[i].loss) << "}";
    out << "],\n     \"nan_events\": [";
    for (std::size_t i = 0; i < r.nan_events.size(); ++i) {
      const auto& e = r.nan_events[i];
      out << (i ? ", " : "") << "{\"step\": " << e.step << ", \"layer\": " << detail::json_string(e.layer)
          << ", \"tensor\": " << detail::json_string(e.tensor) << "}";
    }
    out << "]}" << (k + 1 < runs.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
}

/// The summary table (Markdown): final losses, perplexity, throughput, memory and NaN events.
inline std::string summary_table(const std::vector<run_report>& runs, const std::string& prediction_unit = "tokens") {
  std::ostringstream t;
  t << "| run | final train loss | val loss | val ppl | " << prediction_unit
    << "/s | weights + optimizer | NaN/Inf events | note |\n|---|---:|---:|---:|---:|---:|---:|---|\n";
  for (const auto& run : runs) {
    const auto& r = run.result;
    const double val = r.final_val_loss();
    char line[512];
    std::snprintf(line, sizeof line, "| %s | %.4f | %.4f | %.3f | %.0f | %.1f KiB (%zu + %zu B) | %zu | %s |\n", run.name.c_str(),
                  static_cast<double>(r.final_train_loss()), val, std::exp(val), r.tokens_per_second,
                  static_cast<double>(r.weight_bytes + r.optimizer_bytes) / 1024.0, r.weight_bytes, r.optimizer_bytes, r.nan_events.size(),
                  r.diverged ? "diverged (stopped)" : "");
    t << line;
  }
  return t.str();
}

/// Writes `text` to `path` (creating its directory). Throws io_error.
inline void write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary);
  nvfp4::detail::require(static_cast<bool>(out), errc::io_error, "report: cannot write '" + path.string() + "'");
  out << text;
  out.flush();
  nvfp4::detail::require(static_cast<bool>(out), errc::io_error, "report: error writing '" + path.string() + "'");
}

}  // namespace nvfp4::training
