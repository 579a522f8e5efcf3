"""What a serving engine's KV-cache policy costs: capacity and latency reserving ``max_new_tokens`` or paging.

Usage: ``PYTHONPATH=. python bench/serving_kv.py [--requests 20000] [--rate 1.5]``

One replica of Llama-3 70B on two H100s in bf16 (the analytic model's step times; the KV cache is what the weights
leave of 90% of the GPUs' memory), the serving panel's random lengths (lognormal prompts of mean 512, CV 1;
geometric outputs of mean 128), chunked prefill with a budget of 2,048 tokens and a max batch of 64, Poisson
arrivals. For each policy, a sweep of the panel's rates around ``--rate``: the capacity (the sweep's highest
throughput), the knee, and at ``--rate`` p99 TTFT, p50 TPOT, the share refused and the preemptions. Policies: the
cache reserving each request's prompt plus its own output (an oracle: no engine knows the output's length), plus
``max_new_tokens`` of 512 to 4,096 (TGI's way: outputs drawn longer stop there), and paged (vLLM's way) with the
same caps. Then what a shared system prompt of ``--prefix`` tokens before every prompt costs (prompts of mean 256
after it, outputs of mean 128), computed by every prefill or held in a prefix cache, under either policy. Prints
markdown; writes no file. Not a timing: the simulated figures are deterministic (seed 0).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aonkit.model import Lengths, saturation_knee, serving_sweep  # noqa: E402
from aonkit.model.hardware import devices  # noqa: E402
from aonkit.model.llm import PRESETS  # noqa: E402
from aonkit.model.serving_grid import sweep_rates  # noqa: E402
from aonkit.model.serving_steps import model_step_time, serving_memory  # noqa: E402

CAPS = (None, 512, 1024, 2048, 4096)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--rate", type=float, default=1.5)
    ap.add_argument("--prefix", type=int, default=1500, help="tokens of the shared system prompt (second table)")
    a = ap.parse_args()
    config, device = PRESETS["Llama-3 70B"], {d.name: d for d in devices()}["H100 SXM"]
    kv = serving_memory(config, device, 2, "bf16").kv_tokens
    engine = dict(step_time=model_step_time(config, device, 2, "bf16"), max_batch=64, token_budget=2048,
                  chunked_prefill=True, kv_tokens=kv)  # fmt: skip
    rates = sweep_rates(a.rate)
    print(f"Llama-3 70B, two H100s, {kv:,} tokens of KV cache; {a.requests:,} requests; at {a.rate:g} req/s:\n")
    print("| policy | max new tokens | capacity req/s | knee req/s | p99 TTFT s | p50 TPOT ms | refused | preemptions |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for policy in ("reserve", "paged"):
        for cap in CAPS:
            outputs = Lengths.geometric(128) if cap is None else Lengths.geometric(128).capped(cap)
            sweep = serving_sweep(rates, Lengths.lognormal(512, 1.0), outputs, n_requests=a.requests,
                                  kv_policy=policy, max_new_tokens=cap, **engine)  # fmt: skip
            knee = saturation_knee(sweep, "ttft_p99_s")
            at = sweep.iloc[(sweep["arrival_rate_per_s"] - a.rate).abs().argmin()]
            print(f"| {policy} | {'own output' if cap is None else f'{cap:,}'} | {knee['capacity_per_s']:.2f} | "
                  f"{knee['knee_rate_per_s']:.2f} | {at['ttft_p99_s']:.2f} | {1e3 * at['tpot_p50_s']:.1f} | "
                  f"{at['rejected'] / at['measured']:.2%} | {int(at['preemptions']):,} |", flush=True)
    print(f"\nA shared prefix of {a.prefix:,} tokens before prompts of mean 256, outputs of mean 128; at {a.rate:g} "
          "req/s:\n")
    print("| policy | prefix | capacity req/s | knee req/s | p50 TTFT s | p99 TTFT s | p50 TPOT ms | preemptions |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for policy in ("reserve", "paged"):
        for cache in (False, True):
            sweep = serving_sweep(rates, Lengths.lognormal(256, 1.0), Lengths.geometric(128), n_requests=a.requests,
                                  kv_policy=policy, prefix_tokens=a.prefix, prefix_cache=cache, **engine)  # fmt: skip
            knee = saturation_knee(sweep, "ttft_p99_s")
            at = sweep.iloc[(sweep["arrival_rate_per_s"] - a.rate).abs().argmin()]
            print(f"| {policy} | {'cached' if cache else 'computed'} | {knee['capacity_per_s']:.2f} | "
                  f"{knee['knee_rate_per_s']:.2f} | {at['ttft_p50_s']:.2f} | {at['ttft_p99_s']:.2f} | "
                  f"{1e3 * at['tpot_p50_s']:.1f} | {int(at['preemptions']):,} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
