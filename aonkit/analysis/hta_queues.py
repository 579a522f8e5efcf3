"""HTA 0.5.0's launch-queue lengths per stream, in Numba (:mod:`aonkit._kernels.queues`).

Queue length counts +1 at each launch call and -1 when its GPU event starts,
per stream, in time order. HTA orders the events with numpy's default
(unstable) sort, so when a launch and a GPU start of one stream fall on the
same µs their order, and the counter, is whatever that sort gives: it
differs between numpy builds and CPUs (AVX-512, AVX2 or neither). aonkit
orders such ties by a fixed rule instead, the same on every machine: HTA's
row order (launch calls first, as a stable sort of HTA's frame would give)
by default, or GPU starts first with ``ties="start_first"``. The two rules
are the extremes: at every position the counter of any tie order lies
between them, so HTA's value on any machine does too (the golden tests check
that). Without such ties every order gives HTA's result exactly.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .columns import name_flags, rank_columns

# launch calls that HTA 0.5.0 counts in queue lengths (not cudaGraphLaunch, not hipExtLaunchKernel)
QUEUE_APIS = (
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
    "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemcpyWithStream", "hipMemcpyAsync", "hipMemsetAsync",
)  # fmt: skip

_STATS = ["count", "mean", "std", "min", "25%", "50%", "75%", "max"]


TIES = ("launch_first", "start_first")


def _rank_queues(df: pd.DataFrame, apis: tuple[str, ...], ties: str) -> tuple[np.ndarray, ...]:
    """Events (ts, step) of one rank and their order: positions, stream offsets, stream values (ascending)."""
    from .._kernels.queues import by_stream, queue_events, stable_time_order

    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}, not {ties!r}")
    stream, ts, corr = rank_columns(df, "stream", "ts", "correlation")
    codes, is_api = name_flags(df["name"], apis)
    if "index_correlation" in df:  # HTA counts a launch call only when it links to a GPU row past event 0
        codes = np.where(df["index_correlation"].to_numpy() > 0, codes, -1)
    e_ts, e_stream, e_step = queue_events(stream, ts, corr, np.ascontiguousarray(codes), is_api)
    pos, offsets, streams, mixed = stable_time_order(e_ts, e_stream, e_step)
    if mixed:  # a launch and a GPU start tie in a stream (the order above is then incomplete)
        # launches come first in e_ts, so a stable sort puts them first at a tie
        order = np.argsort(e_ts, kind="stable") if ties == "launch_first" else np.lexsort((e_step, e_ts))
        pos, offsets, streams = by_stream(order, e_stream)
    return e_ts, e_step, pos, offsets, streams


def _tables(frames: Mapping[int, pd.DataFrame], apis: tuple[str, ...], ties: str) -> list[np.ndarray]:
    from .._kernels.queues import queue_table

    return [queue_table(int(rank), *_rank_queues(df, apis, ties)) for rank, df in frames.items()]


def queue_length_series(
    frames: Mapping[int, pd.DataFrame], apis: tuple[str, ...] = QUEUE_APIS, ties: str = "launch_first"
) -> pd.DataFrame:
    """Outstanding GPU operations per stream: +1 at each launch call, -1 at each GPU event start.

    Launch calls are the CPU-side events named in ``apis`` whose correlation
    matches a GPU event (and, in frames with HTA's ``index_correlation``,
    whose linked row is not event 0, as HTA's query has it); GPU events count
    when their launch does. A launch
    and a GPU start of one stream at the same µs are ordered by ``ties``
    (see the module doc), never by the CPU's sort.

    One row per change: ``rank``, ``ts`` (µs), ``stream``, ``queue_length``;
    per rank, streams ascending, each in time order.
    """
    parts = _tables(frames, apis, ties)
    cols = ["rank", "ts", "stream", "queue_length"]
    if not sum(p.shape[1] for p in parts):
        return pd.DataFrame(columns=cols)
    table = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
    return pd.DataFrame(table.T, columns=cols, copy=False)


def queue_length_summary(
    frames: Mapping[int, pd.DataFrame], apis: tuple[str, ...] = QUEUE_APIS, ties: str = "launch_first"
) -> pd.DataFrame:
    """HTA's ``get_queue_length_summary``: ``describe()`` of the queue length per rank and stream.

    Indexed by (``rank``, ``stream``), sorted; the statistics equal pandas'
    ``describe()`` bit for bit. ``ties`` as in :func:`queue_length_series`.
    """
    from .._kernels.describe import describe
    from .._kernels.queues import levels

    keys, rows = [], []
    for rank, df in frames.items():
        _, e_step, pos, offsets, streams = _rank_queues(df, apis, ties)
        level = levels(e_step, pos, offsets)
        for s in range(len(streams)):
            keys.append((rank, int(streams[s])))
            rows.append(describe(level[offsets[s] : offsets[s + 1]], False))
    if not rows:
        return queue_length_series(frames, apis, ties).groupby(["rank", "stream"])["queue_length"].describe()
    order = sorted(range(len(keys)), key=keys.__getitem__)
    index = pd.MultiIndex.from_tuples([keys[i] for i in order], names=["rank", "stream"])
    return pd.DataFrame(np.array([rows[i] for i in order]), index=index, columns=_STATS)


def time_blocked_on_full_queue(frames: Mapping[int, pd.DataFrame], max_queue_length: int = 1024) -> pd.DataFrame:
    """HTA's ``get_time_spent_blocked_on_full_queue``: time each stream's launch queue was full (µs, share)."""
    series = queue_length_series(frames)
    rows = []
    for (rank, stream), s in series.groupby(["rank", "stream"]):
        dur = s["ts"].shift(-1) - s["ts"]
        full = dur[s["queue_length"] >= max_queue_length].sum()
        if full > 0:
            df = frames[rank]
            span = df["end"].max() - df["ts"].min()
            rows.append((rank, stream, full, full / span if span else 0.0))
    return pd.DataFrame(rows, columns=["rank", "stream", "duration_at_max_queue_length",
                                       "relative_duration_at_max_queue_length"])  # fmt: skip
