# minifloat._cuda_kernels (Python face: minifloat/_cuda.py): the CUDA kernels of python/src/cuda/ (quantize, encode, decode of device memory)
# as a second extension module next to minifloat._core. Included at the end of
# python/CMakeLists.txt. Built when a CUDA compiler is found (MINIFLOAT_CUDA=AUTO), always
# (ON: an error without one) or never (OFF). Building needs no GPU and no driver: CI compiles it
# and checks that `import minifloat._cuda` works there (docs/cuda.md).
set(MINIFLOAT_CUDA AUTO CACHE STRING "Build the minifloat._cuda_kernels extension: AUTO (when nvcc is found), ON or OFF")
set_property(CACHE MINIFLOAT_CUDA PROPERTY STRINGS AUTO ON OFF)
# sm_90 machine code (H100/H200) plus compute_90 PTX, which the driver compiles for newer GPUs.
set(MINIFLOAT_CUDA_ARCHITECTURES "90-real;90-virtual" CACHE STRING
    "CUDA_ARCHITECTURES of minifloat._cuda (CMake's syntax: 90-real = sm_90 code, 90-virtual = compute_90 PTX)")
if(NOT MINIFLOAT_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "MINIFLOAT_CUDA = '${MINIFLOAT_CUDA}' is not AUTO, ON or OFF")
endif()

set(MINIFLOAT_CUDA_BUILT OFF)
if(NOT MINIFLOAT_CUDA STREQUAL "OFF")
  # nvcc where CUDA installs it, when it is not on PATH; nvcc's host compiler is the project's.
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(MINIFLOAT_CUDA_NVCC nvcc PATHS /usr/local/cuda/bin)
    if(MINIFLOAT_CUDA_NVCC)
      set(CMAKE_CUDA_COMPILER ${MINIFLOAT_CUDA_NVCC})
    endif()
  endif()
  if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(MINIFLOAT_CUDA_BUILT ON)
  elseif(MINIFLOAT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MINIFLOAT_CUDA=ON but no CUDA compiler was found (set CUDACXX or CMAKE_CUDA_COMPILER)")
  else()
    message(STATUS "No CUDA compiler: minifloat._cuda_kernels is not built")
  endif()
endif()

if(MINIFLOAT_CUDA_BUILT)
  # The kernels, compiled by nvcc without pybind11 (module.cpp, compiled by the host compiler,
  # calls them through launch.hpp). Not minifloat_project_flags: nvcc does not take host flags
  # bare; warnings are errors through nvcc's own switches and -Xcompiler.
  add_library(minifloat_cuda_kernels OBJECT src/cuda/kernels.cu)
  set_target_properties(minifloat_cuda_kernels PROPERTIES
    CUDA_ARCHITECTURES "${MINIFLOAT_CUDA_ARCHITECTURES}"
    POSITION_INDEPENDENT_CODE ON
    CUDA_VISIBILITY_PRESET hidden)
  target_link_libraries(minifloat_cuda_kernels PRIVATE minifloat)
  # -std by hand: CMake before 3.26 knows no CUDA20 dialect flag for nvcc.
  target_compile_options(minifloat_cuda_kernels PRIVATE
    -std=c++20
    --expt-relaxed-constexpr   # the core's constexpr functions are callable on the device
    -Xcompiler=-Wall,-Wextra
    $<$<BOOL:${MINIFLOAT_WERROR}>:-Werror=all-warnings -Xcompiler=-Werror>)

  pybind11_add_module(minifloat_python_cuda MODULE NO_EXTRAS src/cuda/module.cpp)
  set_target_properties(minifloat_python_cuda PROPERTIES
    OUTPUT_NAME _cuda_kernels
    LIBRARY_OUTPUT_DIRECTORY ${MINIFLOAT_PYTHON_DIR}/minifloat
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  # The CUDA runtime statically: importing the module needs no libcudart.so (and no driver until
  # a kernel is launched). OpenMP only because binding.hpp's thread split has its pragma.
  target_link_libraries(minifloat_python_cuda PRIVATE minifloat_cuda_kernels minifloat_project_flags
                        OpenMP::OpenMP_CXX CUDA::cudart_static)
  # Next to _core, in the same install component (python/CMakeLists.txt: pip installs only it).
  if(SKBUILD)
    install(TARGETS minifloat_python_cuda LIBRARY DESTINATION minifloat COMPONENT python)
  else()
    install(TARGETS minifloat_python_cuda LIBRARY DESTINATION ${MINIFLOAT_PYTHON_INSTALL_DIR}/minifloat COMPONENT python)
  endif()

  if(MINIFLOAT_BUILD_TESTS)
    # Without a GPU (CI): the module was built, and `import minifloat`, `import minifloat._cuda`
    # and the wrapper work without a driver; a kernel call then raises RuntimeError.
    add_test(NAME python_cuda_import
      COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/gpu/check_import.py)
    set_tests_properties(python_cuda_import PROPERTIES ENVIRONMENT "PYTHONPATH=${MINIFLOAT_PYTHON_DIR}")
  endif()
endif()
