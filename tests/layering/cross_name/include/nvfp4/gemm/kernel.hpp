// Fixture: a public gemm header with an internal helper in its detail namespace.
#pragma once
namespace nvfp4::detail {
inline int gemm_secret() { return 1; }
}  // namespace nvfp4::detail
