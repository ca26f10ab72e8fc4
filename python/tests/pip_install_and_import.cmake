# ctest python_pip_install: what a user does with a source checkout. A new, empty virtual
# environment that sees torch and NumPy (those of the environment running the tests), then
# `pip install <source>` builds the package through pyproject.toml; the package
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
# torch and NumPy are the ones of the environment running the tests, reached through a .pth file
# (pip counts them as installed): installing the torch wheel again took about a minute of CI.
execute_process(COMMAND ${WORK_DIR}/venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
                OUTPUT_VARIABLE venv_site OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND ${PYTHON} -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
                OUTPUT_VARIABLE outer_site OUTPUT_STRIP_TRAILING_WHITESPACE)
file(WRITE ${venv_site}/outer_environment.pth "${outer_site}\n")
run("finding torch and numpy" ${WORK_DIR}/venv/bin/python -c "import torch, numpy")
# The extension is compiled without optimisation here: this checks the packaging, and an -O3
# build of it took over five minutes of CI's two cores (the release build has the fast one).
run("pip install of the source tree" ${pip} install -c ${SOURCE_DIR}/requirements-dev.txt ${SOURCE_DIR}
    -Ccmake.define.MINIFLOAT_CUDA=OFF -Ccmake.build-type=Debug -Ccmake.define.CMAKE_CXX_FLAGS_DEBUG=-O0
    -Cbuild-dir=${WORK_DIR}/build)
run("importing the installed package" ${WORK_DIR}/venv/bin/python -c
    "import importlib.metadata, minifloat, torch; assert minifloat.__file__.startswith('${WORK_DIR}/venv'), minifloat.__file__; assert minifloat.__version__ == importlib.metadata.version('minifloat'); print(minifloat.__version__, minifloat.quantize(torch.randn(64), 'mxfp4')[:4])")
