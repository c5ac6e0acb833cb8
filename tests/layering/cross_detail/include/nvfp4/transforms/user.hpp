// Fixture: transforms/ (a higher layer) reaching into scaling/'s internals, which the check refuses.
#pragma once
#include "nvfp4/scaling/detail/kernel.hpp"
