"""The analytic models against a real GPU: GEMM efficiency, a decode step, and calibration across batch sizes.

Usage: ``PYTHONPATH=. python bench/gpu_models.py [--skip-gemm] [--skip-decode] [--traces sample_traces/cuda]``

(a) bf16 matrix products at Llama-3 8B's layer shapes (QKV, output, gate+up, down) for 1 to 8192 tokens, timed
with CUDA events (median of 20 after 5 warm-ups): achieved TFLOP/s and the fraction of the roofline time
(``max(flop / bf16 peak, bytes / bandwidth)`` of ``aonkit.model.device_spec`` for this GPU) they reach, beside
the model's default ``EFFICIENCY["matmul"]``; (b) one decode step of four Llama-3 8B layers plus the logits with
a KV cache, captured in a CUDA graph (as serving engines run it: no launch gaps), against
``aonkit.model.llm.decode_time`` for the same four layers; (c) ``calibrate`` on the batch-4 trace of
``tools/make_cuda_samples.py`` predicting the batch-8 one and back, per class; (d) the batch what-if
(``whatif_batch``) from one to the other. (a) and (b) need CUDA; (c) and (d) need only the traces. Prints markdown tables; writes no file.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aonkit.model import device_spec  # noqa: E402
from aonkit.model.llm.presets import LLAMA3_8B  # noqa: E402
from aonkit.model.llm.step import EFFICIENCY  # noqa: E402

SHAPES = {"qkv": (4096, 6144), "out": (4096, 4096), "gate_up": (4096, 28672), "down": (14336, 4096)}


def timed_ms(torch: Any, fn: Any, repeats: int = 20, warmup: int = 5) -> float:
    """Median milliseconds of ``fn()`` on the GPU (CUDA events around each call)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return float(np.median(times))


def gemm_table(torch: Any, spec: Any) -> None:
    peak, bw = spec.peak_flops["bf16"], spec.memory_bandwidth
    print(f"\n### (a) bf16 GEMMs at Llama-3 8B shapes on {spec.name} (bf16 peak {peak / 1e12:.0f} TFLOP/s, "
          f"{bw / 1e12:.2f} TB/s); model default EFFICIENCY['matmul'] = {EFFICIENCY['matmul']}\n")
    print("| tokens | matrix | K x N | ms | TFLOP/s | bound | fraction of roofline time |")
    print("|---:|---|---|---:|---:|---|---:|")
    for tokens in (1, 16, 128, 512, 2048, 8192):
        for name, (k, n) in SHAPES.items():
            a = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            ms = timed_ms(torch, lambda a=a, w=w: a @ w)
            flop, nbytes = 2.0 * tokens * k * n, 2.0 * (tokens * k + k * n + tokens * n)
            ideal = max(flop / peak, nbytes / bw)
            bound = "compute" if flop / peak >= nbytes / bw else "memory"
            print(f"| {tokens} | {name} | {k} x {n} | {ms:.4f} | {flop / ms / 1e9:.0f} | {bound} | "
                  f"{ideal / (ms / 1e3):.2f} |")


def decode_layers(torch: Any, cfg: Any, batch: int, context: int, dev: str = "cuda", naive: bool = False) -> Any:
    """One decode step of ``cfg``'s layers and logits for ``batch`` sequences at ``context``: a callable.

    As a serving engine runs it: the new token's K and V written in place into a preallocated cache, and each
    KV head's group of query heads folded into SDPA's query length (multi-head attention over the cache, which
    reads it once). ``naive``: the cache concatenated with the new token every step (a copy of all of it) and
    SDPA's ``enable_gqa``.
    """
    F, h, d = torch.nn.functional, cfg.hidden, cfg.hidden // cfg.heads
    kvh, bf, group = cfg.kv_heads, torch.bfloat16, cfg.heads // cfg.kv_heads
    g = torch.Generator(device=dev).manual_seed(0)

    def w(*shape: int) -> Any:
        return torch.randn(*shape, device=dev, dtype=bf, generator=g) * 0.02

    n = context if naive else context + 1
    layers = [{"qkv": w(h, h + 2 * kvh * d), "o": w(h, h), "gu": w(h, 2 * cfg.ffn), "down": w(cfg.ffn, h),
               "k": w(batch, kvh, n, d), "v": w(batch, kvh, n, d)} for _ in range(cfg.layers)]  # fmt: skip
    head = w(h, cfg.vocab)
    x0 = w(batch, 1, h)

    def attend(p: dict, q: Any, k: Any, v: Any) -> Any:
        k, v = k.view(batch, 1, kvh, d).transpose(1, 2), v.view(batch, 1, kvh, d).transpose(1, 2)
        if naive:
            q = q.view(batch, 1, cfg.heads, d).transpose(1, 2)
            k, v = torch.cat([p["k"], k], dim=2), torch.cat([p["v"], v], dim=2)
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True).transpose(1, 2).reshape(batch, 1, h)
        p["k"][:, :, context:] = k
        p["v"][:, :, context:] = v
        q = q.view(batch, kvh, group, d)  # query head kv * group + j reads KV head kv
        return F.scaled_dot_product_attention(q, p["k"], p["v"]).reshape(batch, 1, h)

    def step() -> Any:
        x = x0
        for p in layers:
            y = F.rms_norm(x, (h,))
            q, k, v = (y @ p["qkv"]).split([h, kvh * d, kvh * d], dim=-1)
            x = x + attend(p, q, k, v) @ p["o"]
            gate, up = (F.rms_norm(x, (h,)) @ p["gu"]).chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ p["down"]
        return F.rms_norm(x, (h,)) @ head

    return step


def check_decode_attention(torch: Any, dev: str = "cuda") -> float:
    """Largest difference between the folded-group attention and SDPA's ``enable_gqa`` on the same inputs."""
    F = torch.nn.functional
    q = torch.randn(2, 32, 1, 64, device=dev)
    k, v = torch.randn(2, 8, 40, 64, device=dev), torch.randn(2, 8, 40, 64, device=dev)
    ref = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # (2, 32, 1, 64)
    folded = F.scaled_dot_product_attention(q.view(2, 8, 4, 64), k, v).reshape(2, 32, 1, 64)
    return float((ref - folded).abs().max())


def decode_table(torch: Any, spec: Any) -> None:
    from aonkit.model.llm import decode_time

    cfg = dataclasses.replace(LLAMA3_8B, layers=4, name="Llama-3 8B, 4 layers")
    print(f"\n### (b) one decode step, {cfg.name} + logits, bf16, CUDA graph, on {spec.name}\n")
    print(f"(folded-group attention against SDPA's enable_gqa: largest difference "
          f"{check_decode_attention(torch):.2e})\n")  # fmt: skip
    print("| batch | context | cache and attention | measured ms | decode_time ms | error | model's bound parts (ms) |")
    print("|---:|---:|---|---:|---:|---:|---|")
    for batch in (1, 8, 32, 128):
        for context in (1024, 8192):
            model = decode_time(cfg, spec, batch, context)
            parts = ", ".join(f"{k} {v * 1e3:.3f}" for k, v in model.parts.items() if v)
            for naive in (False, True):
                step = decode_layers(torch, cfg, batch, context, naive=naive)
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    for _ in range(3):
                        step()
                torch.cuda.current_stream().wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    step()
                ms = timed_ms(torch, graph.replay)
                how = "cat + enable_gqa (naive)" if naive else "in place + folded groups"
                print(f"| {batch} | {context} | {how} | {ms:.3f} | {model.seconds * 1e3:.3f} | "
                      f"{model.seconds * 1e3 / ms - 1:+.1%} | {parts} |")
                del graph, step
                torch.cuda.empty_cache()


def calibration_table(folder: Path) -> None:
    import aonkit
    from aonkit.model import calibrate
    from aonkit.model.calibration import summarize

    paths = {b: folder / f"gpt_b{b}.pt.trace.json.gz" for b in (4, 8)}
    if not all(p.is_file() for p in paths.values()):
        print(f"\n(c) skipped: no {paths[4].name} / {paths[8].name} in {folder} (tools/make_cuda_samples.py)")
        return
    traces = {b: aonkit.load(p) for b, p in paths.items()}
    try:
        cals = {b: calibrate(t) for b, t in traces.items()}
    except ValueError as exc:
        print(f"\n(c) not possible on these traces: {exc}")
        return
    print("\n### (c) calibrated on one batch size, predicting the other (GPU time of the modelled ops)\n")
    print("| fitted on | predicts | class | measured ms | predicted ms | error |")
    print("|---:|---:|---|---:|---:|---:|")
    for fit, other in ((4, 8), (8, 4)):
        cal = cals[fit]
        for _, r in summarize(cal.predict(traces[other]), cal.factors, cal.overheads).iterrows():
            print(f"| {fit} | {other} | {r['class']} | {r['measured_ns'] / 1e6:.3f} | {r['predicted_ns'] / 1e6:.3f} | "
                  f"{r['error']:+.1%} |")
    batch_table(traces)


def batch_table(traces: dict) -> None:
    """(d) ``batch_scales`` on one batch size predicting the other's step period (GPU-bound steps).

    The step period (one step's end to the next's, :meth:`WhatIf.per_step`) is what a GPU-bound loop's
    throughput is. Whole-trace kernel totals are not compared: a trace also holds kernels the GPU ran in its
    window for steps launched before it (here a fourth step's worth at batch 8, not at batch 4).
    """
    from aonkit.analysis.critical_path import what_if
    from aonkit.analysis.whatif_batch import batch_rules, batch_scales

    print("\n### (d) batch what-if (whatif_batch) on one batch size predicting the other's step period\n")
    print("| from | to | step | period measured ms | predicted ms | error |")
    print("|---:|---:|---:|---:|---:|---:|")
    for src, dst in ((4, 8), (8, 4)):
        pred = what_if(traces[src], batch_rules(batch_scales(traces[src], dst / src))).per_step()
        meas = what_if(traces[dst]).per_step()
        for (step, p), m in zip(pred[["step", "period_ns"]].itertuples(index=False), meas["period_ns"]):
            if p > 0 and m > 0:
                print(f"| {src} | {dst} | {step} | {m / 1e6:.3f} | {p / 1e6:.3f} | {p / m - 1:+.1%} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-gemm", action="store_true")
    ap.add_argument("--skip-decode", action="store_true")
    ap.add_argument("--traces", type=Path, default=ROOT / "sample_traces" / "cuda")
    args = ap.parse_args()
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        torch, cuda = None, False
    if cuda:
        spec = device_spec(torch.cuda.get_device_name(0))
        print(f"GPU: {torch.cuda.get_device_name(0)} (aonkit spec: {spec.name}), torch {torch.__version__}")
        if not args.skip_gemm:
            gemm_table(torch, spec)
        if not args.skip_decode:
            decode_table(torch, spec)
    else:
        print("(a), (b) skipped: no CUDA device")
    calibration_table(args.traces)


if __name__ == "__main__":
    main()
