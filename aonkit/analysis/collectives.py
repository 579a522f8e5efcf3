"""Collectives across ranks: one clock, matched collectives, arrival skew, wait vs transfer, stragglers.

Clock alignment
---------------
Ranks on different hosts do not share a clock, and HTA's shift of every rank
to a common minimum timestamp leaves the hosts' offsets in. aonkit aligns on
the collectives themselves: the participants of a NCCL/RCCL collective finish
within microseconds of one another (the last bytes arrive everywhere at once),
so for each rank the median, over matched collectives, of its end time minus
the reference rank's end time estimates its clock offset. Medians shrug off
the odd collective that ends late on one rank.

Matching
--------
Communication kernels are grouped by process group (the ``Process Group Name``
arg that newer Kineto copies onto NCCL kernels), else by stream, with the
kernel's base name; within a group the k-th collective of every rank is the
same collective (NCCL runs a communicator's collectives in order).

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

from ..trace import Trace
from .kernels import gpu_table

_DTYPE_BYTES = {"Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Int": 4, "Long": 8, "Byte": 1, "Char": 1,
                "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Short": 2}  # fmt: skip


def comm_kernels(trace: Trace) -> pd.DataFrame:
    """Communication kernels of one rank with ``group``, ``seq`` (order in the group) and ``bytes`` (-1 unknown)."""
    g = gpu_table(trace)
    g = g[g["class"] == "communication"].copy()
    rows = g.index.to_numpy()
    pg = trace.arg_values("Process Group Name", rows) if len(rows) else []
    nelems = trace.arg_numbers("In msg nelems", rows) if len(rows) else np.empty(0)
    dtype = trace.arg_values("dtype", rows) if len(rows) else []
    base = g["name"].str.split("(", n=1).str[0]
    g["group"] = [f"pg:{p}|{b}" if p is not None else f"stream:{s}|{b}" for p, s, b in zip(pg, g["stream"], base)]
    size = [_DTYPE_BYTES.get(d, -1) if isinstance(d, str) else -1 for d in dtype]
    g["bytes"] = np.where(np.isnan(nelems) | (np.asarray(size) < 0), -1, np.nan_to_num(nelems) * np.asarray(size))
    g = g.sort_values("ts_ns", kind="stable")
    g["seq"] = g.groupby("group").cumcount()
    return g


def _matched(per_rank: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    parts = [df.assign(rank=r) for r, df in per_rank.items()]
    allk = pd.concat(parts, ignore_index=True)
    n_ranks = allk.groupby(["group", "seq"])["rank"].transform("nunique")
    return allk[n_ranks == len(per_rank)]


def clock_offsets(traces: Mapping[int, Trace], reference: int | None = None) -> pd.Series:
    """Clock offset (ns) of each rank against ``reference`` (default: lowest rank), from collective ends."""
    per = {r: comm_kernels(t) for r, t in traces.items()}
    return _offsets(per, reference)


def _offsets(per: Mapping[int, pd.DataFrame], reference: int | None) -> pd.Series:
    ref = min(per) if reference is None else reference
    m = _matched(per)
    if m.empty:
        return pd.Series(0, index=sorted(per), dtype=np.int64, name="offset_ns")
    ends = m.pivot_table(index=["group", "seq"], columns="rank", values="end_ns", aggfunc="first")
    diff = ends.sub(ends[ref], axis=0)
    return diff.median().round().astype(np.int64).rename("offset_ns")


def collectives(traces: Mapping[int, Trace], reference: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Matched collectives and per-rank participation, on the aligned clock.

    Returns
    -------
    coll : pandas.DataFrame
        One row per collective: ``group``, ``seq``, ``name``, ``first_arrival_ns``,
        ``last_arrival_ns``, ``skew_ns``, ``last_rank``, ``transfer_ns``,
        ``bytes``, ``algbw_gbps``.
    part : pandas.DataFrame
        One row per (collective, rank): ``group``, ``seq``, ``rank``,
        ``arrival_ns``, ``end_ns``, ``wait_ns``, ``late_ns`` (arrival minus the
        median arrival).
    """
    return collectives_from_tables({r: comm_kernels(t) for r, t in traces.items()}, reference)


def collectives_from_tables(
    per: Mapping[int, pd.DataFrame], reference: int | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`collectives` from per-rank :func:`comm_kernels` tables (computed anywhere, e.g. on Dask)."""
    off = _offsets(per, reference)
    m = _matched(per).copy()
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
                   bytes=("bytes", "max")).reset_index()  # fmt: skip
    coll = coll.merge(idx_last[key + ["rank"]].rename(columns={"rank": "last_rank"}), on=key)
    coll["skew_ns"] = coll["last_arrival_ns"] - coll["first_arrival_ns"]
    coll["transfer_ns"] = (coll["median_end_ns"] - coll["last_arrival_ns"]).clip(lower=0).round().astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bw = np.where((coll["bytes"] > 0) & (coll["transfer_ns"] > 0), coll["bytes"] / coll["transfer_ns"], np.nan)
    coll["algbw_gbps"] = bw
    coll = coll.sort_values("first_arrival_ns", kind="stable", ignore_index=True)
    part = m[key + ["rank", "arrival_ns", "end_ns", "wait_ns", "late_ns"]].reset_index(drop=True)
    cols = ["group", "seq", "name", "first_arrival_ns", "last_arrival_ns", "skew_ns", "last_rank", "transfer_ns",
            "bytes", "algbw_gbps"]  # fmt: skip
    return coll[cols], part


def stragglers(traces: Mapping[int, Trace], reference: int | None = None) -> pd.DataFrame:
    """Per rank: how often it arrived last, its median lateness and the wait it imposed on the others.

    Columns: ``rank``, ``collectives``, ``times_last``, ``share_last``,
    ``median_late_ns``, ``imposed_wait_ns`` (others' waiting in collectives
    where this rank arrived last), ``own_wait_ns``; sorted most late first.
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
    """Per device: communication time, and the part of it not hidden behind computation (ns)."""
    from .._kernels.intervals import intersection_length
    from .hta_compat import _merged

    g = gpu_table(trace)
    rows = []
    for device, d in g.groupby("device"):
        comm = d[d["class"] == "communication"]
        comp = d[d["class"] == "computation"]
        mc = _merged(comm["ts_ns"].to_numpy(), comm["end_ns"].to_numpy())
        mp = _merged(comp["ts_ns"].to_numpy(), comp["end_ns"].to_numpy())
        total = int((mc[1] - mc[0]).sum())
        hidden = int(intersection_length(*(np.ascontiguousarray(x, dtype=np.int64) for x in (*mc, *mp))))
        rows.append((device, total, total - hidden, (total - hidden) / total if total else 0.0))
    return pd.DataFrame(rows, columns=["device", "comm_ns", "exposed_comm_ns", "exposed_share"])
