# ctest python_install_and_import: `cmake --install` of this build into a scratch prefix, then the
# installed package is imported (from outside the source tree) and rounds one value.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR} OUTPUT_QUIET RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${result})")
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${WORK_DIR}/${PACKAGE_DIR} ${PYTHON} -c
          "import minifloat, numpy; assert minifloat.__file__.startswith('${WORK_DIR}'); assert minifloat.quantize(numpy.array([0.1], numpy.float32), 'bf16')[0] == numpy.float32(0.10009765625)"
  WORKING_DIRECTORY ${WORK_DIR}
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "the installed package does not import (${result})")
endif()
