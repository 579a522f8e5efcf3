"""aonkit's own GPU breakdowns in ns: kernel classes, per-name statistics, GPU time per CPU op, launches.

Unlike the HTA-compatible functions these keep exact ns, keep every kernel
(no ``others`` lumping, no last-step filter) and recognise communication
kernels by a configurable rule that covers NCCL, RCCL and friends.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pandas as pd

from .. import schema
from .._kernels.inputs import frozen
from ..trace import Trace
from .columns import names_of
from .correlation import gpu_launches, gpu_links

COMM_PATTERN = re.compile(
    r"nccl|rccl|ncclDevKernel|ncclKernel|AllReduce|AllGather|ReduceScatter|SendRecv|all_reduce|all_gather"
    r"|reduce_scatter|alltoall|AllToAll|c10d|gloo|mscclKernel|cross_device_reduce",
    re.IGNORECASE,
)
"""Default rule for communication kernels (override with ``comm_pattern=``)."""

CUDA_LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                 "cudaMemcpyAsync", "cudaMemsetAsync", "cudaGraphLaunch")  # fmt: skip
HIP_LAUNCHES = ("hipLaunchKernel", "hipExtLaunchKernel", "hipExtModuleLaunchKernel", "hipModuleLaunchKernel",
                "hipMemcpyAsync", "hipMemcpyWithStream", "hipMemsetAsync", "hipGraphLaunch")  # fmt: skip


@functools.lru_cache(maxsize=1 << 16)
def kernel_class(cat: str, name: str, comm_pattern: re.Pattern[str] = COMM_PATTERN) -> str:
    """``communication``, ``memory`` (copies and sets) or ``computation`` (remembered per name and rule)."""
    if cat in schema.MEMCPY_CATS or cat in schema.MEMSET_CATS:
        return "memory"
    return "communication" if comm_pattern.search(name) else "computation"


_CLASSES = pd.CategoricalDtype(["communication", "computation", "memory"])


def gpu_table(trace: Trace, comm_pattern: re.Pattern[str] = COMM_PATTERN) -> pd.DataFrame:
    """GPU events with ``name`` (categorical), ``class``, ``device``, ``stream``, ``ts_ns``, ``dur_ns``, ``end_ns``.

    The class is decided once per distinct (category, name) pair, not per
    event. Remembered per trace and pattern (:mod:`aonkit.analysis.memo`).

    Parameters
    ----------
    trace : Trace
        Any trace; its GPU events (kernels, memcpys, memsets) with a duration (``dur_ns >= 0``) are kept.
    comm_pattern : re.Pattern
        Names (searched anywhere in the name) that make a kernel ``communication``; default
        :data:`COMM_PATTERN` (NCCL, RCCL, gloo, c10d and the like).

    Returns
    -------
    pandas.DataFrame
        One row per kept GPU event, indexed by its row in ``trace.events``, in that order: ``name``
        (categorical, the events' categories), ``class`` (categorical: ``communication``, ``computation``
        or ``memory``; memcpys and memsets are ``memory`` whatever their name), ``device``, ``stream``,
        ``ts_ns``, ``dur_ns`` and ``end_ns`` (``ts_ns + dur_ns``; int64 ns).
    """
    from .memo import remembered

    key = ("gpu_table", comm_pattern.pattern, comm_pattern.flags)
    return remembered(trace, key, lambda: _gpu_table(trace, comm_pattern))


def gpu_class_table(trace: Trace, cls: str, comm_pattern: re.Pattern[str] = COMM_PATTERN) -> pd.DataFrame:
    """The rows of :func:`gpu_table` whose ``class`` is ``cls``, with its columns and index.

    Made for those rows alone unless the whole table is remembered already (a rank's communication kernels
    are a few of its GPU events: the whole table, then a mask, cost more than the rows themselves).

    Parameters
    ----------
    trace : Trace
        Any trace.
    cls : str
        ``communication``, ``computation`` or ``memory``.
    comm_pattern : re.Pattern
        As for :func:`gpu_table`.

    Returns
    -------
    pandas.DataFrame
        ``gpu_table(trace, comm_pattern)`` where ``class == cls``: the same columns, dtypes and index.
    """
    from .memo import peek

    if cls not in _CLASSES.categories:
        raise ValueError(f"no kernel class {cls!r}; the classes are {', '.join(_CLASSES.categories)}")
    whole = peek(trace, ("gpu_table", comm_pattern.pattern, comm_pattern.flags))
    if whole is not None:
        return whole[whole["class"] == cls]
    cols = _gpu_arrays(trace, comm_pattern)
    return _gpu_frame(trace, cols, np.flatnonzero(cols[-1] == _CLASSES.categories.get_loc(cls)))


def _gpu_table(trace: Trace, comm_pattern: re.Pattern[str]) -> pd.DataFrame:
    return _gpu_frame(trace, _gpu_arrays(trace, comm_pattern), None)


def _gpu_arrays(trace: Trace, comm_pattern: re.Pattern[str]) -> tuple[np.ndarray, ...]:
    """(rows, ts, dur, device, stream, name codes, class codes) of the GPU events with a duration."""
    from .._kernels.joins import gpu_columns

    ev = trace.events
    name_col, cat_col = ev["name"].array, ev["cat"].array
    rows, ts, dur, device, stream, name_codes, cat_codes = gpu_columns(
        frozen(gpu_launches(trace)["gpu_row"]), frozen(ev["ts_ns"]), frozen(ev["dur_ns"]), frozen(ev["device"]),
        frozen(ev["stream"]), frozen(name_col.codes, np.int32), frozen(cat_col.codes, np.int32),
    )
    names, cats = name_col.categories, cat_col.categories
    width = len(names) + 1
    pair_codes = cat_codes * width + name_codes + 1
    size = (len(cats) + 1) * width
    if size <= 4 * len(rows) + (1 << 20):  # distinct (category, name) pairs through a table, not a sort
        used = np.zeros(size, bool)
        used[pair_codes] = True
        pairs = np.flatnonzero(used)
        slot = np.zeros(size, np.int32)
        slot[pairs] = np.arange(len(pairs), dtype=np.int32)
        inverse = slot[pair_codes]
    else:
        pairs, inverse = np.unique(pair_codes, return_inverse=True)
    classes = list(_CLASSES.categories)
    pair_class = np.array(
        [
            classes.index(
                kernel_class(str(cats[p // width]), str(names[p % width - 1]) if p % width else "", comm_pattern)
            )  # fmt: skip
            for p in pairs.tolist()
        ],
        dtype=np.int8,
    )
    codes = pair_class[inverse] if len(pairs) else np.empty(0, np.int8)
    return rows, ts, dur, device, stream, name_codes, codes


def _gpu_frame(trace: Trace, cols: tuple[np.ndarray, ...], keep: np.ndarray | None) -> pd.DataFrame:
    """:func:`gpu_table`'s frame of :func:`_gpu_arrays`' columns (of the positions ``keep``: all when None)."""
    ev = trace.events
    rows, ts, dur, device, stream, name_codes, codes = cols if keep is None else (c[keep] for c in cols)
    return pd.DataFrame(
        {
            "name": pd.Categorical.from_codes(name_codes, dtype=ev["name"].array.dtype, validate=False),
            "class": pd.Categorical.from_codes(codes, dtype=_CLASSES, validate=False),
            "device": device,
            "stream": stream,
            "ts_ns": ts,
            "dur_ns": dur,
            "end_ns": ts + dur,
        },
        index=ev.index[rows],
    )


def kernel_stats(trace: Trace, by: str = "name", comm_pattern: re.Pattern[str] = COMM_PATTERN) -> pd.DataFrame:
    """Count, total, min, max, mean and sample std of GPU event durations by ``name`` or ``class``.

    One Numba pass over the GPU events (:func:`aonkit._kernels.describe.group_stats`,
    pandas' groupby figures bit for bit); events without a name are left out
    of the by-name table. Rows by total, descending (ties: first seen first).

    Parameters
    ----------
    trace : Trace
        Any loaded trace (kernels, memcpys and memsets count as GPU events).
    by : {"name", "class"}
        One row per event name, or per kernel class (computation, communication, memory).
    comm_pattern : re.Pattern
        Names that make a kernel communication (NCCL/RCCL/gloo and the like by default).

    Returns
    -------
    pandas.DataFrame
        ``name`` (by name only), ``class``, ``count``, ``total_ns``, ``min_ns``, ``max_ns``, ``mean_ns``,
        ``std_ns`` and ``share`` (of the total GPU event time).
    """
    from .describe_stats import group_stats

    g = gpu_table(trace, comm_pattern)
    klass = g["class"].array
    k_codes = np.asarray(klass.codes).astype(np.int64)
    if by == "class":
        keys = k_codes
    else:
        name = g["name"].array
        n_codes = np.asarray(name.codes).astype(np.int64)
        named = n_codes >= 0
        keys = (n_codes * len(klass.categories) + k_codes)[named]
    dur = g["dur_ns"].to_numpy()
    gkeys, count, total, vmin, vmax, mean, std = group_stats(keys, dur if by == "class" else dur[named])
    classes = np.asarray(klass.categories, dtype=object)
    if by == "class":
        out = pd.DataFrame({"class": classes[gkeys].astype(str)})
    else:
        names = np.asarray(name.categories, dtype=object)
        out = pd.DataFrame({"name": names[gkeys // len(classes)].astype(str),
                            "class": classes[gkeys % len(classes)].astype(str)})  # fmt: skip
    out["count"], out["total_ns"], out["min_ns"], out["max_ns"] = count, total, vmin, vmax
    out["mean_ns"], out["std_ns"] = mean, np.nan_to_num(std, nan=0.0)
    grand = int(total.sum())
    out["share"] = total / grand if grand else 0.0
    return out.sort_values("total_ns", ascending=False, kind="stable", ignore_index=True)


def gpu_time_per_op(trace: Trace, level: str = "top_op") -> pd.DataFrame:
    """GPU time of the events each CPU op launched.

    Parameters
    ----------
    trace : Trace
        A trace with CPU ops and GPU events linked by correlation (:func:`gpu_links`).
    level : {"top_op", "op"}
        Attribute each GPU event to its outermost CPU op, or to the innermost one.

    Returns
    -------
    pandas.DataFrame
        ``op_name``, ``calls`` (distinct op instances), ``gpu_events``, ``gpu_ns`` (sum of their durations),
        ``cpu_ns`` (sum of the op instances' durations), by ``gpu_ns`` descending. GPU events whose launch is
        outside the window are reported under ``"(launched before the trace)"``; those with no enclosing op
        under ``"(no op)"``.
    """
    links = gpu_links(trace)
    ev = trace.events
    dur = ev["dur_ns"].to_numpy()
    if level not in ("op", "top_op"):
        raise ValueError(f"level must be 'op' or 'top_op', not {level!r}")
    op = links[f"{level}_row"].to_numpy()
    label = np.where(links["launch_row"] < 0, "(launched before the trace)",
                     np.where(op < 0, "(no op)", names_of(ev, np.maximum(op, 0))))  # fmt: skip
    df = pd.DataFrame({"op_name": label, "op_row": op, "gpu_ns": np.maximum(dur[links["gpu_row"]], 0)})
    agg = df.groupby("op_name", sort=False).agg(gpu_events=("gpu_ns", "size"), gpu_ns=("gpu_ns", "sum"))
    inst = df[df["op_row"] >= 0].drop_duplicates("op_row")
    cpu = (
        pd.DataFrame({"op_name": inst["op_name"], "cpu_ns": dur[inst["op_row"]]})
        .groupby("op_name")
        .agg(calls=("cpu_ns", "size"), cpu_ns=("cpu_ns", "sum"))
    )
    out = agg.join(cpu, how="left").fillna({"calls": 0, "cpu_ns": 0}).astype({"calls": np.int64, "cpu_ns": np.int64})
    return out.reset_index().sort_values("gpu_ns", ascending=False, kind="stable", ignore_index=True)[
        ["op_name", "calls", "gpu_events", "gpu_ns", "cpu_ns"]
    ]


def launch_stats(trace: Trace, apis: tuple[str, ...] = CUDA_LAUNCHES + HIP_LAUNCHES) -> pd.DataFrame:
    """Per launched GPU event: launch call, its CPU duration, the GPU duration and the launch delay (ns).

    CUDA and HIP launch APIs count; ``api`` is categorical over ``apis``.

    Parameters
    ----------
    trace : Trace
        Any trace with GPU events and their launch calls (matched by correlation, :func:`gpu_launches`).
    apis : tuple of str
        Names of the launch calls that count (duplicates dropped, order kept); default
        ``CUDA_LAUNCHES + HIP_LAUNCHES`` (kernel launches, async copies and sets, graph launches).

    Returns
    -------
    pandas.DataFrame
        One row per GPU event whose launch call is named in ``apis``, in ``trace.events`` order of the GPU
        events: ``gpu_row`` and ``launch_row`` (rows of ``trace.events``), ``api`` (categorical, categories
        ``apis`` in order), ``correlation`` (the GPU event's), ``cpu_dur_ns`` and ``gpu_dur_ns`` (-1: no
        duration), ``launch_delay_ns`` (int64 ns), ``before_return`` and ``clock_skew`` (bool).

    Warns
    -----
    AonkitWarning
        With the count of ``clock_skew`` rows, when there are any.

    Notes
    -----
    ``launch_delay_ns`` = GPU start - end of the launch call (from the call's
    start when it has no duration). It is kept as measured, negative values
    included; two flags say why a value is negative:

    ``before_return`` (``launch_delay_ns < 0``)
        The GPU started the work before the call returned. This is real, not
        an error: a kernel launched onto an idle GPU can start while
        ``cudaLaunchKernel`` is still returning, and a copy the call waits for
        (``cudaMemcpyAsync`` from pageable memory) ends before the call does,
        so its delay is about minus the copy's length.
    ``clock_skew`` (the GPU start precedes the call's *start*)
        Impossible in time, so the two timestamps disagree: CPU times come
        from the host clock and GPU times from the device's, which CUPTI or
        roctracer convert to the host clock with some skew. Such rows are
        counted in an :class:`~aonkit.errors.AonkitWarning`. (On the shared
        real traces, every negative delay is ``before_return``, none is skew.)
    """
    from .._kernels.joins import launch_columns

    links = gpu_launches(trace)
    ev = trace.events
    apis = tuple(dict.fromkeys(apis))
    api_of = {name: k for k, name in enumerate(apis)}
    api_code = np.array([api_of.get(c, -1) for c in ev["name"].array.categories] + [-1], np.int64)
    gpu, launch, code, corr, cpu_dur, gpu_dur, delay = launch_columns(
        frozen(links["gpu_row"]), frozen(links["launch_row"]), frozen(ev["name"].array.codes, np.int32),
        frozen(api_code), frozen(ev["ts_ns"]), frozen(ev["dur_ns"]), frozen(ev["correlation"]))  # fmt: skip
    delay = np.where(cpu_dur < 0, delay + cpu_dur, delay)  # a call without a duration: from its start
    skew = delay + np.maximum(cpu_dur, 0) < 0
    if skew.any():
        from ..errors import warn_user as warn

        warn(f"{int(skew.sum())} of {len(skew)} GPU events start before their launch call does (CPU and GPU "
             "clocks disagree); their launch_delay_ns is kept as measured and flagged in clock_skew")  # fmt: skip
    return pd.DataFrame({"gpu_row": gpu, "launch_row": launch,
                         "api": pd.Categorical.from_codes(code, categories=pd.Index(apis, dtype=object)),
                         "correlation": corr, "cpu_dur_ns": np.maximum(cpu_dur, -1),
                         "gpu_dur_ns": np.maximum(gpu_dur, -1), "launch_delay_ns": delay, "before_return": delay < 0,
                         "clock_skew": skew}, copy=False)  # fmt: skip
