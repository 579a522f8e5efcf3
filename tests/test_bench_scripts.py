"""Every bench script that runs on a CPU runs, small, and prints its table.

``bench/`` scripts import the package's functions and call them as the code was when each was written; nothing
else runs them, so a renamed function or a new argument breaks one silently until someone re-measures (session 51:
``bench/serving.py``). Each runs here in a child process on its smallest input (seconds), and its output must hold
the header or row its table starts with. No figure is checked: these are not timings. Not here: the serving scripts
(``test_bench_serving.py``), those that drive Chromium and JupyterLab (``dashboard_page``, ``monitor_page``,
``whatif_page``, ``browser_zoom``, ``_lab``), those that take half a minute or more at their smallest
(``parse --quick``, ``coldstart``, ``daemon``, ``fleet``), ``gpu_lag`` (a GPU) and ``ab_warm`` (a git revision).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .test_bench_serving import ROOT, run_bench

SAMPLE = "sample_traces/gpu_synthetic_rank0.json.gz"

CASES = [
    ("analyses", (SAMPLE,), "kernel breakdown (by class + by name)"),
    ("whatif", ("--events", "5000", "--repeat", "1"), "| synthetic 5,000 | 5,001 |"),
    ("nsys", ("--kernels", "5000", "--repeat", "1"), "| sqlite scan s | pandas.read_sql s | aonkit.load s |"),
    ("views", ("--events", "20000", "--reps", "1", "--report-events", "5000"), "synthetic trace: 20,000 events"),
    ("cache_integrity", ("--events", "5000", "--repeat", "1"), "| synthetic 5,000 |"),
    ("daemon_tick", ("--gpus", "2", "--ticks", "2", "--rounds", "1"), "| part | µs, each round | mean |"),
    ("monitor_poll", ("--polls", "3"), "| NvmlSampler, 8 fake GPUs | 272 |"),
    ("model_widgets", ("--repeats", "1"), "| all, settings seen before |"),
    ("model_widgets", ("--repeats", "1", "--freeze-heap", "--keep-settings", "1"), ", heap frozen, keep_settings=1"),
    ("models", (), "| params (B) | TP | PP | GPUs | batch | measured TFLOP/s |"),
    ("overhead", ("--seconds", "0.3", "--rates", "10", "--cell", "100000", "--repeat", "1"),
     "| HostSampler (compiled loop) | 10 |"),
    ("scale", ("--ranks", "2", "--events", "2000", "--dir", "{tmp}/job"), "| eager |"),
    ("timeline_query", ("--trace", SAMPLE, "--zooms", "1", "--repeats", "1"),
     "| gpu_synthetic_rank0.json.gz | 34,374 |"),
    ("gpu_models", ("--skip-gemm", "--skip-decode"), "### (c) calibrated on one batch size, predicting the other"),
    ("tile_trace", (SAMPLE, "{tmp}/tiled.json", "--copies", "2"), "tiled.json: 68,733 events"),
    ("whatif_batch", ("--batches", "8", "--base", "4"), "| 8 |"),
    ("report_focus", ("--traces", "sample", "--repeats", "1"), "| sample | 34,374 |"),
    ("step_fit", ("--runs", "1"), "| run | events | forward_passes_ms |"),
    ("fuzz", ("--cases", "200", "--procs", "1"), "RESULT: PASS"),
    ("fuzz", ("--cases", "200", "--procs", "1", "--faults"), "RESULT: PASS"),
]


IDS = [c[0] + "".join(f" {a}" for a in ("--faults", "--freeze-heap") if a in c[1]) for c in CASES]


@pytest.mark.parametrize(("script", "args", "expect"), CASES, ids=IDS)
def test_a_bench_script_runs_small_and_prints_its_table(script, args, expect, tmp_path):
    # GIVEN a bench script and its smallest arguments (step_fit profiles a real torch CPU model)
    if script == "step_fit":
        pytest.importorskip("torch")
    # WHEN it runs in a child process, as its usage line says
    out = run_bench(f"bench/{script}.py", *(a.format(tmp=tmp_path) for a in args))
    # THEN it exits 0 and prints the table's header or first row
    assert expect in out, out[-3000:]


def test_whatif_batch_says_when_the_base_batch_is_among_the_others():
    # GIVEN --batches that include --base (the script made the base job's folder twice and crashed)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # WHEN it runs
    proc = subprocess.run([sys.executable, "bench/whatif_batch.py", "--batches", "2,4", "--base", "4"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    # THEN argparse refuses it, naming both options, before simulating anything
    assert proc.returncode == 2
    assert "--batches 2,4 includes --base 4" in proc.stderr
    assert proc.stdout == ""
