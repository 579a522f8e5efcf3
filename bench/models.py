"""The analytic LLM model (aonkit.model.llm) against published measurements, and beside llm-analysis.

Usage: ``PYTHONPATH=. python bench/models.py [--llm-analysis /tmp/llma/bin/python]``

Prints the markdown tables of docs/llm-model.md:

1. Narayanan et al. 2021 (SC'21) Table 1: achieved TFLOP/s per GPU (their count, recomputation included),
   measured against predicted with the default efficiencies, and with one scale factor on the matmul and
   attention efficiencies fitted to this table (least squares on log error);
2. Korthikanti et al. 2022 Table 5: iteration times with full recomputation and with sequence parallelism plus
   selective recomputation, predicted with the defaults and with the Table 1 fit (out of sample);
3. Llama 3 (Dubey et al. 2024) Table 4: TFLOP/s per GPU of the 405B pre-training layouts;
4. with ``--llm-analysis PYTHON`` (an interpreter with ``pip install llm-analysis``, e.g. a throwaway venv;
   never a dependency of aonkit), llm-analysis 0.2.2's iteration time and memory on the Table 1 layouts;
5. the time of one step-time evaluation and of a 256-point decode curve.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aonkit.model import device_spec
from aonkit.model.llm import (
    DGX_A100,
    DGX_H100,
    LLAMA3_70B,
    LLAMA3_405B,
    Parallelism,
    decode_time,
    gpt_config,
    training_memory,
    training_step,
)

A100, H100 = device_spec("A100 SXM4 80GB"), device_spec("H100 SXM")
# params (B), heads, hidden, layers, TP, PP, GPUs, batch, achieved TFLOP/s per GPU
TABLE1 = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137), (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142), (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138), (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148), (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163), (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
]
# name, heads, hidden, layers, TP, PP, global batch, Table 5 seconds: full recompute, SP + selective
KORTHIKANTI = [
    ("22B", 64, 6144, 48, 8, 1, 4, 1.42, 1.10), ("175B", 96, 12288, 96, 8, 8, 64, 18.13, 13.75),
    ("530B", 128, 20480, 105, 8, 35, 280, 49.05, 37.83), ("1T", 160, 25600, 128, 8, 64, 512, 94.42, 71.49),
]
# GPUs, CP, sequence, TFLOP/s per GPU (Llama 3 Table 4: TP 8, PP 16, 16M tokens per batch, BF16)
LLAMA = [(8192, 1, 8192, 430), (16384, 1, 8192, 400), (16384, 16, 131072, 380)]


def eff(scale: float) -> dict[str, float]:
    return {"matmul": 0.8 * scale, "attention": 0.6 * scale}


def table1_tflops(row: tuple, scale: float = 1.0) -> float:
    _, a, h, n, t, p, gpus, batch, _ = row
    par = Parallelism(tp=t, pp=p, dp=gpus // (t * p), recompute="full")
    st = training_step(gpt_config(n, h, a), A100, par, batch, network=DGX_A100, dtype="fp16", flash=False,
                       efficiency=eff(scale))  # fmt: skip
    return st.hardware_flops / (st.step_s * gpus) / 1e12


def fit_scale() -> float:
    def loss(k: float) -> float:
        return sum(math.log(table1_tflops(r, k) / r[-1]) ** 2 for r in TABLE1)

    return min((0.5 + 0.0025 * i for i in range(241)), key=loss)


def narayanan(scale: float) -> None:
    print("| params (B) | TP | PP | GPUs | batch | measured TFLOP/s | predicted | error | fitted | error |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    errs, fitted = [], []
    for row in TABLE1:
        pred, fit = table1_tflops(row), table1_tflops(row, scale)
        meas = row[-1]
        errs.append(pred / meas - 1)
        fitted.append(fit / meas - 1)
        print(f"| {row[0]} | {row[4]} | {row[5]} | {row[6]} | {row[7]} | {meas} | {pred:.1f} | {100 * errs[-1]:+.1f}% "
              f"| {fit:.1f} | {100 * fitted[-1]:+.1f}% |")  # fmt: skip
    print(f"\nmean |error|: defaults {100 * statistics.mean(map(abs, errs)):.1f}%, "
          f"fitted (scale {scale:.4f}) {100 * statistics.mean(map(abs, fitted)):.1f}%\n")  # fmt: skip


def korthikanti(scale: float) -> None:
    print("| model | scheme | measured s | predicted s | error | fitted s | error | MFU predicted |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, a, h, n, t, p, batch, full, sel in KORTHIKANTI:
        cfg = gpt_config(n, h, a)
        for scheme, rec, sp, meas in (("full recompute", "full", False, full), ("SP + selective", "selective", True, sel)):
            par = Parallelism(tp=t, pp=p, sp=sp, recompute=rec)
            st = training_step(cfg, A100, par, batch, network=DGX_A100, dtype="fp16", flash=False)
            sf = training_step(cfg, A100, par, batch, network=DGX_A100, dtype="fp16", flash=False,
                               efficiency=eff(scale))  # fmt: skip
            print(f"| {name} | {scheme} | {meas} | {st.step_s:.2f} | {100 * (st.step_s / meas - 1):+.1f}% "
                  f"| {sf.step_s:.2f} | {100 * (sf.step_s / meas - 1):+.1f}% | {100 * st.mfu:.1f}% |")  # fmt: skip
    print()


def llama3() -> None:
    print("| GPUs | CP | seq | measured TFLOP/s | vpp | predicted (full s²) | causal | error (causal) | memory GB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for gpus, cp, seq, meas in LLAMA:
        cfg = LLAMA3_405B.replace(seq=seq)
        batch = 16 * 2**20 // seq
        for vpp in (1, 2):
            par = Parallelism(tp=8, pp=16, cp=cp, dp=gpus // (128 * cp), sp=True, vpp=vpp, zero=1)
            full = training_step(cfg, H100, par, batch, network=DGX_H100)
            causal = training_step(cfg, H100, par, batch, network=DGX_H100, causal=True)
            mem = training_memory(cfg, par, batch, dropout=False).total / 1e9
            pc = causal.flops_per_gpu_s / 1e12
            print(f"| {gpus} | {cp} | {seq} | {meas} | {vpp} | {full.flops_per_gpu_s / 1e12:.0f} | {pc:.0f} "
                  f"| {100 * (pc / meas - 1):+.0f}% | {mem:.0f} |")  # fmt: skip
    print()


_LLMA = """
import json, sys
from llm_analysis.analysis import train
out = []
for row in json.load(open(sys.argv[1])):
    r = train(model_name=row["path"], gpu_name="a100-sxm-80gb", log_level="ERROR", batch_size_per_gpu=1,
              global_batch_size=row["batch"], seq_len=2048, activation_recomputation=2, tp_size=row["tp"],
              pp_size=row["pp"], total_num_gpus=row["gpus"], flops_efficiency=0.8, hbm_memory_efficiency=0.8,
              intra_node_memory_efficiency=0.8, inter_node_memory_efficiency=0.8, flash_attn=False,
              softmax_dropout=True)
    out.append({k: r[k] for k in ("num_params_total", "latency_per_iter", "weight_memory_per_gpu",
                "gradient_memory_per_gpu", "optimizer_state_memory_per_gpu", "activation_memory_per_gpu")})
print(json.dumps(out))
"""


def llm_analysis(python: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for params, a, h, n, t, p, gpus, batch, _ in TABLE1:
            path = Path(tmp) / f"gpt-{params}.json"
            path.write_text(json.dumps({"name": path.stem, "max_seq_len": 2048, "num_layers": n, "n_head": a,
                                        "hidden_dim": h, "vocab_size": 51200, "ffn_embed_dim": 4 * h}))  # fmt: skip
            rows.append({"path": str(path), "batch": batch, "tp": t, "pp": p, "gpus": gpus})
        spec = Path(tmp) / "rows.json"
        spec.write_text(json.dumps(rows))
        script = Path(tmp) / "run.py"
        script.write_text(_LLMA)
        done = subprocess.run([python, str(script), str(spec)], capture_output=True, text=True, check=True)
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    print("| params (B) | measured s | aonkit s | llm-analysis s | aonkit bubble s | aonkit DP s "
          "| aonkit GB/GPU | llm-analysis GB/GPU |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row, other in zip(TABLE1, theirs):
        params, a, h, n, t, p, gpus, batch, meas = row
        cfg = gpt_config(n, h, a)
        par = Parallelism(tp=t, pp=p, dp=gpus // (t * p), recompute="full")
        st = training_step(cfg, A100, par, batch, network=DGX_A100, dtype="fp16", flash=False)
        measured_s = st.hardware_flops / (meas * 1e12 * gpus)
        mem = training_memory(cfg, par, batch, flash=False).total / 1e9
        keys = ("weight_memory_per_gpu", "gradient_memory_per_gpu", "optimizer_state_memory_per_gpu",
                "activation_memory_per_gpu")  # fmt: skip
        their_mem = sum(other[k] for k in keys) / 1e9
        print(f"| {params} | {measured_s:.2f} | {st.step_s:.2f} | {other['latency_per_iter']:.2f} "
              f"| {st.bubble_s:.2f} | {st.communication['dp']:.2f} | {mem:.1f} | {their_mem:.1f} |")  # fmt: skip
    print()


def timing() -> None:
    import numpy as np

    par = Parallelism(tp=8, pp=16, dp=64, sp=True, vpp=2, zero=1)
    runs = []
    for _ in range(2000):
        t0 = time.perf_counter()
        training_step(LLAMA3_405B, H100, par, 2048)
        runs.append(time.perf_counter() - t0)
    batch = np.arange(1, 257)
    curve = []
    for _ in range(200):
        t0 = time.perf_counter()
        decode_time(LLAMA3_70B, H100, batch, 8192, tp=8)
        curve.append(time.perf_counter() - t0)
    print(f"training_step (Llama-3 405B, TP8 PP16 DP64 vpp2): median {1e6 * statistics.median(runs):.0f} us")
    print(f"decode_time over 256 batch sizes (Llama-3 70B, TP8): median {1e6 * statistics.median(curve):.0f} us")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--llm-analysis", metavar="PYTHON", help="interpreter that has llm-analysis installed")
    args = ap.parse_args()
    scale = fit_scale()
    narayanan(scale)
    korthikanti(scale)
    llama3()
    if args.llm_analysis:
        llm_analysis(args.llm_analysis)
    timing()
    return 0


if __name__ == "__main__":
    sys.exit(main())
