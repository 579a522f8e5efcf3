"""The speculative multi-thread scan gives exactly the one-thread result, errors included."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import aonkit
from aonkit._kernels import trace_scan as ks
from aonkit.sources import _parallel
from aonkit.sources._io import read_buffer
from aonkit.sources.chrome_trace import parse_buffer

from .conftest import SAMPLE_TRACES, SHARED_TRACES, shared_trace_files

FILES = [p for p in shared_trace_files() if p.stat().st_size > 20_000] + sorted(SAMPLE_TRACES.glob("*.json.gz"))


def _outcome(buf: np.ndarray, threads: int, salvage: bool = False):
    try:
        t = parse_buffer(buf, path="x", threads=threads, salvage=salvage)
    except aonkit.TraceFormatError as err:
        return ("error", err.offset, err.event_index, err.reason)
    return ("ok", t)


def _same(a, b) -> None:
    assert a[0] == b[0]
    if a[0] == "error":
        assert a[1:] == b[1:]
        return
    ta, tb = a[1], b[1]
    assert ta.events.equals(tb.events) and ta.metadata == tb.metadata and ta.warnings == tb.warnings
    sa, sb = ta._raw.spans(), tb._raw.spans()
    assert np.array_equal(sa[1], sb[1]) and np.array_equal(sa[2], sb[2])


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_parallel_equals_sequential_on_real_traces(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parallel, "MIN_PARALLEL_BYTES", 0)
    buf, _ = read_buffer(path)
    one = _outcome(buf, 1)
    for threads in (2, 5):
        _same(_outcome(buf, threads), one)


def test_cuts_are_used_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parallel, "MIN_PARALLEL_BYTES", 0)
    events = [{"ph": "X", "name": f"op{i % 7}", "ts": i, "args": {"correlation": i, "x": [{"a": 1}, {"b": 2}]}}
              for i in range(3000)]  # fmt: skip
    tail = {"deviceProperties": [{"id": 0}, {"id": 1}], "distributedInfo": {"rank": 3}}
    text = json.dumps({"traceEvents": events, **tail})
    buf = np.frombuffer(text.encode(), np.uint8).copy()
    assert len(_parallel._cuts(buf, 4)) == 3
    # args hold "}, {" too: a cut there is caught (MISMATCH) and the result is still exact
    scan = _parallel.scan(buf, 4)
    assert scan.err == 0 and scan.n_ev == 3000
    _same(_outcome(buf, 4), _outcome(buf, 1))
    t = _outcome(buf, 4)[1]
    assert t.meta.rank == 3 and t.events["correlation"].tolist() == list(range(3000))
    # errors and truncation land at the same place with the same event index
    for cut in (len(text) // 3, len(text) // 2, len(text) - 30):
        part = buf[:cut].copy()
        _same(_outcome(part, 4), _outcome(part, 1))
        _same(_outcome(part, 4, salvage=True), _outcome(part, 1, salvage=True))
    bad = buf.copy()
    bad[len(text) * 3 // 4] = ord("#")
    _same(_outcome(bad, 4), _outcome(bad, 1))


def test_find_event_boundary() -> None:
    buf = np.frombuffer(b'[{"a":1} ,\n {"b":2}]', np.uint8).copy()
    assert ks.find_event_boundary(buf, 0, 100) == 12
    assert ks.find_event_boundary(buf, 13, 100) == -1


def test_shared_folder_present_or_skipped() -> None:
    if not SHARED_TRACES.is_dir():
        pytest.skip("shared traces absent")
    assert FILES
