# Runs one libFuzzer target for a short, reproducible time over a fresh copy of its seed corpus
# (the fuzzer adds what it finds to the copy, never to the source tree). Crash inputs land in
# WORK_DIR as crash-*/leak-*/timeout-* files.
#   cmake -DFUZZER=<exe> -DCORPUS=<seed dir> -DWORK_DIR=<dir> -DSECONDS=<n> -P run_fuzz.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(COPY ${CORPUS}/ DESTINATION ${WORK_DIR}/corpus)
execute_process(
  COMMAND ${FUZZER} -seed=1 -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048 -max_len=4096
          -print_final_stats=1 -artifact_prefix=${WORK_DIR}/ ${WORK_DIR}/corpus
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (exit ${result}); the failing input is in ${WORK_DIR}")
endif()
