// nvfp4/error.hpp: the library's one error convention.
// Every public entry point checks its preconditions and throws nvfp4::error, which carries a
// category (errc) and a message saying what was wrong and where. Nothing is written to an
// output before all checks have passed. Inner kernels never throw.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "nvfp4/config.hpp"

namespace nvfp4 {

/// What kind of precondition failed. Stable: tools map these to exit codes.
enum class errc {
  invalid_argument = 1,  ///< a parameter out of its domain (bad block size, bad option)
  shape_mismatch,        ///< operand shapes or layouts that do not fit together
  non_finite_input,      ///< NaN or Inf where the format has no encoding for it
  null_pointer,          ///< a null buffer with a non-zero size
  misaligned,            ///< a buffer that does not meet a documented alignment
  dtype_mismatch,        ///< element type differs from what the call or the file declares
  io_error,              ///< a file could not be opened, read or written
  malformed_file,        ///< a file's content is truncated, inconsistent or not the format
  unsupported,           ///< a valid request this build or version does not implement
  overflow,              ///< finite input whose result does not fit its format (RHT output, GEMM alpha)
};

constexpr const char* errc_name(errc code) {
  switch (code) {
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::shape_mismatch:
      return "shape_mismatch";
    case errc::non_finite_input:
      return "non_finite_input";
    case errc::null_pointer:
      return "null_pointer";
    case errc::misaligned:
      return "misaligned";
    case errc::dtype_mismatch:
      return "dtype_mismatch";
    case errc::io_error:
      return "io_error";
    case errc::malformed_file:
      return "malformed_file";
    case errc::unsupported:
      return "unsupported";
    case errc::overflow:
      return "overflow";
  }
  return "unknown";
}

/// The exception every public nvfp4 function throws on bad input.
class error : public std::runtime_error {
 public:
  error(errc code, const std::string& message) : std::runtime_error(std::string("nvfp4: ") + message), code_(code) {}
  errc code() const noexcept { return code_; }

 private:
  errc code_;
};

/// Thrown for NaN/Inf in an input tensor; says where the first one (in row-major order) is.
class non_finite_error : public error {
 public:
  non_finite_error(const std::string& what_tensor, index_t row, index_t col, float value)
      : error(errc::non_finite_input, what_tensor + " holds " + (value != value ? std::string("NaN") : std::string("Inf")) + " at (" +
                                          std::to_string(row) + ", " + std::to_string(col) + "); the format has no encoding for it"),
        row_(row),
        col_(col) {}
  index_t row() const noexcept { return row_; }
  index_t col() const noexcept { return col_; }

 private:
  index_t row_;
  index_t col_;
};

namespace detail {
/// A number as messages show it: %.6g ("3e+38", not 39 digits).
inline std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

/// `e` with `context` in front of its message ("nvfp4: <context>: <message>"), the same code.
inline error with_context(const error& e, const std::string& context) {
  std::string message = e.what();
  if (message.rfind("nvfp4: ", 0) == 0) message.erase(0, 7);
  return error(e.code(), context + ": " + message);
}

/// Throws nvfp4::error(code, message) when the condition is false.
inline void require(bool condition, errc code, const char* message) {
  if (!condition) throw error(code, message);
}
inline void require(bool condition, errc code, const std::string& message) {
  if (!condition) throw error(code, message);
}
}  // namespace detail

}  // namespace nvfp4
