"""Compare aonkit's critical path with HTA 0.5.0's on the five HTA test traces, from HTA's saved JSON.

Usage::

    PYTHONPATH=. python tools/cp_compare.py                      # the tables (markdown) of all five traces
    PYTHONPATH=. python tools/cp_compare.py --trace alexnet -v   # plus every event on one path only
    PYTHONPATH=. python tools/cp_compare.py --json out.json      # the numbers, machine-readable

HTA's side is read from ``bench/out/hta_critical_path/<trace>.json`` (HTA 0.5.0, default environment; see
``docs/critical-path-hta.md``): its window, its path edges and its critical events (``ev`` = row of
``trace.events``). aonkit's side is :func:`aonkit.analysis.critical_path.what_if` with no rule over the
same window (HTA's ``[start, end]`` in ns; annotation ``""``, which has no upper bound in HTA: the whole
trace). Findings: ``docs/critical-path-vs-hta.md``.

What is compared, per trace:

- **events**: rows on both paths, only on aonkit's, only on HTA's, by category, with the time each side
  gives them. aonkit's time of an event is the duration of its path nodes (self-time segments, a GPU event,
  a blocking call's wake-up instant, which has none); HTA's is the weight of the op/kk edges attributed to
  it (``attributed_ev``). Edge time that belongs to no event (aonkit's edge latencies, HTA's launch edges;
  dep and sync edges weigh 0 in HTA) is in the lengths. aonkit's host-gap nodes (row -1) are listed as the
  category ``(host gap)``.
- **causes**: each event on one side only gets a class (:data:`CLASSES`), from the rules of the two models.
- **regions**: the events of the classes ``cpu-branch`` / ``gpu-branch`` grouped by the shared events around
  them (where the two paths split and meet again), with the time of each path there, aonkit's also in
  HTA's accounting.
- **lengths**: HTA's length (the sum of its edge weights) and span; aonkit's window time and path span,
  split into host gaps, annotation self time (``user_annotation`` / ``python_function`` rows: no node in
  HTA), blocked time (sync-edge latencies), CPU time of the calls HTA counts as blocking (exit edge 0),
  other CPU, GPU and other edge latencies. "aonkit in HTA's accounting" keeps only the last three.
- **PR #283**: the event counts against HTA with the 1.5 ms kernel-kernel cap (the JSON's variant, which
  equals the newer HTA's reference overlay on end_to_end).
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHARED = ROOT.parent / "shared" / "traces" / "hta" / "critical_path"
HTA_JSON = ROOT / "bench" / "out" / "hta_critical_path"
TRACES = {  # HTA JSON name -> trace file under SHARED
    "simple_add": "simple_add/benchmark_result_493459_1694039959_trace.json.gz",
    "end_to_end_simple_add": "end_to_end/simple_add/input/trace.json.gz",
    "cuda_event_sync": "cuda_event_sync/event_sync_trace.json.gz",
    "cuda_event_sync_multi_stream": "cuda_event_sync_multi_stream/event_sync_trace.json.gz",
    "alexnet": "alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
}
ANNOTATION_CATS = frozenset({"user_annotation", "python_function", "gpu_user_annotation"})
HTA_BLOCKING = frozenset({"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery", "cudaEventSynchronize",
                          "cudaMemcpy", "cudaMemcpyAsync"})
"""Calls whose exit edge HTA weighs 0 (docs/critical-path-hta.md §3, "Leaving an event"; quirk 5)."""
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
EDGE_SHORT = {"critical_path_operator": "op", "critical_path_dependency": "dep",
              "critical_path_kernel_launch_delay": "launch", "critical_path_kernel_kernel_delay": "kk",
              "critical_path_sync_dependency": "sync"}
AON_EDGE = ("thread", "stream", "launch", "sync", "stream wait", "collective", "handoff")
CLASSES = {
    "zero-dur": "aonkit only: a zero-duration CPU event (HTA drops rows with dur 0, hta doc §2)",
    "annotation": "aonkit only: annotation self time (no node in HTA; its ops are top-level, dep edges weigh 0)",
    "path-head": "only before the other path's first node",
    "path-tail": "only after the other path's last node (HTA drops trailing zero-weight edges, quirk 9)",
    "cpu-branch": "aonkit only: the CPU branch where HTA takes a GPU branch",
    "gpu-branch": "HTA only: the GPU branch where aonkit stays on the CPU",
    "other": "none of the above",
}
TRACE_SHORT = {"end_to_end_simple_add": "end_to_end", "cuda_event_sync_multi_stream": "multi_stream"}


def _window_ns(hta: dict) -> tuple[int, int] | None:
    """HTA's window in ns, end inclusive as HTA's; None for annotation "" (HTA: no upper bound: the whole trace)."""
    w = hta["window_us"]
    if w.get("end") is None:
        return None
    return int(w["start"]) * 1000, int(w["end"]) * 1000 + 1


def hta_side(hta: dict) -> dict:
    """HTA's critical events, the time its op/kk edges attribute to each (µs), and which nodes are on the path."""
    cp = hta["critical_path"]
    if "events" not in cp:
        raise ValueError("HTA JSON without critical_path.events")
    time_of: dict[int, float] = defaultdict(float)
    by_type: Counter = Counter()
    nodes_on: dict[int, set] = defaultdict(set)
    for e in cp["edges"]:
        kind = EDGE_SHORT[e["type"]]
        by_type[kind] += e["weight"]
        if kind in ("op", "kk"):
            time_of[int(e["attributed_ev"])] += e["weight"]
        for end in ("src", "dst"):
            nodes_on[int(e[end]["ev"])].add("S" if e[end]["is_start"] else "E")
    variant = next((v for k, v in hta.get("variants", {}).items() if "PR #283" in k), None)
    return {"events": {int(e["ev"]) for e in cp["events"]}, "time_us": dict(time_of), "edge_time_us": dict(by_type),
            "nodes_on": nodes_on, "length_us": cp["length_us"], "span_us": cp["last_ts_us"] - cp["first_ts_us"],
            "first_ns": cp["first_ts_us"] * 1000, "last_ns": cp["last_ts_us"] * 1000, "edges": cp["edges"],
            "pr283_events": None if variant is None else {int(x) for x in variant["events"]},
            "pr283_length_us": None if variant is None else variant["length_us"]}


def aonkit_side(trace, window: tuple[int, int] | None) -> dict:  # noqa: ANN001 - an aonkit Trace
    """aonkit's critical path over the window, with each node's id and the kind of its critical incoming edge.

    The window's host work and the GPU work it launched (``scope="launched"``), as HTA takes a step's.
    """
    from aonkit.analysis.critical_path import graph_of, what_if

    r = what_if(trace, window=window, scope="launched")
    path = r.critical_path.copy()
    g = graph_of(trace)
    nodes, edge = _path_nodes(g, r, window)
    assert len(nodes) == len(path) and (g.row[nodes] == path["row"].to_numpy()).all()
    path["edge_in"] = [AON_EDGE[g.edge_kind[e]] if e >= 0 else "release" for e in edge[nodes]]
    path["node"] = nodes
    ev = trace.events
    rows = path["row"].to_numpy()
    path["cat"] = np.where(rows >= 0, ev["cat"].astype(object).to_numpy()[np.maximum(rows, 0)], "(host gap)")
    path["time_ns"] = path["dur_ns"] + path["wait_ns"]  # a negative wait (GPU start before the call returned) counts
    return {"whatif": r, "path": path}


def _path_nodes(g, r, window) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """The node ids of ``r.critical_path``, found as :func:`what_if` finds them (its table does not keep them),
    and each node's critical incoming edge (-1: released)."""
    from aonkit._kernels.dag import critical_path as path_of
    from aonkit._kernels.dag import schedule

    _, _, pred, edge = schedule(g.order, g.indptr, g.src, g.lat_ns, g.dur_ns, g.release_ns)
    inside = r._context[2]  # the window's nodes as what_if chose them (None: every node)
    inside = np.ones(len(g), bool) if inside is None else inside
    idx = np.flatnonzero(inside)
    end = int(idx[np.argmax(r.finish_ns[idx])])
    nodes = path_of(r.finish_ns, pred, end)
    return nodes[inside[nodes]], edge


def _cat(ev: pd.DataFrame, row: int) -> str:
    if row < 0:
        return "(host gap)"
    c = str(ev["cat"].iat[row])
    return "sync" if c == "cuda_sync" else c


def _classify(ev: pd.DataFrame, row: int, label: str, a_first: int, a_last: int, h: dict) -> str:
    """The class (:data:`CLASSES`) of an event on one path only."""
    cat = str(ev["cat"].iat[row])
    ts = int(ev["ts_ns"].iat[row])
    end = ts + max(int(ev["dur_ns"].iat[row]), 0)
    if label == "aonkit only":
        if cat in ANNOTATION_CATS:
            return "annotation"
        if int(ev["dur_ns"].iat[row]) == 0 and cat not in GPU_CATS:
            return "zero-dur"
        if ts >= h["last_ns"] or (end > h["last_ns"] and str(ev["name"].iat[row]) in HTA_BLOCKING):
            return "path-tail"
        if end <= h["first_ns"]:
            return "path-head"
        return "cpu-branch" if cat not in GPU_CATS else "other"
    if ts >= a_last:
        return "path-tail"
    if end <= a_first:
        return "path-head"
    return "gpu-branch" if cat in GPU_CATS else "other"


def compare(name: str, trace=None) -> dict:  # noqa: ANN001
    """Every number of the comparison for one trace (see the module doc)."""
    import aonkit

    hta = json.loads((HTA_JSON / f"{name}.json").read_text())
    if trace is None:
        trace = aonkit.load(SHARED / TRACES[name] if name in TRACES else hta["trace_file"])
    ev = trace.events
    window = _window_ns(hta)
    h = hta_side(hta)
    _check_rows(ev, hta)
    a = aonkit_side(trace, window)
    path = a["path"]
    a_time = path.groupby("row")["dur_ns"].sum() / 1000.0  # node time; edge latencies are in the lengths
    a_rows = {int(x) for x in path["row"] if x >= 0}
    h_rows = h["events"]
    sets = {"both": a_rows & h_rows, "aonkit only": a_rows - h_rows, "HTA only": h_rows - a_rows}
    a_first, a_last = int(path["start_ns"].iat[0]), int((path["start_ns"] + path["dur_ns"]).iat[-1])
    cls = {(label, row): _classify(ev, row, label, a_first, a_last, h)
           for label in ("aonkit only", "HTA only") for row in sets[label]}
    by_cat: dict[str, dict[str, dict[str, float]]] = {}
    for label, rows in sets.items():
        for row in rows:
            d = by_cat.setdefault(_cat(ev, row), {}).setdefault(label, {"n": 0, "aon_us": 0.0, "hta_us": 0.0})
            d["n"] += 1
            d["aon_us"] += float(a_time.get(row, 0.0))
            d["hta_us"] += float(h["time_us"].get(row, 0.0))
    gaps = path[path["row"] < 0]
    if len(gaps):
        by_cat["(host gap)"] = {"aonkit only": {"n": len(gaps), "aon_us": float(gaps["dur_ns"].sum()) / 1000,
                                                "hta_us": 0.0}}
    causes: dict[str, dict[str, dict[str, float]]] = {}
    for (label, row), c in cls.items():
        d = causes.setdefault(label, {}).setdefault(c, {"n": 0, "aon_us": 0.0, "hta_us": 0.0})
        d["n"] += 1
        d["aon_us"] += float(a_time.get(row, 0.0))
        d["hta_us"] += float(h["time_us"].get(row, 0.0))
    res = {"trace": name, "window_ns": window, "hta": h, "aon": a, "sets": sets, "by_cat": by_cat, "classes": cls,
           "causes": causes, "events": ev, "a_time_us": a_time}
    res["lengths"] = _lengths(ev, path, a["whatif"], h)
    res["shared_time"] = _shared_time(ev, sets["both"], a_time, h)
    res["regions"] = _regions(ev, res)
    res["agreement"] = _agreement(ev, res)
    return res


def _check_rows(ev: pd.DataFrame, hta: dict) -> None:
    """HTA's ``ev`` must be the row of ``trace.events``: the same name and start (µs) for every critical event."""
    bad = [e["ev"] for e in hta["critical_path"]["events"]
           if str(ev["name"].iat[e["ev"]]) != e["name"] or int(ev["ts_ns"].iat[e["ev"]]) != int(e["ts"]) * 1000]
    if bad:
        raise ValueError(f"{len(bad)} HTA events do not match aonkit's rows, e.g. ev {bad[:5]} (a trace with a "
                         "base time, which aonkit applies and HTA 0.5 does not, is compared by bench/whatif.py only)")


def _hta_acct(ev: pd.DataFrame, path: pd.DataFrame) -> dict[str, np.ndarray]:
    """Masks splitting aonkit's path nodes by how HTA's model would count their time."""
    rows = path["row"].to_numpy()
    safe = np.maximum(rows, 0)
    cats = np.where(rows >= 0, ev["cat"].astype(object).to_numpy()[safe], "")
    names = np.where(rows >= 0, ev["name"].astype(object).to_numpy()[safe], "")
    gap = rows < 0
    ann = np.isin(cats, list(ANNOTATION_CATS))
    gpu = (path["kind"] == "gpu").to_numpy()
    sync_in = (path["edge_in"] == "sync").to_numpy()
    launches_next = np.append((path["edge_in"] == "launch").to_numpy()[1:], False)
    # HTA's exit edge of these calls weighs 0, but a path that leaves one by its launch edge keeps its time
    blocking = ~gap & ~ann & ~gpu & np.isin(names, list(HTA_BLOCKING)) & ~launches_next
    return {"gap": gap, "ann": ann, "gpu": gpu, "sync_in": sync_in, "blocking": blocking,
            "cpu": ~gap & ~ann & ~gpu & ~blocking}


def _hta_weight_of(ev: pd.DataFrame, path: pd.DataFrame) -> float:
    """aonkit path time (µs) as HTA's weights count it: no gaps, annotation self time, blocked or blocking time."""
    m = _hta_acct(ev, path)
    dur = path["dur_ns"].to_numpy()
    wait = path["wait_ns"].to_numpy()
    keep = m["cpu"] | m["gpu"]
    return float(dur[keep].sum() + wait[keep & ~m["sync_in"]].sum()) / 1000


def _lengths(ev: pd.DataFrame, path: pd.DataFrame, r, h: dict) -> dict:  # noqa: ANN001
    m = _hta_acct(ev, path)
    dur = path["dur_ns"].to_numpy()
    wait = path["wait_ns"].to_numpy()
    first, last = int(path["start_ns"].iat[0]), int((path["start_ns"] + path["dur_ns"]).iat[-1])

    def us(mask: np.ndarray, waits: bool = True) -> float:
        return float(dur[mask].sum() + (wait[mask].sum() if waits else 0)) / 1000

    out = {
        "hta_length_us": h["length_us"], "hta_span_us": h["span_us"],
        "hta_op_us": h["edge_time_us"].get("op", 0), "hta_launch_us": h["edge_time_us"].get("launch", 0),
        "hta_kk_us": h["edge_time_us"].get("kk", 0), "hta_pr283_length_us": h["pr283_length_us"],
        "aon_window_us": r.step_time_ns / 1000, "aon_path_span_us": (last - first) / 1000,
        "aon_path_time_us": float(dur.sum() + wait.sum()) / 1000,
        "aon_gap_us": us(m["gap"]), "aon_annotation_us": us(m["ann"]),
        "aon_sync_wait_us": float(wait[m["sync_in"]].sum()) / 1000,
        "aon_blocking_cpu_us": float(dur[m["blocking"]].sum()) / 1000,
        "aon_cpu_us": float(dur[m["cpu"]].sum()) / 1000, "aon_gpu_us": float(dur[m["gpu"]].sum()) / 1000,
        "aon_other_wait_us": float(wait[(m["cpu"] | m["gpu"] | m["blocking"]) & ~m["sync_in"]].sum()) / 1000,
        "aon_first_ns": first, "aon_last_ns": last,
        "head_us": (h["first_ns"] - first) / 1000, "tail_us": (last - h["last_ns"]) / 1000,
    }
    out["aon_hta_acct_us"] = _hta_weight_of(ev, path)
    return out


def _shared_time(ev: pd.DataFrame, both: set, a_time: pd.Series, h: dict) -> dict[str, dict[str, float]]:
    """Events on both paths: where the two sides give them different time, by reason."""
    out: dict[str, dict[str, float]] = {}
    for row in both:
        name = str(ev["name"].iat[row])
        if h["nodes_on"].get(row) == {"S"}:
            why = "HTA: start node only (the path leaves by the launch edge)"
        elif name in HTA_BLOCKING:
            why = "call on HTA's blocking list (exit edge 0)"
        elif h["nodes_on"].get(row) == {"E"}:
            why = "HTA: end node only"
        else:
            why = "other: both nodes on HTA's path"
        d = out.setdefault(why, {"n": 0, "aon_us": 0.0, "hta_us": 0.0})
        d["n"] += 1
        d["aon_us"] += float(a_time.get(row, 0.0))
        d["hta_us"] += float(h["time_us"].get(row, 0.0))
    return out


def _regions(ev: pd.DataFrame, res: dict) -> list[dict]:
    """Where the paths split: branch events grouped between the shared events around them."""
    h, path = res["hta"], res["aon"]["path"]
    ts = ev["ts_ns"].to_numpy()
    dur = ev["dur_ns"].to_numpy()
    anchors = sorted(int(ts[r]) for r in res["sets"]["both"] if dur[r] > 0)
    groups: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for (label, row), c in res["classes"].items():
        if c in ("cpu-branch", "gpu-branch", "other"):
            groups[bisect.bisect_right(anchors, int(ts[row]))].append((label, row))
    out = []
    for b, members in sorted(groups.items()):
        lo = anchors[b - 1] if b > 0 else -(2**62)
        hi = anchors[b] if b < len(anchors) else 2**62
        in_a = (path["start_ns"] >= lo) & (path["start_ns"] < hi)
        edges = [e for e in h["edges"] if lo <= e["src"]["node_ts"] * 1000 < hi]
        h_types: Counter = Counter()
        for e in edges:
            h_types[EDGE_SHORT[e["type"]]] += e["weight"]
        a_part = path[in_a]
        a_end = int((a_part["start_ns"] + a_part["dur_ns"]).max()) if len(a_part) else lo
        h_end = max((e["dst"]["node_ts"] * 1000 for e in edges), default=lo)
        split = min(res["sets"]["both"], key=lambda r: abs(int(ts[r]) - lo)) if b > 0 else -1
        out.append({
            "from_us": (lo - h["first_ns"]) / 1000 if b > 0 else None,
            "to_us": (hi - h["first_ns"]) / 1000 if b < len(anchors) else None,
            "split_at": str(ev["name"].iat[split]) if split >= 0 else "(path start)",
            "aon_only": sum(1 for lab, _ in members if lab == "aonkit only"),
            "hta_only": sum(1 for lab, _ in members if lab == "HTA only"),
            "hta_only_gpu_us": sum(float(dur[r]) for lab, r in members if lab == "HTA only") / 1000,
            "aon_wall_us": float(a_part["time_ns"].sum()) / 1000,
            "aon_hta_acct_us": _hta_weight_of(ev, a_part),
            "aon_end_us": (a_end - h["first_ns"]) / 1000,
            "hta_weight_us": float(sum(e["weight"] for e in edges)),
            "hta_types_us": dict(h_types),
            "hta_end_us": (h_end - h["first_ns"]) / 1000,
        })
    return out


def _agreement(ev: pd.DataFrame, res: dict) -> dict[str, dict[str, float]]:
    """Event-set agreement as measured, and without the presentation-only classes (zero-dur, annotation)."""
    s, cls = res["sets"], res["classes"]

    def row(both: int, a_only: int, h_only: int) -> dict[str, float]:
        return {"both": both, "aon_only": a_only, "hta_only": h_only,
                "jaccard": both / max(both + a_only + h_only, 1)}

    out = {"as is": row(len(s["both"]), len(s["aonkit only"]), len(s["HTA only"]))}
    h = res["hta"]
    out["as is"]["hta_time_on_both"] = sum(h["time_us"].get(r, 0.0) for r in s["both"]) / max(h["length_us"], 1)
    ev_time = sum(float(t) for r, t in res["a_time_us"].items()
                  if r >= 0 and str(ev["cat"].iat[int(r)]) not in ANNOTATION_CATS)  # no host gap, no annotation
    out["as is"]["aon_time_on_both"] = sum(float(res["a_time_us"].get(r, 0.0)) for r in s["both"]) / max(ev_time, 1)
    a_only = [r for r in s["aonkit only"] if cls[("aonkit only", r)] not in ("zero-dur", "annotation")]
    out["without zero-dur and annotation rows"] = row(len(s["both"]), len(a_only), len(s["HTA only"]))
    if res["hta"]["pr283_events"] is not None:
        a_rows = s["both"] | set(a_only)
        p = res["hta"]["pr283_events"]
        out["same, vs HTA + PR #283"] = row(len(a_rows & p), len(a_rows - p), len(p - a_rows))
    return out


def _fmt(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:,.0f}" if abs(x) >= 10 or x == int(x) else f"{x:,.1f}"


def markdown(results: list[dict]) -> str:
    """The tables of ``docs/critical-path-vs-hta.md``."""
    def short(res: dict) -> str:
        return TRACE_SHORT.get(res["trace"], res["trace"])

    out = ["### Critical events (rows)", "",
           "| trace | both | aonkit only | HTA only | Jaccard | HTA's length on shared events | aonkit's event time "
           "on shared events | without zero-dur / annotation rows: aonkit only, Jaccard "
           "| same vs HTA+PR #283: both / aonkit only / HTA only, Jaccard |",
           "|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for res in results:
        g = res["agreement"]
        a, b = g["as is"], g["without zero-dur and annotation rows"]
        c = g.get("same, vs HTA + PR #283")
        cc = "—" if c is None else f"{c['both']} / {c['aon_only']} / {c['hta_only']}, {c['jaccard']:.3f}"
        out.append(f"| {short(res)} | {a['both']} | {a['aon_only']} | {a['hta_only']} | {a['jaccard']:.3f} "
                   f"| {a['hta_time_on_both']:.2%} | {a['aon_time_on_both']:.2%} "
                   f"| {b['aon_only']}, {b['jaccard']:.3f} | {cc} |")
    out += ["", "### Events on one path only, by cause (n; µs aonkit / µs HTA)", "",
            "| trace | " + " | ".join(CLASSES) + " |", "|---|" + "---|" * len(CLASSES)]
    for res in results:
        cells = []
        for c in CLASSES:
            parts = []
            for label, tag in (("aonkit only", "A"), ("HTA only", "H")):
                d = res["causes"].get(label, {}).get(c)
                if d:
                    parts.append(f"{tag} {d['n']}: {_fmt(d['aon_us'])} / {_fmt(d['hta_us'])}")
            cells.append("; ".join(parts))
        out.append(f"| {short(res)} | " + " | ".join(cells) + " |")
    out += ["", "### Path lengths (µs)", "",
            "| trace | HTA length | HTA span | aonkit window | aonkit path span | host gaps | annotation self "
            "| blocked (sync edges) | blocking calls' CPU | other CPU | GPU | other edges | aonkit in HTA's "
            "accounting | ratio to HTA | HTA+PR #283 length |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for res in results:
        L = res["lengths"]
        out.append(
            f"| {short(res)} | {_fmt(L['hta_length_us'])} | {_fmt(L['hta_span_us'])} | {_fmt(L['aon_window_us'])} "
            f"| {_fmt(L['aon_path_span_us'])} | {_fmt(L['aon_gap_us'])} | {_fmt(L['aon_annotation_us'])} "
            f"| {_fmt(L['aon_sync_wait_us'])} | {_fmt(L['aon_blocking_cpu_us'])} | {_fmt(L['aon_cpu_us'])} "
            f"| {_fmt(L['aon_gpu_us'])} | {_fmt(L['aon_other_wait_us'])} | {_fmt(L['aon_hta_acct_us'])} "
            f"| {L['aon_hta_acct_us'] / max(L['hta_length_us'], 1):.4f} | {_fmt(L['hta_pr283_length_us'])} |")
    out += ["", "### Where the paths split (times in µs from HTA's first path node)", "",
            "| trace | split at | from | to | aonkit only / HTA only | aonkit wall | aonkit in HTA's accounting "
            "| HTA weight (op/launch/kk) | aonkit ends | HTA ends |", "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for res in results:
        for g in res["regions"]:
            t = g["hta_types_us"]
            out.append(
                f"| {short(res)} | {g['split_at'][:40]} | {_fmt(g['from_us'])} | {_fmt(g['to_us'])} "
                f"| {g['aon_only']} / {g['hta_only']} | {_fmt(g['aon_wall_us'])} | {_fmt(g['aon_hta_acct_us'])} "
                f"| {_fmt(g['hta_weight_us'])} ({_fmt(t.get('op', 0))}/{_fmt(t.get('launch', 0))}/"
                f"{_fmt(t.get('kk', 0))}) | {_fmt(g['aon_end_us'])} | {_fmt(g['hta_end_us'])} |")
    out += ["", "### Events on both paths: time by reason (n; µs aonkit / µs HTA)", "",
            "| trace | reason | n | aonkit µs | HTA µs |", "|---|---|--:|--:|--:|"]
    for res in results:
        for why, d in sorted(res["shared_time"].items()):
            out.append(f"| {short(res)} | {why} | {d['n']} | {_fmt(d['aon_us'])} | {_fmt(d['hta_us'])} |")
    for res in results:
        out += ["", f"### {short(res)}: by category (n: µs aonkit / µs HTA)", "",
                "| category | both | aonkit only | HTA only |", "|---|---|---|---|"]
        for c in sorted(res["by_cat"], key=lambda c: (c.startswith("("), c)):
            cells = []
            for label in ("both", "aonkit only", "HTA only"):
                d = res["by_cat"][c].get(label)
                cells.append("" if d is None else f"{d['n']}: {_fmt(d['aon_us'])} / {_fmt(d['hta_us'])}")
            out.append(f"| {c} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def detail(res: dict) -> str:
    """Every event on one path only, in time order (µs from HTA's first path node)."""
    ev = res["events"]
    lines = []
    for label in ("aonkit only", "HTA only"):
        rows = sorted(res["sets"][label], key=lambda r: (ev["ts_ns"].iat[r], r))
        lines.append(f"## {res['trace']}: {label} ({len(rows)})")
        for r in rows:
            t = (ev["ts_ns"].iat[r] - res["hta"]["first_ns"]) / 1000
            lines.append(f"  ev {r:6d} @{t:12,.0f} dur {ev['dur_ns'].iat[r] / 1000:10,.0f}  "
                         f"{str(ev['cat'].iat[r]):15s} {str(ev['name'].iat[r])[:50]:50s} "
                         f"aon {res['a_time_us'].get(r, 0):8,.0f} hta {res['hta']['time_us'].get(r, 0):8,.0f}  "
                         f"{res['classes'][(label, r)]}")
    return "\n".join(lines)


def to_json(res: dict) -> dict:
    """The numbers of one trace, JSON-ready."""
    return {"trace": res["trace"], "window_ns": res["window_ns"], "lengths": res["lengths"],
            "agreement": res["agreement"], "by_cat": res["by_cat"], "causes": res["causes"],
            "regions": res["regions"], "shared_time": res["shared_time"],
            "sets": {k: sorted(v) for k, v in res["sets"].items()},
            "classes": {f"{label}:{row}": c for (label, row), c in sorted(res["classes"].items())}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", action="append", help="one HTA JSON's name (repeatable; bench/whatif.py --hta writes "
                    "more cases); default the five")
    ap.add_argument("-v", "--verbose", action="store_true", help="list the events on one path only")
    ap.add_argument("--json", type=Path, help="write the numbers here")
    args = ap.parse_args(argv)
    results = [compare(n) for n in (args.trace or list(TRACES))]
    print(markdown(results))
    if args.verbose:
        for res in results:
            print()
            print(detail(res))
    if args.json:
        args.json.write_text(json.dumps([to_json(r) for r in results], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
