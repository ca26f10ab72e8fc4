#!/usr/bin/env bash
# bench/mca_hot_loops.sh — llvm-mca's static throughput model of the library's hot loops on
# AMD Zen 4 and Intel Sapphire Rapids, without either machine: bench/mca_kernels.cpp is compiled
# with clang++ -O3 -march=znver4 and -march=sapphirerapids, bench/mca_loop.py cuts each kernel's
# loop out of the assembly (by function and by the kernel's own instruction), and llvm-mca
# -mcpu=<same> prints the block reciprocal throughput (the resource bound, cycles per iteration),
# the simulated cycles per iteration (Total Cycles / Iterations: dependencies and dispatch too)
# and IPC; elements per cycle = the elements one iteration handles / the simulated cycles. A model, not a measurement: no caches,
# no memory, perfect branch prediction, the loop alone.
#
# usage: bench/mca_hot_loops.sh [-v]      (-v: llvm-mca's full report per loop on stderr)
# Needs clang++ and llvm-mca of one LLVM release (16 or newer for znver4): Debian 12's
# clang-19 llvm-19 packages. Override with CLANGXX=... LLVM_MCA=... CXXFILT=...
set -euo pipefail
cd "$(dirname "$0")/.."
verbose=0
[[ ${1:-} == -v ]] && verbose=1
pick() { for c in "$@"; do command -v "$c" >/dev/null 2>&1 && { echo "$c"; return; }; done; echo "$1"; }
CLANGXX=${CLANGXX:-$(pick clang++-19 clang++)}
LLVM_MCA=${LLVM_MCA:-$(pick llvm-mca-19 llvm-mca)}
CXXFILT=${CXXFILT:-$(pick llvm-cxxfilt-19 llvm-cxxfilt c++filt)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name | function (regex on the demangled name) | the kernel's own instruction | elements per
# iteration: zmm = 16 per 512-bit store in the loop, aes = 16 per five 512-bit AES rounds (ARS-5:
# one block of 16 32-bit words), reg = 16 (one register of floats: the bfloat16 loop, whose two
# paths, the conversion and the single-binade integer form, each store it)
split='^void minifloat::storage::detail::step_tiles<minifloat::storage::detail::byte_field_weights<'
pf='\(minifloat::storage::detail::pair_form\)'
kernels=(
  "quantize e4m3 nearest-even|float_add_run<\(minifloat::rounding\)0, false, float|vaddps|zmm"
  "quantize bf16 nearest-even|hardware_run<\(minifloat::rounding\)0, false, \(minifloat::detail::hardware_form\)2, false|vcvtneps2bf16|reg"
  "quantize e4m3 stochastic|stochastic_run<false, float,|vaesenc|aes"
  "SGD bf16+8 stochastic: tile split|${split}unsigned short, unsigned char, ${pf}1>>|vaesenc|aes"
  "SGD fp16+8 stochastic: tile split|${split}unsigned short, unsigned char, ${pf}3>>|vaesenc|aes"
  "SGD e4m3+8 stochastic: tile split|${split}unsigned char, unsigned char, ${pf}4>>|vaesenc|aes"
)

echo "clang: $("$CLANGXX" --version | head -1); llvm-mca: $("$LLVM_MCA" --version | grep -m1 -o 'LLVM version [0-9.]*')"
printf '| loop | cpu | instructions | Block RThroughput | cycles/iteration | IPC | elements/iteration | elements/cycle | busiest resource (cycles/iteration) |\n'
printf '|---|---|---:|---:|---:|---:|---:|---:|---|\n'
for cpu in znver4 sapphirerapids; do
  "$CLANGXX" -std=c++20 -O3 -march=$cpu -Iinclude -S bench/mca_kernels.cpp -o "$work/$cpu.s"
  for k in "${kernels[@]}"; do
    IFS='|' read -r name fn marker per <<<"$k"
    python3 bench/mca_loop.py "$work/$cpu.s" "$fn" "$marker" "$CXXFILT" >"$work/loop.s"
    counts=$(tail -1 "$work/loop.s")
    zmm=$(sed -E 's/.*stores zmm=([0-9]+).*/\1/' <<<"$counts")
    aes=$(sed -E 's/.*vaesenc_zmm=([0-9]+).*/\1/' <<<"$counts")
    case $per in zmm) elements=$((16 * zmm)) ;; aes) elements=$((16 * aes / 5)) ;; reg) elements=16 ;; esac
    grep -v '^#' "$work/loop.s" >"$work/body.s"
    "$LLVM_MCA" -mtriple=x86_64 -mcpu=$cpu -iterations=200 -bottleneck-analysis "$work/body.s" >"$work/mca.txt" 2>&1
    [[ $verbose == 1 ]] && { echo "=== $name, $cpu"; cat "$work/loop.s" "$work/mca.txt"; } >&2
    n=$(grep -c . "$work/body.s")
    rt=$(awk '/Block RThroughput:/ {print $3}' "$work/mca.txt")
    cyc=$(awk '/^Iterations:/ {i = $2} /^Total Cycles:/ {c = $3} END {printf "%.2f", c / i}' "$work/mca.txt")
    nested=""
    head -1 "$work/loop.s" | grep -q 'inner loop' && nested=" (two paths as straight-line code: an upper bound)"
    ipc=$(awk '/^IPC:/ {print $2}' "$work/mca.txt")
    # the resource with the highest pressure per iteration (llvm-mca's "Resource pressure per
    # iteration" table: resource names on one line, cycles on the next)
    busiest=$(awk '/Resource pressure per iteration:/ {getline names; getline cycles; n = split(names, a); split(cycles, b);
                     best = 0; for (i = 1; i <= n; i++) if (b[i] != "-" && b[i] + 0 > best) { best = b[i] + 0; at = i }
                   } END {print best}' "$work/mca.txt")
    port=$(awk '/^Resources:/ {on = 1; next} on && /^\[/ {res[++k] = $3} on && /^$/ && k {on = 0}
                /Resource pressure per iteration:/ {getline; getline c; n = split(c, b); best = 0;
                  for (i = 1; i <= n; i++) if (b[i] != "-" && b[i] + 0 > best) { best = b[i] + 0; at = i } }
                END {print res[at]}' "$work/mca.txt")
    epc=$(awk -v e="$elements" -v c="$cyc" 'BEGIN {printf "%.2f", e / c}')
    printf '| %s%s | %s | %s | %s | %s | %s | %s | %s | %s (%s) |\n' "$name" "$nested" "$cpu" "$n" "$rt" "$cyc" "$ipc" "$elements" "$epc" "$port" "$busiest"
  done
done
