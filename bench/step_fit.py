"""Engine step times measured from a trace: how well ``fit_step_time`` predicts passes it was not fitted to.

Usage: ``PYTHONPATH=. python bench/step_fit.py [--runs 3] [--device cpu] [--trace PATH]``

Each run profiles ``tools/generate_trace.py``'s decoder generating for its five batches of requests (or reads
``--trace``, a trace of that tool's requests), then:

1. reads the passes back (``forward_passes``: its time) and compares each pass's ``dur_ns`` with the wall time the
   loop measured around it (``time.perf_counter``; the profiler's own cost is in both);
2. fits on all passes: median |relative residual| per kind;
3. leaves each request out in turn, fits on the other four, and predicts the one left out: the error of its
   prefill, of its decode passes (median |relative|) and of its whole time (the sum of its passes), which is what
   the serving simulation adds up.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import aonkit  # noqa: E402
from aonkit.analysis import forward_passes  # noqa: E402
from aonkit.model import fit_step_time  # noqa: E402


def one_run(path: Path, pass_s: list[list[float]] | None, requests: tuple) -> dict[str, float]:
    trace = aonkit.load(path)
    t0 = time.perf_counter()
    p = forward_passes(trace)
    took = time.perf_counter() - t0
    out = {"events": len(trace.events), "forward_passes_ms": took * 1e3}
    if pass_s is not None:
        wall = np.concatenate([np.asarray(t) for t in pass_s])
        out["dur_over_wall_median"] = float(np.median(p["dur_ns"].to_numpy() / 1e9 / wall))
    fit = fit_step_time(p)
    s = fit.summary()
    out.update({f"fit_{k}_median_abs_rel": float(s.loc[k, "median_abs_relative"]) for k in s.index})
    request = np.repeat(np.arange(len(requests)), [n for _, _, n in requests])
    errs: dict[str, list[float]] = {"prefill": [], "decode": [], "request": []}
    for i in range(len(requests)):
        held = request == i
        f = fit_step_time(p[~held])
        got, want = f.predict(p[held]), p["dur_ns"].to_numpy()[held] / 1e9
        rel = got / want - 1
        errs["prefill"].append(abs(float(rel[0])))
        errs["decode"].append(float(np.median(np.abs(rel[1:]))))
        errs["request"].append(abs(float(got.sum() / want.sum() - 1)))
    out.update({f"held_out_{k}_median_abs_rel": statistics.median(v) for k, v in errs.items()})
    out.update({f"held_out_{k}_max_abs_rel": max(v) for k, v in errs.items()})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--trace", type=Path, help="a trace of generate_trace.py's REQUESTS (no wall times then)")
    args = ap.parse_args()
    from generate_trace import REQUESTS, generation_trace

    rows = []
    if args.trace:
        rows.append(one_run(args.trace, None, REQUESTS))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.runs):
                path = Path(tmp) / f"gen{r}.json.gz"
                info = generation_trace(path, args.device, annotate=bool(r % 2))
                rows.append(one_run(path, info["pass_s"], REQUESTS))
    keys = list(rows[0])
    print("| run | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for i, row in enumerate(rows):
        print(f"| {i} | " + " | ".join(f"{row[k]:.3g}" for k in keys) + " |")


if __name__ == "__main__":
    main()
