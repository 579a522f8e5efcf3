"""What a source gives a trace: event text through ``EventText``, samples through ``trace.samples``."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.sources.samplers import SAMPLE_COLUMNS, RingSampler, attach_samples, samples_table
from aonkit.trace import EventText, RawEvents, Trace, all_spans

from .conftest import ROOT, load_events

sys.path.insert(0, str(ROOT / "tools"))
from gen_nsys import METRICS, generate  # noqa: E402

EVENTS = [
    {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 10.0, "dur": 2.5, "args": {"n": 3}},
    {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 11.0, "dur": 1.0, "args": {"n": 4.5}},
    {"ph": "i", "cat": "x", "name": "c", "pid": 1, "tid": 1, "ts": 12.0, "s": "t"},
]


class ListText:
    """An ``EventText`` without one buffer: each event's text kept on its own, joined only for the rows asked."""

    def __init__(self, texts: list[bytes]) -> None:
        self.texts = texts
        self.asked: list[int | None] = []

    def select(self, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        rows = np.arange(len(self.texts)) if rows is None else np.asarray(rows, np.int64)
        self.asked.append(len(rows))
        chosen = [self.texts[int(r)] for r in rows[::-1]]  # stored in reverse: positions must be honoured
        ends = np.cumsum([len(t) for t in chosen]).astype(np.int64)
        buf = np.frombuffer(b"".join(chosen), np.uint8)
        return buf, ends - [len(t) for t in chosen], ends, np.arange(len(rows))[::-1].copy()

    def text(self, i: int) -> bytes:
        return self.texts[i]


def test_a_source_without_one_buffer_serves_every_text_reader(tmp_path: Path) -> None:
    # GIVEN a trace whose event text comes from an EventText that is not a RawEvents
    base = load_events(tmp_path, EVENTS)
    text: EventText = ListText([base.event_bytes(i) for i in range(len(base))])
    trace = Trace(base.events, base.meta, text)
    # THEN lossless access and the args readers see the same texts as the JSON reader's RawEvents
    assert isinstance(base._raw, RawEvents) and not isinstance(text, RawEvents)
    assert [trace.event_json(i) for i in range(3)] == [base.event_json(i) for i in range(3)]
    assert trace.arg_values("n", np.array([1, 0])) == [4.5, 3]
    np.testing.assert_array_equal(trace.arg_numbers("n"), base.arg_numbers("n"))
    assert text.asked[0] == 2  # two rows asked, two built: no whole buffer for a row query
    # and the cache saves it through select(None), in event order
    buf, start, end = all_spans(text)
    assert [buf[s:e].tobytes() for s, e in zip(start, end)] == text.texts
    cached = aonkit.load(trace.save(tmp_path / "t.aon.parquet"))
    assert [cached.event_bytes(i) for i in range(3)] == text.texts


class Fixed(RingSampler):
    """A sampler of two host metrics with set values and times (nothing runs)."""

    metrics = ("load", "mem")

    def __init__(self, ts: list[int]) -> None:
        super().__init__(capacity=16)
        for k, t in enumerate(ts):
            self._ts[k], self._values[k] = t, (k, 10 * k)
        self._count = len(ts)


def test_attach_samples_adds_a_sampler_to_a_trace_with_gpu_metrics(tmp_path: Path) -> None:
    # GIVEN an nsys export with GPU metric samples, and host samples taken over the same time
    trace = aonkit.load(generate(tmp_path / "m.sqlite", kernels=200, metrics=True))
    gpu = trace.samples
    assert gpu is not None and len(gpu)
    mid = int(gpu["ts_ns"].iloc[len(gpu) // 2])
    sampler = Fixed([mid - 5, mid, mid + 5])
    # WHEN the sampler is attached
    out = attach_samples(trace, sampler)
    # THEN trace.samples holds both, in time order, with the samples-table columns and dtypes
    assert out is trace.samples and list(out.columns) == list(SAMPLE_COLUMNS)
    assert len(out) == len(gpu) + 6 and out["ts_ns"].is_monotonic_increasing
    assert out["ts_ns"].dtype == np.int64 and out["device"].dtype == np.int64 and out["value"].dtype == np.float64
    cats = list(out["metric"].cat.categories)
    assert cats == [*gpu["metric"].cat.categories, "load", "mem"] and set(cats) <= {*METRICS, "load", "mem"}
    host = out[out["device"] == -1]
    assert host["metric"].astype(str).tolist() == ["load", "mem"] * 3 and host["value"].tolist() == [0, 0, 1, 10, 2, 20]
    # and a table attached with replace=True stands alone; the cache keeps it
    attach_samples(trace, sampler.read(1)[0], replace=True)
    assert trace.samples["ts_ns"].tolist() == [mid, mid, mid + 5, mid + 5]
    cached = aonkit.load(trace.save(tmp_path / "m.aon.parquet"))
    pd.testing.assert_frame_equal(cached.samples[["ts_ns", "value"]], trace.samples[["ts_ns", "value"]])


def test_samples_table_needs_the_columns() -> None:
    with pytest.raises(ValueError, match="missing"):
        samples_table(pd.DataFrame({"ts_ns": [1], "value": [2.0]}))
    t = samples_table(pd.DataFrame({"ts_ns": [5, 1], "device": [0, 0], "metric": ["b", "a"], "value": [1, 2]}))
    assert t["ts_ns"].tolist() == [1, 5] and isinstance(t["metric"].dtype, pd.CategoricalDtype)


def test_monitor_figures_come_from_views() -> None:
    from aonkit.views.monitor import monitor_view, wide

    channels = [(-1, "load"), (-1, "mem")]
    view = monitor_view(channels)
    assert [[m["y"] for m in c["marks"]] for c in view.charts] == [["load@-1"], ["mem@-1"]]
    assert all(c["x"] == {"type": "time", "label": "", "zoom": True} for c in view.charts)  # linked time axes
    data = wide(Fixed([1_000_000, 2_000_000]).read(0)[0], channels)
    assert data["t"].tolist() == [1.0, 2.0] and data["mem@-1"].tolist() == [0.0, 10.0]
