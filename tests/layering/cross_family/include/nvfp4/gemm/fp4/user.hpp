// Fixture: the family's own header reading its internals, which the check allows.
#pragma once
#include "nvfp4/gemm/fp4/detail/kernel.hpp"
