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


def _no_numba_place(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of aonkit, and an environment, in which none of Numba's own cache places can be written.

    As a read-only install used by an account without a writable home: here ``__pycache__`` of the kernels is a
    file and the home and cache folders lie under a file, which even root cannot make folders in.
    """
    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "aonkit", pkg / "aonkit", ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "aonkit" / "_kernels" / "__pycache__").write_text("not a folder")
    (tmp_path / "file").write_text("")
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {"HOME": str(tmp_path / "file" / "home"), "XDG_CACHE_HOME": str(tmp_path / "file" / "cache"),
           "NUMBA_CACHE_DIR": "", "TMPDIR": str(temp)}  # fmt: skip
    return pkg, env


def _run(pkg: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _RUN], env={**os.environ, "PYTHONPATH": str(pkg),
                          "AONKIT_COMPILE_NOTICE": "0", **env}, capture_output=True, text=True, timeout=300,
                          cwd=pkg)  # fmt: skip


def test_without_a_place_numba_can_write_the_kernels_cache_in_a_private_temp_folder(tmp_path: Path) -> None:
    # GIVEN no cache place of Numba's own that can be written (Numba alone would refuse to define the kernels)
    pkg, env = _no_numba_place(tmp_path)
    # WHEN a process runs a kernel, and then another
    first, second = _run(pkg, env), _run(pkg, env)
    # THEN both work; the first compiles into <temp>/aonkit-numba-<uid> (0700), the second loads from there
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    assert "count_event_keys" in json.loads(first.stdout.splitlines()[-1])
    assert json.loads(second.stdout.splitlines()[-1]) == []
    place = Path(env["TMPDIR"]) / f"aonkit-numba-{os.getuid()}"
    assert place.is_dir() and (place.stat().st_mode & 0o777) == 0o700
    assert any(place.rglob("trace_scan.count_event_keys-*.nbi")), sorted(p.name for p in place.rglob("*"))
    assert "Numba's cache has no folder" not in first.stderr + second.stderr


def test_a_private_folder_others_may_write_is_not_used_and_the_kernels_compile_each_time(tmp_path: Path) -> None:
    # GIVEN the temp folder's aonkit-numba-<uid> writable by others (files planted there would run as this user)
    pkg, env = _no_numba_place(tmp_path)
    place = Path(env["TMPDIR"]) / f"aonkit-numba-{os.getuid()}"
    place.mkdir()
    place.chmod(0o777)
    # WHEN a process runs a kernel, twice
    runs = [_run(pkg, env) for _ in range(2)]
    # THEN they work, each compiling it (no cache), the folder untouched and a line on stderr says why
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
        assert "count_event_keys" in json.loads(r.stdout.splitlines()[-1])
        assert "aonkit: Numba's cache has no folder this user may write" in r.stderr
    assert list(place.iterdir()) == []
