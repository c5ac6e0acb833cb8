// Fixture: gemm's own header may name gemm's internals (accepted).
#pragma once
#include "nvfp4/gemm/kernel.hpp"
inline int gemm_user() { return nvfp4::detail::gemm_secret(); }
