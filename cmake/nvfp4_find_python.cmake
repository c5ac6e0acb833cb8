# Picks the Python 3 interpreter of the project's Python module and Python-run tests: one that
# imports numpy (the module's arrays are numpy arrays). The first python3 on PATH may not have it
# (e.g. a pyenv shim), so candidates are tried in order: PATH's python3, /usr/bin/python3,
# /usr/local/bin/python3. Sets the cache variable Python3_EXECUTABLE (set it yourself to choose),
# which find_package(Python3) then uses. Leaves it unset when none has numpy.
if(NOT Python3_EXECUTABLE)
  find_program(_nvfp4_path_python NAMES python3 NO_CACHE)
  foreach(_candidate IN ITEMS ${_nvfp4_path_python} /usr/bin/python3 /usr/local/bin/python3)
    if(EXISTS ${_candidate})
      execute_process(COMMAND ${_candidate} -c "import numpy" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
      if(_rc EQUAL 0)
        set(Python3_EXECUTABLE ${_candidate} CACHE FILEPATH "Python 3 interpreter (with numpy) for nvfp4's Python module and tests")
        break()
      endif()
    endif()
  endforeach()
endif()
