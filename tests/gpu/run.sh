#!/usr/bin/env bash
# tests/gpu/run.sh — one command for a machine with an NVIDIA GPU: builds the Python package with
# its CUDA kernels (no network, no pip: cmake, a C++ compiler, nvcc, Python with torch, numpy and
# pybind11 must be there), then checks that the GPU kernels give the CPU's bits
# (tests/gpu/check_kernels.py), that the package imports, runs the device test of the headers
# (tests/cuda/device_rounding.cu) and the GPU benchmark (python/bench/bench_cuda.py). About
# 3-5 minutes on an H100/H200 host with 16 cores. Ends with one SUMMARY line; exit status 0 only
# when every step passed.
#
#   tests/gpu/run.sh              # from anywhere; builds into build/gpu (BUILD_DIR=... to change)
#   SKIP_BUILD=1 tests/gpu/run.sh # reuse BUILD_DIR as it is
#   tests/gpu/run.sh --dry-run    # without a GPU: the CPU kernels stand in for the device
#                                 # (check_kernels.py --dry-run --small), no benchmark
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
build=${BUILD_DIR:-build/gpu}
python=${PYTHON:-python3}
dry_run=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry_run=1 ;;
    *) echo "run.sh: unknown argument '$arg' (only --dry-run)" >&2; exit 2 ;;
  esac
done
mkdir -p "$build"
build=$(cd "$build" && pwd)
log="$build/gpu-check.log"
exec > >(tee "$log") 2>&1
start=$(date +%s)
declare -a results=()
failed=0

summary() {
  local status=$?
  echo
  echo "SUMMARY run.sh$([ "$dry_run" = 1 ] && echo ' --dry-run'): ${results[*]:-nothing ran} ($(( $(date +%s) - start )) s; log: $log)"
  if [ "$failed" != 0 ] || [ "$status" != 0 ]; then echo "RESULT: FAIL"; else echo "RESULT: PASS"; fi
}
trap summary EXIT

# Runs a named step; records ok/FAILED and carries on (only the build stops the script).
step() {
  local name=$1; shift
  echo
  echo "=== $name: $*"
  local t0; t0=$(date +%s)
  if "$@"; then
    results+=("$name=ok($(( $(date +%s) - t0 ))s)")
  else
    results+=("$name=FAILED")
    failed=1
  fi
}

echo "=== machine"
date -u
uname -a
nproc
if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true; fi
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi

echo "=== prerequisites"
missing=()
for tool in cmake c++ nvcc "$python"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if command -v "$python" >/dev/null; then
  for module in torch numpy pybind11; do
    "$python" -c "import $module" 2>/dev/null || missing+=("python module $module")
  done
  "$python" -c "import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
    || missing+=("Python.h (python3-dev)")
fi
if command -v c++ >/dev/null; then
  echo '#include <zlib.h>' | c++ -E -x c++ - >/dev/null 2>&1 || missing+=("zlib.h (zlib1g-dev)")
fi
if [ ${#missing[@]} -ne 0 ]; then
  echo "missing: ${missing[*]}"
  results+=("prerequisites=MISSING(${missing[*]})")
  exit 1
fi
nvcc --version | tail -2
"$python" -c "import sys, torch, numpy, pybind11; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available(), 'numpy', numpy.__version__, 'pybind11', pybind11.__version__)"
results+=("prerequisites=ok")

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  echo
  echo "=== build into $build"
  t0=$(date +%s)
  # Tests, benchmarks and examples off (they need Catch2, MPFR, ...); warnings are not errors here:
  # another compiler version must not stop a run that can be tried once. The host code (the
  # CPU extension) is only the reference the GPU is compared with, and gives the same bits at
  # any optimisation level, so it is built at -O1: its slowest file compiles in about half the
  # time. Both extensions build at once (the default target holds nothing else here).
  if cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
       -DMINIFLOAT_BUILD_PYTHON=ON -DMINIFLOAT_CUDA=ON \
       -DMINIFLOAT_BUILD_TESTS=OFF -DMINIFLOAT_BUILD_BENCHMARKS=OFF -DMINIFLOAT_BUILD_EXAMPLES=OFF \
       -DMINIFLOAT_WERROR=OFF -DPython3_EXECUTABLE="$(command -v "$python")" &&
     cmake --build "$build" -j "$(nproc)"; then
    results+=("build=ok($(( $(date +%s) - t0 ))s)")
  else
    results+=("build=FAILED")
    exit 1
  fi
fi
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"

step import "$python" tests/gpu/check_import.py
if [ "$dry_run" = 1 ]; then
  step kernels "$python" tests/gpu/check_kernels.py --dry-run --small
  step bench_dry_run "$python" python/bench/bench_cuda.py --dry-run
  step device_rounding_compile nvcc -std=c++20 --expt-relaxed-constexpr -arch=sm_90 -Iinclude \
    tests/cuda/device_rounding.cu -o "$build/device_rounding"
else
  step kernels "$python" tests/gpu/check_kernels.py
  step dispatch "$python" tests/gpu/check_dispatch.py
  step bench "$python" python/bench/bench_cuda.py --reps 5
  step device_rounding bash -c "nvcc -std=c++20 --expt-relaxed-constexpr -arch=sm_90 -Iinclude \
    tests/cuda/device_rounding.cu -o '$build/device_rounding' && '$build/device_rounding'"
fi
[ "$failed" = 0 ]
