"""Cold start: ``aonkit warmup`` compiles ahead, and a long first compilation says what it is doing.

Numba reports every compilation as a ``numba:compile`` event (a load from its
on-disk cache is not one), so a process that compiles nothing is counted,
not timed.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

import numba
import numpy as np
import pytest
from numba.core import event

from aonkit._kernels._notice import CompileNotice

from .compile_events import LISTEN
from .conftest import ROOT, SAMPLE_TRACES

COUNT_DEMO = LISTEN + r"""
import contextlib, io, sys
from pathlib import Path
from aonkit.demo import run_demo
with contextlib.redirect_stdout(io.StringIO()):
    run_demo(Path(sys.argv[1]))
print("COMPILED", len(names), sorted(set(names)))
"""

TWICE = r"""
import contextlib, importlib, io, pkgutil
import aonkit._kernels as K
from numba.core.registry import CPUDispatcher
from aonkit.warmup import warmup
with contextlib.redirect_stdout(io.StringIO()):
    warmup(None)
twice = []
for m in pkgutil.iter_modules(K.__path__):
    mod = importlib.import_module(f"aonkit._kernels.{m.name}")
    twice += [f"{m.name}.{n}" for n, f in vars(mod).items()
              if isinstance(f, CPUDispatcher) and f.__module__ == mod.__name__ and len(f.signatures) > 1]
print("TWICE", sorted(twice))
"""


@pytest.mark.slow
def test_warmup_leaves_nothing_for_the_demo_to_compile(tmp_path):
    if not SAMPLE_TRACES.is_dir():
        pytest.skip("sample_traces/ is not in this checkout")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"), "AONKIT_COMPILE_NOTICE": "1",
           "PYTHONPATH": str(ROOT)}
    w = subprocess.run([sys.executable, "-m", "aonkit.cli", "warmup"], env=env, capture_output=True, text=True,
                       timeout=1500, cwd=tmp_path)
    assert w.returncode == 0, w.stderr[-3000:]
    assert "warmup: done in" in w.stdout
    # from an empty cache the parser takes seconds: the notice names it, then says how long it took
    assert "aonkit: compiling the trace parser" in w.stderr and "aonkit: compiled in" in w.stderr
    d = subprocess.run([sys.executable, "-c", COUNT_DEMO, str(tmp_path / "demo")], env=env, capture_output=True,
                       text=True, timeout=600, cwd=tmp_path)
    assert d.returncode == 0, d.stderr[-3000:]
    assert "COMPILED 0 []" in d.stdout, d.stdout
    assert (tmp_path / "demo" / "summary.html").is_file()
    # and no kernel of the warm-up is compiled for two argument types (int8 vs int32 codes, read-only or not):
    # one specialization per kernel is what a trace of other dtypes finds compiled
    t = subprocess.run([sys.executable, "-c", TWICE], env=env, capture_output=True, text=True, timeout=600,
                       cwd=tmp_path)  # fmt: skip
    assert t.returncode == 0, t.stderr[-3000:]
    assert "TWICE []" in t.stdout, t.stdout


def _with_notice(after_s: float, call) -> tuple[CompileNotice, str]:  # noqa: ANN001 - a callable that compiles
    """Run ``call`` with a notice registered; the notice and what it wrote."""
    out = io.StringIO()
    notice = CompileNotice(after_s=after_s, stream=out)
    event.register("numba:compile", notice)
    try:
        call()
    finally:
        event.unregister("numba:compile", notice)
    return notice, out.getvalue()


def test_the_notice_names_a_compilation_that_takes_long_and_says_how_long():
    @numba.njit(cache=False)
    def freshly_defined(a):
        return a.sum() * 2

    notice, text = _with_notice(0.001, lambda: freshly_defined(np.arange(4)) == 12 or pytest.fail("wrong sum"))
    assert "aonkit: compiling test_warmup.freshly_defined for this machine" in text
    assert "aonkit: compiled in" in text
    assert notice.depth == 0


def test_no_notice_for_a_quick_compilation():
    @numba.njit(cache=False)
    def quick(x):
        return x + 1

    notice, text = _with_notice(60.0, lambda: quick(1) == 2 or pytest.fail("wrong sum"))
    assert text == "" and notice.timer is None


def test_warmup_leaves_the_quick_parse_setting_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    from aonkit.warmup import SAMPLE_DIR, run_steps

    monkeypatch.setenv("AONKIT_QUICK_PARSE", "auto")
    run_steps([], SAMPLE_DIR, quiet=True)
    assert os.environ["AONKIT_QUICK_PARSE"] == "auto"
    monkeypatch.delenv("AONKIT_QUICK_PARSE")
    run_steps([], SAMPLE_DIR, quiet=True)
    assert "AONKIT_QUICK_PARSE" not in os.environ
