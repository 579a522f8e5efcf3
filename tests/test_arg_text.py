"""Arg look-ups without compilation (:mod:`aonkit.arg_text`) give exactly what the Numba kernels give."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aonkit
from aonkit import arg_text
from aonkit._kernels.args import args_starts, find_args, find_args_at, span_ints

from .conftest import SAMPLE_TRACES, SHARED_TRACES
from .test_fuzz import mutated

KEYS = [b'"args"', b'"correlation"', b'"name"', b'"External id"', b'"Input Dims"', b'"correlation"', b'"caf\\u00e9"']
ROOT = Path(__file__).resolve().parents[1]


def _flat(keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    key_off = np.cumsum([0] + [len(k) for k in keys]).astype(np.int64)
    return np.frombuffer(b"".join(keys), np.uint8).copy(), key_off


def _both(buf: np.ndarray, start: np.ndarray, end: np.ndarray, keys: list[bytes]) -> bool:
    """Compare the walk with the kernels; False where the walk declined (then the kernel is used)."""
    flat, key_off = _flat(keys)
    rows = np.arange(len(start), dtype=np.int64)
    at = args_starts(buf, start, end)
    try:
        walked = arg_text.find_args(buf, start, end, None, rows, keys)
        direct = arg_text.find_args(buf, start, end, at, rows, keys)
    except arg_text.Declined:  # nested past the interpreter's recursion: the kernel is used
        return False
    np.testing.assert_array_equal(walked, find_args(buf, start, end, rows, flat, key_off))
    np.testing.assert_array_equal(direct, find_args_at(buf, end, at, rows, flat, key_off))
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated(), cuts=st.lists(st.integers(0, 6000), min_size=2, max_size=40))
def test_same_spans_as_the_kernels_on_any_bytes(data: bytes, cuts: list[int]) -> None:
    buf = np.frombuffer(data, np.uint8).copy()
    edges = np.sort(np.clip(np.array(cuts, np.int64), 0, len(buf)))
    _both(buf, edges[:-1].copy(), edges[1:].copy(), KEYS)


def _events_of(text: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each top-level object of a JSON array's text as an event span (the spans a trace has)."""
    buf = np.frombuffer(text, np.uint8).copy()
    starts, ends, depth, in_str, esc = [], [], 0, False, False
    for i, c in enumerate(text):
        if in_str:
            esc, in_str = (False, True) if esc else (c == 92, c != 34)
        elif c == 34:
            in_str = True
        elif c in (123, 91):
            depth += 1
            if depth == 2 and c == 123:
                starts.append(i)
        elif c in (125, 93):
            depth -= 1
            if depth == 1 and c == 125:
                ends.append(i + 1)
    return buf, np.array(starts, np.int64), np.array(ends, np.int64)


ODD_ARGS = [
    '{"args": {"correlation": 1, "correlation": 2}}',  # the last wins
    '{"args": {"x": {"correlation": 5}, "correlation": 6}}',  # a nested namesake, then the member
    '{"args": {"x": {"correlation": 5}}}',  # only nested: absent
    '{"args": {"name": "say \\"correlation\\": 3", "correlation": 4}}',  # escapes: the walk
    '{"args": {"Ext\\u0065rnal id": 7}}',  # an escaped key is not matched (raw text)
    '{"args": {"caf\\u00e9": 8}}',  # a wanted key written escaped
    '{"args": {"correlation": 1, }}',  # malformed: the row is -1
    '{"args": {"correlation": 01}}',
    '{"args": {"correlation": NaN, "name": -Infinity}}',
    '{"args": [1, 2], "name": "x"}',  # args not an object
    '{"args": {"a": 1}, "args": {"correlation": 9}}',  # the last args object
    '{"args": {"Input Dims": [[1, 2], [3]], "correlation": 1.5e3}}',
]
DECLINED = [
    '{"args": {"correlation": ' + "1" * 5000 + "}}",  # past int()'s digit limit
    '{"args": {"correlation": 1, "deep": ' + "[" * 3000 + "]" * 3000 + "}}",  # past Python's recursion
]


@pytest.mark.parametrize("event", ODD_ARGS + DECLINED)
def test_same_spans_on_odd_args(event: str) -> None:
    buf, start, end = _events_of(("[" + event + "]").encode())
    assert len(start) == 1
    assert _both(buf, start, end, KEYS) == (event not in DECLINED)  # compared, or left to the kernel


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(-(2**64), 2**64), st.floats(allow_nan=True), st.text(max_size=6),
                          st.sampled_from(["-0", "0", "00", "-", "1.", "1e5", "-9223372036854775808",
                                           "9223372036854775807", "123456789012345678", "0x1"])),
                max_size=30))  # fmt: skip
def test_span_ints_as_the_kernel(values: list) -> None:
    tokens = [v if isinstance(v, str) else json.dumps(v) for v in values]
    text = "".join(tokens).encode("utf-8")
    offs = np.cumsum([0] + [len(t.encode("utf-8")) for t in tokens])
    spans = np.stack([offs[:-1], offs[1:]], axis=1).astype(np.int64) if tokens else np.empty((0, 2), np.int64)
    spans = spans[spans[:, 1] > spans[:, 0]]
    buf = np.frombuffer(text + b" ", np.uint8).copy()
    got, ok = arg_text.span_ints(buf, spans)
    want, wok = span_ints(buf, spans)
    np.testing.assert_array_equal(ok, wok)
    np.testing.assert_array_equal(got[ok], want[wok])


def _lookups(trace: aonkit.Trace, rows: np.ndarray) -> list:
    keys = ["External id", "Input Dims", "bytes", "correlation", "memory bandwidth (GB/s)", "Bytes", "Addr",
            "Comms Id", "Collective name", "stream", "grid"]
    out: list = [trace.arg_ints_of(keys, rows)]
    for key in keys:
        out += [trace.arg_values(key, rows), trace.arg_numbers(key, rows), trace.arg_ints(key, rows)]
    return out


REAL = [SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz", SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz",
        SHARED_TRACES / "hta/trace_filter/sampled_rank-0.json.gz",
        SHARED_TRACES / "tracelens/mi300/resnet_act_checkpoint.json.gz",
        SHARED_TRACES / "hta/large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz",
        SAMPLE_TRACES / "nsys/synthetic_2proc.sqlite"]  # fmt: skip (the last: text built per selection)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_trace_lookups_agree_on_real_traces(path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} not present (shared traces)")
    first = aonkit.load(path)
    for trace in (first, aonkit.load(first.save(tmp_path / "c.parquet"))):
        rows = np.arange(len(trace.events))[:20_000]
        monkeypatch.setenv("AONKIT_QUICK_PARSE", "0")
        want = _lookups(trace, rows)
        monkeypatch.setenv("AONKIT_QUICK_PARSE", "1")
        got = _lookups(trace, rows)
        for k in want[0]:
            np.testing.assert_array_equal(got[0][k], want[0][k])
        for g, w in zip(got[1:], want[1:]):
            if isinstance(w, list):
                assert g == w
            else:
                np.testing.assert_array_equal(g, w)
        assert any(v is not None for values in want[1::3] for v in values)  # some keys are there to find


def test_a_new_machine_looks_args_up_without_compiling(tmp_path: Path) -> None:
    """From an empty Numba cache: a quick load and arg look-ups compile nothing (they took ~14 s here)."""
    script = (
        "import numba.core.event as ev, aonkit, numpy as np\n"
        "names = []\n"
        "class L(ev.Listener):\n"
        "    def on_start(self, e): names.append(e.data['dispatcher'].py_func.__qualname__)\n"
        "    def on_end(self, e): pass\n"
        "ev.register('numba:compile', L())\n"
        f"t = aonkit.load({str(SAMPLE_TRACES / 'gpu_synthetic_rank0.json.gz')!r})\n"
        "ids = t.arg_ints('External id'); dims = t.arg_values('Input Dims', np.arange(100))\n"
        "mem = t.arg_ints_of(['Bytes', 'Addr']); bw = t.arg_numbers('Bytes')\n"
        "assert (ids >= 0).sum() > 1000 and (mem['Bytes'] != -1).sum() > 100 and (bw > 0).any()\n"
        "print('COMPILED', names)\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "AONKIT_BACKGROUND_COMPILE": "0",
           "AONKIT_QUICK_PARSE": "auto", "PYTHONPATH": str(ROOT)}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "COMPILED []" in out.stdout, out.stdout


def test_the_walk_gives_way_to_compiling_past_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that would walk more than QUICK_BUDGET_ROWS events in all compiles the kernels instead.

    Unless a background compilation runs: then it walks on.
    """
    from numba import njit

    from aonkit.trace_args import walk_quickly

    @njit
    def cold(x):  # never compiled, not cached: not ready
        return x

    from aonkit.sources import first_run

    compiling = [False]
    monkeypatch.setattr(first_run, "background_compiling", lambda: compiling[0])
    monkeypatch.setenv("AONKIT_QUICK_PARSE", "auto")
    monkeypatch.setattr(arg_text, "_walked", [0])
    assert walk_quickly(1000, (cold, np.zeros(3))) and arg_text._walked == [1000]
    assert not walk_quickly(arg_text.QUICK_ROWS + 1, (cold, np.zeros(3)))  # too many rows for one look-up
    monkeypatch.setattr(arg_text, "_walked", [arg_text.QUICK_BUDGET_ROWS - 10])
    assert not walk_quickly(11, (cold, np.zeros(3))) and walk_quickly(10, (cold, np.zeros(3)))
    compiling[0] = True  # past the budget, but the background compilation will bring the kernels: walk on
    assert walk_quickly(11, (cold, np.zeros(3)))
    compiling[0] = False
    monkeypatch.setenv("AONKIT_QUICK_PARSE", "1")
    assert walk_quickly(10, (cold, np.zeros(3)))  # forced: no budget
    monkeypatch.setenv("AONKIT_QUICK_PARSE", "0")
    assert not walk_quickly(10, (cold, np.zeros(3)))


def test_the_walk_counts_every_kernel_the_look_up_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    """One kernel of the look-up still cold (finding the args offsets, say) is reason enough to walk."""
    from numba import njit

    from aonkit.trace_args import walk_quickly

    @njit(cache=False)
    def warm(x):
        return x

    @njit(cache=False)
    def cold(x):
        return x

    warm(np.zeros(3))
    monkeypatch.setenv("AONKIT_QUICK_PARSE", "auto")
    monkeypatch.setattr(arg_text, "_walked", [0])
    assert not walk_quickly(10, (warm, np.zeros(3)))
    assert walk_quickly(10, (warm, np.zeros(3)), (cold, np.zeros(3)))
