# Installs the library into a scratch prefix, then configures, builds and runs a tiny consumer
# that finds it with find_package(nvfp4 CONFIG REQUIRED). Run as `cmake -P` by ctest.
file(REMOVE_RECURSE ${WORK_DIR})
function(run_step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()
run_step(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/lib-build -DNVFP4_BUILD_TESTS=OFF
         -DNVFP4_BUILD_BENCHMARKS=OFF -DNVFP4_BUILD_EXAMPLES=OFF -DNVFP4_BUILD_TOOLS=OFF
         -DCMAKE_INSTALL_PREFIX=${WORK_DIR}/prefix)
run_step(${CMAKE_COMMAND} --install ${WORK_DIR}/lib-build)
run_step(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/consumer-build
         -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
run_step(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer-build)
run_step(${WORK_DIR}/consumer-build/consumer)
