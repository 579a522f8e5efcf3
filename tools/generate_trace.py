"""Trace a small decoder generating text with a KV cache: the forward passes an inference engine runs.

Usage: ``PYTHONPATH=. python tools/generate_trace.py OUT.json.gz [--device cpu|cuda] [--tiny] [--annotate]``

The model is :data:`SHAPE` (``--tiny``: :data:`TINY`; on a GPU, ``tools/make_cuda_samples.py`` passes a larger one).

Runs batches of requests (batch sizes, prompt lengths and tokens to generate from :data:`REQUESTS`), each a
prefill of its prompts and then one decode pass per new token (greedy), under torch.profiler with
``record_shapes=True``, after one unprofiled warm-up request. ``--annotate`` wraps each pass in
``record_function("engine_step")`` as an engine would. :func:`aonkit.analysis.forward_passes` reads the passes
back, :func:`aonkit.model.fit_step_time` fits the serving model's step times to them
(``tests/test_engine_passes.py``, ``tools/make_sample_traces.py``, ``tools/make_cuda_samples.py``).
"""

from __future__ import annotations

import argparse
import gzip
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SHAPE = {"layers": 2, "hidden": 256, "heads": 8, "kv_heads": 2, "vocab": 1000, "max_seq": 1024}
TINY = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "vocab": 300, "max_seq": 256}
REQUESTS = ((1, 64, 8), (2, 128, 8), (4, 32, 8), (8, 96, 8), (3, 192, 8))
"""(batch, prompt tokens, tokens generated) of each batch of requests."""


def decoder(torch: Any, layers: int, hidden: int, heads: int, kv_heads: int, vocab: int, max_seq: int) -> Any:
    """A pre-norm decoder with grouped-query SDPA attention and a KV cache: ``model(ids, cache) -> logits, cache``.

    ``ids`` is ``[batch, tokens]``; ``cache`` None (a prefill) or the previous call's (a decode of the tokens
    that follow). Token and learned position embeddings; the position table is smaller than the vocabulary.
    """
    nn, F = torch.nn, torch.nn.functional
    d = hidden // heads

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.q, self.kv = nn.Linear(hidden, hidden), nn.Linear(hidden, 2 * kv_heads * d)
            self.proj = nn.Linear(hidden, hidden)
            self.up, self.down = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

        def forward(self, x: Any, past: Any) -> tuple[Any, Any]:
            b, s, _ = x.shape
            h = self.ln1(x)
            q = self.q(h).view(b, s, heads, d).transpose(1, 2)
            k, v = self.kv(h).view(b, s, 2, kv_heads, d).permute(2, 0, 3, 1, 4)
            if past is not None:
                k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=past is None, enable_gqa=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, hidden))
            return x + self.down(F.gelu(self.up(self.ln2(x)))), (k, v)

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.pos = nn.Embedding(vocab, hidden), nn.Embedding(max_seq, hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, vocab, bias=False)

        def forward(self, ids: Any, cache: Any = None) -> tuple[Any, Any]:
            start = 0 if cache is None else cache[0][0].shape[2]
            x = self.emb(ids) + self.pos(torch.arange(start, start + ids.shape[1], device=ids.device))
            new = []
            for i, blk in enumerate(self.blocks):
                x, c = blk(x, None if cache is None else cache[i])
                new.append(c)
            return self.head(self.ln(x[:, -1:])), new

    return Decoder()


def generate(torch: Any, model: Any, batch: int, prompt: int, new: int, vocab: int, device: str,
             annotate: bool = False) -> list[float]:  # fmt: skip
    """Greedy generation of ``new`` tokens for ``batch`` random prompts; the wall time of each pass (s)."""
    from torch.profiler import record_function

    ids = torch.randint(0, vocab, (batch, prompt), device=device)
    cache, times = None, []
    for _ in range(new):
        t0 = time.perf_counter()
        if annotate:
            with record_function("engine_step"):
                logits, cache = model(ids, cache)
                ids = logits[:, -1].argmax(-1, keepdim=True)
        else:
            logits, cache = model(ids, cache)
            ids = logits[:, -1].argmax(-1, keepdim=True)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def generation_trace(path: Path, device: str = "cpu", shape: dict[str, int] | None = None, annotate: bool = False,
                     requests: tuple[tuple[int, int, int], ...] = REQUESTS) -> dict[str, Any]:  # fmt: skip
    """Profile the generations of ``requests`` into ``path`` (``.json`` or ``.json.gz``); what ran, as a dict.

    ``shape``: the :func:`decoder`'s sizes (default :data:`SHAPE`). The dict: ``model`` (the shape), ``device``,
    ``requests``, ``pass_s`` (each request's passes, wall seconds by ``time.perf_counter``), ``annotated`` and
    ``torch`` (its version).
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    shape = SHAPE if shape is None else shape
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = decoder(torch, **shape).to(device=device, dtype=dtype).eval()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch.inference_mode():
        generate(torch, model, 2, 16, 3, shape["vocab"], device)  # warm-up, not profiled
        with profile(activities=acts, record_shapes=True) as prof:
            times = [generate(torch, model, b, p, n, shape["vocab"], device, annotate) for b, p, n in requests]
    path = Path(path)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        path.write_bytes(gzip.compress(raw.read_bytes(), mtime=0) if path.suffix == ".gz" else raw.read_bytes())
    return {"model": shape, "device": device, "requests": [list(r) for r in requests], "pass_s": times,
            "annotated": annotate, "torch": torch.__version__}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--annotate", action="store_true")
    args = ap.parse_args(argv)
    info = generation_trace(args.out, args.device, TINY if args.tiny else SHAPE, args.annotate)
    print(f"wrote {args.out}: {sum(len(t) for t in info['pass_s'])} passes on {args.device}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
