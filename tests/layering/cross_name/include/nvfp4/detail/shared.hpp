// Fixture: a helper of the shared include/nvfp4/detail/ (any folder may name it).
#pragma once
namespace nvfp4::detail {
inline int shared_helper() { return 2; }
}  // namespace nvfp4::detail
