// Compiled with -ffast-math by the fast_math_refused test: nvfp4/config.hpp must stop the build.
#include "nvfp4/nvfp4.hpp"

int main() { return 0; }
