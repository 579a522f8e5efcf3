"""HTA 0.5.0's preparation of each rank's events: the frames every HTA-semantics table is computed from.

HTA prepares each rank's events before any analysis; :func:`hta_frames` does
the same from aonkit's events table:

=====================  ==========================================================
HTA step               here
=====================  ==========================================================
drop events without    rows without a duration (``dur_ns < 0``: absent, or negative
``dur`` / ``cat``      in the file), no ``cat`` or ``cat == "Trace"`` are dropped (so
                       flows, instants and metadata go). HTA keeps a negative ``dur``
                       and sums it; aonkit does not (docs/hta-compat.md)
float rounding         ``ts = ceil(ts)``, ``end = floor(ts + dur)`` in µs, computed
                       exactly from the file's ns (HTA rounds float64 µs, which can
                       differ by 1 µs on epoch-µs traces)
alignment              ``ts -= min(ts over all ranks)`` of the file's own ``ts``
                       (relative to ``baseTimeNanoseconds`` when present)
last-step filter       with more than one ``ProfilerStep#N`` name in the job,
                       CPU-side rows starting at or after the rank's last step are
                       dropped, and GPU-side rows (a stream and a correlation, or a
                       sync) are kept only when their ``correlation`` matches a kept
                       CPU-side row
GPU rows               ``stream != -1``
launch of a GPU row    HTA's ``index_correlation``, taken before the last-step
                       filter: the *last* CPU-side row with the GPU row's
                       correlation, event 0 when none has it, none for -1
=====================  ==========================================================

Frames have ``index`` (the row in ``trace.events``), int64 ``ts``, ``dur``,
``end`` (µs, aligned), ``stream``, ``correlation``, ``device``, ``pid``/``tid``
as in the trace, str ``name``, ``cat`` and ``kernel_type``, for memory
operations ``memory_bw_gbps`` (the profiler's ``memory bandwidth (GB/s)`` arg),
and ``index_correlation``: the ``index`` of the row HTA links across CPU and
GPU (a GPU row's launch call, a launch call's GPU row; see
:func:`index_correlation`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..trace import Trace
from ..traceset import TraceSet
from .columns import code_flags

COMMUNICATION = "COMMUNICATION"
MEMORY = "MEMORY"
COMPUTATION = "COMPUTATION"
OTHER = "OTHER"
_COMM_RE = re.compile(r"^nccl.*Kernel")
_MEM_RE = re.compile(r"^Memcpy|^Memset|^dma")
# HTA's test for a compute kernel, kept as HTA writes it: a name that contains "Memcpy" or "Sync", or starts
# with "Memset", is not compute ("Stream Sync", "Context Sync" and "Event Sync" rows have a stream)
_NOT_COMPUTE_RE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
_STEP_RE = re.compile(r"ProfilerStep")
#: Categories of the GPU rows in HTA's idle-time breakdown (``cuda_sync`` and annotations are left out).
IDLE_KERNEL_CATS = ("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events")
_SYNC_NAMES = ("Event Sync", "Context Sync")  # GPU-side rows for HTA's correlation join, whatever their stream


def kernel_type(name: str) -> str:
    """HTA's kernel class of a GPU event name: communication, memory, computation, or other (e.g. syncs)."""
    if _COMM_RE.match(name):
        return COMMUNICATION
    if _MEM_RE.match(name):
        return MEMORY
    if _NOT_COMPUTE_RE.match(name):
        return OTHER
    return COMPUTATION


def _as_mapping(traces: Trace | TraceSet | Mapping[int, Trace]) -> Mapping[int, Trace]:
    if isinstance(traces, Trace):
        return {traces.meta.rank if traces.meta.rank is not None else 0: traces}
    return traces


def _one_rank(trace: Trace) -> dict[str, np.ndarray | pd.Categorical]:
    """The columns of one rank's frame, before alignment and the last-step filter."""
    full = trace.events
    cat_codes, not_trace = code_flags(full["cat"], lambda c: c != "Trace")
    keep = (full["dur_ns"].to_numpy() >= 0) & (cat_codes >= 0) & not_trace[cat_codes]
    index = np.flatnonzero(keep)
    # only the columns HTA's frame uses, each taken once (not the whole table filtered)
    ev = {c: full[c].to_numpy()[index] for c in ("ts_ns", "dur_ns", "stream", "device", "correlation")}
    ev.update({c: full[c].array.take(index) for c in ("name", "cat", "pid", "tid")})
    base = trace.meta.base_time_ns or 0
    t0 = ev["ts_ns"] - base
    end_ns = t0 + ev["dur_ns"]
    ts = -((-t0) // 1000)  # ceil
    end = end_ns // 1000  # floor
    names = _names_filled(ev["name"])
    kinds = np.array([TYPE_CODE[kernel_type(c)] for c in names.categories], dtype=np.int8)
    kind = (
        pd.Categorical.from_codes(kinds[names.codes], categories=list(TYPE_CODE))
        if len(kinds)
        else (pd.Categorical([], categories=list(TYPE_CODE)))
    )
    bw = np.full(index.shape[0], np.nan)
    mem = (np.asarray(kind.codes) == TYPE_CODE[MEMORY]) & (ev["stream"] != -1)
    if mem.any():
        bw[mem] = trace.arg_numbers("memory bandwidth (GB/s)", index[mem])
    linked = index_correlation(index, ev["stream"], ev["correlation"], names)
    return {"index": index, "ts": ts, "dur": end - ts, "end": end, "name": names, "cat": ev["cat"], "pid": ev["pid"],
            "tid": ev["tid"], "stream": ev["stream"], "device": ev["device"], "correlation": ev["correlation"],
            "kernel_type": kind, "memory_bw_gbps": bw, "index_correlation": linked}  # fmt: skip


def index_correlation(index: np.ndarray, stream: np.ndarray, corr: np.ndarray, names: pd.Categorical) -> np.ndarray:
    """HTA 0.5.0's ``index_correlation``: per row, the ``index`` of its linked row across CPU and GPU.

    HTA merges CPU-side rows (a correlation, not GPU-side) with GPU-side rows
    (``stream >= 0`` and ``correlation >= 0``, or named ``Event Sync`` /
    ``Context Sync``) on correlation and writes the pairs in CPU row order, so
    a GPU row with several CPU rows keeps the *last* one, and a CPU row with
    several GPU rows (a graph launch) its last GPU row. A row with a
    correlation that matches nothing gets 0, which HTA then reads as the label
    of the file's first event (``index`` 0: a launch only when that event is
    in the frame, and a launch call linked to event 0 is not counted as a
    launch at all); a correlation of -1 links nothing (-1 here).
    """
    from .key_match import first_match

    corr = np.asarray(corr, dtype=np.int64)
    linked = corr != -1
    gpu_side = linked & _gpu_side(stream, corr, names)
    out = np.where(linked & (corr >= 0), 0, -1).astype(np.int64)
    # backwards: the first match in reversed order is the last row
    for probe, keys in ((np.flatnonzero(gpu_side), np.flatnonzero(linked & ~gpu_side)[::-1]),
                        (np.flatnonzero(linked & ~gpu_side), np.flatnonzero(gpu_side)[::-1])):  # fmt: skip
        pos, found = first_match(corr[keys], keys, corr[probe])
        out[probe[found]] = index[pos[found]]
    return out


TYPE_CODE = {COMPUTATION: 0, COMMUNICATION: 1, MEMORY: 2, OTHER: 3}
"""Code of each kernel type in the frames' ``kernel_type`` categorical (and HTA's overlap-label order)."""


def _names_filled(col: pd.Series | pd.Categorical) -> pd.Categorical:
    """The name column as a categorical of str with missing names as ``""`` (HTA's empty symbol)."""
    cat = col.array if isinstance(col, pd.Series) else col
    cats = list(cat.categories.astype(str))
    codes = np.asarray(cat.codes)
    if (codes < 0).any():
        if "" not in cats:
            cats.append("")
        codes = np.where(codes < 0, cats.index(""), codes)
    return pd.Categorical.from_codes(codes, categories=pd.Index(cats, dtype="str"), validate=False)


def _gpu_side(stream: np.ndarray, corr: np.ndarray, names: pd.Categorical) -> np.ndarray:
    """HTA's ``GPUKernelFilter``: a stream and a correlation (both >= 0), or an ``Event Sync``/``Context Sync`` row.

    Everything else is CPU-side for HTA's correlation join and last-step
    filter, GPU annotations without a correlation included.
    """
    codes, sync = code_flags(pd.Series(names), lambda c: c in _SYNC_NAMES)
    stream = np.asarray(stream, dtype=np.int64)
    corr = np.asarray(corr, dtype=np.int64)
    return ((stream >= 0) & (corr >= 0)) | sync[codes]


def _step_names(cols: Mapping[str, np.ndarray | pd.Categorical]) -> set[str]:
    """Names holding ``ProfilerStep`` among the rank's rows (HTA looks them up in its shared symbol table)."""
    codes, flags = code_flags(pd.Series(cols["name"]), lambda c: bool(_STEP_RE.search(str(c))))
    cats = cols["name"].categories
    return {str(cats[c]) for c in np.unique(codes[flags[codes]])}


def _last_step_rows(cols: Mapping[str, np.ndarray | pd.Categorical], steps: set[str]) -> np.ndarray:
    """The rows HTA's last-step filter keeps, from a rank's columns (used when ``steps``, all ranks', has > 1 name).

    CPU-side rows (:func:`_gpu_side`) that start before the last step of this
    rank's CPU-side rows (none when it has no step: HTA compares with NaN),
    and GPU-side rows whose correlation matches a kept CPU-side row. As HTA's
    ``merge``: GPU rows first, each repeated once per CPU row with its
    correlation, then the CPU rows.
    """
    from .key_match import match_counts

    is_cpu = ~_gpu_side(cols["stream"], cols["correlation"], cols["name"])
    codes, step_name = code_flags(pd.Series(cols["name"]), lambda c: str(c) in steps)
    is_step = is_cpu & step_name[codes]
    ts = cols["ts"]
    cpu_rows = np.flatnonzero(is_cpu & (ts < ts[is_step].max())) if is_step.any() else np.empty(0, np.int64)
    gpu_rows = np.flatnonzero(~is_cpu)
    corr = cols["correlation"].astype(np.int64, copy=False)
    reps = match_counts(corr[cpu_rows], corr[gpu_rows])
    return np.concatenate([np.repeat(gpu_rows, reps), cpu_rows])


def hta_frames(
    traces: Trace | TraceSet | Mapping[int, Trace], include_last_step: bool = False
) -> dict[int, pd.DataFrame]:
    """Per-rank event frames prepared exactly as HTA 0.5.0 prepares them (see module doc).

    Each column is taken once: the last-step filter picks its rows from the
    columns before the frame is built.
    """
    ranks = {rank: _one_rank(t) for rank, t in _as_mapping(traces).items()}
    steps = set().union(*(_step_names(c) for c in ranks.values())) if not include_last_step else set()
    lows = [int(c["ts"].min()) for c in ranks.values() if len(c["ts"])]
    low = min(lows) if lows else 0
    out = {}
    for rank, cols in ranks.items():
        if len(steps) > 1:  # HTA filters only with more than one step name in the job
            rows = _last_step_rows(cols, steps)
            cols = {k: v.take(rows) for k, v in cols.items()}
        cols["ts"] = cols["ts"] - low
        cols["end"] = cols["end"] - low
        out[rank] = pd.DataFrame(cols, copy=False)
    return out


def gpu_rows(df: pd.DataFrame) -> pd.DataFrame:
    """HTA's GPU events: rows with a stream."""
    return df[df["stream"] != -1]


def hta_merge(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """HTA's ``merge_kernel_intervals``: (start, end) of each group of intervals, in time order.

    Intervals are taken by start; a new group begins where a start passes
    every earlier end, and a group spans its first start to its largest end.
    After HTA's µs rounding a sub-µs event can end before it starts; such an
    interval alone in its group has a negative length, and HTA sums it so.
    """
    if len(ts) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    order = np.argsort(ts, kind="stable")
    ts = np.asarray(ts, dtype=np.int64)[order]
    end = np.asarray(end, dtype=np.int64)[order]
    new = np.ones(ts.shape[0], bool)
    new[1:] = ts[1:] > np.maximum.accumulate(end)[:-1]
    first = np.flatnonzero(new)
    return ts[first], np.maximum.reduceat(end, first)


def union_us(df: pd.DataFrame, clamp: bool = False) -> int:
    """Length of the union of the rows' [ts, end) intervals, summed over HTA's groups (:func:`hta_merge`).

    With ``clamp``, intervals that end before they start cover nothing
    instead of counting negative.
    """
    ts, end = df["ts"].to_numpy(), df["end"].to_numpy()
    starts, ends = hta_merge(ts, np.maximum(end, ts) if clamp else end)
    return int((ends - starts).sum())
