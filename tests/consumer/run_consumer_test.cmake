# Installs the project into a scratch prefix, then builds and runs tests/consumer against it.
file(REMOVE_RECURSE ${WORK_DIR})
foreach(step
    "${CMAKE_COMMAND};-S;${SOURCE_DIR};-B;${WORK_DIR}/lib-build;-DCMAKE_INSTALL_PREFIX=${WORK_DIR}/prefix;-DMINIFLOAT_BUILD_TESTS=OFF;-DMINIFLOAT_BUILD_BENCHMARKS=OFF;-DMINIFLOAT_BUILD_EXAMPLES=OFF"
    "${CMAKE_COMMAND};--install;${WORK_DIR}/lib-build"
    "${CMAKE_COMMAND};-S;${SOURCE_DIR}/tests/consumer;-B;${WORK_DIR}/consumer-build;-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix;-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
    "${CMAKE_COMMAND};--build;${WORK_DIR}/consumer-build"
    "${WORK_DIR}/consumer-build/consumer")
  execute_process(COMMAND ${step} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "consumer step failed (${result}): ${step}")
  endif()
endforeach()
