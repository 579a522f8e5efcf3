"""Serving queue model: time to simulate a million requests.

Usage: ``PYTHONPATH=. python bench/serving.py [--requests 1000000] [--repeat 5]``

Workloads: (a) continuous batching, 8 replicas x 64 sequences, lognormal prompts (mean 512, CV 1), geometric
outputs (mean 128), Poisson arrivals at about 80% of capacity, with and without chunked prefill; (b) M/M/1-like
(one replica, one sequence, one output token) at 70% load. Prints the median wall time of ``simulate_serving``
(drawing the workload, tabulating step times, the Numba simulation, the request table and summary), the
simulation kernel alone on the same arrays, and the engine steps simulated. The first call, which may compile
(or load the Numba cache), is not timed. Prints a markdown table; record it yourself (this writes no file).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aonkit._kernels.serving import JSQ, simulate  # noqa: E402
from aonkit.model import ArrivalProcess, Lengths, StepTime, simulate_serving  # noqa: E402

LLM = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.01, 1e-4, 1e-7))
CASES = {
    "batching, whole prompts": dict(arrivals=ArrivalProcess(115.0), prompt_tokens=Lengths.lognormal(512, 1.0),
                                    output_tokens=Lengths.geometric(128), step_time=LLM, replicas=8, max_batch=64,
                                    token_budget=65536),
    "batching, chunked prefill": dict(arrivals=ArrivalProcess(115.0), prompt_tokens=Lengths.lognormal(512, 1.0),
                                      output_tokens=Lengths.geometric(128), step_time=LLM, replicas=8, max_batch=64,
                                      token_budget=2048, chunked_prefill=True),
    "M/M/1 (batch 1, 1 token)": dict(arrivals=ArrivalProcess(0.7), prompt_tokens=Lengths.geometric(10**6),
                                     output_tokens=1, step_time=StepTime(prefill_time_s=(0.0, 1e-6))),
}


def kernel_time(res, case: dict) -> float:
    """The Numba simulation alone on the requests ``res`` simulated."""
    r = res.requests.sort_values("arrival_s")
    prompt, output = r["prompt_tokens"].to_numpy(), r["output_tokens"].to_numpy()
    b = case.get("max_batch", 1)
    top = np.sort(prompt + output - 1)[-b:].sum()
    tabs = case["step_time"].tables(min(case.get("token_budget", 2**62), np.sort(prompt)[-b:].sum()), b, top)
    t = time.perf_counter()
    simulate(r["arrival_s"].to_numpy(), prompt, output, case.get("replicas", 1), b, case.get("token_budget", 2**62),
             2**62, 0, False, case.get("chunked_prefill", False), JSQ, 0.0, *tabs)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    print(f"| workload ({a.requests:,} requests) | simulate_serving s | kernel s | engine steps | p99 TTFT s |")
    print("|---|---|---|---|---|")
    for name, case in CASES.items():
        simulate_serving(**case, n_requests=1000, seed=0)  # compile or load the cache
        walls, kernels = [], []
        for k in range(a.repeat):
            t = time.perf_counter()
            res = simulate_serving(**case, n_requests=a.requests, seed=k)
            walls.append(time.perf_counter() - t)
            kernels.append(kernel_time(res, case))
        print(f"| {name} | {statistics.median(walls):.3f} | {statistics.median(kernels):.3f} | "
              f"{int(res.replicas['steps'].sum()):,} | {res.summary['ttft_p99_s']:.3g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
