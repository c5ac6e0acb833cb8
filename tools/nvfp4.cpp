// tools/nvfp4.cpp: the `nvfp4` command-line tool. Dispatches to one subcommand, maps errors to
// exit statuses (docs/cli.md, cli_support.hpp's exit_statuses): 0 ok, 1 unexpected failure,
// 2 usage error, 10 + errc otherwise.
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <new>
#include <string>

#include "checkpoint_commands.hpp"
#include "cli_support.hpp"
#include "convert_commands.hpp"
#include "gemm_command.hpp"
#include "report_commands.hpp"

namespace {

constexpr const char* main_help = R"(usage: nvfp4 COMMAND [ARGS] [--help]

NVIDIA's 4-bit block-scaled formats (NVFP4, MXFP4, MXFP8) on the CPU, bit-exact with the GPU stack.

commands:
  quantize IN.npy OUT.safetensors    quantize an array into ModelOpt's NVFP4 checkpoint layout
  dequantize IN.safetensors OUT.npy  restore a quantized tensor as float32
  inspect FILE                       tensors, dtypes, shapes, formats and statistics of a file
  stats REFERENCE APPROX             error metrics (MSE, SQNR, max error, cosine) between two arrays
  gemm A B [OUT.npy]                 NVFP4 GEMM D = A * B^T, bit-exact model vs fp32
  pack OUT INPUT...                  quantize many weights (or a model) into one checkpoint
  convert IN OUT --to FORMAT         ModelOpt / compressed-tensors / GGUF / torchao, bits kept
  diff A B                           where two checkpoints (or quantizer flavors) disagree
  help [COMMAND]                     this text, or a command's help
  --version                          the library version and the instruction set of this build

)";

using command_function = int (*)(int, char**);

struct command {
  const char* name;
  command_function run;
  const char* help;
};

constexpr command commands[] = {
    {"quantize", nvfp4::cli::run_quantize, nvfp4::cli::quantize_help},
    {"dequantize", nvfp4::cli::run_dequantize, nvfp4::cli::dequantize_help},
    {"inspect", nvfp4::cli::run_inspect, nvfp4::cli::inspect_help},
    {"stats", nvfp4::cli::run_stats, nvfp4::cli::stats_help},
    {"gemm", nvfp4::cli::run_gemm, nvfp4::cli::gemm_help},
    {"pack", nvfp4::cli::run_pack, nvfp4::cli::pack_help},
    {"convert", nvfp4::cli::run_convert, nvfp4::cli::convert_help},
    {"diff", nvfp4::cli::run_diff, nvfp4::cli::diff_help},
};

const command* find_command(const std::string& name) {
  for (const auto& c : commands)
    if (name == c.name) return &c;
  return nullptr;
}

int dispatch(int argc, char** argv) {
  const std::string full_help = main_help + nvfp4::cli::exit_status_help();
  if (argc < 2) {
    std::fputs(full_help.c_str(), stderr);
    return nvfp4::cli::exit_usage;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h") {
    std::fputs(full_help.c_str(), stdout);
    return nvfp4::cli::exit_ok;
  }
  if (name == "--version") {
    // Line 1: the library version; line 2: the instruction set the fast paths were compiled for
    // (nvfp4::compiled_isa: "scalar" means a build without -march, 10-20x slower); line 3: OpenMP.
    std::printf("nvfp4 %d.%d.%d\nisa: %s\nopenmp: %s\n", NVFP4_VERSION_MAJOR, NVFP4_VERSION_MINOR, NVFP4_VERSION_PATCH,
                nvfp4::isa_name(nvfp4::compiled_isa), NVFP4_HAS_OPENMP ? "on" : "off");
    return nvfp4::cli::exit_ok;
  }
  if (name == "help") {
    if (argc < 3) {
      std::fputs(full_help.c_str(), stdout);
      return nvfp4::cli::exit_ok;
    }
    const command* c = find_command(argv[2]);
    if (!c) throw nvfp4::cli::usage_error(std::string("unknown command '") + argv[2] + "'");
    std::fputs(c->help, stdout);
    return nvfp4::cli::exit_ok;
  }
  const command* c = find_command(name);
  if (!c) throw nvfp4::cli::usage_error("unknown command '" + name + "' (try nvfp4 --help)");
  return c->run(argc, argv);
}

/// A message as printed: at most 4000 bytes. The readers clip what they echo of a file
/// (io/json_limits.hpp); this is the backstop that keeps any message a screenful.
std::string shown(const char* message) {
  std::string text = message;
  if (text.size() > 4000) text = text.substr(0, 4000) + "... (" + std::to_string(text.size()) + " bytes in all)";
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  // An interrupted run (Ctrl-C, kill, a file size limit) leaves no temporary output behind.
  nvfp4::io::install_temporary_file_cleanup();
  try {
    return dispatch(argc, argv);
  } catch (const nvfp4::cli::usage_error& e) {
    std::fprintf(stderr, "nvfp4: %s\n", shown(e.what()).c_str());
    if (argc >= 2 && find_command(argv[1])) std::fprintf(stderr, "try: nvfp4 %s --help\n", argv[1]);
    return nvfp4::cli::exit_usage;
  } catch (const nvfp4::error& e) {
    std::fprintf(stderr, "%s [%s]\n", shown(e.what()).c_str(), nvfp4::errc_name(e.code()));
    return nvfp4::cli::exit_code_for(e.code());
  } catch (const std::filesystem::filesystem_error& e) {
    // A file system call's own failure that no check above turned into an nvfp4::error: reported
    // as one (io_error), with the path and the system's reason.
    const std::string where = e.path1().empty() ? std::string() : e.path1().string() + ": ";
    std::fprintf(stderr, "nvfp4: cannot access %s%s [%s]\n", shown(where.c_str()).c_str(), e.code().message().c_str(),
                 nvfp4::errc_name(nvfp4::errc::io_error));
    return nvfp4::cli::exit_code_for(nvfp4::errc::io_error);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "nvfp4: out of memory\n");
    return nvfp4::cli::exit_failure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nvfp4: %s\n", shown(e.what()).c_str());
    return nvfp4::cli::exit_failure;
  }
}
