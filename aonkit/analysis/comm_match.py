"""Which kernels of different ranks are the same collective, and how the ranks' clocks line up.

Matching, best evidence first:

1. **Sequence numbers.** When every kernel of a process group carries a
   ``Seq``/``seq`` arg (newer PyTorch), the collectives of a group are
   matched by number.
2. **Order, aligned by signature.** Otherwise the k-th collective of a group
   (``Process Group Name``, else the stream, with the ``Collective name``,
   else the kernel's base name) is the same on every rank. When message sizes
   are known (``In msg nelems``/``Out msg nelems``), each rank's sequence is
   shifted by the few places that best align its (name, sizes) signatures
   with the reference rank's, which recovers profiling windows that start at
   different collectives on different ranks.

Args missing on a kernel are taken from the ``record_param_comms`` op around
its launch call. A collective is matched when every rank that has its group
has it, so subgroups are matched among their own ranks.

Clock offsets: per pair of ranks sharing matched collectives, the median
difference of their end times; ranks are reached from the reference through
such pairs. A rank reached by none is aligned on the ``ProfilerStep#N``
starts it shares with an aligned rank, else left at 0 with a warning.
When the ranks' clocks are known (a job ``aonkit trace`` wrote: one per node, by
its boot id; :func:`clock_keys`), ranks on one clock share it: those on the
reference's clock get offset 0 whatever the
estimates say (step starts would take a late rank's lateness for a clock
offset), and the ranks of another host share the median of their estimates,
unless a rank's collectives put it over 1 ms from its host's clock (then it
keeps its own, with a warning).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..errors import warn_user as warn
from ..trace import Trace
from .columns import code_flags
from .correlation import cpu_stack, gpu_launches, step_numbers

ARGS = {"coll": "Collective name", "in_nelems": "In msg nelems", "out_nelems": "Out msg nelems",
        "group_size": "Group size", "pg": "Process Group Name", "dtype": "dtype"}  # fmt: skip
SEQ_ARGS = ("Seq", "seq")
MAX_SHIFT = 16

HOST_TOLERANCE_NS = 1_000_000
"""A rank said to share a host whose collectives put its clock further than this from the host's keeps its own."""
_MAX_OFFSET_NS = float(2**62)  # an offset beyond this is no clock difference, and would not fit int64 sums


def comm_args(trace: Trace, rows: np.ndarray) -> pd.DataFrame:
    """The collective args (``coll``, ``in_nelems``, ... ``seq``) of kernels ``rows``, indexed by row.

    A kernel without them gets those of the ``record_param_comms`` op that
    encloses its launch call, when there is one.
    """
    out = _args_of(trace, rows)
    bare = np.ones(len(out), bool)
    for col in (*ARGS, "seq"):  # column by column: a frame's isna().all(axis=1) costs more than this at any size
        bare &= pd.isna(out[col].to_numpy())
    if bare.any():
        ops = _param_comms_ops(trace, rows[bare])
        have = ops >= 0
        if have.any():
            found = _args_of(trace, ops[have])
            for col in out.columns:
                out.loc[rows[bare][have], col] = found[col].to_numpy()
    return out


def _args_of(trace: Trace, rows: np.ndarray) -> pd.DataFrame:
    cols: dict[str, object] = {}
    for col, key in ARGS.items():
        if col in ("in_nelems", "out_nelems", "group_size"):
            cols[col] = trace.arg_numbers(key, rows) if len(rows) else np.empty(0)
        else:
            values = trace.arg_values(key, rows) if len(rows) else []
            cols[col] = np.array([v if isinstance(v, str) else None for v in values], dtype=object)
    seq = np.full(len(rows), np.nan)
    for key in SEQ_ARGS:
        if len(rows):
            seq = np.where(np.isnan(seq), trace.arg_numbers(key, rows), seq)
    cols["seq"] = seq
    return pd.DataFrame(cols, index=rows)


def _param_comms_ops(trace: Trace, kernels: np.ndarray) -> np.ndarray:
    """The ``record_param_comms`` op enclosing each kernel's launch call (-1 if none)."""
    links = gpu_launches(trace).set_index("gpu_row")["launch_row"]
    launch = links.reindex(kernels).fillna(-1).to_numpy(np.int64)
    parent = cpu_stack(trace)
    names = trace.events["name"]
    is_pc = (names == "record_param_comms").to_numpy()
    out = np.full(len(kernels), -1, np.int64)
    for k, row in enumerate(launch.tolist()):
        while row >= 0 and not is_pc[row]:
            row = int(parent.get(row, -1))
        out[k] = row
    return out


def profiler_step_starts(trace: Trace) -> dict[int, int]:
    """Start (ns) of each CPU-side ``ProfilerStep#N``, by N."""
    ev = trace.events
    n = step_numbers(ev["name"])
    rows = np.flatnonzero(n >= 0)  # the few step rows first, then their phase and category
    ph, complete = code_flags(ev["ph"], lambda v: v == "X")
    cat, gpu_side = code_flags(ev["cat"], lambda v: v == "gpu_user_annotation")
    cpu = rows[complete[ph[rows]] & ~gpu_side[cat[rows]]]
    return {int(k): int(t) for k, t in zip(n[cpu], ev["ts_ns"].to_numpy()[cpu])}


def _signature(df: pd.DataFrame) -> np.ndarray:
    """A hash of (collective, in size, out size) per kernel."""
    parts = [df["coll"].astype(str), df["in_nelems"].fillna(-1).astype(str), df["out_nelems"].fillna(-1).astype(str)]
    return pd.util.hash_pandas_object(parts[0] + "|" + parts[1] + "|" + parts[2], index=False).to_numpy()


def best_shift(ref: np.ndarray, other: np.ndarray, max_shift: int = MAX_SHIFT) -> int:
    """The shift s for which ``other[i + s] == ref[i]`` holds most often (0 unless strictly better)."""
    best, best_score = 0, -1
    for s in sorted(range(-max_shift, max_shift + 1), key=lambda s: (abs(s), -s)):
        lo, hi = max(0, -s), min(len(ref), len(other) - s)
        score = int((ref[lo:hi] == other[lo + s : hi + s]).sum()) if hi > lo else 0
        if score > best_score:
            best, best_score = s, score
    return best


def assign_keys(per: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """All ranks' communication kernels with ``rank``, ``group``, ``seq`` and ``match_by``."""
    allk = pd.concat(list(per.values()), ignore_index=True) if per else None
    if allk is not None:  # each row's rank (the ranks' frames once, not one copy each with a column added)
        allk["rank"] = np.repeat(np.array(list(per), dtype=np.int64), [len(df) for df in per.values()])
    if allk is None or allk.empty:
        return pd.DataFrame(columns=["rank", "group", "seq", "match_by", "ts_ns", "end_ns"])
    allk = allk.sort_values(["rank", "ts_ns"], kind="stable", ignore_index=True)
    name = allk["coll"].where(allk["coll"].notna(), allk["name"].astype(str).str.split("(", n=1).str[0])
    # without a process group name: the stream, unless every rank runs the collective on one stream (ids differ)
    streams = allk.assign(base=name).groupby(["base", "rank"])["stream"].transform("nunique")
    one = streams.groupby(name).transform("max") == 1
    allk["pg_key"] = np.where(allk["pg"].notna(), "pg:" + allk["pg"].astype(str),
                              np.where(one, "any", "stream:" + allk["stream"].astype(str)))  # fmt: skip
    by_seq = allk.groupby("pg_key")["seq"].transform(lambda s: s.notna().all()).to_numpy(bool)
    allk["group"] = np.where(by_seq, allk["pg_key"], allk["pg_key"] + "|" + name)
    allk["match_by"] = np.where(by_seq, "seq", "order")
    order = allk.groupby(["rank", "group"]).cumcount().to_numpy()
    allk["seq"] = np.where(by_seq, allk["seq"].fillna(-1), order).astype(np.int64)
    rest = allk[~by_seq]
    if len(rest):
        sig = _signature(rest)  # per kernel, hashed once for the whole job
        known = ~(rest["in_nelems"].isna() & rest["out_nelems"].isna()).to_numpy()
        seq, how = allk["seq"].to_numpy().copy(), allk["match_by"].to_numpy().copy()
        for rows in rest.groupby("group", sort=True).indices.values():  # positions in `rest`, rank then time order
            ranks = rest["rank"].to_numpy()[rows]
            cut = np.flatnonzero(np.diff(ranks)) + 1
            parts = np.split(rows, cut)
            ref = parts[0] if known[parts[0]].any() else None
            for mine in parts[1:]:
                if ref is None or not known[mine].any() or np.array_equal(sig[ref], sig[mine]):
                    continue
                s = best_shift(sig[ref], sig[mine])
                if s:
                    at = rest.index[mine]  # allk's index is 0..n-1 (reset above)
                    seq[at] -= s
                    how[at] = "order+shift"
        allk["seq"], allk["match_by"] = seq, how
    return allk


def matched(allk: pd.DataFrame) -> pd.DataFrame:
    """Kernels of collectives that every rank having their group has (two ranks at least, in a job of several)."""
    if allk.empty:
        return allk
    n_ranks = allk.groupby("group")["rank"].transform("nunique")
    n_here = allk.groupby(["group", "seq"])["rank"].transform("nunique")
    least = 2 if allk["rank"].nunique() > 1 else 1
    return allk[(n_here == n_ranks) & (n_ranks >= least)]


def clock_keys(traces: object) -> Mapping[int, str] | None:
    """Rank -> the clock its trace is on, where known: a TraceSet's ``clocks``, else its ``hosts``; else None.

    Ranks with one key share one clock (:func:`offsets`). ``traces`` is a :class:`~aonkit.TraceSet` or any mapping
    of rank to trace (which says nothing: None).
    """
    return getattr(traces, "clocks", None) or getattr(traces, "hosts", None) or None


def offsets(m: pd.DataFrame, steps: Mapping[int, dict[int, int]], reference: int,
            hosts: Mapping[int, str] | None = None) -> pd.Series:  # fmt: skip
    """Clock offset (ns) of each rank against ``reference``; ``.attrs["method"]`` says how each was found.

    ``hosts`` (rank -> host, or the clock's key of :func:`clock_keys`, where known): one clock per key
    (:func:`per_host`).
    """
    ranks = sorted(steps)
    ends = m.pivot_table(index=["group", "seq"], columns="rank", values="end_ns", aggfunc="first") if len(m) else None
    off: dict[int, int] = {reference: 0}
    method = {reference: "reference"}
    frontier = [reference]
    cols = {r: k for k, r in enumerate(ends.columns)} if ends is not None else {}
    e = ends.to_numpy(np.float64) if ends is not None else None
    while frontier:  # breadth-first through ranks that share matched collectives
        nxt = []
        for a in frontier:
            todo = [b for b in ranks if b not in off and b in cols]
            if a not in cols or not todo:
                continue
            d = e[:, [cols[b] for b in todo]] - e[:, [cols[a]]]  # type: ignore[index]
            shared = (~np.isnan(d)).any(axis=0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # columns without a shared collective
                med = np.nanmedian(d, axis=0)
            for b, ok, m in zip(todo, shared, med):
                if ok and abs(off[a] + float(m)) < _MAX_OFFSET_NS:  # beyond: clock garbage, left unaligned
                    off[b] = off[a] + int(round(float(m)))
                    method[b] = "collectives"
                    nxt.append(b)
        frontier = nxt
    for r in ranks:
        if r in off:
            continue
        for a in list(off):
            common = sorted(set(steps[r]) & set(steps[a]))
            m = float(np.median([float(steps[r][n]) - float(steps[a][n]) for n in common])) if common else 0.0
            if common and abs(off[a] + m) < _MAX_OFFSET_NS:
                off[r] = off[a] + int(round(m))
                method[r] = "profiler_steps"
                break
    if hosts:
        per_host(off, method, hosts, reference, ranks)
    lost = [r for r in ranks if r not in off]
    if lost:
        warn(f"ranks {lost} share no matched collective or ProfilerStep with rank {reference} (or the offsets "
             "they give are beyond 2**62 ns, clock garbage): their clocks are not aligned (offset 0)")
    out = pd.Series({r: off.get(r, 0) for r in ranks}, dtype=np.int64, name="offset_ns")
    out.index.name = "rank"
    out.attrs["method"] = {r: method.get(r, "none") for r in ranks}
    return out


def per_host(off: dict[int, int], method: dict[int, str], hosts: Mapping[int, str], reference: int,
             ranks: list[int]) -> None:  # fmt: skip
    """One clock per host, in place: the reference's host's ranks at 0, another host's at its ranks' median.

    Methods become ``"same_host"`` (the reference's host) and ``"<method> per host"`` (the estimates' method,
    ``collectives`` if any of the host's ranks had one). A rank without an estimate of its own takes its host's.
    A rank whose collectives put it more than :data:`HOST_TOLERANCE_NS` from its host's clock keeps its own
    offset, with a warning: one host's clocks are one, so the hosts said are wrong (or the matching is).
    """
    groups: dict[str, list[int]] = {}
    for r in ranks:
        if hosts.get(r):
            groups.setdefault(hosts[r], []).append(r)
    doubt = []
    for host, members in groups.items():
        found = [r for r in members if r in off]
        if host == hosts.get(reference):
            value, how = 0, "same_host"
        elif found:
            value = int(round(float(np.median([off[r] for r in found]))))
            how = ("collectives" if any(method[r] == "collectives" for r in found) else "profiler_steps") + " per host"
        else:
            continue
        for r in members:
            if r == reference:
                continue
            if method.get(r) == "collectives" and abs(off[r] - value) > HOST_TOLERANCE_NS:
                doubt.append(r)
                continue
            off[r], method[r] = value, how
    if doubt:
        warn(f"ranks {sorted(doubt)} are said to share a host with other ranks, but their collectives put their clocks "
             f"over {HOST_TOLERANCE_NS / 1e6:g} ms from that host's: each keeps the offset its collectives give")
