"""The serving bench scripts run, small: they call the kernel and the model as the code is now.

``bench/serving.py`` calls the simulation kernel with its arguments in order; in session 51 a new argument broke
it and nothing noticed until it was run. These run each script on a few thousand requests (no timing is checked).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_bench(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.parametrize(("script", "args", "rows"), [
    ("bench/serving.py", ("--requests", "3000", "--repeat", "1"), ("batching, whole prompts", "M/M/1")),
    ("bench/serving_kv.py", ("--requests", "1500",), ("| reserve | own output |", "| paged | 4,096 |",
                                                      "| paged | cached |")),
    ("bench/serving_disagg.py", ("--requests", "1500"), ("| 1 | colocated, whole prompts |",
                                                        "| 5 | 1 prefill + 1 decode |")),
    ("bench/serving_spec.py", ("--requests", "1500", "--repeats", "1"), ("| Llama-3.2 1B draft | 326,341 |",
                                                                         "| 1,500 requests |")),
    ("bench/serving_spec.py", ("--requests", "1500", "--repeats", "1", "--kv-policy", "paged"),
     ("KV cache: paged", "req/s, preemptions |", "| Llama-3.2 1B draft | 326,341 |")),
])
def test_a_serving_bench_script_runs_and_prints_its_table(script, args, rows):
    out = run_bench(script, *args)
    for row in rows:
        assert row in out, out[-2000:]
