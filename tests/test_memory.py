"""Memory timeline, peaks and the ops holding memory at the peak."""

from __future__ import annotations

import json

import numpy as np

import aonkit
from aonkit.analysis.memory import memory_events, memory_peaks

from .conftest import SAMPLE_TRACES, require_shared
from .naive import read_text


def test_memory_events_match_reference_totals() -> None:
    path = require_shared() / "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    t = aonkit.load(path)
    mem = memory_events(t)
    doc = json.loads(read_text(path))
    raw = sorted((e for e in doc["traceEvents"] if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    assert len(mem) == len(raw) == 2450
    assert mem["allocated_bytes"].tolist() == [e["args"]["Total Allocated"] for e in raw]
    assert mem["bytes"].tolist() == [e["args"]["Bytes"] for e in raw]
    peaks, holders = memory_peaks(t)
    gpu = peaks[peaks["device"] == 0].iloc[0]
    on_gpu = [e["args"]["Total Allocated"] for e in raw if e["args"]["Device Type"] == 1]
    assert gpu["peak_allocated_bytes"] == max(on_gpu)
    # the holders at the peak are the live allocations then: their bytes never exceed the peak
    assert 0 < holders[holders["device"] == 0]["bytes"].sum() <= gpu["peak_allocated_bytes"]


def test_peak_holders_against_naive_simulation() -> None:
    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    mem = memory_events(t)
    peaks, holders = memory_peaks(t, n=1000)
    for device, d in mem.groupby("device"):
        at = int(np.argmax(d["allocated_bytes"].to_numpy()))
        live = {}
        for a, b in zip(d["addr"][: at + 1], d["bytes"][: at + 1]):
            if b > 0:
                live[a] = b
            else:
                live.pop(a, None)
        assert holders[holders["device"] == device]["bytes"].sum() == sum(live.values())
    assert (holders["op_name"] != "(no op)").any()
