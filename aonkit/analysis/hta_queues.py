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
    from .group_order import group_time_order

    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}, not {ties!r}")
    stream, ts, corr = rank_columns(df, "stream", "ts", "correlation")
    codes, is_api = name_flags(df["name"], apis)
    # HTA counts a launch call only when it links to a GPU row past event 0
    linked = rank_columns(df, "index_correlation")[0] if "index_correlation" in df else None
    e_ts, e_stream, e_step = queue_events(stream, ts, corr, codes, is_api, linked)
    # launches come first in e_ts, so a stable order by time puts them first at a tie ("launch_first")
    pos, offsets, streams = group_time_order(e_stream, e_ts)
    if ties == "start_first" and _mixed_ties(e_ts[pos], e_step[pos], offsets):
        pos = np.lexsort((e_step, e_ts, e_stream)).astype(np.int64)  # -1 (a start) before +1 at a tie
    return e_ts, e_step, pos, offsets, streams


def queue_events(stream: np.ndarray, ts: np.ndarray, corr: np.ndarray, codes: np.ndarray, is_api: np.ndarray,
                 linked: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The +1/-1 events of HTA's queue length: launches first, then GPU starts, each in row order.

    Rows are one rank's events: ``stream`` (-1 on the CPU side), ``ts``,
    ``corr`` (correlation), and launch calls flagged per name code
    (``is_api[codes[i]]``; code -1 reads the last flag), and where ``linked``
    (HTA's ``index_correlation``) is given, only those with ``linked > 0``. Launches are
    CPU-side API rows whose correlation some GPU row has, each counted once
    per such GPU row, on that row's stream (HTA joins them), in GPU row
    order; GPU rows count when a launch has their correlation. Returns (ts,
    stream, step) of the events.
    """
    from .._kernels.queues import queue_event_arrays, queue_rows
    from .key_match import first_match, match_counts
    from .standin import kernel_or_standin

    use_linked = linked is not None
    g_corr, g_ts, g_stream, a_corr, a_ts = queue_rows(stream, ts, corr, np.ascontiguousarray(codes), is_api,
                                                      linked if use_linked else corr, use_linked)  # fmt: skip
    a_stream, launched = first_match(g_corr, g_stream, a_corr)
    l_corr = a_corr[launched]
    pairs = match_counts(l_corr, g_corr)  # per GPU row, the launches of its correlation
    counted = pairs > 0
    if int(pairs.sum()) == len(l_corr):  # one GPU row per launch (each has one at least), the usual case
        return kernel_or_standin(queue_event_arrays, _event_arrays, a_ts, a_stream, launched, g_ts, g_stream, counted)
    # HTA's join repeats a launch once per GPU row of its correlation, on that row's stream, in GPU row order
    reps = match_counts(g_corr, l_corr)
    order = np.argsort(g_corr, kind="stable")
    first = np.searchsorted(g_corr[order], l_corr)
    ends = np.cumsum(reps)
    at = np.repeat(first - ends + reps, reps) + np.arange(int(ends[-1]))
    up_ts, up_stream = np.repeat(a_ts[launched], reps), g_stream[order[at]]
    return _event_arrays(up_ts, up_stream, np.ones(len(up_ts), bool), g_ts, g_stream, counted)


def _event_arrays(up_ts: np.ndarray, up_stream: np.ndarray, launched: np.ndarray, g_ts: np.ndarray,
                  g_stream: np.ndarray, counted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`aonkit._kernels.queues.queue_event_arrays` in numpy (its stand-in, and the repeated launches' way)."""
    n_up, n_down = int(np.count_nonzero(launched)), int(np.count_nonzero(counted))
    e_step = np.concatenate([np.ones(n_up, np.int64), np.full(n_down, -1, np.int64)])
    return (np.concatenate([up_ts[launched], g_ts[counted]]).astype(np.int64, copy=False),
            np.concatenate([up_stream[launched], g_stream[counted]]).astype(np.int64, copy=False), e_step)  # fmt: skip


def _mixed_ties(t: np.ndarray, step: np.ndarray, offsets: np.ndarray) -> bool:
    """Whether a stream (``offsets``) has a launch and a GPU start at the same time (``t`` in stream order)."""
    tie = (t[1:] == t[:-1]) & (step[1:] != step[:-1])
    tie[offsets[1:-1] - 1] = False  # neighbours across a stream's end
    return bool(tie.any())


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
    from .._kernels.queues import levels
    from .describe_stats import describe

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
