#!/bin/sh
# Runs the dieharder suite (Debian package `dieharder`) on the raw stream of the stochastic-
# rounding generator (random.hpp, ARS-5): bench/random_stream writes the 32-bit draws of one
# seed, `dieharder -a -g 200` reads them from stdin as raw 32-bit words. The report goes to
# stdout, followed by the PASSED / WEAK / FAILED counts. docs/formats.md records a run.
#
#   bench/dieharder.sh [build directory, default build/release] [seed, default 0] [32|64]
#
# Build the generator first: cmake --build build/release --target random_stream
# A full run took 33 minutes here (docs/formats.md, "The random stream", records it).
set -eu
build=${1:-build/release}
seed=${2:-0}
bits=${3:-32}
stream="$build/bench/random_stream"
if [ ! -x "$stream" ]; then
  echo "dieharder.sh: $stream not found; build it with: cmake --build $build --target random_stream" >&2
  exit 2
fi
if ! command -v dieharder >/dev/null 2>&1; then
  echo "dieharder.sh: dieharder not found; install it with: apt-get install -y dieharder" >&2
  exit 2
fi
report=$(mktemp)
trap 'rm -f "$report"' EXIT
echo "# $stream --seed $seed --bits $bits | dieharder -a -g 200"
"$stream" --seed "$seed" --bits "$bits" | dieharder -a -g 200 | tee "$report"
echo "# PASSED $(grep -c ' PASSED' "$report") WEAK $(grep -c ' WEAK' "$report") FAILED $(grep -c ' FAILED' "$report")"
