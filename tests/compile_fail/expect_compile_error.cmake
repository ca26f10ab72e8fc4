# Compiles SOURCE and passes only if compilation fails with MESSAGE in the diagnostics.
execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only -I${INCLUDE_DIR} ${SOURCE}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(result EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not")
endif()
string(FIND "${out}${err}" "${MESSAGE}" found)
if(found EQUAL -1)
  message(FATAL_ERROR "${SOURCE} failed without the message '${MESSAGE}':\n${err}")
endif()
