// tests/tools/cli_fixture.hpp: the fixture the CLI's end-to-end tests share: a scratch directory
// per test, running the built `nvfp4` binary (with an optional environment prefix) and capturing
// its status, output and run time (or its peak memory), and checking which files the directory
// holds afterwards.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace nvfp4::test {

namespace fs = std::filesystem;

struct run_result {
  int status = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Cli : public nvfp4::test::temp_dir_test {
 protected:
  fs::path path(const std::string& name) const { return dir_ / name; }

  /// Runs `ENV nvfp4 ARGS` through the shell (ARGS already shell-quoted where needed; ENV such as
  /// "OMP_NUM_THREADS=2" or "ulimit -f 1;"). Its output goes to files outside the directory.
  run_result run(const std::string& args, const std::string& env = "") const {
    const fs::path out = dir_.string() + ".stdout", err = dir_.string() + ".stderr";
    const std::string command = "(" + env + " '" + NVFP4_CLI_PATH + "' " + args + ") >'" + out.string() + "' 2>'" + err.string() + "'";
    const auto start = std::chrono::steady_clock::now();
    const int raw = std::system(command.c_str());
    run_result r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    fs::remove(out);
    fs::remove(err);
    return r;
  }
  /// Runs the built `nvfp4` with `args` (no shell between: execv) and returns its exit status and
  /// its own peak resident memory (wait4's ru_maxrss, in KiB), its output discarded.
  struct measured_run {
    int status = -1;
    long peak_rss_kib = 0;
  };
  measured_run run_measured(const std::vector<std::string>& args) const {
    std::vector<char*> argv;
    std::string program = NVFP4_CLI_PATH;
    argv.push_back(program.data());
    std::vector<std::string> copies = args;
    for (auto& a : copies) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    measured_run r;
    int raw = 0;
    struct rusage usage {};
    if (pid > 0 && ::wait4(pid, &raw, 0, &usage) == pid) {
      r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
      r.peak_rss_kib = usage.ru_maxrss;
    }
    return r;
  }

  /// The path of `name` in the directory, single-quoted for the shell.
  std::string q(const std::string& name) const {
    std::string quoted = "'";  // appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "'" + string
    quoted += path(name).string();
    quoted += '\'';
    return quoted;
  }

  void write_raw(const std::string& name, const std::string& bytes) const { std::ofstream(path(name), std::ios::binary) << bytes; }
  void write_raw(const std::string& name, const std::vector<std::uint8_t>& bytes) const {
    write_raw(name, std::string(bytes.begin(), bytes.end()));
  }

  /// The files in the directory, sorted.
  std::vector<std::string> files() const {
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(dir_)) found.push_back(e.path().filename().string());
    std::sort(found.begin(), found.end());
    return found;
  }
  /// No file in the directory except those listed (no partial outputs, no temporaries).
  void expect_only_files(std::vector<std::string> names) const {
    std::sort(names.begin(), names.end());
    EXPECT_EQ(files(), names);
  }
};

}  // namespace nvfp4::test
