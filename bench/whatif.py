"""Critical path and what-if cost: graph build and re-time on a large synthetic trace and on real ones.

Usage: ``PYTHONPATH=. python bench/whatif.py [--events 1000000] [--repeat 7] [--job-dir DIR ...] [--lazy]``

``--job-dir`` adds a job folder of your own, e.g. the 64 ranks of 54 MB that ``bench/scale.py`` writes
(``/tmp/aonkit-scale-job``): loaded whole, or with ``--lazy`` as a lazily loaded job (each rank's graph is
then built in the job's worker processes, from its Parquet cache).

``--hta`` first runs HTA 0.5's ``critical_path_analysis`` on :data:`HTA_CASES` (HTA's venv:
``python tools/hta_diff.py --setup``), ``--only-hta`` prints only the side by side.

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
    ap.add_argument("--hta", action="store_true", help="run HTA's critical path first (bench/out/hta-venv)")
    ap.add_argument("--only-hta", action="store_true", help="only the side by side with HTA")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    import aonkit
    from aonkit.analysis.critical_path import Rule, graph_of, what_if

    if a.hta:
        run_hta(timeout=1800)
    if a.only_hta:
        hta_side_by_side()
        return 0
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


ALEXNET_STEP = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
HTA_CASES = [  # (name, trace under ../shared/traces, HTA's annotation, instance): its own tests' five, then steps
    ("simple_add", "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz", ALEXNET_STEP, "1"),
    ("end_to_end_simple_add", "hta/critical_path/end_to_end/simple_add/input/trace.json.gz", "", "0"),
    ("cuda_event_sync", "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz", "ProfilerStep", "0"),
    ("cuda_event_sync_multi_stream", "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz", "",
     "none"),
    ("alexnet", "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz", ALEXNET_STEP, "1"),
    ("qwen_h100_step", "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "ProfilerStep", "0"),
    ("resnet_mi300_step", "tracelens/mi300/resnet_act_checkpoint.json.gz", "ProfilerStep", "1"),
    ("trace_diff_control_step", "hta/trace_diff/control/control.json.gz", "ProfilerStep", "1"),
    ("df_index_resolver_step", "hta/df_index_resolver/df_index_resolver.json.gz", "ProfilerStep", "1"),
    ("df_index_resolver_5_steps", "hta/df_index_resolver/df_index_resolver.json.gz", "ProfilerStep", "0,4"),
]  # fmt: skip
HTA_OUT = ROOT / "bench" / "out" / "hta_critical_path"
HTA_PY = ROOT / "bench" / "out" / "hta-venv" / "bin" / "python"  # python tools/hta_diff.py --setup makes it


def run_hta(timeout: float) -> None:
    """HTA's critical path of each case, each in a fresh process of HTA's venv (``tools/hta_critical_path.py``)."""
    if not HTA_PY.exists():
        print(f"\n(no {HTA_PY.relative_to(ROOT)}: run `python tools/hta_diff.py --setup` first)")
        return
    for name, rel, annotation, instance in HTA_CASES:
        trace = SHARED / "traces" / rel
        if trace.exists():
            subprocess.run([str(HTA_PY), str(ROOT / "tools" / "hta_critical_path.py"), str(trace),
                            str(HTA_OUT / f"{name}.json"), "--annotation", annotation, "--instance", instance],
                           check=True, timeout=timeout)  # fmt: skip


def _aonkit_window(trace, hta: dict) -> tuple[int, int] | None:  # noqa: ANN001 - an aonkit Trace
    """HTA's window (file µs, end inclusive) on aonkit's clock, or None (annotation "": no upper bound in HTA).

    aonkit applies a trace's base time where HTA 0.5 does not (the TraceLens H100 and MI300 traces): the
    offset is read off HTA's critical events (each names its row and start); a µs either side covers HTA's
    rounding of starts.
    """
    import numpy as np

    w = hta["window_us"]
    if w["end"] is None:
        return None
    ts = trace.events["ts_ns"].to_numpy()
    off = int(np.median([ts[e["ev"]] - e["ts"] * 1000 for e in hta["critical_path"]["events"]]))
    return w["start"] * 1000 + off - 1000, w["end"] * 1000 + off + 1001


def hta_side_by_side() -> None:
    """aonkit's critical path against HTA 0.5's ``critical_path_analysis`` on the same trace and window.

    HTA's times are those of its run (``bench/out/hta_critical_path/<case>.json``, written by ``--hta``): its
    load (``TraceAnalysis``) and one ``critical_path_analysis`` call, in a fresh process. aonkit's are measured
    here: the load, then the graph and the critical path over the same window (``what_if(trace, window=..., scope="launched")``,
    the trace's first call, the kernels loaded by one untimed call before). The Jaccard index compares the two paths' critical events
    (rows of the trace) with zero-length and annotation rows left out (HTA has no node for them;
    ``docs/critical-path-vs-hta.md``).
    """
    import json

    import aonkit
    from aonkit.analysis.critical_path import what_if

    runs = [(c, HTA_OUT / f"{c[0]}.json") for c in HTA_CASES if (HTA_OUT / f"{c[0]}.json").exists()]
    if not runs:
        print(f"\n(no HTA results in {HTA_OUT.relative_to(ROOT)}: run with --hta; skipped the side by side)")
        return
    what_if(aonkit.load(SHARED / "traces" / HTA_CASES[2][1]), window=None)  # Numba's kernels loaded, not timed
    print("\n| HTA case (annotation, instance) | HTA graph nodes | HTA load s | HTA critical path s | aonkit load s "
          "| aonkit graph + critical path s | speed-up: path, load + path | critical events: HTA, aonkit, Jaccard |")
    print("|---|---|---|---|---|---|---|---|")
    for (name, rel, annotation, instance), run in runs:
        d = json.loads(run.read_text())
        t0 = time.perf_counter()
        t = aonkit.load(SHARED / "traces" / rel)
        t1 = time.perf_counter()
        path = what_if(t, window=_aonkit_window(t, d), scope="launched").critical_path  # HTA's step: CPU ops + their GPU work
        t2 = time.perf_counter()
        ev = t.events
        keep = (ev["dur_ns"].to_numpy() > 0) & ~ev["cat"].isin(["user_annotation", "python_function",
                                                                "gpu_user_annotation"]).to_numpy()  # fmt: skip
        ours = {int(r) for r in path["row"] if r >= 0 and keep[r]}
        theirs = {int(e["ev"]) for e in d["critical_path"]["events"] if keep[e["ev"]]}
        jac = len(ours & theirs) / max(len(ours | theirs), 1)
        w = d["wall_s"]
        hl, hc, al, ac = w["load"], w["critical_path_analysis"], t1 - t0, t2 - t1
        label = annotation[:24] or '""'
        print(f"| {name} ({label}, {instance}) | {d['graph']['nodes']:,} | {hl:.2f} | {hc:.2f} | "
              f"{al:.3f} | {ac:.3f} | {hc / ac:.0f}x, {(hl + hc) / (al + ac):.0f}x | "
              f"{len(theirs):,}, {len(ours):,}, {jac:.3f} |")


if __name__ == "__main__":
    sys.exit(main())
