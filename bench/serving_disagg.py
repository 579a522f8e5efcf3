"""Colocated or disaggregated serving on the same GPUs: where the prompts are computed, and what it costs.

Usage: ``PYTHONPATH=. python bench/serving_disagg.py [--requests 20000] [--gpus 2]``

Llama-3 8B on H100s (the analytic model's step times), long prompts (uniform 4,000-12,000 tokens) and outputs of
100-400 tokens, Poisson arrivals at a few rates. The same ``--gpus`` serve them three ways: every GPU a replica
that prefills whole prompts (budget 16,384 tokens) between its decode steps, the same with chunked prefill (chunks
of 2,048 beside the decode steps: Sarathi, vLLM's default), and half the GPUs a prefill pool, the other half a
decode pool (max batch 128), each request's KV cache (128 KB a token) sent over 50 GB/s after its first token
(:func:`aonkit.model.simulate_disaggregated`). Prints p50 and p99 TTFT and TPOT and the throughput per rate, in
markdown; writes no file. Not a timing: the figures are deterministic (seed 1).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aonkit.model import ArrivalProcess, Lengths, Pool, simulate_disaggregated, simulate_serving  # noqa: E402
from aonkit.model.hardware import devices  # noqa: E402
from aonkit.model.llm import PRESETS  # noqa: E402
from aonkit.model.serving_steps import model_step_time  # noqa: E402

RATES = (1.0, 2.0, 3.0, 4.0, 5.0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--gpus", type=int, default=2, help="an even number: half prefill, half decode when apart")
    a = ap.parse_args()
    if a.gpus < 2 or a.gpus % 2:
        ap.error(f"--gpus {a.gpus}: give an even number, at least 2")
    st = model_step_time(PRESETS["Llama-3 8B"], {d.name: d for d in devices()}["H100 SXM"])
    half = a.gpus // 2
    print(f"Llama-3 8B on {a.gpus} H100s; prompts 4,000-12,000 tokens, outputs 100-400; {a.requests:,} requests\n")
    print("| req/s | serving | p50 TTFT s | p99 TTFT s | p50 TPOT ms | p99 TPOT ms | throughput req/s |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for rate in RATES:
        load = dict(arrivals=ArrivalProcess(rate), prompt_tokens=Lengths.uniform(4000, 12000),
                    output_tokens=Lengths.uniform(100, 400), n_requests=a.requests, seed=1)  # fmt: skip
        ways = {
            "colocated, whole prompts": simulate_serving(**load, step_time=st, replicas=a.gpus, max_batch=64,
                                                         token_budget=16384),  # fmt: skip
            "colocated, chunked prefill": simulate_serving(**load, step_time=st, replicas=a.gpus, max_batch=64,
                                                           token_budget=2048, chunked_prefill=True),  # fmt: skip
            f"{half} prefill + {half} decode": simulate_disaggregated(**load, prefill=Pool(half, st, 64, 16384),
                                                                      decode=Pool(half, st, 128),
                                                                      transfer_s=(0.001, 131072 / 50e9)),
        }  # fmt: skip
        for name, res in ways.items():
            s = res.summary
            print(f"| {rate:g} | {name} | {s['ttft_p50_s']:.3f} | {s['ttft_p99_s']:.3f} | {1e3 * s['tpot_p50_s']:.1f} | "
                  f"{1e3 * s['tpot_p99_s']:.1f} | {s['throughput_per_s']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
