# nvfp4_isa_notice(<flags>): says at configure time which instruction set the project's own
# programs (examples, tools, benchmarks, tests) get with <flags>, and warns once when they would
# run the scalar paths (10-20x slower, same results) without anyone having asked for that.
# An explicit NVFP4_ARCH_FLAGS (the x86-64 preset, a cross build) is a deliberate choice: a status
# line only. Sets NVFP4_PROGRAM_ISA (avx512, avx2 or scalar) in the caller's scope.
include(CheckCXXSourceCompiles)

function(nvfp4_isa_notice flags)
  string(REPLACE ";" " " _flags "${flags}")
  set(CMAKE_REQUIRED_FLAGS "${_flags}")
  set(CMAKE_REQUIRED_QUIET ON)
  # The same tests as config.hpp's NVFP4_HAS_AVX512 / NVFP4_HAS_AVX2.
  string(MAKE_C_IDENTIFIER "${_flags}" _key)
  check_cxx_source_compiles("
#if !(defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__))
#error no AVX-512
#endif
int main() { return 0; }" NVFP4_ISA_AVX512_${_key})
  check_cxx_source_compiles("
#if !(defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#error no AVX2
#endif
int main() { return 0; }" NVFP4_ISA_AVX2_${_key})
  if(NVFP4_ISA_AVX512_${_key})
    set(_isa avx512)
  elseif(NVFP4_ISA_AVX2_${_key})
    set(_isa avx2)
  else()
    set(_isa scalar)
  endif()
  set(NVFP4_PROGRAM_ISA ${_isa} PARENT_SCOPE)
  if(_isa STREQUAL "scalar" AND NOT NVFP4_ARCH_FLAGS)
    message(WARNING
      "nvfp4: the project's programs build without AVX2 (flags: '${_flags}'), so they run the "
      "scalar paths: same results, 10-20x slower. Configure with -DNVFP4_NATIVE=ON on an "
      "AVX2/AVX-512 machine (the default), or set NVFP4_ARCH_FLAGS (e.g. -march=x86-64-v3) to "
      "choose; programs print nvfp4::compiled_isa.")
  else()
    message(STATUS "nvfp4: the project's programs use the ${_isa} kernels (flags: '${_flags}')")
  endif()
endfunction()
