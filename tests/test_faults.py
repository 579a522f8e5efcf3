"""Corruption and fault suite: every case ends in a correct result, a named error or warning, or a refusal.

1,200 seeded cases here (``tests/faults.py`` has the cases and their oracles);
``bench/fuzz.py --faults`` runs 100,000 and more. The JSON scanner's own
fuzzing is in ``test_fuzz.py``, the nsys reader's in ``test_nsys_edge.py``.
"""

from __future__ import annotations

import collections
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import aonkit
from aonkit.cache import cache_path_for

from .conftest import ROOT
from .faults import FAMILIES, make_source, run_case

CASES = {"cache_bytes": 250, "cache_truncate": 150, "sidecar": 250, "sidecar_swap": 100, "gzip": 300, "jobdir": 150}


@pytest.mark.parametrize("family", FAMILIES)
def test_fault_family(tmp_path: Path, family: str) -> None:
    seen: collections.Counter[str] = collections.Counter()
    for seed in range(CASES[family]):
        try:
            seen[run_case(family, seed, tmp_path / str(seed))] += 1
        except Exception as exc:
            raise AssertionError(f"{family} case {seed}: {type(exc).__name__}: {exc}") from exc
    assert len(seen) >= 2, seen  # the damage reaches more than one outcome: the oracle is exercised
    assert sum(CASES.values()) >= 1000


WRITER = """
import sys, aonkit
a, b, cache, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ta, tb = aonkit.load(a), aonkit.load(b)
for i in range(n):
    (ta if i % 2 else tb).save(cache)
"""


def test_concurrent_writers_and_a_reader(tmp_path: Path) -> None:
    # two versions of one trace, cached to one place (as `aonkit cache --out`) by two processes at once
    a = make_source((tmp_path / "a").mkdir() or tmp_path / "a" / "c.json", seed=1)
    b = make_source((tmp_path / "b").mkdir() or tmp_path / "b" / "c.json", seed=2, n=20)
    out = tmp_path / "out"
    out.mkdir()
    cache = cache_path_for(a, out)
    ta, tb = aonkit.load(a), aonkit.load(b)
    ta.save(cache)
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(a), str(b), str(cache), "60"], cwd=ROOT)
               for _ in range(2)]
    seen: collections.Counter[str] = collections.Counter()
    deadline = time.monotonic() + 120
    while any(w.poll() is None for w in writers) and time.monotonic() < deadline:
        try:
            with warnings.catch_warnings(record=True) as record:
                warnings.simplefilter("always")
                t = aonkit.load(cache)
        except aonkit.TraceFormatError as exc:  # caught mid-swap with no usable source: named, never wrong
            assert exc.path is not None and Path(exc.path).parent == out, str(exc)
            seen["error"] += 1
            continue
        assert t.equals(ta) or t.equals(tb), "a reader saw a mix of two writes"
        seen["fallback" if any(issubclass(w.category, aonkit.AonkitWarning) for w in record) else "ok"] += 1
    assert all(w.wait(timeout=120) == 0 for w in writers)
    assert seen["ok"] > 0, seen
    final = aonkit.load(cache)  # the writers took turns: the last cache is whole
    assert (final.equals(ta) or final.equals(tb)) and not final.warnings
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
