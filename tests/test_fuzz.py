"""Fuzzing the byte scanner: mutated and truncated real traces never crash, hang or read out of bounds.

Numba does no bounds checks, so an out-of-bounds read would crash the test
process or produce garbage spans; both fail here. The stdlib ``json`` module is
the oracle for whether a document is valid.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aonkit
from aonkit.sources.chrome_trace import parse_buffer

from .conftest import SHARED_TRACES
from .naive import read_text

SEEDS = [
    "hta/trace_compare/base/base.json.gz",
    "kineto-docs-traces/after_fix_trace.json",
    "hta/triton_example/triton_example.json.gz",
    "hta/trace_file_list/inference_rank_1.json.gz",
]
STRUCTURAL = b'{}[]:,"\\ 0123456789-+.eEtrufalsnNI\n'


def _seed_bytes() -> list[bytes]:
    out = []
    for rel in SEEDS:
        p = SHARED_TRACES / rel
        if p.exists():
            out.append(read_text(p)[:6000])
    if not out:  # no shared folder: a small hand-made trace still exercises the scanner
        ev = [
            {"ph": "X", "cat": "kernel", "name": f"k{i}", "ts": i + 0.5, "dur": 1, "args": {"correlation": i}}
            for i in range(20)
        ]
        out.append(json.dumps({"traceEvents": ev, "deviceProperties": [{"id": 0}]}).encode())
    return out


SEED_DATA = _seed_bytes()


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEED_DATA)))
    for _ in range(draw(st.integers(0, 6))):
        if not data:
            break
        pos = draw(st.integers(0, len(data) - 1))
        op = draw(st.integers(0, 3))
        if op == 0:
            data[pos] = draw(st.sampled_from(list(STRUCTURAL)))
        elif op == 1:
            data[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif op == 2:
            del data[pos : pos + draw(st.integers(1, 40))]
        else:
            data[pos] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


def _check(data: bytes, salvage: bool) -> None:
    buf = np.frombuffer(data, np.uint8).copy()
    try:
        trace = parse_buffer(buf, path="fuzz.json", salvage=salvage)
    except aonkit.TraceFormatError as err:
        if "no 'traceEvents'" not in err.reason and "no trace events" not in err.reason:  # whole-document errors
            assert err.offset is not None and 0 <= err.offset <= len(data)
        outcome = "error"
    else:
        outcome = "ok"
        buf_, start, end = trace._raw.spans()
        assert np.all((0 <= start) & (start < end) & (end <= len(data)))
        for i in range(len(trace)):
            trace.event_json(i)  # every span is a complete JSON object
        arg_spans, _ = trace._arg_spans_of(["correlation", "bytes", "name"], None)
        found = arg_spans[:, :, 0] >= 0  # every value found lies inside its event
        assert np.all(~found | ((start[:, None] <= arg_spans[:, :, 0]) & (arg_spans[:, :, 1] <= end[:, None])))
        want = [e.get("args", {}).get("correlation") if isinstance(e.get("args"), dict) else None
                for e in (trace.event_json(i) for i in range(len(trace)))]  # fmt: skip
        assert trace.arg_values("correlation") == want
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return  # the scanner does not validate UTF-8 in text it does not decode
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        if not salvage:
            assert outcome == "error"
        return
    is_trace = isinstance(doc, list) or (isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list))
    if is_trace and not text.startswith("\ufeff"):
        events = doc if isinstance(doc, list) else doc["traceEvents"]
        n_events = sum(isinstance(e, dict) for e in events)
        assert outcome == ("ok" if n_events else "error")  # a trace without events is refused, never empty
        if n_events:
            assert len(trace) == n_events


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated(), salvage=st.booleans())
def test_mutated_traces_never_crash(data: bytes, salvage: bool) -> None:
    _check(data, salvage)


@pytest.mark.parametrize("seed", range(len(SEED_DATA)))
def test_every_truncation_of_a_real_trace(seed: int) -> None:
    data = SEED_DATA[seed]
    for k in range(0, len(data), max(1, len(data) // 400)):
        _check(data[:k], salvage=True)
        _check(data[:k], salvage=False)


def test_deep_nesting_is_an_error_not_a_crash(tmp_path: Path) -> None:
    p = tmp_path / "deep.json"
    p.write_text('{"traceEvents":[{"args":' + "[" * 20000 + "]" * 20000 + "}]}")
    with pytest.raises(aonkit.TraceFormatError, match="nested deeper"):
        aonkit.load(p)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated(), cuts=st.lists(st.integers(0, 6000), min_size=2, max_size=40))
def test_args_kernels_on_unchecked_bytes(data: bytes, cuts: list[int]) -> None:
    """find_args, args_starts, find_args_at and span_floats on any bytes and spans: in bounds, never a crash."""
    from aonkit._kernels.args import args_starts, find_args, find_args_at, span_floats

    buf = np.frombuffer(data, np.uint8).copy()
    n = len(buf)
    edges = np.sort(np.clip(np.array(cuts, np.int64), 0, n))
    start, end = edges[:-1].copy(), edges[1:].copy()
    keys = [b'"args"', b'"correlation"', b'"name"']
    key_off = np.cumsum([0] + [len(k) for k in keys]).astype(np.int64)
    flat = np.frombuffer(b"".join(keys), np.uint8).copy()
    out = find_args(buf, start, end, np.arange(len(start)), flat, key_off)
    hit = out[:, :, 0] >= 0
    assert np.all(~hit | ((start[:, None] <= out[:, :, 0]) & (out[:, :, 0] <= out[:, :, 1])
                          & (out[:, :, 1] <= end[:, None])))  # fmt: skip
    at = args_starts(buf, start, end)  # each an args object's '{' inside its event, or -1
    found = at >= 0
    assert np.all(~found | ((start <= at) & (at < end))) and (buf[at[found]] == ord("{")).all()
    direct = find_args_at(buf, end, at, np.arange(len(start)), flat, key_off)
    hit = direct[:, :, 0] >= 0
    assert np.all(~hit | ((start[:, None] <= direct[:, :, 0]) & (direct[:, :, 0] <= direct[:, :, 1])
                          & (direct[:, :, 1] <= end[:, None])))  # fmt: skip
    vals, ok = span_floats(buf, np.stack([start, end], axis=1))
    for s_, e_, v, good in zip(start.tolist(), end.tolist(), vals.tolist(), ok.tolist()):
        if good:
            assert float(json.loads(bytes(buf[s_:e_]))) == v
