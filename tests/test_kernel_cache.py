"""A cached kernel is compiled again when any kernel module changes, not only its own (aonkit._kernels._stamp)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .compile_events import LISTEN

ROOT = Path(__file__).resolve().parent.parent

_RUN = LISTEN + """
import json
import numpy as np
from aonkit._kernels import trace_scan
buf = np.frombuffer(b'{"ph": "X"}, ' * 10, np.uint8).copy()
assert trace_scan.count_event_keys(buf, 0, len(buf)) == 10
print(json.dumps(names))
"""


def _compiled(pkg: Path, cache: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(pkg), "NUMBA_CACHE_DIR": str(cache), "AONKIT_COMPILE_NOTICE": "0"}
    out = subprocess.run([sys.executable, "-c", _RUN], env=env, capture_output=True, text=True, timeout=300,
                         cwd=pkg)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_an_edit_of_another_kernel_module_recompiles_a_cached_kernel(tmp_path: Path) -> None:
    # GIVEN a copy of aonkit whose kernel is in an empty Numba cache after one run
    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "aonkit", pkg / "aonkit", ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "numba"
    assert "count_event_keys" in _compiled(pkg, cache)
    assert _compiled(pkg, cache) == []  # a new process finds it in the cache
    # WHEN a kernel module other than the kernel's own changes (its callees could live there)
    lex = pkg / "aonkit" / "_kernels" / "json_lex.py"
    lex.write_text(lex.read_text() + "\n# edited\n")
    # THEN the next process compiles the kernel again, and the one after finds the new entry
    assert "count_event_keys" in _compiled(pkg, cache)
    assert _compiled(pkg, cache) == []
