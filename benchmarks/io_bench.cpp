// Benchmarks of the checkpoint readers' JSON, in entries/s at 10^3 .. 10^5 entries: a shard index
// (model.safetensors.index.json, ordered_json as read_json_file reads it) and a safetensors header.
// Linear code shows the same entries/s at every size; a quadratic parse (issue 39: 10,000 index
// entries took 1.1 s, 80,000 took 117 s) falls by 10x for each 10x more entries. The baseline in
// the same binary: nlohmann's own parser into nlohmann::json (a std::map, n log n), which checks
// none of the limits.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "nvfp4/io/json_limits.hpp"
#include "nvfp4/io/safetensors.hpp"

namespace {

/// {"metadata": {...}, "weight_map": {"model.layers.I.t": "model-0000S-of-00163.safetensors", ...}}
std::string index_text(std::int64_t entries) {
  std::string text = R"({"metadata": {"total_size": 0}, "weight_map": {)";
  for (std::int64_t i = 0; i < entries; ++i)
    text += (i ? ", " : "") + std::string("\"model.layers.") + std::to_string(i) + ".mlp.weight\": \"model-" +
            std::to_string(10000 + i % 163).substr(1) + "-of-00163.safetensors\"";
  return text + "}}";
}

/// A safetensors image of `entries` empty F32 tensors.
std::vector<std::uint8_t> header_image(std::int64_t entries) {
  std::string json = "{";
  for (std::int64_t i = 0; i < entries; ++i)
    json += (i ? "," : "") + std::string("\"model.layers.") + std::to_string(i) + R"(.t":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
  json += "}";
  json.append((8 - json.size() % 8) % 8, ' ');
  std::vector<std::uint8_t> image(8 + json.size());
  for (int i = 0; i < 8; ++i)
    image[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(json.size()) >> (8 * i));
  std::copy(json.begin(), json.end(), image.begin() + 8);
  return image;
}

void BM_index_parse_ordered(benchmark::State& state) {  // what read_json_file does with an index
  const std::string text = index_text(state.range(0));
  for (auto _ : state)
    benchmark::DoNotOptimize(nvfp4::io::parse_json_bounded<nlohmann::ordered_json>(text, "index", nvfp4::io::duplicate_keys::keep_last));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
void BM_index_parse_nlohmann_map(benchmark::State& state) {  // baseline: nlohmann::json::parse, no limits checked
  const std::string text = index_text(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(nlohmann::json::parse(text));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
void BM_safetensors_header_parse(benchmark::State& state) {
  const auto image = header_image(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(nvfp4::io::parse_safetensors(image.data(), image.size(), "bench"));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

BENCHMARK(BM_index_parse_ordered)->RangeMultiplier(10)->Range(1'000, 100'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_index_parse_nlohmann_map)->RangeMultiplier(10)->Range(1'000, 100'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_safetensors_header_parse)->RangeMultiplier(10)->Range(1'000, 100'000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
