"""Column specifications of aonkit's tables: names, dtypes, units and sentinels.

Events table (``Trace.events``): one row per element of the file's
``traceEvents`` array, in file order.

============  ==========  ======================================================
column        dtype       meaning
============  ==========  ======================================================
ph            category    phase: ``X`` complete, ``i`` instant, ``s``/``f`` flow,
                          ``M`` metadata, ``C`` counter, ...; NA when absent
cat           category    category (``cpu_op``, ``kernel``, ``cuda_runtime``...)
name          category    event name
pid           category    process id; categories are the file's values, ints
                          stay ints and strings (``"Spans"``) stay strings
tid           category    thread id or GPU stream (``7`` or ``"stream 7"``)
ts_ns         int64       absolute start in ns: ``baseTimeNanoseconds +
                          ts*1000``, exact from the decimal text (rounded half
                          to even below 1 ns); ``TS_MISSING`` when absent
dur_ns        int64       duration in ns; -1 when absent or negative in the
                          file (a load warning says so): sum ``dur_ns >= 0``
correlation   int64       ``args.correlation`` (runtime call <-> GPU event); -1
external_id   int64       ``args["External id"]`` or old ``"external id"``; -1
stream        int64       ``args.stream``; -1 when absent or not an integer
device        int64       ``args.device``; -1
id            int64       flow id (``s``/``f`` events); -1
bp            category    flow binding point (``"e"``); NA when absent
============  ==========  ======================================================

Integer columns hold a value only when the JSON token is an integer that fits
int64; anything else (absent, string, float, larger than int64) is -1 and the
original stays reachable through ``Trace.event_args(i)`` / ``Trace.event_json(i)``.
"""

from __future__ import annotations

import numpy as np

TS_MISSING: int = int(np.iinfo(np.int64).min)
"""Sentinel of ``ts_ns`` for events without a usable ``ts``."""


def first_ts(ts: np.ndarray) -> int:
    """The earliest timestamp of ``ts_ns`` values, ignoring ``TS_MISSING`` (``TS_MISSING`` when none is left)."""
    ts = ts[ts != TS_MISSING]
    return int(ts.min()) if len(ts) else TS_MISSING


CATEGORY_COLUMNS: tuple[str, ...] = ("ph", "cat", "name", "pid", "tid", "bp")
INT_COLUMNS: tuple[str, ...] = ("ts_ns", "dur_ns", "correlation", "external_id", "stream", "device", "id")
EVENT_COLUMNS: tuple[str, ...] = (
    "ph", "cat", "name", "pid", "tid", "ts_ns", "dur_ns",
    "correlation", "external_id", "stream", "device", "id", "bp",
)  # fmt: skip

# Category names across Kineto eras (2020-21 files use capitalised names).
KERNEL_CATS = frozenset({"kernel", "Kernel"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "Memcpy"})
MEMSET_CATS = frozenset({"gpu_memset", "Memset"})
GPU_CATS = KERNEL_CATS | MEMCPY_CATS | MEMSET_CATS
CPU_OP_CATS = frozenset({"cpu_op", "Operator"})
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "Driver", "mtia_runtime"})
FLOW_PHASES = frozenset({"s", "t", "f"})
