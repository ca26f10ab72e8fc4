#!/usr/bin/env python3
"""What a run ran on, recorded beside its CSV: the command, the git commit and whether the tracked
files differed from it, and for the C++ trainer the executable's SHA-256, its build's settings and
the CPU.

As a program it runs one training command and writes that record when the command succeeds:

    examples/run_record.py --json RUN.json --log RUN.log -- BUILD/examples/train ARGS...

The command's stdout and stderr go to RUN.log; RUN.json (written only when the command exits 0,
atomically) holds the command (paths relative to the checkout), its exit status, wall time, CPU
seconds of the process (user + system, from wait4), peak RSS, the finish time (UTC), the load
average, the git state (`git_state`), the train executable's SHA-256 and its CMakeCache.txt's
CMAKE_BUILD_TYPE, CMAKE_CXX_FLAGS and MINIFLOAT_NN_GEMM (`build_settings`), and the CPU model.
The exit status is the command's. examples/reproduce*.sh run every training through it;
examples/torch/provenance.py (the PyTorch runs' record) uses `git_state` from here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The build settings that change a C++ run's numbers (docs/results.md: the GEMM and FMA contraction).
BUILD_KEYS = ("CMAKE_BUILD_TYPE", "CMAKE_CXX_FLAGS", "MINIFLOAT_NN_GEMM")


def git_state(root: str) -> dict:
    """HEAD's commit and whether tracked files differ from it (`dirty_paths`: which ones)."""

    def git(*args):
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, check=True).stdout

    try:
        commit = git("rev-parse", "HEAD").strip()
        changed = [line[3:] for line in git("status", "--porcelain", "--untracked-files=no").splitlines()]
    except (OSError, subprocess.CalledProcessError) as e:
        return {"commit": None, "dirty": None, "git_error": str(e)}
    return {"commit": commit, "dirty": bool(changed), "dirty_paths": changed}


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_settings(executable: str) -> dict:
    """BUILD_KEYS from the CMakeCache.txt of the build tree that holds `executable` (searched upwards
    from its directory); None for each when no cache is found."""
    d = os.path.dirname(os.path.abspath(executable))
    while True:
        cache = os.path.join(d, "CMakeCache.txt")
        if os.path.isfile(cache):
            break
        if os.path.dirname(d) == d:
            return {k: None for k in BUILD_KEYS}
        d = os.path.dirname(d)
    found = {}
    with open(cache, encoding="utf-8", errors="replace") as f:
        for line in f:
            name, sep, value = line.rstrip("\n").partition("=")
            key = name.split(":", 1)[0]
            if sep and key in BUILD_KEYS:
                found[key] = value
    return {k: found.get(k) for k in BUILD_KEYS}


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _relative(arg: str) -> str:
    """An absolute path inside the checkout as a path relative to it (the same in every checkout)."""
    if os.path.isabs(arg) and os.path.commonpath([ROOT, os.path.abspath(arg)]) == ROOT:
        return os.path.relpath(arg, ROOT)
    return arg


def run(command: list[str], json_path: str, log_path: str) -> int:
    started = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    returncode = os.waitstatus_to_exitcode(status)
    if returncode != 0:
        return returncode
    record = {
        "command": [_relative(a) for a in command], "returncode": returncode,
        "wall_s": round(time.time() - started, 2),
        "cpu_user_s": round(usage.ru_utime, 2), "cpu_sys_s": round(usage.ru_stime, 2),
        "max_rss_kb": usage.ru_maxrss, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        **git_state(ROOT),
        "train_sha256": sha256_of(command[0]), "build": build_settings(command[0]), "cpu_model": cpu_model(),
    }
    with open(json_path + ".tmp", "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    os.replace(json_path + ".tmp", json_path)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True, help="where the run's record goes")
    parser.add_argument("--log", required=True, help="where the command's output goes")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the training command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("command: give the training command after --")
    if not os.path.isfile(command[0]):
        parser.error(f"command: {command[0]} is not a file")
    return run(command, args.json, args.log)


if __name__ == "__main__":
    sys.exit(main())
