"""Every figure aonkit gives is the same whatever the CPU's SIMD level and the thread count.

numpy picks sort, sum and search kernels by CPU feature at run time, and the
tie order of its unstable sort differs between AVX-512, AVX2 and plain
x86-64: a result that leaned on it would pass here and fail on CI's CPU.
``NPY_DISABLE_CPU_FEATURES`` turns the dispatch down in a child process, so
this machine plays the others; the scanner also runs on one thread and on
several (its parallel scan must equal the one-thread scan).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .conftest import ROOT, SAMPLE_TRACES, SHARED_TRACES


def _dispatch_groups() -> list[str]:
    """numpy's dispatch targets built in and usable on this CPU, highest last (e.g. X86_V3 ... AVX512_SPR)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return [g for g in __cpu_dispatch__ if __cpu_features__.get(g, False)]


def _run(path: Path, threads: int, disabled: list[str]) -> str:
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=" ".join(disabled))
    proc = subprocess.run([sys.executable, "-m", "tests.digest_native", str(path), str(threads)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


# the 25 MB ResNet trace has launch/start and copy end/start ties in the same µs, and is scanned in parallel
CASES = [SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz", SHARED_TRACES / "param/resnet_kineto.json.gz"]


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_same_figures_on_every_cpu_level_and_thread_count(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} not found (../shared absent)")
    groups = _dispatch_groups()
    if not groups:
        pytest.skip(f"numpy {np.__version__} dispatches nothing on this CPU: nothing to turn down")
    want = _run(path, 1, [])
    assert len(want.splitlines()) > 10
    # each level down in turn: e.g. AVX512_ICL off, then AVX-512 off (an AVX2-only CPU), then all (baseline x86-64)
    for k in range(len(groups) - 1, -1, -1):
        disabled, threads = groups[k:], 2
        got = _run(path, threads, disabled)
        diff = [f"{a} != {b}" for a, b in zip(want.splitlines(), got.splitlines()) if a != b]
        assert not diff, f"with {disabled} off and {threads} threads: {diff}"
