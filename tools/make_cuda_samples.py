"""Make the real CUDA sample traces (on a machine with an NVIDIA GPU; ``tools/device_check.py`` runs this).

Usage: ``PYTHONPATH=. python tools/make_cuda_samples.py [--out sample_traces/cuda] [--device cuda]``

Writes, under ``--out``:

* ``profile/``: a ``%%aon_profile`` bundle (trace, GPU and host samples, manifest) of a small GPT trained for
  twelve steps in bf16 at batch 16 (half the layers of the model below), each step after 100 ms of host-side
  "data loading" (the GPU idles meanwhile),
  run through the real magic in an IPython shell: ``%%aon_profile --interval 0.1 --wait 2 --warmup 1 --active 8``
  (10 Hz: NVML refreshes GPM metrics every 100 ms, so each GPM sample covers the time since the previous one).
* ``gpt_b4.pt.trace.json.gz``, ``gpt_b8.pt.trace.json.gz``: the same model at batch 4 and 8, three steps each
  under torch.profiler with shapes and FLOPs: a calibration on one predicts the other
  (``tests/test_calibrate.py``, ``bench/gpu_models.py``).
* ``gpt_generate.pt.trace.json.gz``: a decoder with a KV cache (:data:`GENERATE`, bf16) generating for
  batches of requests (:data:`GENERATE_REQUESTS`), each pass in a ``record_function`` and followed by a
  synchronize, under torch.profiler with shapes (``tools/generate_trace.py``): the passes
  :func:`aonkit.analysis.forward_passes` finds and :func:`aonkit.model.fit_step_time` fits
  (``tests/test_engine_passes.py``).
* ``MANIFEST.json``: the model, torch and GPU they were made with, and each file's bytes.

``--device cpu --tiny`` runs the same code on the CPU with a toy model (a smoke test of this script; it writes
nothing worth keeping). Nothing here runs at import: the module only defines the model.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SMALL = {"layers": 4, "hidden": 2048, "heads": 16, "seq": 1024, "vocab": 32000}
TINY = {"layers": 2, "hidden": 64, "heads": 4, "seq": 32, "vocab": 128}
GENERATE = {"layers": 4, "hidden": 2048, "heads": 16, "kv_heads": 4, "vocab": 32000, "max_seq": 4096}
GENERATE_REQUESTS = ((1, 512, 8), (4, 1024, 8), (16, 256, 8), (32, 128, 8), (8, 2048, 8), (64, 64, 8))
"""(batch, prompt tokens, tokens generated): prefills of 512 to 16,384 tokens, decodes of batch 1 to 64."""


def gpt(torch: Any, layers: int, hidden: int, heads: int, seq: int, vocab: int) -> Any:
    """A GPT-style decoder (pre-norm, causal SDPA attention, GELU MLP 4x, tied nothing) as a torch module."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
            self.up, self.down = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

        def forward(self, x: Any) -> Any:
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, heads, hidden // heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, hidden))
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.pos = nn.Embedding(vocab, hidden), nn.Embedding(seq, hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, vocab, bias=False)

        def forward(self, idx: Any) -> Any:
            x = self.emb(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    return GPT()


def trainer(torch: Any, shape: dict[str, int], batch: int, device: str, loader_s: float = 0.0) -> Any:
    """``step()``: one training step of the model on a fixed random batch (after ``loader_s`` of host time)."""
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = gpt(torch, **shape).to(device=device, dtype=dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    idx = torch.randint(0, shape["vocab"], (batch, shape["seq"]), device=device)

    def step() -> None:
        if loader_s:
            time.sleep(loader_s)  # the data loader: host time with the GPU idle
        opt.zero_grad(set_to_none=True)
        logits = model(idx[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, shape["vocab"]).float(), idx[:, 1:].reshape(-1))
        loss.backward()
        opt.step()

    return step


def bundle_layers(shape: dict[str, int]) -> int:
    """The bundle's model has half the layers (its trace holds eight steps and must stay under 2 MB)."""
    return max(1, shape["layers"] // 2)


def profile_bundle(torch: Any, shape: dict[str, int], device: str, out: Path) -> Path:
    """The ``%%aon_profile`` bundle, made through the magic in a real IPython shell."""
    from IPython.core.interactiveshell import InteractiveShell

    import aonkit

    step = trainer(torch, {**shape, "layers": bundle_layers(shape)}, 16, device, loader_s=0.1)
    step()  # compile and allocate outside the run
    if device == "cuda":
        torch.cuda.synchronize()
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "aonkit")
    shell.user_ns.update(step=step, aonkit=aonkit, torch=torch, device=device)
    cell = ("%%aon_profile --interval 0.1 --wait 2 --warmup 1 --active 8 --quiet --return prof --out " + str(out)
            + "\nfor _ in range(12):\n    step()\n    aonkit.step()\nif device == 'cuda':\n"
            "    torch.cuda.synchronize()\n")  # fmt: skip
    shell.run_cell(cell).raise_error()
    print("\n".join(shell.user_ns["prof"].messages))
    return out


def batch_trace(torch: Any, shape: dict[str, int], batch: int, device: str, path: Path) -> Path:
    """Three training steps at ``batch`` under torch.profiler (shapes, FLOPs), gzipped to ``path``."""
    from torch.profiler import ProfilerActivity, profile, schedule

    step = trainer(torch, shape, batch, device)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "t.json"
        with profile(activities=acts, schedule=schedule(wait=1, warmup=1, active=3), record_shapes=True,
                     with_flops=True, on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:  # fmt: skip
            for _ in range(5):
                step()
                prof.step()
        path.write_bytes(gzip.compress(raw.read_bytes(), mtime=0))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "sample_traces" / "cuda")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--tiny", action="store_true", help="a toy model (smoke test)")
    args = ap.parse_args()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("make_cuda_samples: torch sees no CUDA device (use --device cpu --tiny for a smoke test)")
    shape = TINY if args.tiny else SMALL
    args.out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(args.out / "profile", ignore_errors=True)
    profile_bundle(torch, shape, args.device, args.out / "profile")
    files = [batch_trace(torch, shape, b, args.device, args.out / f"gpt_b{b}.pt.trace.json.gz") for b in (4, 8)]
    sys.path.insert(0, str(ROOT / "tools"))
    from generate_trace import TINY as GEN_TINY
    from generate_trace import generation_trace

    gen = generation_trace(args.out / "gpt_generate.pt.trace.json.gz", args.device,
                           GEN_TINY if args.tiny else GENERATE, annotate=True,
                           requests=((2, 16, 3), (1, 8, 2)) if args.tiny else GENERATE_REQUESTS)  # fmt: skip
    files.append(args.out / "gpt_generate.pt.trace.json.gz")
    files += sorted((args.out / "profile").iterdir())
    manifest = {
        "model": {**shape, "bundle_layers": bundle_layers(shape), "mlp": "4x GELU",
                  "attention": "causal scaled_dot_product_attention",
                  "dtype": "bf16" if args.device == "cuda" else "fp32", "optimizer": "AdamW (foreach)"},
        "generate": {"model": gen["model"], "requests": gen["requests"], "dtype": "bf16" if args.device == "cuda"
                     else "fp32"},
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
        "files": {str(f.relative_to(args.out)): f.stat().st_size for f in files},
    }  # fmt: skip
    (args.out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(json.dumps(manifest, indent=1))
    bundle = sum(f.stat().st_size for f in (args.out / "profile").iterdir())
    if bundle > 2_000_000:
        print(f"WARNING: the bundle is {bundle:,} bytes, over the 2 MB a sample trace may take", file=sys.stderr)


if __name__ == "__main__":
    main()
