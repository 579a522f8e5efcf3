"""Parquet cache round trips: equal events, metadata, warnings and lossless event text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aonkit
from aonkit.cache import sidecar_path

from .conftest import SAMPLE_TRACES, SHARED_TRACES

CASES = [
    "kineto-plugin-2020/samples/resnet50_num_workers_0/worker0.pt.trace.json.gz",  # string tids, 2020 names
    "hta/large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz",  # uint64 args
    "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",  # base time, metadata block
    "hta/execution_trace/benchmark_simple_add_trace.json.gz",
]


def _roundtrip(src: Path, tmp_path: Path) -> tuple[aonkit.Trace, aonkit.Trace]:
    t = aonkit.load(src)
    out = t.save(tmp_path / "c.parquet")
    assert out.exists() and sidecar_path(out).exists()
    return t, aonkit.load(out)


def _shared_roundtrip(rel: str, tmp_path: Path) -> tuple[aonkit.Trace, aonkit.Trace]:
    """:func:`_roundtrip` of a shared trace; the test skips when ``../shared`` lacks it."""
    src = SHARED_TRACES / rel
    if not src.exists():
        pytest.skip(f"shared trace {src} not found")
    return _roundtrip(src, tmp_path)


@pytest.mark.parametrize("rel", CASES)
def test_cache_roundtrip_shared(tmp_path: Path, rel: str) -> None:
    t, c = _shared_roundtrip(rel, tmp_path)
    assert c.equals(t)
    assert c.events["pid"].tolist() == t.events["pid"].tolist()  # ints stay ints, strings stay strings
    assert c.warnings == t.warnings and c.meta.rank == t.meta.rank
    for i in range(0, len(t), max(1, len(t) // 50)):
        assert c.event_json(i) == t.event_json(i)


def test_cache_roundtrip_sample_and_salvaged(tmp_path: Path) -> None:
    src = SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"
    t, c = _roundtrip(src, tmp_path)
    assert c.equals(t) and len(c.kernels) == len(t.kernels)
    cut = tmp_path / "cut.json"
    text = json.dumps({"traceEvents": [{"ph": "X", "ts": i, "args": {"Comms Id": 2**64 - 1}} for i in range(9)]})
    cut.write_text(text[: len(text) // 2])
    s = aonkit.load(cut, salvage=True)
    s.save(tmp_path / "s.parquet")
    back = aonkit.load(tmp_path / "s.parquet")
    assert back.equals(s) and back.warnings == s.warnings and back.event_args(0)["Comms Id"] == 2**64 - 1


def test_cache_without_sidecar_is_a_clear_error(tmp_path: Path) -> None:
    t = aonkit.load(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz")
    out = t.save(tmp_path / "x.parquet")
    sidecar_path(out).unlink()
    with pytest.raises(aonkit.TraceFormatError, match="sidecar"):
        aonkit.load(out)


@pytest.mark.parametrize("rel", CASES)
def test_cache_keeps_args_offsets(tmp_path: Path, rel: str) -> None:
    """The cache stores where each event's args start: equal to a fresh walk of the text, so look-ups skip it."""
    import numpy as np

    from aonkit._kernels.args import args_starts

    t, c = _shared_roundtrip(rel, tmp_path)
    c._raw._ensure()  # the text is read: the offsets come with it, no walk
    assert c._raw._args_at is not None
    at = c._raw.args_offsets()
    buf, start, end = c._raw.spans()
    assert np.array_equal(at, args_starts(buf, np.ascontiguousarray(start), np.ascontiguousarray(end)))
    rows = np.arange(0, len(t), max(1, len(t) // 200))
    for key in ("correlation", "External id", "stream"):
        assert c.arg_values(key, rows) == t.arg_values(key, rows)


def test_cache_without_args_offsets_still_reads(tmp_path: Path) -> None:
    """A cache text without ``args_rel`` (as nsys writes it; rewritten here, the sidecar re-signed) reads the same."""
    import pyarrow.parquet as pq

    from aonkit._filecheck import crc32_buffer
    from aonkit.cache import _check, text_path

    t, _ = _roundtrip(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz", tmp_path)
    path = tmp_path / "c.parquet"
    text = text_path(path)
    pq.write_table(pq.read_table(text).drop_columns(["args_rel"]), text)
    side = json.loads(sidecar_path(path).read_text())
    side.pop("check")
    side["text"] = _check(text)
    side["check"] = crc32_buffer(json.dumps(side).encode())
    sidecar_path(path).write_text(json.dumps(side))
    old = aonkit.load(path)
    old._raw._ensure()
    assert old.equals(t) and old._raw._args_at is None  # found by a walk on the first look-up
    rows = t.kernels.index.to_numpy()
    assert old.arg_values("correlation", rows) == t.arg_values("correlation", rows)
