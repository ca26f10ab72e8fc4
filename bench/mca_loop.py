#!/usr/bin/env python3
"""Prints the hot loop of one function of an assembly file (for bench/mca_hot_loops.sh).

usage: mca_loop.py FILE.s FUNCTION_REGEX MARKER_REGEX [CXXFILT]
The function is the first whose demangled name matches FUNCTION_REGEX. A loop is the code from a
label to a later jump back to it; the hot loop is the shortest innermost one (no other loop and no
call inside) that has an instruction matching MARKER_REGEX (the kernel's own operation, e.g.
vaesenc for the stochastic loop: the shortest, because a kernel's general and counting variants
are longer loops with the same operation). Printed: its instructions, then a line
'# stores zmm=Z ymm=Y xmm=X vaesenc_zmm=A' counting vector stores to memory and 512-bit AES
rounds (the script turns one of them into elements per iteration)."""
import re
import subprocess
import sys

lines = open(sys.argv[1]).read().split('\n')
wanted = re.compile(sys.argv[2])
starts, names = {}, []
for i, l in enumerate(lines):
    m = re.match(r'^([A-Za-z_$][\w.$]*):', l)
    if m:
        starts[m.group(1)] = i
        names.append(m.group(1))
marker = re.compile(sys.argv[3])
demangled = subprocess.run([sys.argv[4] if len(sys.argv) > 4 else 'llvm-cxxfilt'], input='\n'.join(names),
                           capture_output=True, text=True).stdout.split('\n')
for name, dem in zip(names, demangled):
    if wanted.search(dem):
        break
else:
    sys.exit(f'no function matches {sys.argv[2]}')
s = starts[name]
e = next(i for i in range(s, len(lines)) if re.match(r'^\s*\.size\s+' + re.escape(name) + ',', lines[i]))
body = lines[s:e]
labels = {m.group(1): j for j, l in enumerate(body) if (m := re.match(r'^(\.LBB[\w]+):', l))}
loops = [(labels[m.group(1)], j) for j, l in enumerate(body)
         if (m := re.match(r'^\s+j\w+\s+(\.LBB\w+)', l)) and m.group(1) in labels and labels[m.group(1)] < j]


def instructions(a, b):
    return [x.split('#')[0].rstrip() for x in body[a:b + 1]
            if re.match(r'^\s+[a-z]', x) and not x.strip().startswith('.')]


def vector(ins):
    return sum(1 for x in ins if re.search(r'%[xyz]mm|%k[0-7]', x))


best, nested = None, False
for allow_inner in (False, True):  # a loop with a cold inner loop (a per-lane fallback) only if no other
    for a, b in loops:
        ins = instructions(a, b)
        inner = any(a <= c and d <= b and (c, d) != (a, b) for c, d in loops)
        if (inner and not allow_inner) or any(x.strip().startswith('call') for x in ins) or not any(marker.search(x) for x in ins):
            continue
        if best is None or len(ins) < len(best):
            best, nested = ins, inner
    if best is not None:
        break
if best is None:
    sys.exit(f'no innermost loop with {sys.argv[3]} in {dem[:80]}')
print('# ' + dem[:400] + (' (the loop holds an inner loop, modelled as straight-line code)' if nested else ''))
print('\n'.join(best))
count = lambda reg: sum(1 for x in best if re.match(r'^\s+v\w*mov\w*\s+%' + reg + r'mm\d+, [^%]*\(', x))
aes = sum(1 for x in best if re.match(r'^\s+vaesenc(last)?\s', x) and '%zmm' in x)
print(f'# stores zmm={count("z")} ymm={count("y")} xmm={count("x")} vaesenc_zmm={aes}')
