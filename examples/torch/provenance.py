"""What a run ran on: the git commit, whether the tree differed from it, and the versions.

reproduce.py stores this next to every run's CSV (in the run's .json), so a table can be traced
to the code that made it and runs that straddled a code change can be told apart.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

# Printed by the interpreter that runs train.py, with train.py's environment, so the versions are
# those of the run and not of whoever calls reproduce.py.
_VERSIONS = """
import json, platform, torch, minifloat, minifloat._core as core
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__,
                  "minifloat": minifloat.__version__, "extension_path": core.__file__}))
"""


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


def versions(python: str, env: dict, cwd: str) -> dict:
    """Python, torch and minifloat versions as `python` sees them under `env`, and the SHA-256 of
    the compiled extension it imports (two builds of one version differ there)."""
    out = subprocess.run([python, "-c", _VERSIONS], capture_output=True, text=True, env=env, cwd=cwd, check=True)
    v = json.loads(out.stdout)
    with open(v["extension_path"], "rb") as f:
        v["extension_sha256"] = hashlib.sha256(f.read()).hexdigest()
    if os.path.commonpath([os.path.abspath(cwd), v["extension_path"]]) == os.path.abspath(cwd):
        v["extension_path"] = os.path.relpath(v["extension_path"], cwd)   # the same in every checkout
    return v


def record(root: str, python: str, env: dict) -> dict:
    """Everything above, for one run's metadata."""
    return {**git_state(root), **versions(python, env, root)}
