"""Launch-queue length per GPU stream in exact ns: aonkit's own semantics, next to HTA's.

Every GPU event (kernel, memcpy, memset) is one operation in its stream's
queue from its launch call's start until the event starts on the GPU. Unlike
HTA's counter (:func:`aonkit.analysis.hta_queues.queue_length_series`), this

- counts every GPU event once, also each kernel of a CUDA-graph launch (HTA
  adds one per launch call and subtracts one per kernel, so graphs drive its
  counter negative), whatever the launch API, CUDA or HIP;
- counts events launched before the profiling window from the window's
  start (they were in the queue already), instead of dropping them;
- uses exact ns and no last-step filter, and reports the level after all the
  changes at one instant, so ties between launches and starts have one answer.

Streams are keyed by (``device``, ``stream``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..trace import Trace
from .columns import pair_keys
from .correlation import gpu_launches
from .queue_sweep import numpy_queue_inputs, queue_sweep


def _queue_levels(trace: Trace, store: bool) -> tuple[np.ndarray, ...]:
    """The queue sweep per stream (:func:`aonkit._kernels.step_series.queue_levels`) and the streams' ids."""
    from .._kernels.step_series import queue_inputs
    from .standin import kernel_or_standin

    links = gpu_launches(trace)
    ev = trace.events
    ts = ev["ts_ns"].to_numpy()
    launch = links["launch_row"].to_numpy()
    window = 0  # the trace's first timestamp: where events launched before the window enter their queue
    if len(launch) and launch.min() < 0:
        valid = ts[ts != schema.TS_MISSING]  # rare: events without a time; the window starts at the first real one
        window = int(valid.min()) if len(valid) else 0
    up, down, before, device, stream = kernel_or_standin(
        queue_inputs, numpy_queue_inputs, links["gpu_row"].to_numpy(), launch, ts, ev["device"].to_numpy(),
        ev["stream"].to_numpy(), schema.TS_MISSING, window)  # fmt: skip
    keys, decode = pair_keys(device, stream)
    t, level, out_off, gkeys, ops, n_before, peak, mean = queue_sweep(keys, up, down, before, store)
    devices, streams = decode(gkeys)
    return t, level, out_off, devices, streams, ops, n_before, peak, mean


def queue_length_series(trace: Trace) -> pd.DataFrame:
    """Operations waiting in each stream's queue, as a step function in ns.

    One row per (``device``, ``stream``) and instant at which the length
    changes: ``ts_ns`` and ``queue_length`` (after every change at that
    instant); rows sorted by device, stream, time.

    Parameters
    ----------
    trace : Trace
        Any trace. Each GPU event (kernel, memcpy, memset) with a timestamp is queued from its launch call's
        start (or its own start, if earlier) until its own start; one without a launch call in the trace
        (``launch_row`` -1 in :func:`~aonkit.analysis.correlation.gpu_launches`) from the trace's first
        timestamp.

    Returns
    -------
    pandas.DataFrame
        ``device``, ``stream``, ``ts_ns`` (int64 ns) and ``queue_length`` (int64, operations queued after
        every change at ``ts_ns``).
    """
    t, level, out_off, devices, streams, *_ = _queue_levels(trace, True)
    reps = np.diff(out_off)
    return pd.DataFrame({"device": np.repeat(devices, reps), "stream": np.repeat(streams, reps), "ts_ns": t,
                         "queue_length": level}, copy=False)  # fmt: skip


def queue_length_summary(trace: Trace) -> pd.DataFrame:
    """Queue statistics per (``device``, ``stream``).

    Columns: ``ops`` (GPU events), ``launched_before_trace``,
    ``max_queue_length`` and ``mean_queue_length`` (time-weighted, from the
    stream's first change to its last).

    Parameters
    ----------
    trace : Trace
        Any trace; events are queued as in :func:`queue_length_series`.

    Returns
    -------
    pandas.DataFrame
        One row per (``device``, ``stream``), sorted by device then stream: ``device``, ``stream``, ``ops``
        (int64, GPU events with a timestamp), ``launched_before_trace`` (int64, those without a launch call in
        the trace), ``max_queue_length`` (int64) and ``mean_queue_length`` (float; NaN when the first and last
        change are at the same instant).
    """
    _, _, _, devices, streams, ops, n_before, peak, mean = _queue_levels(trace, False)
    return pd.DataFrame({"device": devices, "stream": streams, "ops": ops, "launched_before_trace": n_before,
                         "max_queue_length": peak, "mean_queue_length": mean}, copy=False)  # fmt: skip
