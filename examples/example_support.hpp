// examples/example_support.hpp: what the example programs share: "--key value" flags, the test
// distributions (normal with outliers, heavy-tailed Student-t, ...), a millisecond timer, and the
// line saying which kernels the program was built with.
#pragma once

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "nvfp4/config.hpp"

namespace examples {

/// Prints which kernels this program was compiled for (nvfp4::compiled_isa), so nobody times
/// the scalar paths unknowingly.
inline void print_kernels() {
  const bool scalar = nvfp4::compiled_isa == nvfp4::isa::scalar;
  std::printf("kernels: %s%s\n", nvfp4::isa_name(nvfp4::compiled_isa),
              scalar ? " (built without AVX2 / AVX-512 flags: the scalar paths, same results, 10-20x slower)" : "");
}

/// Flags of the form --key value (or --key=value); --help prints `usage` and exits.
class flags {
 public:
  flags(int argc, char** argv, const char* usage) {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        std::fputs(usage, stdout);
        std::exit(0);
      }
      if (arg.rfind("--", 0) != 0) fail(usage, "unexpected argument '" + arg + "'");
      const auto eq = arg.find('=');
      const std::string key = eq != std::string::npos ? arg.substr(2, eq - 2) : arg.substr(2);
      // A misspelt flag must not run the defaults silently: every flag is named in the usage text.
      if (!usage_names(usage, key)) fail(usage, "unknown flag --" + key);
      if (eq != std::string::npos) {
        values_[key] = arg.substr(eq + 1);
      } else {
        if (i + 1 >= argc) fail(usage, "flag " + arg + " needs a value");
        values_[key] = argv[++i];
      }
    }
  }
  long long integer(const std::string& key, long long fallback) const {
    const auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    char* end = nullptr;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (end == it->second.c_str() || *end != '\0' || v < 0) {
      std::fprintf(stderr, "--%s needs a non-negative integer\n", key.c_str());
      std::exit(2);
    }
    return v;
  }
  std::string text(const std::string& key, const std::string& fallback) const {
    const auto it = values_.find(key);
    return it == values_.end() ? fallback : it->second;
  }

 private:
  /// Whether `usage` names --key (followed by anything but another letter, digit or dash).
  static bool usage_names(const std::string& usage, const std::string& key) {
    if (key.empty()) return false;
    const std::string flag = "--" + key;
    for (auto at = usage.find(flag); at != std::string::npos; at = usage.find(flag, at + 1)) {
      const std::size_t after = at + flag.size();
      if (after == usage.size() || !(std::isalnum(static_cast<unsigned char>(usage[after])) || usage[after] == '-')) return true;
    }
    return false;
  }
  [[noreturn]] static void fail(const char* usage, const std::string& why) {
    std::fprintf(stderr, "%s\n%s", why.c_str(), usage);
    std::exit(2);
  }
  std::map<std::string, std::string> values_;
};

/// N(0, 1) with a few large outliers (every `outlier_every`-th element, of either sign, scaled
/// by `outlier_scale`): the shape of LLM activations and weights with outlier channels.
inline std::vector<float> normal_with_outliers(long long count, unsigned seed, long long outlier_every = 997, float outlier_scale = 40.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(count));
  for (auto& v : x) v = normal(rng);
  for (long long i = outlier_every / 2; i < count; i += outlier_every)
    x[static_cast<std::size_t>(i)] = (i & 1 ? -1.0f : 1.0f) * outlier_scale * (1.0f + std::fabs(normal(rng)));
  return x;
}

/// Student-t with `dof` degrees of freedom (heavy tails for small dof).
inline std::vector<float> student_t(long long count, unsigned seed, float dof) {
  std::mt19937_64 rng(seed);
  std::student_t_distribution<float> t(dof);
  std::vector<float> x(static_cast<std::size_t>(count));
  for (auto& v : x) v = t(rng);
  return x;
}

/// Uniform on [-1, 1].
inline std::vector<float> uniform(long long count, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(count));
  for (auto& v : x) v = u(rng);
  return x;
}

/// Random sign times a log-normal magnitude (values spread over several octaves).
inline std::vector<float> log_normal(long long count, unsigned seed, float sigma = 1.5f) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<float> magnitude(0.0f, sigma);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> x(static_cast<std::size_t>(count));
  for (auto& v : x) v = (negative(rng) ? -1.0f : 1.0f) * magnitude(rng);
  return x;
}

/// Wall time of f() in milliseconds.
template <class F>
double time_ms(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace examples
