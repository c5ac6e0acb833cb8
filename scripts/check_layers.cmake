# scripts/check_layers.cmake: the layering check (ctest test `layering`, run by
# `cmake --workflow --preset test`). Fails when
#  1. a header under include/nvfp4/ includes a header of a higher layer (the table below), or
#     another folder's internals: nvfp4/<folder>/detail/ (and a layer's <folder>/simd/) is for the
#     headers under <folder>/ only, at any depth (gemm/fp4/detail/ for gemm/fp4/, gemm/detail/
#     for all of gemm/); helpers several folders share live in the folder above them, in
#     include/nvfp4/detail/ or in simd/, or
#  1b. a header names another folder's internals, `detail::name` (any spelling: nvfp4::detail::,
#     nn::detail::, ...) where `name` is declared only in headers of other folders (their
#     detail/ or their own headers' detail namespaces), whatever it includes: the include rule
#     cannot see a name reached through a public header of that folder. The owner of a name is
#     the folder of the headers declaring it (a detail/ or simd/ folder counts as the folder
#     above it); names declared in include/nvfp4/detail/, simd/ or the root headers are shared.
#     A name used unqualified inside a detail namespace is not seen. NVFP4_NAME_CROSSINGS lists
#     the crossings the tree still has, each to be removed by its folder's owner; an entry that no
#     longer occurs fails the check too, so the list only shrinks, or
#  2. an ISA macro (__AVX*, __SSE*, __FMA__, __F16C__, __AMX*, NVFP4_HAS_* but NVFP4_HAS_OPENMP,
#     NVFP4_AMX_*) appears in the library, the tools, the examples or the bindings outside
#     config.hpp (which defines the NVFP4_HAS_* macros), the dispatch point (simd/dispatch.hpp)
#     and the ISA folders (include/nvfp4/simd/ and any include/nvfp4/<layer>/.../simd/, whose headers
#     only make their own code vanish when their ISA is not compiled in). Tests and benchmarks
#     may name them: they reach one ISA's kernels on purpose.
#  3. OpenMP is used outside simd/parallel.hpp: a `#pragma omp` anywhere in the library, the tools,
#     the examples or the bindings (every parallel loop goes through parallel.hpp's primitives,
#     with its one threshold), or <omp.h>, an omp_* call or _OPENMP in the library outside
#     parallel.hpp and config.hpp (which defines NVFP4_HAS_OPENMP). Programs may still ask or set
#     the thread count (omp_get_max_threads, omp_set_num_threads); tests and benchmarks may too.
# Usage: cmake -DSOURCE_DIR=<repository root> -P scripts/check_layers.cmake
# docs/architecture.md explains the layers; a new folder is one more line in the table.

# ---- the layer table ------------------------------------------------------------------------
# `name=rank` for each folder under include/nvfp4/ (and each header at its root). A header may
# include headers of its own rank and of lower ranks only. The ranks follow the real include graph
# (a folder sits just above the highest folder it includes). Add a folder with the rank of the
# layer it belongs to; umbrella headers sit at the rank of what they gather.
set(NVFP4_LAYERS
  "config.hpp=0" "error.hpp=0" "detail=0"  # the foundation: version, ISA macros, errors, checked sizes
  "formats=1" "formats.hpp=1"              # element and scale formats, their scalar codecs
  "simd=2"                                 # ISA primitives (Ops), the dispatch point, parallel loops
  "random=3"                               # Philox, random bytes
  "scaling=4" "scaling.hpp=4"              # block formats, quantizers, scale layouts
  "metrics=4"                              # error metrics
  "transforms=5"                           # the Hadamard transform
  "gemm=6"                                 # block-scaled and FP8 GEMMs
  "io=6"                                   # file formats: block formats and transforms, no GEMM
  "recipes=7"                              # TE's recipes
  "interop=7"                              # Eigen interop (its GEMMs)
  "nn=8"                                   # layers
  "training=9"                             # optimizers, the trainer, the studies' recipes (over nn)
  "nvfp4.hpp=10"                           # the umbrella header
)

# Crossings of rule 1b the tree still has (`header:name`, the header under include/nvfp4/): the
# bit helpers of formats/ (float_bits, bits_float, exp2i, decode_table, encode_minifloat) belong in
# include/nvfp4/detail/; the others need a public entry in the folder that owns them.
set(NVFP4_NAME_CROSSINGS
  "gemm/fp4/mma_model.hpp:exp2i" "io/npy_convert.hpp:bits_float" "scaling/fp8_quantize.hpp:bits_float" "scaling/fp8_quantize.hpp:float_bits"
  "scaling/mxfp8_quantize.hpp:exp2i" "scaling/mxfp8_quantize.hpp:float_bits" "scaling/quantizer_flavor.hpp:bits_float"
  "scaling/quantizer_flavor.hpp:float_bits" "scaling/scale_rules.hpp:exp2i" "simd/avx512/ops.hpp:bits_float"
  "simd/avx512/ops.hpp:encode_minifloat" "simd/avx512/ops.hpp:float_bits" "simd/minifloat_lanes.hpp:decode_table"
  "simd/minifloat_lanes.hpp:exp2i" "simd/minifloat_lanes.hpp:float_bits" "simd/nvfp4_lanes.hpp:exp2i"
  "gemm/detail/tile_sources.hpp:decode_table" "interop/eigen_gemm.hpp:check_gemm_operands" "transforms/hadamard.hpp:check_rounding" "transforms/hadamard.hpp:quantize_with_amax_fast"
)

# Files outside include/nvfp4/ that the ISA-macro check also reads (programs, bindings).
set(NVFP4_CHECKED_DIRS examples tools python)

cmake_policy(SET CMP0057 NEW)  # if(... IN_LIST ...)

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_layers: pass -DSOURCE_DIR=<repository root>")
endif()
set(include_root "${SOURCE_DIR}/include/nvfp4")

function(layer_rank name out)
  foreach(entry IN LISTS NVFP4_LAYERS)
    string(REPLACE "=" ";" pair "${entry}")
    list(GET pair 0 key)
    list(GET pair 1 rank)
    if(key STREQUAL name)
      set(${out} ${rank} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

set(failures "")

# ---- 1. no upward includes --------------------------------------------------------------------
file(GLOB_RECURSE headers RELATIVE "${include_root}" "${include_root}/*.hpp" "${include_root}/*.h")
foreach(header IN LISTS headers)
  string(REGEX REPLACE "/.*" "" layer "${header}")
  layer_rank("${layer}" rank)
  if(rank STREQUAL "")
    list(APPEND failures "include/nvfp4/${header}: folder '${layer}' is not in the layer table of scripts/check_layers.cmake")
    continue()
  endif()
  file(STRINGS "${include_root}/${header}" includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"nvfp4/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"nvfp4/([^\"]*)\".*" "\\1" target "${line}")
    string(REGEX REPLACE "/.*" "" target_layer "${target}")
    layer_rank("${target_layer}" target_rank)
    if(target_rank STREQUAL "")
      list(APPEND failures "include/nvfp4/${header}: includes nvfp4/${target}, whose folder is not in the layer table")
    elseif(target_rank GREATER rank)
      list(APPEND failures "include/nvfp4/${header} (layer ${layer}, rank ${rank}) includes nvfp4/${target} (layer ${target_layer}, rank ${target_rank}): an upward include")
    endif()
    # A folder's internals (its detail/, and the simd/ of a layer folder) belong to that folder,
    # nested ones included: nvfp4/gemm/fp4/detail/ is for headers under gemm/fp4/ only, while
    # nvfp4/gemm/detail/ serves all of gemm/ (its families too). The top-level detail/ and simd/
    # (no folder before them) are shared by every layer.
    if(target MATCHES "^(([^/]+/)+)(detail|simd)/")
      set(owner "${CMAKE_MATCH_1}")
      string(FIND "${header}" "${owner}" owner_at)
      if(NOT owner_at EQUAL 0)
        list(APPEND failures "include/nvfp4/${header} includes nvfp4/${target}: another folder's ${CMAKE_MATCH_3}/ (${owner}${CMAKE_MATCH_3}/ is for the headers under ${owner} only: move what both need down to the folder they share, include/nvfp4/detail/ or simd/)")
      endif()
    endif()
  endforeach()
endforeach()

# ---- 1b. no names of another folder's internals -----------------------------------------------
# Declarations: types, aliases, concepts, namespaces, functions and variables, one per line as the
# library writes them. The folder that owns a header: its path without the file and any detail/ or simd/
# part ("" for the shared include/nvfp4/detail/, simd/ and the root headers).
function(owner_folder header out)
  get_filename_component(dir "${header}" DIRECTORY)
  string(REGEX REPLACE "(^|/)(detail|simd)(/.*)?$" "" dir "${dir}")
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()
set(type_decl "(struct|class|union|concept|using|enum class|enum)[ \t]+([A-Za-z_][A-Za-z_0-9]*)")
set(namespace_decl "namespace[ \t]+([A-Za-z_0-9]+::)*([A-Za-z_][A-Za-z_0-9]*)[ \t]*\\{")
set(function_decl "^[ \t]*(template[ \t]*<.*>[ \t]+)?((inline|constexpr|consteval|static|friend|NVFP4_[A-Z_]+|\\[\\[[a-z_]+\\]\\])[ \t]+)*([A-Za-z_][A-Za-z_0-9:<>,]*)[ \t*&]+([A-Za-z_][A-Za-z_0-9]*)[ \t]*(\\(|=|\\[|\\{)")
set(declared_names "")
foreach(header IN LISTS headers)
  owner_folder("${header}" owner)
  file(STRINGS "${include_root}/${header}" namespaces REGEX "${namespace_decl}")
  file(STRINGS "${include_root}/${header}" lines REGEX "(${type_decl}|${function_decl})")
  list(APPEND lines ${namespaces})
  foreach(line IN LISTS lines)
    if(line MATCHES "^[ \t]*//" OR line MATCHES "^[ \t]*(return|else|throw|case|co_return|delete|new)[ \t]")
      continue()
    endif()
    set(name "")
    if(line MATCHES "${namespace_decl}")  # a nested internal namespace (detail::tiles) is its folder's
      set(name "${CMAKE_MATCH_2}")
    elseif(line MATCHES "${type_decl}")
      set(name "${CMAKE_MATCH_2}")
    elseif(line MATCHES "${function_decl}")
      set(name "${CMAKE_MATCH_5}")
    endif()
    if(name STREQUAL "")
      continue()
    endif()
    list(APPEND owners_of_${name} "<${owner}>")
    list(APPEND declared_names "${name}")
  endforeach()
endforeach()
foreach(header IN LISTS headers)
  owner_folder("${header}" user)
  file(STRINGS "${include_root}/${header}" lines REGEX "detail::[A-Za-z_]")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[ \t]*//")
      continue()
    endif()
    string(REGEX MATCHALL "detail::[A-Za-z_][A-Za-z_0-9]*" uses "${line}")
    foreach(use IN LISTS uses)
      string(REPLACE "detail::" "" name "${use}")
      if(NOT DEFINED owners_of_${name})
        continue()  # not declared in a library header (a macro, a test's): nothing to check
      endif()
      set(allowed FALSE)
      foreach(owner IN LISTS owners_of_${name})
        string(REGEX REPLACE "^<(.*)>$" "\\1" owner "${owner}")
        if(owner STREQUAL "" OR user STREQUAL owner OR user MATCHES "^${owner}/")
          set(allowed TRUE)
        endif()
      endforeach()
      if(NOT allowed AND "${header}:${name}" IN_LIST NVFP4_NAME_CROSSINGS)
        list(APPEND crossings_seen "${header}:${name}")
        set(allowed TRUE)
      endif()
      if(NOT allowed)
        list(REMOVE_DUPLICATES owners_of_${name})
        string(REPLACE "<" "" shown "${owners_of_${name}}")
        string(REPLACE ">" "/" shown "${shown}")
        string(REPLACE ";" ", " shown "${shown}")
        list(APPEND failures "include/nvfp4/${header} names ${use}, an internal of ${shown} (another folder's detail: use that folder's public API, or move the helper down to a folder both share)")
      endif()
    endforeach()
  endforeach()
endforeach()
if(EXISTS "${include_root}/config.hpp")  # the real tree (the fixtures list no crossings)
  foreach(crossing IN LISTS NVFP4_NAME_CROSSINGS)
    if(NOT crossing IN_LIST crossings_seen)
      list(APPEND failures "scripts/check_layers.cmake: NVFP4_NAME_CROSSINGS lists ${crossing}, which no longer occurs: remove the entry")
    endif()
  endforeach()
endif()

# ---- 2. ISA macros only at the dispatch point and in the ISA folders ---------------------------
set(isa_pattern "(__AVX|__SSE|__FMA__|__F16C__|__AMX|NVFP4_HAS_[A-Z0-9_]+|NVFP4_AMX_[A-Z0-9_]+)")
set(sources "")
file(GLOB_RECURSE library_files "${include_root}/*.hpp" "${include_root}/*.h")
list(APPEND sources ${library_files})
foreach(dir IN LISTS NVFP4_CHECKED_DIRS)
  if(EXISTS "${SOURCE_DIR}/${dir}")
    file(GLOB_RECURSE dir_files "${SOURCE_DIR}/${dir}/*.hpp" "${SOURCE_DIR}/${dir}/*.h" "${SOURCE_DIR}/${dir}/*.cpp"
         "${SOURCE_DIR}/${dir}/*.cc" "${SOURCE_DIR}/${dir}/*.cu")
    list(APPEND sources ${dir_files})
  endif()
endforeach()
foreach(path IN LISTS sources)
  file(RELATIVE_PATH relative "${SOURCE_DIR}" "${path}")
  if(relative STREQUAL "include/nvfp4/config.hpp" OR relative STREQUAL "include/nvfp4/simd/dispatch.hpp" OR
     relative MATCHES "^include/nvfp4/simd/" OR relative MATCHES "^include/nvfp4/[a-z_0-9]+/([a-z_0-9]+/)*simd/")
    continue()
  endif()
  file(STRINGS "${path}" lines REGEX "${isa_pattern}")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[ \t]*//")  # a comment naming a macro chooses nothing
      continue()
    endif()
    string(REGEX REPLACE "NVFP4_HAS_OPENMP" "" without_openmp "${line}")
    if(without_openmp MATCHES "${isa_pattern}")
      string(STRIP "${line}" shown)
      string(REPLACE ";" "," shown "${shown}")  # one list entry per line
      list(APPEND failures "${relative}: ISA macro outside the dispatch point and the ISA folders: ${shown}")
    endif()
  endforeach()
endforeach()

# ---- 3. OpenMP only in simd/parallel.hpp ------------------------------------------------------
foreach(path IN LISTS sources)
  file(RELATIVE_PATH relative "${SOURCE_DIR}" "${path}")
  if(relative STREQUAL "include/nvfp4/simd/parallel.hpp")
    continue()
  endif()
  if(relative MATCHES "^include/" AND NOT relative STREQUAL "include/nvfp4/config.hpp")
    set(omp_pattern "(#[ \t]*pragma[ \t]+omp|<omp\\.h>|[^a-z_]omp_[a-z_]+[ \t]*\\(|_OPENMP)")
  else()
    set(omp_pattern "#[ \t]*pragma[ \t]+omp")
  endif()
  file(STRINGS "${path}" lines REGEX "${omp_pattern}")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[ \t]*//")
      continue()
    endif()
    string(STRIP "${line}" shown)
    string(REPLACE ";" "," shown "${shown}")  # one list entry per line
    list(APPEND failures "${relative}: OpenMP outside simd/parallel.hpp (use its parallel_ranges / parallel_reduce / parallel_max / parallel_dynamic): ${shown}")
  endforeach()
endforeach()

if(failures)
  list(LENGTH failures count)
  foreach(failure IN LISTS failures)
    message("${failure}")
  endforeach()
  message(FATAL_ERROR "layering check: ${count} problem(s) (layers and ISA rules: docs/architecture.md)")
endif()
list(LENGTH headers header_count)
message("layering check: ${header_count} headers, no upward include, no other folder's detail/ or internal names, ISA macros and OpenMP only where allowed")
