# ctest python_pip_install: what a user does with a source checkout. A new, empty virtual
# environment gets torch and NumPy (at requirements-dev.txt's pins, so no other torch build is
# fetched), then `pip install <source>` builds the package through pyproject.toml; the package
# is imported from outside the source tree, must be the installed one with the headers' version,
# and must round to a block format.
file(REMOVE_RECURSE ${WORK_DIR})
function(run what)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${what} failed (${result})")
  endif()
endfunction()
file(MAKE_DIRECTORY ${WORK_DIR})
run("creating the virtual environment" ${PYTHON} -m venv ${WORK_DIR}/venv)
set(pip ${WORK_DIR}/venv/bin/python -m pip --disable-pip-version-check -q)
run("installing torch and numpy" ${pip} install -c ${SOURCE_DIR}/requirements-dev.txt torch numpy)
# The extension is compiled without optimisation here: this checks the packaging, and an -O3
# build of it took over five minutes of CI's two cores (the release build has the fast one).
run("pip install of the source tree" ${pip} install -c ${SOURCE_DIR}/requirements-dev.txt ${SOURCE_DIR}
    -Ccmake.define.MINIFLOAT_CUDA=OFF -Ccmake.build-type=Debug -Ccmake.define.CMAKE_CXX_FLAGS_DEBUG=-O0
    -Cbuild-dir=${WORK_DIR}/build)
run("importing the installed package" ${WORK_DIR}/venv/bin/python -c
    "import importlib.metadata, minifloat, torch; assert minifloat.__file__.startswith('${WORK_DIR}/venv'), minifloat.__file__; assert minifloat.__version__ == importlib.metadata.version('minifloat'); print(minifloat.__version__, minifloat.quantize(torch.randn(64), 'mxfp4')[:4])")
