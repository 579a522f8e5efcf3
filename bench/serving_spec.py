"""Speculative decoding under load: where a draft stops paying as the arrival rate grows, and what it costs to simulate.

Usage: ``PYTHONPATH=. python bench/serving_spec.py [--requests 20000] [--repeats 5] [--kv-policy paged]
[--model "Llama-3 70B" --tp 2 --rates 0.25,0.5,1,1.5,2,3]``

Llama-3 8B on one H100 (the analytic model's step times), lognormal prompts of mean 1,024 tokens (CV 1), geometric
outputs of mean 256 stopped at 1,024 new tokens, a max batch of 64 and the KV cache that fits beside the weights
(reserving prompt plus max new tokens). Three engines: plain decoding, a draft that costs nothing (prompt lookup)
and Llama-3.2 1B as the draft (its weights and cache take memory too), both drafting 4 tokens accepted with
probability 0.7 (:mod:`aonkit.model.serving_spec`). Prints p50 TPOT, p99 TTFT and throughput per rate (the figures
are deterministic: seed 1), then the simulation's cost with and without speculation (the iterations' draw
included: median of ``--repeats``, ms). ``--kv-policy paged``: the cache grows as contexts do and preempts
(vLLM's way) instead of reserving, and the table gives each rate's preemptions too; ``--model``, ``--tp`` and
``--rates`` serve another preset on ``tp`` H100s (Llama-3 70B on two holds about 8,800 tokens: there the cache
binds). Writes no file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aonkit.model import ArrivalProcess, Lengths, device_spec, serving_sweep, simulate_serving  # noqa: E402
from aonkit.model.llm import LLAMA32_1B, PRESETS  # noqa: E402
from aonkit.model.serving_spec import Speculation, speculative_memory, speculative_step_time  # noqa: E402
from aonkit.model.serving_steps import model_step_time  # noqa: E402

RATES = (1.0, 4.0, 8.0, 16.0, 24.0, 32.0)
MAX_NEW = 1024


def engines(model: str = "Llama-3 8B", tp: int = 1) -> dict[str, dict]:
    """The three engines' keyword arguments of ``simulate_serving`` (step times, KV cache, speculation)."""
    h100, cfg = device_spec("H100 SXM"), PRESETS[model]
    spec = Speculation(4, 0.7)
    out = {"plain": {"step_time": model_step_time(cfg, h100, tp),
                     "kv_tokens": speculative_memory(cfg, None, h100, tp).kv_tokens}}  # fmt: skip
    for name, draft in (("no-cost draft", None), ("Llama-3.2 1B draft", LLAMA32_1B)):
        out[name] = {"step_time": speculative_step_time(cfg, h100, tp, k=spec.k, draft=draft),
                     "kv_tokens": speculative_memory(cfg, draft, h100, tp).kv_tokens, "speculative": spec}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--kv-policy", choices=("reserve", "paged"), default="reserve")
    ap.add_argument("--model", default="Llama-3 8B", choices=list(PRESETS))
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--rates", default=",".join(f"{r:g}" for r in RATES), help="arrival rates, comma-separated")
    a = ap.parse_args()
    rates = [float(r) for r in a.rates.split(",")]
    work = {"n_requests": a.requests, "seed": 1, "warmup": 0.1, "max_batch": 64, "max_new_tokens": MAX_NEW,
            "kv_policy": a.kv_policy}  # fmt: skip
    paged = a.kv_policy == "paged"
    prompts, outputs = Lengths.lognormal(1024, 1.0), Lengths.geometric(256).capped(MAX_NEW)
    eng = engines(a.model, a.tp)
    print(f"{a.model} on {a.tp} H100(s), {a.requests:,} requests a rate; k = 4, acceptance 0.7; KV cache: "
          f"{a.kv_policy}\n")  # fmt: skip
    what = "TPOT p50 ms, TTFT p99 s, req/s" + (", preemptions" if paged else "")
    print("| engine | KV tokens | " + " | ".join(f"{r:g}/s: {what}" for r in rates) + " |")
    print("|---|---:|" + "---:|" * len(rates))
    for name, kw in eng.items():
        sweep = serving_sweep(rates, prompts, outputs, **work, **kw)
        cells = [f"{r.tpot_p50_s * 1e3:.2f}, {r.ttft_p99_s:.3g}, {r.throughput_per_s:.1f}"
                 + (f", {r.preemptions:,}" if paged else "") for r in sweep.itertuples()]  # fmt: skip
        print(f"| {name} | {kw['kv_tokens']:,} | " + " | ".join(cells) + " |")
    print("\n| simulation of 8 req/s (ms, median) | plain | speculative (1B draft) | ratio |\n|---|---:|---:|---:|")
    times = {}
    for name in ("plain", "Llama-3.2 1B draft"):
        got = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            simulate_serving(ArrivalProcess(8.0), prompts, outputs, **work, **eng[name])
            got.append((time.perf_counter() - t0) * 1e3)
        times[name] = statistics.median(got)
    p, s = times["plain"], times["Llama-3.2 1B draft"]
    print(f"| {a.requests:,} requests | {p:.1f} | {s:.1f} | {s / p:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
