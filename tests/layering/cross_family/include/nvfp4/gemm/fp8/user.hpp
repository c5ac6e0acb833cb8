// Fixture: the other family of the same layer reaching into gemm/fp4/'s internals, which the check refuses.
#pragma once
#include "nvfp4/gemm/fp4/detail/kernel.hpp"
