# Installs the library as a user would and builds downstream projects against the INSTALLED
# package (never the build tree). Run by ctest as `cmake -P` with -DSTEP=<step>:
#   install         cmake --install BUILD_DIR --prefix WORK_DIR/prefix, then check what was installed
#                   (and, when the build has the Python module, that the installed one imports)
#   core            consumer/ linking nvfp4::nvfp4, configured with Eigen hidden: must build and run
#   eigen           consumer/ linking nvfp4::eigen + nvfp4::native (COMPONENTS eigen): must build and run
#   eigen_missing   consumer/ asking for COMPONENTS eigen with Eigen hidden: configure must fail, saying why
# Also: WORK_DIR, CONSUMER_DIR, BUILD_DIR, SOURCE_DIR, CXX (the compiler), PYTHON (may be empty).
function(run_step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
# Only the prefix is searched: no package registry, no system nvfp4.
set(find_args -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_CXX_COMPILER=${CXX})

if(STEP STREQUAL "install")
  file(REMOVE_RECURSE ${WORK_DIR})
  run_step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
  foreach(f include/nvfp4/nvfp4.hpp include/nvfp4/interop/eigen.hpp share/cmake/nvfp4/nvfp4Config.cmake
            share/cmake/nvfp4/nvfp4ConfigVersion.cmake share/cmake/nvfp4/nvfp4Targets.cmake
            share/doc/nvfp4/README.md share/doc/nvfp4/LICENSE share/doc/nvfp4/docs/api.md share/doc/nvfp4/docs/numerics_spec.md)
    if(NOT EXISTS ${prefix}/${f})
      message(FATAL_ERROR "cmake --install did not install ${f}")
    endif()
  endforeach()
  file(READ ${prefix}/share/cmake/nvfp4/nvfp4Targets.cmake targets)
  foreach(tree ${SOURCE_DIR} ${BUILD_DIR})
    string(FIND "${targets}" "${tree}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "the installed nvfp4Targets.cmake names ${tree}: the package would depend on the build machine")
    endif()
  endforeach()
  file(GLOB built_module ${BUILD_DIR}/python/nvfp4/_nvfp4*.so)
  if(built_module AND PYTHON)
    # The package nvfp4/ (its __init__.py and the extension nvfp4/_nvfp4*.so) in a site directory.
    file(GLOB_RECURSE installed_module ${prefix}/lib/_nvfp4*.so)
    if(NOT installed_module)
      message(FATAL_ERROR "the Python module was built but cmake --install did not install it")
    endif()
    get_filename_component(package ${installed_module} DIRECTORY)
    if(NOT EXISTS ${package}/__init__.py)
      message(FATAL_ERROR "cmake --install did not install the nvfp4 package's __init__.py next to ${installed_module}")
    endif()
    get_filename_component(site ${package} DIRECTORY)
    run_step(${CMAKE_COMMAND} -E env PYTHONPATH=${site} ${PYTHON} -c
             "import nvfp4, numpy; q = nvfp4.quantize(numpy.ones((2, 32), numpy.float32)); assert q.scales.shape == (2, 2)")
  endif()
  foreach(target nvfp4::nvfp4 nvfp4::eigen nvfp4::native)
    string(FIND "${targets}" "add_library(${target} INTERFACE IMPORTED)" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "the installed package does not define ${target}")
    endif()
  endforeach()
elseif(STEP STREQUAL "core")
  run_step(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/core ${find_args} -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON)
  string(FIND "${step_output}" "from ${prefix}/" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the consumer did not find nvfp4 in ${prefix}:\n${step_output}")
  endif()
  run_step(${CMAKE_COMMAND} --build ${WORK_DIR}/core)
  run_step(${WORK_DIR}/core/consumer)
  message(STATUS "${step_output}")
elseif(STEP STREQUAL "eigen")
  run_step(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/eigen ${find_args} -DCONSUMER_WITH_EIGEN=ON)
  run_step(${CMAKE_COMMAND} --build ${WORK_DIR}/eigen)
  run_step(${WORK_DIR}/eigen/consumer)
  message(STATUS "${step_output}")
elseif(STEP STREQUAL "eigen_missing")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/eigen_missing ${find_args}
                          -DCONSUMER_WITH_EIGEN=ON -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(FIND "${out}${err}" "Eigen3 (3.3 or later) was not found" at)
  if(rc EQUAL 0 OR at EQUAL -1)
    message(FATAL_ERROR "asking for COMPONENTS eigen without Eigen should fail and say so (rc ${rc}):\n${out}\n${err}")
  endif()
else()
  message(FATAL_ERROR "unknown STEP '${STEP}'")
endif()
