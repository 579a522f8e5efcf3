"""Warm speed of this checkout against an earlier commit, both in one process, calls alternated.

Usage: ``PYTHONPATH=. python bench/ab_warm.py REV [TRACE] [--rounds N]`` (default trace: the
1,000,000-event synthetic trace of ``bench/analyses.py``; default 60 rounds).

The host this project is measured on changes speed by 10-50% between runs minutes apart, more than the
differences a kernel change makes; two processes run one after the other compare the host's phases as much
as the code. Here REV's ``aonkit`` is taken out (``git archive``) and imported under another name
(``aonkit_ab``, its own Numba cache), each analysis is called once by each version (compiling, with
``AONKIT_STANDINS=0``), then the two versions' calls alternate ``N`` times, per-trace memos cleared before
each, and the best of each is printed with their ratio (this checkout over REV).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"


def _package(rev: str) -> Path:
    """REV's aonkit (``git archive``) as the package ``aonkit_ab`` under bench/out, its absolute imports renamed."""
    dest = OUT / f"ab-{rev}"
    if not (dest / "aonkit_ab").exists():
        dest.mkdir(parents=True, exist_ok=True)
        tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "aonkit"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(dest)], input=tar.stdout, check=True)
        (dest / "aonkit").rename(dest / "aonkit_ab")
        for py in (dest / "aonkit_ab").rglob("*.py"):
            text = py.read_text()
            new = re.sub(r"\b(from|import) aonkit\b", r"\1 aonkit_ab", text)
            new = new.replace('"aonkit.', '"aonkit_ab.')
            if new != text:
                py.write_text(new)
    return dest


def _calls(mod: object, path: str) -> tuple[dict, object]:
    from importlib import import_module

    def a(name: str) -> object:
        return import_module(f"{mod.__name__}.analysis.{name}")

    trace = mod.load(path)
    frames = a("hta_compat").hta_frames(trace)
    # no launch call and GPU start at one µs (as bench/analyses.py): the queue counter's merge without ties
    untied = {r: f.assign(ts=f["ts"] * 2 + (f["stream"].to_numpy() != -1)) for r, f in frames.items()}
    q, bw, idle, hc, k, c = a("queues"), a("bandwidth"), a("idle"), a("hta_counters"), a("kernels"), a("correlation")
    calls = {
        "queue length summary (native ns)": lambda: q.queue_length_summary(trace),
        "queue length series (native ns)": lambda: q.queue_length_series(trace),
        "copy bandwidth series (native ns)": lambda: bw.memory_bandwidth_series(trace),
        "idle time by cause (native, per device)": lambda: idle.idle_summary(trace),
        "HTA idle time breakdown + interval stats": lambda: hc.idle_time_breakdown(frames),
        "HTA queue length summary (no ties)": lambda: hc.queue_length_summary(untied),
        "HTA queue length summary": lambda: hc.queue_length_summary(frames),
        "HTA queue length series": lambda: hc.queue_length_series(frames),
        "kernel breakdown (by class + by name)": lambda: (k.kernel_stats(trace, by="class"), k.kernel_stats(trace)),
        "GPU links": lambda: c.gpu_links(trace),
    }
    return calls, a("memo")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rev")
    ap.add_argument("trace", nargs="?", default=str(OUT / "synthetic_1000000.json"))
    ap.add_argument("--rounds", type=int, default=60)
    args = ap.parse_args()
    os.environ["AONKIT_STANDINS"] = "0"  # the kernels, compiled on the first call: warm speed only
    os.environ["AONKIT_BACKGROUND_COMPILE"] = "0"
    if not Path(args.trace).exists():
        print(f"{args.trace} is missing: run bench/analyses.py once (it writes the synthetic trace)")
        return 2
    sys.path.insert(0, str(_package(args.rev)))
    sys.path.insert(0, str(ROOT))
    import aonkit_ab

    import aonkit

    versions = {args.rev: _calls(aonkit_ab, args.trace), "this checkout": _calls(aonkit, args.trace)}
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()  # fmt: skip
    print(f"| analysis (memo cleared; best of {args.rounds}, alternated) | {args.rev} ms | {rev} ms | ratio |")
    print("|---|---|---|---|")
    for name in versions[args.rev][0]:
        best = {}
        for calls, memo in versions.values():
            memo.clear()
            calls[name]()
        for _ in range(args.rounds):
            for v, (calls, memo) in versions.items():
                memo.clear()
                t = time.perf_counter()
                calls[name]()
                best[v] = min(best.get(v, 1e9), time.perf_counter() - t)
        a, b = best[args.rev] * 1e3, best["this checkout"] * 1e3
        print(f"| {name} | {a:.2f} | {b:.2f} | {b / a:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
