// examples/train_compare.cpp: trains the same model from the same seed under several training
// recipes side by side (FP32, BF16, and the emulated low-precision recipes with their controls),
// prints a progress line per run, and writes loss curves (CSV, JSON, SVG), the gap to BF16 and a
// summary table to reports/.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "example_support.hpp"
#include "nvfp4/nn/mlp.hpp"
#include "nvfp4/nn/transformer.hpp"
#include "nvfp4/training/recipe_catalog.hpp"
#include "nvfp4/training/report.hpp"
#include "nvfp4/training/text_dataset.hpp"
#include "nvfp4/training/trainer.hpp"

#if NVFP4_HAS_OPENMP
#include <omp.h>
#endif

#ifndef NVFP4_DATA_DIR
#define NVFP4_DATA_DIR "data"
#endif

namespace {

const char* usage =
    "train_compare: the same model, the same seed, several training recipes side by side\n"
    "\n"
    "  --model transformer|mlp  what to train (default transformer: a byte-level LM on --text)\n"
    "  --recipes LIST           comma-separated recipe names, or 'all' (default)\n"
    "  --steps N                training steps per run (default 300)\n"
    "  --width N --depth N --heads N   transformer width, blocks, heads (64, 2, 4); MLP hidden, layers\n"
    "  --seq N --batch N        sequence length and sequences per step (64, 16); MLP: batch rows\n"
    "  --lr X --warmup N --clip X      AdamW learning rate (3e-3), warmup steps (30), clip norm (1)\n"
    "  --optimizer adamw|muon|sgd      (default adamw)\n"
    "  --gemm relaxed|exact     quantized GEMMs FP32-accumulated (default: the fastest; every recipe's\n"
    "                           quantization is exact either way), or bit-exact to the tensor core\n"
    "  --text FILE              the training text (default data/shakespeare.txt)\n"
    "  --threads N              OpenMP threads per run (default 1)\n"
    "  --jobs N                 runs trained at the same time (default 2)\n"
    "  --eval-every N --eval-batches N  validation cadence (50) and batches (8)\n"
    "  --log-every N            per-layer amax / gradient-norm logs every N steps (0: off; default 50)\n"
    "  --cooldown-fraction X    the BF16 cooldown of the recipes that have one (default 0.2), in [0, 1]\n"
    "  --skip-quant-first N --skip-quant-last N   BF16 first / last model layers of the recipes that\n"
    "                           keep layers in BF16 (nvfp4_last_bf16: 0 and 1)\n"
    "  --seed N                 model, data and rounding seed (default 1)\n"
    "  --out DIR                report directory (default reports)\n";

double real_flag(const examples::flags& f, const std::string& key, double fallback) {
  const std::string text = f.text(key, "");
  if (text.empty()) return fallback;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(v)) {
    std::fprintf(stderr, "--%s needs a number, got '%s'\n", key.c_str(), text.c_str());
    std::exit(2);
  }
  return v;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

struct settings {
  std::string model, optimizer, text, gemm;
  long long steps, width, depth, heads, seq, batch, warmup, threads, jobs, eval_every, eval_batches, log_every, seed;
  double lr, clip;
};

std::unique_ptr<nvfp4::nn::model> make_model(const settings& s, const nvfp4::nn::engine_factory& engines) {
  using namespace nvfp4;
  if (s.model == "mlp")
    return std::make_unique<nn::mlp_classifier>(
        nn::mlp_config{
            .inputs = 64, .hidden = s.width, .depth = static_cast<int>(s.depth), .classes = 16, .seed = static_cast<std::uint64_t>(s.seed)},
        engines);
  return std::make_unique<nn::transformer_lm>(nn::transformer_config{.width = s.width,
                                                                     .depth = static_cast<int>(s.depth),
                                                                     .heads = s.heads,
                                                                     .seq_len = s.seq,
                                                                     .seed = static_cast<std::uint64_t>(s.seed)},
                                              engines);
}

std::unique_ptr<nvfp4::training::optimizer> make_optimizer(const settings& s, nvfp4::nn::model& m,
                                                           const nvfp4::training::state_formats& states) {
  using namespace nvfp4::training;
  const state_plan plan{.default_formats = states};
  const float lr = static_cast<float>(s.lr);
  if (s.optimizer == "sgd") return std::make_unique<sgd_momentum>(m.parameters(), sgd_options{.lr = lr * 30.0f, .states = plan});
  const adamw_options adam{.lr = lr, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .states = plan};
  if (s.optimizer == "muon") return std::make_unique<muon>(m.parameters(), muon_options{.lr = 0.02f, .states = plan, .adamw = adam});
  return std::make_unique<adamw>(m.parameters(), adam);
}

void require_option(bool ok, const char* what) {
  if (!ok) throw nvfp4::error(nvfp4::errc::invalid_argument, what);
}

/// A message without the library's "nvfp4: " prefix, to put behind a recipe's name.
std::string bare_message(const std::exception& e) {
  std::string message = e.what();
  return message.rfind("nvfp4: ", 0) == 0 ? message.substr(7) : message;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace nvfp4;
  const examples::flags f(argc, argv, usage);
  settings s{f.text("model", "transformer"), f.text("optimizer", "adamw"), f.text("text", NVFP4_DATA_DIR "/shakespeare.txt"),
             // Relaxed by default: the quantized tensors are the recipe's bits either way, and only the
             // accumulation of the quantized GEMMs differs (FP8: 3-4x faster steps; docs/training.md).
             f.text("gemm", "relaxed"), f.integer("steps", 300), f.integer("width", 64), f.integer("depth", 2), f.integer("heads", 4),
             f.integer("seq", 64), f.integer("batch", 16), f.integer("warmup", 30), f.integer("threads", 1), f.integer("jobs", 2),
             f.integer("eval-every", 50), f.integer("eval-batches", 8), f.integer("log-every", 50), f.integer("seed", 1),
             real_flag(f, "lr", 3e-3), real_flag(f, "clip", 1.0)};
  const std::filesystem::path out_dir = f.text("out", "reports");
  if (s.model != "transformer" && s.model != "mlp") {
    std::fprintf(stderr, "--model must be transformer or mlp\n");
    return 2;
  }
  if (s.gemm != "exact" && s.gemm != "relaxed") {
    std::fprintf(stderr, "--gemm must be exact or relaxed\n");
    return 2;
  }
  const gemm_mode mode = s.gemm == "exact" ? gemm_mode::exact : gemm_mode::relaxed;
  if (s.optimizer != "adamw" && s.optimizer != "muon" && s.optimizer != "sgd") {
    std::fprintf(stderr, "--optimizer must be adamw, muon or sgd\n");
    return 2;
  }
  try {
    // Recipes first: an unknown name fails before any work.
    std::vector<training::training_recipe> recipes;
    const std::string list = f.text("recipes", "all");
    if (list == "all") {
      recipes = training::recipe_catalog(mode);
    } else {
      for (const auto& name : split(list)) recipes.push_back(training::find_recipe(name, mode));
    }
    if (recipes.empty()) throw error(errc::invalid_argument, "--recipes names no recipe");
    require_option(s.steps >= 1, "--steps must be >= 1");
    require_option(s.threads >= 1 && s.jobs >= 1, "--threads and --jobs must be >= 1");
    require_option(s.batch >= 1 && s.eval_batches >= 1, "--batch and --eval-batches must be >= 1");

    std::unique_ptr<training::dataset> data;
    std::string unit = "tokens";
    if (s.model == "mlp") {
      data = std::make_unique<training::cluster_dataset>(training::cluster_config{
          .features = 64, .classes = 16, .spread = 1.0f, .batch_size = s.batch, .seed = static_cast<std::uint64_t>(s.seed)});
      unit = "examples";
    } else {
      data = std::make_unique<training::text_dataset>(
          std::filesystem::path(s.text),
          training::text_config{.seq_len = s.seq, .batch_size = s.batch, .seed = static_cast<std::uint64_t>(s.seed)});
    }
    {
      const auto probe = make_model(s, nn::fp32_engines());
      // The controls' flags replace the catalog's settings of the recipes that use that control;
      // every recipe's controls are checked against this model before any run starts.
      const std::string cooldown = f.text("cooldown-fraction", ""), first = f.text("skip-quant-first", ""),
                        last = f.text("skip-quant-last", "");
      for (auto& r : recipes) {
        training::precision_controls& c = r.controls;
        if (!cooldown.empty() && c.cooldown_fraction > 0.0) c.cooldown_fraction = real_flag(f, "cooldown-fraction", 0.0);
        if ((!first.empty() || !last.empty()) && c.skip_quant_first_layers + c.skip_quant_last_layers > 0) {
          // A flag not given keeps the recipe's own count.
          c.skip_quant_first_layers =
              static_cast<int>(std::min<long long>(f.integer("skip-quant-first", c.skip_quant_first_layers), 1 << 20));
          c.skip_quant_last_layers = static_cast<int>(std::min<long long>(f.integer("skip-quant-last", c.skip_quant_last_layers), 1 << 20));
        }
        try {
          c.validate(probe->layer_count());
        } catch (const error& e) {
          throw error(errc::invalid_argument, "recipe " + r.name + ": " + bare_message(e));
        }
      }
      std::printf("model: %s, %zu parameters, %d layers for the precision controls; data: %s\n", probe->name().c_str(),
                  probe->parameter_count(), probe->layer_count(), data->name().c_str());
    }
    std::printf("%zu recipes x %lld steps, batch %lld x %lld, %s lr %g, %lld job(s) x %lld thread(s)\n\n", recipes.size(), s.steps, s.batch,
                s.model == "mlp" ? 1 : s.seq, s.optimizer.c_str(), s.lr, s.jobs, s.threads);

    std::vector<training::run_report> reports(recipes.size());
    std::mutex print_mutex;
    std::atomic<std::size_t> next{0};
    std::vector<std::string> failures(recipes.size());
    auto worker = [&] {
#if NVFP4_HAS_OPENMP
      omp_set_num_threads(static_cast<int>(std::max<long long>(1, s.threads)));
#endif
      for (std::size_t i = next++; i < recipes.size(); i = next++) {
        const auto& recipe = recipes[i];
        try {
          auto model = make_model(s, recipe.engines(static_cast<std::uint64_t>(s.seed)));
          auto opt = make_optimizer(s, *model, recipe.optimizer_states);
          training::train_options options{.steps = s.steps,
                                          .warmup_steps = std::min(s.warmup, s.steps),
                                          .min_lr_fraction = 0.1f,
                                          .grad_clip = static_cast<float>(s.clip),
                                          .controls = recipe.controls,
                                          .eval_every = static_cast<int>(s.eval_every),
                                          .eval_batches = static_cast<int>(s.eval_batches),
                                          .log_every = static_cast<int>(s.log_every),
                                          .progress_every = static_cast<int>(std::max<long long>(1, s.steps / 6))};
          options.on_progress = [&](const training::progress_report& p) {
            const std::lock_guard<std::mutex> lock(print_mutex);
            std::printf("[%-18s] step %5lld/%lld  loss %.4f  val %s  %s/s %.0f\n", recipe.name.c_str(), p.step, p.total_steps, p.loss,
                        std::isfinite(p.val_loss) ? (std::to_string(p.val_loss).substr(0, 6)).c_str() : "  -   ", unit.c_str(),
                        p.tokens_per_second);
            std::fflush(stdout);
          };
          reports[i] = {recipe.name, recipe.description, training::train(*model, *data, *opt, options)};
        } catch (const std::exception& e) {
          failures[i] = bare_message(e);
        }
      }
    };
    std::vector<std::thread> pool;
    for (long long j = 0; j < std::max<long long>(1, std::min<long long>(s.jobs, static_cast<long long>(recipes.size()))); ++j)
      pool.emplace_back(worker);
    for (auto& t : pool) t.join();
    for (std::size_t i = 0; i < failures.size(); ++i)
      if (!failures[i].empty()) throw error(errc::invalid_argument, "recipe " + recipes[i].name + ": " + failures[i]);

    const std::vector<std::pair<std::string, std::string>> settings_json{{"model", s.model},
                                                                         {"optimizer", s.optimizer},
                                                                         {"gemm", s.gemm},
                                                                         {"text", s.model == "mlp" ? "" : s.text},
                                                                         {"steps", std::to_string(s.steps)},
                                                                         {"width", std::to_string(s.width)},
                                                                         {"depth", std::to_string(s.depth)},
                                                                         {"heads", std::to_string(s.heads)},
                                                                         {"seq", std::to_string(s.seq)},
                                                                         {"batch", std::to_string(s.batch)},
                                                                         {"lr", std::to_string(s.lr)},
                                                                         {"threads", std::to_string(s.threads)},
                                                                         {"jobs", std::to_string(s.jobs)},
                                                                         {"seed", std::to_string(s.seed)},
                                                                         {"isa", isa_name(compiled_isa)}};
    const std::string title = (s.model == "mlp" ? std::string("MLP on clusters") : "byte-level LM on " + data->name()) + ", " +
                              std::to_string(s.steps) + " steps";
    std::ostringstream csv, json, layers;
    training::write_loss_csv(csv, reports);
    training::write_json(json, settings_json, reports);
    training::write_layer_log_csv(layers, reports);
    const std::string table = training::summary_table(reports, unit);
    training::write_text_file(out_dir / "train_compare.csv", csv.str());
    training::write_text_file(out_dir / "train_compare.json", json.str());
    training::write_text_file(out_dir / "train_compare_layers.csv", layers.str());
    training::write_text_file(out_dir / "train_compare_summary.md", "# train_compare: " + title + "\n\n" + table);
    training::write_text_file(out_dir / "train_compare_loss.svg", training::loss_chart_svg(reports, "Loss: " + title));
    const bool has_bf16 = std::any_of(reports.begin(), reports.end(), [](const auto& r) { return r.name == "bf16"; });
    if (has_bf16)
      training::write_text_file(out_dir / "train_compare_gap.svg", training::gap_chart_svg(reports, "bf16", "Gap to BF16: " + title));
    std::printf("\n%s\nwrote %s/train_compare{.csv,.json,_layers.csv,_summary.md,_loss.svg%s}\n", table.c_str(), out_dir.string().c_str(),
                has_bf16 ? ",_gap.svg" : "");
  } catch (const error& e) {
    std::fprintf(stderr, "train_compare: %s\n", e.what());
    return 1;
  }
  return 0;
}
