"""HTA 0.5.0's critical path of one trace window, as JSON (run with the Python of HTA's venv only).

Usage::

    bench/out/hta-venv/bin/python tools/hta_critical_path.py TRACE OUT.json [--annotation A] [--instance I]

``TRACE`` is one Kineto JSON (``.json`` or ``.json.gz``); HTA reads it as rank 0. ``--annotation`` is
HTA's substring (default ``""``: the whole trace); ``--instance`` an int, ``a,b`` (a range) or ``none``.
The JSON holds what ``tools/cp_compare.py`` and ``bench/whatif.py`` read: HTA's window in the file's µs
(``end`` null for annotation ``""``, which has no upper bound in HTA), the path's edges (type, weight, the
event an op or kernel-kernel edge is attributed to, both ends' event row, start/end flag and time) and
critical events (row, name, start), its length (the sum of the weights), the graph's size, and the wall time
of HTA's load and of ``critical_path_analysis`` (one call, this process). Event rows are HTA's ``index``:
the event's position in ``traceEvents``, which is also its row in ``aonkit``'s ``trace.events``.
It imports nothing of aonkit (HTA's venv pins older pandas and numpy).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
import warnings
from pathlib import Path


def _instance(text: str) -> int | tuple[int, int] | None:
    if text.lower() == "none":
        return None
    if "," in text:
        a, b = text.split(",")
        return int(a), int(b)
    return int(text)


def _window(df, sym_index: dict, annotation: str, instance) -> tuple[int, int | None]:  # noqa: ANN001
    """HTA's window in its own (shifted) µs, chosen as ``critical_path_analysis`` chooses it."""
    if annotation == "":
        return int(df.ts.min()), None
    ids = [v for k, v in sym_index.items() if annotation in k]
    a, b = (0, 0) if instance is None else (instance if isinstance(instance, tuple) else (instance, instance))
    rows = df[df.name.isin(ids)]
    return int(rows.ts[a : b + 1].min()), int((rows.ts + rows.dur)[a : b + 1].max())


def run(trace: Path, annotation: str, instance) -> dict:  # noqa: ANN001
    """Load ``trace`` into HTA, run its critical path over the window and return the JSON's content."""
    logging.disable(logging.WARNING)  # HTA logs each phase at INFO/WARNING
    warnings.simplefilter("ignore", FutureWarning)  # HTA 0.5.0's pandas idioms
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as tmp:  # HTA wants a trace folder; the file is named, not copied
        t0 = time.perf_counter()
        ta = TraceAnalysis(trace_files={0: str(trace.resolve())}, trace_dir=tmp)
        t1 = time.perf_counter()
        out = ta.critical_path_analysis(0, annotation, instance)
        t2 = time.perf_counter()
    if out is None:
        raise SystemExit(f"{trace}: HTA found no annotation matching {annotation!r}")
    g, ok = out
    df, syms = ta.t.get_trace(0), ta.t.symbol_table
    shift = int(ta.t.min_ts)
    start, end = _window(df, syms.get_sym_id_map(), annotation, instance)
    names = syms.get_sym_table()
    ts_of = df.set_index("index")["ts"] if "index" in df.columns else df["ts"]
    name_of = df.set_index("index")["name"] if "index" in df.columns else df["name"]

    def end_of(nid: int) -> dict:
        n = g.node_list[nid]
        return {"ev": int(n.ev_idx), "is_start": bool(n.is_start), "node_ts": int(n.ts) + shift}

    edges = []
    for e in g.critical_path_edges_set:
        attributed = g.edge_to_event_map.get((e.begin, e.end))
        edges.append({"type": e.type.value, "weight": int(e.weight), "src": end_of(e.begin), "dst": end_of(e.end),
                      "attributed_ev": -1 if attributed is None else int(attributed)})
    edges.sort(key=lambda e: (e["src"]["node_ts"], e["dst"]["node_ts"]))
    events = [{"ev": int(i), "name": names[int(name_of.at[i])], "ts": int(ts_of.at[i]) + shift}
              for i in sorted(g.critical_path_events_set)]
    path_ts = [int(g.node_list[n].ts) + shift for n in g.critical_path_nodes]
    return {
        "trace_file": str(trace), "trace_dir": str(trace.parent), "annotation": annotation,
        "instance_id": list(instance) if isinstance(instance, tuple) else instance, "success": bool(ok),
        "hta_version": _version(), "window_us": {"start": start + shift, "end": None if end is None else end + shift},
        "graph": {"nodes": g.number_of_nodes(), "edges": g.number_of_edges(), "rows": int(len(df))},
        "critical_path": {"events": events, "edges": edges, "length_us": sum(e["weight"] for e in edges),
                          "first_ts_us": min(path_ts), "last_ts_us": max(path_ts), "nodes": len(path_ts)},
        "wall_s": {"load": t1 - t0, "critical_path_analysis": t2 - t1},
    }


def _version() -> str:
    from importlib.metadata import version

    return version("HolisticTraceAnalysis")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--annotation", default="")
    p.add_argument("--instance", type=_instance, default=0)
    a = p.parse_args(argv)
    res = run(a.trace, a.annotation, a.instance)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res))
    w = res["wall_s"]
    print(f"{a.trace.name}: load {w['load']:.2f} s, critical_path_analysis {w['critical_path_analysis']:.2f} s, "
          f"{res['graph']['nodes']} nodes, path {res['critical_path']['nodes']} nodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
