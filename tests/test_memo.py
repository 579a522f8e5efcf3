"""The per-trace memo of derived tables (gpu_launches, gpu_links, gpu_table, copies)."""

from __future__ import annotations

import gc

import numpy as np
import pandas as pd

import aonkit
from aonkit.analysis import correlation, kernels, memo

from .conftest import SAMPLE_TRACES


def _trace() -> aonkit.Trace:
    return aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")


def test_gpu_links_computed_once_per_events_table(monkeypatch) -> None:
    t = _trace()
    calls, joins = [], []
    real, real_join = correlation._gpu_links, correlation._gpu_launches
    monkeypatch.setattr(correlation, "_gpu_links", lambda tr: calls.append(1) or real(tr))
    monkeypatch.setattr(correlation, "_gpu_launches", lambda tr: joins.append(1) or real_join(tr))
    first = correlation.gpu_links(t)
    kernels.gpu_time_per_op(t)
    kernels.launch_stats(t)  # needs only the correlation join, which gpu_links made and shares
    assert len(calls) == 1 and len(joins) == 1 and memo.size(t) == 3  # links, the join and the op stack
    pd.testing.assert_frame_equal(correlation.gpu_links(t), first)
    t.events = t.events.copy()  # a new events table: recomputed
    correlation.gpu_links(t)
    assert len(calls) == 2
    memo.clear(t)
    assert memo.size(t) == 0
    correlation.gpu_links(t)
    assert len(calls) == 3


def test_callers_cannot_change_the_remembered_table() -> None:
    t = _trace()
    a = correlation.gpu_links(t)
    before = a.copy()
    a["launch_row"] = -7
    a.loc[0, "op_row"] = 123
    pd.testing.assert_frame_equal(correlation.gpu_links(t), before)


def test_gpu_table_keyed_by_pattern() -> None:
    import re

    t = _trace()
    default = kernels.gpu_table(t)
    none = kernels.gpu_table(t, re.compile("^$"))
    assert memo.size(t) == 3  # one table per pattern, and the GPU rows (gpu_launches) they share
    assert (none["class"] != "communication").all() and (default["class"] == "communication").any()
    np.testing.assert_array_equal(kernels.gpu_table(t)["class"], default["class"])


def test_memo_does_not_keep_traces_alive() -> None:
    t = _trace()
    correlation.gpu_links(t)
    n = len(memo._MEMO)
    del t
    gc.collect()
    assert len(memo._MEMO) == n - 1


def test_names_of_matches_object_conversion() -> None:
    t = _trace()
    rows = np.arange(0, len(t), 7)
    want = t.events["name"].astype(object).to_numpy()[rows]
    got = kernels.names_of(t.events, rows)
    assert [str(x) for x in got] == [str(x) for x in want]


def test_copies_read_once_for_summary_and_series(monkeypatch) -> None:
    from aonkit.analysis import bandwidth

    t = _trace()
    reads = []
    real = bandwidth._copies
    monkeypatch.setattr(bandwidth, "_copies", lambda tr: reads.append(1) or real(tr))
    summary = bandwidth.memory_bandwidth_summary(t)
    series = bandwidth.memory_bandwidth_series(t)
    assert len(reads) == 1 and len(summary) and len(series)
    memo.clear(t)
    pd.testing.assert_frame_equal(bandwidth.memory_bandwidth_summary(t), summary)
    assert len(reads) == 2
