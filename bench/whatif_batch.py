"""What if the batch grew, against ground truth: the sample job's simulator run again at other batch sizes.

Usage: ``PYTHONPATH=. python bench/whatif_batch.py [--batches 2,8,16] [--base 4] [--shared DIR]``

``tools/make_sample_traces.py`` simulates the bundled 2-rank job at batch ``--base`` and again at each of
``--batches`` (same seed). Printed per batch: the re-simulated job's measured span, what-if on the base job with
``batch_rules(batch_scales(job, b / base))`` and its error, the naive answer (every compute kernel ``b / base``
times as long, and every GPU event) and the time ``batch_scales`` took. Then the sweep of the base job at
ProfilerStep#3, and, with ``--shared``, ``batch_scales(trace, 2)`` on every GPU trace there under 150 MB: how
much of the GPU time each rule covers, the step ratio, and which traces say they need ``spec=``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aonkit  # noqa: E402
from aonkit.analysis.critical_path import Rule, what_if  # noqa: E402
from aonkit.analysis.memory import memory_peaks  # noqa: E402
from aonkit.analysis.whatif_batch import batch_rules, batch_scales, batch_sweep  # noqa: E402
from aonkit.analysis.whatif_batch_memory import batch_memory  # noqa: E402


def simulated_job(out: Path, batch: int) -> aonkit.TraceSet:
    """The sample job simulated at ``batch`` (ranks written under ``out``, loaded as a job)."""
    spec = importlib.util.spec_from_file_location("_mst", ROOT / "tools" / "make_sample_traces.py")
    mst = importlib.util.module_from_spec(spec)
    sys.modules["_mst"] = mst  # dataclasses look their module up
    spec.loader.exec_module(mst)  # type: ignore[union-attr]
    out.mkdir(parents=True)
    for sim in mst.simulate_job(mst.SynthConfig(batch=batch)):
        mst.write_gzip(out / f"rank{sim.rank}.json.gz", mst.render_trace(sim))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return aonkit.load_job(sorted(out.glob("*.json.gz")))


def truth(batches: list[int], base_batch: int) -> aonkit.TraceSet:
    with tempfile.TemporaryDirectory() as tmp:
        base = simulated_job(Path(tmp) / f"b{base_batch}", base_batch)
        print("| batch | re-simulated span | what-if | error | every compute kernel x k | every GPU event x k | "
              "batch_scales s | peak memory re-simulated | projected |")
        print("|---|---|---|---|---|---|---|---|---|")
        for b in batches:
            k = b / base_batch
            job = simulated_job(Path(tmp) / f"b{b}", b)
            real = what_if(job).measured_ns
            peak = max(int(memory_peaks(t)[0]["peak_allocated_bytes"].max()) for t in job.values())
            projected = int(batch_memory(base, k)["projected_bytes"].max())
            t0 = time.perf_counter()
            rules = batch_rules(batch_scales(base, k))
            took = time.perf_counter() - t0
            pred = what_if(base, rules).step_time_ns
            naive = what_if(base, [Rule(k, gpu_class="computation")]).step_time_ns
            every = what_if(base, [Rule(k, kind="gpu")]).step_time_ns
            print(f"| {b} | {real / 1e6:.2f} ms | {pred / 1e6:.2f} ms | {100 * (pred / real - 1):+.2f}% | "
                  f"{100 * (naive / real - 1):+.2f}% | {100 * (every / real - 1):+.2f}% | {took:.2f} | "
                  f"{peak / 1e9:.3f} GB | {projected / 1e9:.3f} GB |")
        return base


def survey(shared: Path) -> None:
    print("\n| trace | batch_scales s | step x (2x batch) | GPU time by rule |")
    print("|---|---|---|---|")
    for f in sorted(p for p in shared.rglob("*.json*") if p.stat().st_size < 150e6):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t = aonkit.load(f)
        except aonkit.AonkitError:
            continue
        if not len(t.gpu_events):
            continue
        name = str(f.relative_to(shared))
        t0 = time.perf_counter()
        try:
            s = batch_scales(t, 2.0)
        except aonkit.AonkitError as exc:
            print(f"| {name} | - | - | says: {str(exc)[:70]} |")
            continue
        took = time.perf_counter() - t0
        r = what_if(t, batch_rules(s))
        share = (s.groupby("how")["dur_ns"].sum() / max(int(s["dur_ns"].sum()), 1)).sort_values(ascending=False)
        said = ", ".join(f"{h.split(':')[0].split(' (')[0]} {v:.0%}" for h, v in share.items())
        print(f"| {name} | {took:.2f} | {r.step_time_ns / r.model_ns:.3f} | {said} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", default="2,8,16")
    ap.add_argument("--base", type=int, default=4)
    ap.add_argument("--shared", type=Path, help="a folder of traces to survey (e.g. ../shared/traces)")
    a = ap.parse_args()
    batches = [int(b) for b in a.batches.split(",")]
    if a.base in batches:
        ap.error(f"--batches {a.batches} includes --base {a.base}: the base job is what the others are compared with")
    base = truth(batches, a.base)
    t0 = time.perf_counter()
    sweep = batch_sweep(base, (0.5, 1, 2, 4, 8), step=3)
    print(f"\nsweep of the base job at ProfilerStep#3 ({time.perf_counter() - t0:.2f} s):")
    print("| batch x | step | step x | throughput x | GPU share of the path | peak GPU memory |")
    print("|---|---|---|---|---|---|")
    for r in sweep.itertuples():
        print(f"| {r.factor:g} | {r.step_ns / 1e6:.2f} ms | {r.step_ratio:.3f} | {r.throughput_ratio:.3f} | "
              f"{r.gpu_share:.1%} | {r.peak_bytes / 1e9:.1f} of {r.capacity_bytes / 1e9:.1f} GB |")
    if a.shared:
        survey(a.shared)


if __name__ == "__main__":
    main()
