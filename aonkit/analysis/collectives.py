"""Collectives across ranks: one clock, matched collectives, arrival skew, wait vs transfer, stragglers.

Clock alignment
---------------
Ranks on different hosts do not share a clock, and HTA's shift of every rank
to a common minimum timestamp leaves the hosts' offsets in (ranks known to
share a clock, :attr:`aonkit.TraceSet.clocks`, get one offset). aonkit aligns on
the collectives themselves: the participants of a NCCL/RCCL collective finish
within microseconds of one another (the last bytes arrive everywhere at once),
so the median, over shared collectives, of a rank's end time minus another's
estimates their clock offset. Medians shrug off the odd collective that ends
late on one rank. Ranks that share no collective fall back to their
``ProfilerStep#N`` starts, else stay unaligned with a warning.

Matching
--------
By sequence number when Kineto writes one, else by order within a process
group and collective, aligned by message sizes: see
:mod:`aonkit.analysis.comm_match`.

Per collective, with arrival = kernel start on the common clock:
``skew_ns`` = last arrival - first arrival; ``last_rank``; per rank
``wait_ns`` = last arrival - own arrival (time blocked in the kernel for the
others); ``transfer_ns`` = median end - last arrival; ``algbw_gbps`` =
message bytes / transfer time when the message size is known.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..errors import warn_user as warn
from ..trace import Trace
from ..traceset import each_rank
from .comm_match import assign_keys, clock_keys, comm_args, matched, offsets, profiler_step_starts
from .kernels import gpu_class_table, gpu_table

_DTYPE_BYTES = {"Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Int": 4, "Long": 8, "Byte": 1, "Char": 1,
                "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Short": 2}  # fmt: skip


def comm_kernels(trace: Trace) -> pd.DataFrame:
    """Communication kernels of one rank with their collective args.

    Columns: those of :func:`~aonkit.analysis.kernels.gpu_table` plus
    ``coll``, ``in_nelems``, ``out_nelems``, ``group_size``, ``pg``,
    ``dtype``, ``seq`` (the profiler's sequence number, NaN when absent) and
    ``bytes`` (message bytes, -1 unknown); in time order. ``attrs
    ["profiler_steps"]`` holds the rank's ``ProfilerStep#N`` starts, for
    clock alignment when ranks share no collective.

    Parameters
    ----------
    trace : Trace
        One rank's trace. Communication kernels are the GPU events other than memcpys and memsets whose name
        matches :data:`~aonkit.analysis.kernels.COMM_PATTERN` (``class == "communication"`` in ``gpu_table``).

    Returns
    -------
    pandas.DataFrame
        Indexed by row of ``trace.events``, sorted by ``ts_ns`` (stable): ``name``, ``class``, ``device``,
        ``stream``, ``ts_ns``, ``dur_ns``, ``end_ns`` (ns), then the args ``coll`` (``Collective name``),
        ``in_nelems`` (``In msg nelems``), ``out_nelems`` (``Out msg nelems``), ``group_size``
        (``Group size``), ``pg`` (``Process Group Name``), ``dtype`` and ``seq`` (``Seq`` or ``seq``), and
        ``bytes``. ``coll``, ``pg`` and ``dtype`` are str, None when absent; ``in_nelems``, ``out_nelems``,
        ``group_size`` and ``seq`` are float, NaN when absent; ``bytes`` (float) is ``in_nelems`` times the
        size of ``dtype``, -1 when either is unknown. A kernel without any of these args takes those of the
        ``record_param_comms`` op around its launch call, when there is one.
        ``attrs["profiler_steps"]`` is a dict of N to the start (ns) of the rank's CPU-side
        ``ProfilerStep#N``.
    """
    g = gpu_class_table(trace, "communication")
    g = g.join(comm_args(trace, g.index.to_numpy())).sort_values("ts_ns", kind="stable")
    size = np.array([_DTYPE_BYTES.get(d, -1) if isinstance(d, str) else -1 for d in g["dtype"]], dtype=np.float64)
    nelems = g["in_nelems"].to_numpy(np.float64)
    g["bytes"] = np.where(np.isnan(nelems) | (size < 0), -1, np.nan_to_num(nelems) * size)
    g.attrs["profiler_steps"] = profiler_step_starts(trace)
    return g


def clock_offsets(traces: Mapping[int, Trace], reference: int | None = None) -> pd.Series:
    """Clock offset (ns) of each rank against ``reference`` (default: lowest rank).

    From matched collectives' ends, else ``ProfilerStep#N`` starts (see the
    module doc); ``.attrs["method"]`` tells which, per rank.

    Parameters
    ----------
    traces : TraceSet or mapping of int to Trace
        A job's ranks (a :class:`~aonkit.TraceSet` runs :func:`comm_kernels` through :meth:`aonkit.TraceSet.map`).
        A TraceSet whose :attr:`~aonkit.TraceSet.clocks` are known (a job ``aonkit trace`` wrote: one per node), or
        whose ``hosts`` are set, has one clock per node or host (:func:`~aonkit.analysis.comm_match.clock_keys`).
    reference : int, optional
        The rank whose clock the others are measured against (offset 0). Default None: the lowest rank.

    Returns
    -------
    pandas.Series
        ``offset_ns`` (int64, ns) indexed by ``rank`` (ascending): a rank's offset to subtract from its
        timestamps to put them on the reference's clock. ``attrs["method"]`` maps each rank to
        ``"reference"``, ``"collectives"``, ``"profiler_steps"``, ``"same_host"`` (the reference's host: 0),
        ``"collectives per host"`` / ``"profiler_steps per host"`` (its host's median) or ``"none"`` (not
        aligned: offset 0, and a :class:`UserWarning` names such ranks).
    """
    return offsets_from_tables(each_rank(traces, comm_kernels), reference, clock_keys(traces))


def offsets_from_tables(per: Mapping[int, pd.DataFrame], reference: int | None = None,
                        hosts: Mapping[int, str] | None = None) -> pd.Series:  # fmt: skip
    """:func:`clock_offsets` from the ranks' :func:`comm_kernels` tables (``{rank: table}``), already made.

    ``hosts``: rank -> host (or clock: :func:`~aonkit.analysis.comm_match.clock_keys`) where known: the ranks of one
    host share its clock.
    """
    ref = min(per) if reference is None else reference
    m = matched(assign_keys(per))
    return offsets(m, {r: df.attrs.get("profiler_steps", {}) for r, df in per.items()}, ref, hosts)


_COLL_DTYPES = {"group": "str", "seq": np.int64, "name": "str", "first_arrival_ns": np.int64,
                "last_arrival_ns": np.int64, "skew_ns": np.int64, "last_rank": np.int64, "transfer_ns": np.int64,
                "bytes": np.float64, "algbw_gbps": np.float64, "match_by": "str"}  # fmt: skip
_PART_DTYPES = {"group": "str", "seq": np.int64, "rank": np.int64, "arrival_ns": np.int64, "end_ns": np.int64,
                "wait_ns": np.int64, "late_ns": np.float64}  # fmt: skip


def collectives(traces: Mapping[int, Trace], reference: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Matched collectives and per-rank participation, on the aligned clock.

    Parameters
    ----------
    traces : TraceSet or mapping of int to Trace
        A job's ranks (a :class:`~aonkit.TraceSet` runs :func:`comm_kernels` through :meth:`aonkit.TraceSet.map`).
    reference : int, optional
        The rank whose clock the others are aligned to (:func:`clock_offsets`). Default None: the lowest rank.

    Returns
    -------
    coll : pandas.DataFrame
        One row per collective: ``group``, ``seq``, ``name``, ``first_arrival_ns``,
        ``last_arrival_ns``, ``skew_ns``, ``last_rank``, ``transfer_ns``,
        ``bytes``, ``algbw_gbps``, ``match_by`` (``seq``, ``order`` or
        ``order+shift``). Times in ns on the reference rank's clock; ``transfer_ns`` is the median end minus
        the last arrival, rounded, at least 0; ``bytes`` is the largest of the ranks' message bytes (-1:
        unknown); ``algbw_gbps`` is ``bytes / transfer_ns`` in GB/s (NaN unless both are positive). Sorted by
        ``first_arrival_ns``.
    part : pandas.DataFrame
        One row per (collective, rank): ``group``, ``seq``, ``rank``,
        ``arrival_ns``, ``end_ns``, ``wait_ns``, ``late_ns`` (arrival minus the
        median arrival).

    Both are empty, with these columns, and an :class:`~aonkit.errors.AonkitWarning`
    says so, when no communication kernel is matched across ranks.
    """
    return collectives_from_tables(each_rank(traces, comm_kernels), reference, clock_keys(traces))


def collectives_from_tables(
    per: Mapping[int, pd.DataFrame], reference: int | None = None, hosts: Mapping[int, str] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`collectives` from per-rank :func:`comm_kernels` tables (computed anywhere, e.g. on Dask).

    ``hosts``: rank -> host (or clock: :func:`~aonkit.analysis.comm_match.clock_keys`) where known: the ranks of one
    host share its clock (:func:`clock_offsets`).
    """
    ref = min(per) if reference is None else reference
    m = matched(assign_keys(per)).copy()
    if m.empty:
        warn("no collectives in the job: no communication kernel is matched across ranks, so the collective "
             "and straggler tables are empty")
        coll = pd.DataFrame({c: pd.Series(dtype=t) for c, t in _COLL_DTYPES.items()})
        return coll, pd.DataFrame({c: pd.Series(dtype=t) for c, t in _PART_DTYPES.items()})
    off = offsets(m, {r: df.attrs.get("profiler_steps", {}) for r, df in per.items()}, ref, hosts)
    m["arrival_ns"] = m["ts_ns"] - m["rank"].map(off)
    m["end_ns"] = m["end_ns"] - m["rank"].map(off)
    key = ["group", "seq"]
    grp = m.groupby(key)
    last = grp["arrival_ns"].transform("max")
    m["wait_ns"] = last - m["arrival_ns"]
    m["late_ns"] = m["arrival_ns"] - grp["arrival_ns"].transform("median")
    idx_last = m.loc[grp["arrival_ns"].idxmax()]
    coll = grp.agg(name=("name", "first"), first_arrival_ns=("arrival_ns", "min"),
                   last_arrival_ns=("arrival_ns", "max"), median_end_ns=("end_ns", "median"),
                   bytes=("bytes", "max"), match_by=("match_by", "first")).reset_index()  # fmt: skip
    coll = coll.merge(idx_last[key + ["rank"]].rename(columns={"rank": "last_rank"}), on=key)
    coll["skew_ns"] = coll["last_arrival_ns"] - coll["first_arrival_ns"]
    coll["transfer_ns"] = (coll["median_end_ns"] - coll["last_arrival_ns"]).clip(lower=0).round().astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bw = np.where((coll["bytes"] > 0) & (coll["transfer_ns"] > 0), coll["bytes"] / coll["transfer_ns"], np.nan)
    coll["algbw_gbps"] = bw
    coll = coll.sort_values("first_arrival_ns", kind="stable", ignore_index=True)
    part = m[list(_PART_DTYPES)].reset_index(drop=True)
    return coll[list(_COLL_DTYPES)], part


def stragglers(traces: Mapping[int, Trace], reference: int | None = None) -> pd.DataFrame:
    """Per rank: how often it arrived last, its median lateness and the wait it imposed on the others.

    Parameters
    ----------
    traces : TraceSet or mapping of int to Trace
        A job's ranks (collectives matched across them by :func:`collectives`).
    reference : int, optional
        The rank whose clock the others are aligned to (default: the lowest).

    Returns
    -------
    pandas.DataFrame
        ``rank``, ``collectives``, ``times_last``, ``share_last``, ``median_late_ns``, ``imposed_wait_ns``
        (others' waiting in collectives where this rank arrived last), ``own_wait_ns``; sorted most late first.
        Empty, with a warning, for a job without collectives.
    """
    coll, part = collectives(traces, reference)
    return stragglers_from(coll, part)


def stragglers_from(coll: pd.DataFrame, part: pd.DataFrame) -> pd.DataFrame:
    """:func:`stragglers` from the output of :func:`collectives`."""
    n = coll.shape[0]
    imposed = part.merge(coll[["group", "seq", "last_rank"]], on=["group", "seq"])
    imposed = imposed[imposed["rank"] != imposed["last_rank"]].groupby("last_rank")["wait_ns"].sum()
    out = part.groupby("rank").agg(collectives=("seq", "size"), median_late_ns=("late_ns", "median"),
                                   own_wait_ns=("wait_ns", "sum")).reset_index()  # fmt: skip
    out["times_last"] = out["rank"].map(coll["last_rank"].value_counts()).fillna(0).astype(np.int64)
    out["share_last"] = out["times_last"] / n if n else 0.0
    out["imposed_wait_ns"] = out["rank"].map(imposed).fillna(0).astype(np.int64)
    cols = ["rank", "collectives", "times_last", "share_last", "median_late_ns", "imposed_wait_ns", "own_wait_ns"]
    return out.sort_values(["times_last", "median_late_ns"], ascending=False, kind="stable", ignore_index=True)[cols]


def exposed_communication(trace: Trace) -> pd.DataFrame:
    """Per device: communication time, and the part of it not hidden behind computation.

    Parameters
    ----------
    trace : Trace
        Any trace with GPU kernels (communication kernels are told by name, as in :func:`kernel_stats`).

    Returns
    -------
    pandas.DataFrame
        ``device``, ``comm_ns``, ``exposed_comm_ns`` (communication time with no computation kernel running on
        the device) and ``exposed_share``.
    """
    from .._kernels.intervals import intersection_length
    from .hta_compat import hta_merge

    g = gpu_table(trace)
    rows = []
    for device, d in g.groupby("device"):
        comm = d[d["class"] == "communication"]
        comp = d[d["class"] == "computation"]
        mc = hta_merge(comm["ts_ns"].to_numpy(), comm["end_ns"].to_numpy())
        mp = hta_merge(comp["ts_ns"].to_numpy(), comp["end_ns"].to_numpy())
        total = int((mc[1] - mc[0]).sum())
        hidden = int(intersection_length(*(np.ascontiguousarray(x, dtype=np.int64) for x in (*mc, *mp))))
        rows.append((device, total, total - hidden, (total - hidden) / total if total else 0.0))
    return pd.DataFrame(rows, columns=["device", "comm_ns", "exposed_comm_ns", "exposed_share"])
