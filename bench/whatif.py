"""Critical path and what-if cost: graph build and re-time on a large synthetic trace and on real ones.

Usage: ``PYTHONPATH=. python bench/whatif.py [--events 1000000] [--repeat 7] [--job-dir DIR ...] [--lazy]``

``--job-dir`` adds a job folder of your own, e.g. the 64 ranks of 54 MB that ``bench/scale.py`` writes
(``/tmp/aonkit-scale-job``): loaded whole, or with ``--lazy`` as a lazily loaded job (each rank's graph is
then built in the job's worker processes, from its Parquet cache).

Prints, per input (a synthetic trace, two real ones, a generated 64-rank job):
events, graph nodes and edges, the first build (the graph; for a job each rank's graph, the clock
offsets, the collectives tied and the job numbered topologically), the median re-time after a rule
change (the slider's path: one lean pass that writes the finish times), and the first critical-path
table after it (for a job this makes the combined trace, for the names). HTA's ``critical_path_analysis``
side by side: see ``hta_side_by_side``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
REAL = ["tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "hta/df_index_resolver/df_index_resolver.json.gz"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--job-dir", type=Path, action="append", default=[])
    ap.add_argument("--only-jobs", action="store_true", help="measure only the --job-dir folders")
    ap.add_argument("--lazy", action="store_true", help="load the --job-dir folders lazily")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    import aonkit
    from aonkit.analysis.critical_path import Rule, graph_of, what_if

    with tempfile.TemporaryDirectory() as tmp:
        inputs = []
        gen = SHARED / "tools" / "gen_trace.py"
        if gen.exists():
            syn = Path(tmp) / "syn.json"
            subprocess.run([sys.executable, str(gen), "--events", str(a.events), str(syn)], check=True,
                           capture_output=True)
            inputs.append((f"synthetic {a.events:,}", syn))
        inputs += [(Path(r).name[:32], SHARED / "traces" / r) for r in REAL if (SHARED / "traces" / r).exists()]
        job_dir = Path(tmp) / "job64"
        sys.path.insert(0, str(ROOT))
        from tests.gen_ranks import write_job

        write_job(job_dir, ranks=64, steps=6, straggler=37, exposed_ranks=(), launches=True)
        inputs.append(("64-rank job (gen_ranks, launches)", job_dir))
        if a.only_jobs:
            inputs = []
        inputs += [(f"job {d.name}", d) for d in a.job_dir]
        print("| input | events | nodes | edges | build s | re-time ms (median) | first path table s "
              "| identity vs measured |")
        print("|---|---|---|---|---|---|---|---|")
        for label, path in inputs:
            lazy = a.lazy and path in a.job_dir
            t = aonkit.load(path, lazy=True) if lazy else aonkit.load_job(path) if path.is_dir() else aonkit.load(path)
            t0 = time.perf_counter()
            g = graph_of(t)
            build = time.perf_counter() - t0
            base = what_if(t)
            times = []
            for k in range(a.repeat):
                t0 = time.perf_counter()
                r = what_if(t, [Rule(0.5 + 0.05 * k, kind="gpu")])
                times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            table = len(r.critical_path)
            first_table = time.perf_counter() - t0
            err = (base.model_ns - base.measured_ns) / base.measured_ns
            n_ev = "-" if lazy else f"{sum(len(x) for x in t.values()) if isinstance(t, aonkit.TraceSet) else len(t):,}"
            print(f"| {label}{' (lazy)' if lazy else ''} | {n_ev} | "
                  f"{len(g):,} | {len(g.src):,} | {build:.2f} | {1000 * statistics.median(times):.1f} | "
                  f"{first_table:.2f} ({table:,} nodes) | {100 * err:+.2f}% |")
            if lazy:
                t.close()
    hta_side_by_side()
    return 0


def hta_side_by_side() -> None:
    """aonkit's graph + critical path against HTA 0.5's ``critical_path_analysis`` wall time on its own traces.

    HTA's times are those its run recorded (``bench/out/hta_critical_path/*.json``, made by the study behind
    ``docs/critical-path-hta.md``); aonkit's are measured here, first call per trace (kernels compiled).
    """
    import json

    import aonkit
    from aonkit.analysis.critical_path import critical_path

    runs = sorted((ROOT / "bench" / "out" / "hta_critical_path").glob("*.json"))
    if not runs:
        print("\n(no HTA results in bench/out/hta_critical_path: skipped the side by side)")
        return
    print("\n| HTA trace | HTA critical_path_analysis s | aonkit graph + critical path s (first call) | speed-up |")
    print("|---|---|---|---|")
    for run in runs:
        d = json.loads(run.read_text())
        files = sorted(Path(d["trace_dir"]).glob("*.json*")) if Path(d["trace_dir"]).is_dir() else []
        if not files:
            continue
        path = files[0]
        t = aonkit.load(path)
        t0 = time.perf_counter()
        critical_path(t)
        ours = time.perf_counter() - t0
        theirs = float(d["wall_s"]["critical_path_analysis"])
        print(f"| {run.stem} | {theirs:.3f} | {ours:.4f} | {theirs / ours:.0f}x |")



if __name__ == "__main__":
    sys.exit(main())
