#!/usr/bin/env python3
"""Cold start: what a new user's first calls cost, from an empty Numba cache.

Usage::

    PYTHONPATH=. python bench/coldstart.py [--trace PATH] [--skip-demo] [--skip-warmup]

Every phase runs in a fresh process with its own empty ``NUMBA_CACHE_DIR`` (so
nothing compiled earlier on this machine helps), and a Numba event listener
counts and times every compilation:

* ``import``: ``import aonkit`` in a new interpreter of its own, and which of numba, pandas and
  pyarrow it loaded;
* ``load``: the first ``aonkit.load`` of a 54 MB trace (``gen_trace.py
  --events 185000`` unless ``--trace`` is given), then the same load again in
  the same process (warm): with the quick first-run reader
  (:mod:`aonkit.sources.first_run`), and with ``AONKIT_QUICK_PARSE=0`` (the
  Numba parser compiled on the call); then a new user's first load with the
  background compile on, the time until that compile has ended (the first
  views, the parser, then the rest of ``aonkit warmup``), a load in the next
  process, and every analysis's first call in a process after that;
* each analysis's first call, in catalogue order, after the load (each
  analysis pays only for kernels that no earlier call compiled), then the
  same call warm;
* ``demo``: ``aonkit demo`` from an empty cache;
* ``warmup``: ``aonkit warmup`` from an empty cache, then the demo and the
  54 MB load in new processes on that cache: what they still compile.

Printed, and written as Markdown to ``bench/out/coldstart.md``; the per-kernel
compile table (top-level compilations, which include the helpers they
compile) goes to ``bench/out/coldstart_kernels.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
GEN = ROOT.parent / "shared" / "tools" / "gen_trace.py"

# Runs in the child. Installs the compile listener before aonkit is imported.
CHILD = r"""
import json, sys, time, warnings
from numba.core import event
depth = []; compiles = []
class _L(event.Listener):
    def on_start(self, ev):
        depth.append(time.perf_counter())
    def on_end(self, ev):
        t = depth.pop()
        if not depth:
            d = ev.data["dispatcher"]
            compiles.append([PHASE[0], d.py_func.__module__ + "." + d.py_func.__qualname__, time.perf_counter() - t])
event.register("numba:compile", _L())
PHASE = ["import"]
import aonkit
out = {}
mode, arg = sys.argv[1], sys.argv[2]

def timed(name, fn):
    PHASE[0] = name
    n0 = len(compiles)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn()
            ok = True
        except Exception as e:  # an analysis that does not apply to this trace
            ok = type(e).__name__
    first = time.perf_counter() - t
    c = compiles[n0:]
    return {"first_s": first, "compile_s": sum(x[2] for x in c), "n_compiles": len(c), "ok": ok}

if mode == "analyses":
    sys.path.insert(0, sys.argv[3])
    from tools.analysis_digest import trace_analyses
    res = {"load": timed("load", lambda: aonkit.load(arg))}
    trace = aonkit.load(arg)
    t = time.perf_counter(); aonkit.load(arg); res["load"]["warm_s"] = time.perf_counter() - t
    for name, fn in trace_analyses().items():
        res[name] = timed(name, lambda: fn(trace))
        from aonkit.analysis.memo import clear
        clear(trace)
        t = time.perf_counter()
        try:
            fn(trace)
        except Exception:
            pass
        res[name]["warm_s"] = time.perf_counter() - t
    res["report"] = timed("report", lambda: aonkit.to_html(trace))
    out["entries"] = res
elif mode == "one":  # one analysis, first thing after a load, in a process of its own
    sys.path.insert(0, sys.argv[3])
    from tools.analysis_digest import trace_analyses
    fn = trace_analyses()[sys.argv[4]]
    trace = aonkit.load(arg)
    out["entries"] = {sys.argv[4]: timed(sys.argv[4], lambda: fn(trace))}
elif mode == "firstload":
    from aonkit.sources import first_run
    out["entries"] = {"load": timed("load", lambda: aonkit.load(arg))}
    out["background"] = first_run._state["pid"]
elif mode == "demo":
    from aonkit.demo import run_demo
    import contextlib, io
    with contextlib.redirect_stdout(io.StringIO()):
        out["entries"] = {"demo": timed("demo", lambda: run_demo(__import__("pathlib").Path(arg)))}
    from aonkit.sources import first_run
    out["background"] = first_run._state["pid"]  # the parent waits for it: it would share the cores with the next phase
elif mode == "warmup":
    from aonkit.warmup import warmup
    out["entries"] = {"warmup": timed("warmup", lambda: warmup(quiet=True))}
out["compiles"] = compiles
print("@@" + json.dumps(out))
"""


IMPORT = ("import sys, time; t = time.perf_counter(); import aonkit; dt = time.perf_counter() - t; "
          "print(dt, [m for m in ('numba', 'pandas', 'pyarrow') if m in sys.modules])")


def import_cost() -> str:
    """``import aonkit`` alone in a new interpreter: seconds, and which heavy packages it loaded."""
    out = subprocess.run([sys.executable, "-c", IMPORT], env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, check=True).stdout.split(maxsplit=1)
    return f"{float(out[0]):.3f} s, loading {out[1].strip()}"


def child(mode: str, arg: str, cache: str, *extra: str, **env_extra: str) -> dict:
    """Run one phase in a new interpreter on the Numba cache ``cache``; its report."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT), "AONKIT_COMPILE_NOTICE": "0",
           "AONKIT_QUICK_PARSE": "auto", "AONKIT_BACKGROUND_COMPILE": "1", **env_extra}
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD, mode, arg, str(ROOT), *extra], env=env, capture_output=True,
                       text=True, check=False)
    wall = time.perf_counter() - t
    line = [x for x in p.stdout.splitlines() if x.startswith("@@")]
    if p.returncode or not line:
        raise RuntimeError(f"{mode} child failed:\n{p.stderr[-3000:]}")
    res = json.loads(line[-1][2:])
    res["wall_s"] = wall
    return res


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def isolated(trace: str, size_mb: float) -> int:
    """Each analysis as a new user's first call: its own process and empty cache, right after a quick load.

    No background compilation (it would share the 2 cores): what the call itself costs, whichever runs first.
    """
    sys.path.insert(0, str(ROOT))
    from tools.analysis_digest import trace_analyses

    lines = [f"| analysis, first call in its own process on an empty cache ({size_mb:.0f} MB trace) | first call s | "
             "of which compiling s | compilations |", "|---|---|---|---|"]
    worst = []
    for name in trace_analyses():
        with tempfile.TemporaryDirectory() as tmp:
            e = child("one", trace, f"{tmp}/c", name, AONKIT_BACKGROUND_COMPILE="0")["entries"][name]
        worst.append((e["first_s"], name))
        note = "" if e.get("ok", True) is True else f" ({e['ok']})"
        lines.append(f"| {name}{note} | {e['first_s']:.2f} | {e['compile_s']:.2f} | {e['n_compiles']} |")
        print(lines[-1], flush=True)
    over = sorted((w for w in worst if w[0] > 2.0), reverse=True)
    lines += ["", f"over 2 s: {len(over)} of {len(worst)}" + (": " + ", ".join(f"{n} {s:.1f}" for s, n in over)
                                                           if over else "")]
    print(lines[-1])
    (OUT / "coldstart_isolated.md").write_text("\n".join(lines) + "\n")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", help="trace to load (default: 54 MB from gen_trace.py --events 185000)")
    ap.add_argument("--skip-demo", action="store_true")
    ap.add_argument("--skip-warmup", action="store_true")
    ap.add_argument("--isolated", action="store_true",
                    help="only: each analysis first after a load in a process of its own, each on an empty cache")
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    trace = a.trace
    if trace is None:
        trace = str(OUT / "coldstart_185k.json")
        if not Path(trace).exists():
            subprocess.run([sys.executable, str(GEN), trace, "--events", "185000"], check=True)
    size_mb = os.path.getsize(trace) / 1e6
    if a.isolated:
        return isolated(trace, size_mb)
    rows, kernels = [], []
    with tempfile.TemporaryDirectory() as tmp:
        # the analyses after a first load that reads quickly (no background compile: it would share the 2 cores)
        r = child("analyses", trace, f"{tmp}/c1", AONKIT_BACKGROUND_COMPILE="0")
        kernels += r["compiles"]
        for name, e in r["entries"].items():
            rows.append(("load (quick reader; warm: again quick)" if name == "load" else name, e))
        p = child("analyses", trace, f"{tmp}/c4", AONKIT_QUICK_PARSE="0")["entries"]["load"]
        rows.insert(1, ("load compiling the Numba parser on the call (AONKIT_QUICK_PARSE=0)", p))
        t = time.perf_counter()
        f = child("firstload", trace, f"{tmp}/c5")
        while _alive(f["background"]):
            time.sleep(0.2)
        rows.insert(2, ("first load, as a new user's (background compile on)", f["entries"]["load"]))
        rows.insert(3, ("... until the background compile has ended (views, parser, then the rest of warmup)", {
            "first_s": time.perf_counter() - t, "compile_s": float("nan"), "n_compiles": 0}))
        n = child("firstload", trace, f"{tmp}/c5")
        rows.insert(4, ("load in the next process", n["entries"]["load"]))
        b = child("analyses", trace, f"{tmp}/c5", AONKIT_BACKGROUND_COMPILE="0")["entries"]
        worst = max((k for k in b if k not in ("load", "report")), key=lambda k: b[k]["first_s"])
        rows.insert(5, ("every analysis's first call in a process after that", {
            "first_s": sum(e["first_s"] for k, e in b.items() if k != "load"),
            "compile_s": sum(e["compile_s"] for k, e in b.items() if k != "load"),
            "n_compiles": sum(e["n_compiles"] for k, e in b.items() if k != "load")}))
        rows.insert(6, (f"... the slowest analysis ({worst})", b[worst]))
        rows.insert(7, ("... the report (bokeh models: Python's work, no cache keeps it)", b["report"]))
        imp = import_cost()
        if not a.skip_demo:
            d = child("demo", f"{tmp}/demo", f"{tmp}/c2")
            rows.append(("demo (own process, empty cache)", {**d["entries"]["demo"], "wall": d["wall_s"]}))
            while _alive(d.get("background")):  # the demo's background compile ends before the next phase
                time.sleep(0.2)
        if not a.skip_warmup:
            w = child("warmup", "", f"{tmp}/c3")
            rows.append(("aonkit warmup (empty cache)", {**w["entries"]["warmup"], "wall": w["wall_s"]}))
            d = child("demo", f"{tmp}/demo2", f"{tmp}/c3")
            rows.append(("demo after warmup", {**d["entries"]["demo"], "wall": d["wall_s"]}))
            r2 = child("analyses", trace, f"{tmp}/c3")
            after = r2["entries"]
            rows.append((f"load {size_mb:.0f} MB after warmup", after["load"]))
            left = sum(e["n_compiles"] for k, e in after.items() if k != "load")
            rows.append(("every analysis after warmup", {
                "first_s": sum(e["first_s"] for k, e in after.items() if k != "load"),
                "compile_s": sum(e["compile_s"] for k, e in after.items() if k != "load"), "n_compiles": left}))
    lines = [f"import aonkit (a new interpreter, nothing else imported): {imp}", "",
             f"| entry point ({size_mb:.0f} MB trace) | first call s | of which compiling s | compilations | "
             "warm s | process wall s |", "|---|---|---|---|---|---|"]
    for name, e in rows:
        warm = f"{e['warm_s']:.3f}" if "warm_s" in e else ""
        wall = f"{e['wall']:.1f}" if "wall" in e else ""
        note = "" if e.get("ok", True) is True else f" ({e['ok']})"
        lines.append(f"| {name}{note} | {e['first_s']:.2f} | {e['compile_s']:.2f} | {e['n_compiles']} | {warm} | "
                     f"{wall} |")
    text = "\n".join(lines)
    print(text)
    (OUT / "coldstart.md").write_text(text + "\n")
    by: dict[str, list[float]] = {}
    for phase, name, s in kernels:
        by.setdefault(name, [0.0, 0, phase])
        by[name][0] += s
        by[name][1] += 1
    kt = ["| kernel (top-level compile) | first needed by | s | specializations |", "|---|---|---|---|"]
    for name, (s, n, phase) in sorted(by.items(), key=lambda kv: -kv[1][0]):
        kt.append(f"| {name.removeprefix('aonkit._kernels.')} | {phase} | {s:.2f} | {n} |")
    (OUT / "coldstart_kernels.md").write_text("\n".join(kt) + "\n")
    print(f"\nkernels: {len(by)} compiled at top level, {sum(v[0] for v in by.values()):.1f} s; "
          f"table in {OUT / 'coldstart_kernels.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
