"""What a run ran on: the git commit, whether the tree differed from it, and the versions.

reproduce.py stores this next to every run's CSV (in the run's .json), so a table can be traced
to the code that made it and runs that straddled a code change can be told apart. The git state is
examples/run_record.py's, which records the C++ trainer's runs the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from run_record import git_state, sha256_of  # noqa: E402,F401  (shared with the C++ runs' record)

# Printed by the interpreter that runs train.py, with train.py's environment, so the versions are
# those of the run and not of whoever calls reproduce.py.
_VERSIONS = """
import json, platform, torch, minifloat, minifloat._core as core
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__,
                  "minifloat": minifloat.__version__, "extension_path": core.__file__}))
"""


def versions(python: str, env: dict, cwd: str) -> dict:
    """Python, torch and minifloat versions as `python` sees them under `env`, and the SHA-256 of
    the compiled extension it imports (two builds of one version differ there)."""
    out = subprocess.run([python, "-c", _VERSIONS], capture_output=True, text=True, env=env, cwd=cwd, check=True)
    v = json.loads(out.stdout)
    v["extension_sha256"] = sha256_of(v["extension_path"])
    if os.path.commonpath([os.path.abspath(cwd), v["extension_path"]]) == os.path.abspath(cwd):
        v["extension_path"] = os.path.relpath(v["extension_path"], cwd)   # the same in every checkout
    return v


def record(root: str, python: str, env: dict) -> dict:
    """Everything above, for one run's metadata."""
    return {**git_state(root), **versions(python, env, root)}
