"""Forward passes read off a traced generation, and the serving model's step times fitted to them."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.analysis.engine_passes import forward_passes
from aonkit.model import fit_step_time

from .conftest import require_shared

ROOT = Path(__file__).resolve().parent.parent
REQUESTS = ((1, 24, 5), (3, 40, 4), (2, 9, 6))


def _tool() -> object:
    spec = importlib.util.spec_from_file_location("generate_trace", ROOT / "tools" / "generate_trace.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.fixture(scope="module")
def generation(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A real torch.profiler trace of a small decoder generating for REQUESTS, with and without annotations."""
    pytest.importorskip("torch")
    tool, out = _tool(), tmp_path_factory.mktemp("gen")
    runs = {}
    for annotate in (False, True):
        path = out / f"gen_{annotate}.json.gz"
        info = tool.generation_trace(path, shape=tool.TINY, annotate=annotate,  # type: ignore[attr-defined]
                                     requests=REQUESTS)
        runs[annotate] = (aonkit.load(path), info)
    return runs


def _expected() -> pd.DataFrame:
    """What each pass of REQUESTS fed: a prefill of every prompt, then one token per sequence per decode."""
    rows = []
    for b, p, n in REQUESTS:
        rows.append(("prefill", b, b * p, b * p))
        rows += [("decode", b, b, b * (p + k)) for k in range(1, n)]  # the k-th decode attends to p + k tokens
    return pd.DataFrame(rows, columns=["kind", "batch", "new_tokens", "context_tokens"])


@pytest.mark.parametrize("annotate", [False, True])
def test_the_passes_of_a_real_generation_are_found_with_their_tokens(generation: dict, annotate: bool) -> None:
    # GIVEN a real generation traced (token and position embeddings, a KV cache, grouped-query SDPA)
    trace, info = generation[annotate]
    # WHEN its passes are read
    p = forward_passes(trace)
    # THEN there is one per prefill and decode, with exactly the batch, tokens and context each ran
    want = _expected()
    assert len(p) == len(want) == sum(len(t) for t in info["pass_s"])
    got = p[["kind", "batch", "new_tokens", "context_tokens"]].astype({"kind": str})
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    assert (p["layers"] == info["model"]["layers"]).all()
    assert (p["kernel_ns"] == 0).all() and p["annotated"].all() == annotate
    # passes follow each other: each ends before the next starts, and the interval is to the next start
    ts, end = p["ts_ns"].to_numpy(), (p["ts_ns"] + p["dur_ns"]).to_numpy()
    assert (p["dur_ns"] > 0).all() and (end[:-1] <= ts[1:]).all()
    assert (p["interval_ns"].to_numpy()[:-1] == np.diff(ts)).all() and p["interval_ns"].iloc[-1] == -1


def test_an_annotated_pass_is_its_annotation(generation: dict) -> None:
    trace, _ = generation[True]
    ev = trace.events
    steps = ev[ev["name"] == "engine_step"].sort_values("ts_ns")
    p = forward_passes(trace)
    assert (p["ts_ns"].to_numpy() == steps["ts_ns"].to_numpy()).all()
    assert (p["dur_ns"].to_numpy() == steps["dur_ns"].to_numpy()).all()


def test_the_token_table_can_be_named(generation: dict, tmp_path: Path) -> None:
    trace, info = generation[False]
    pos_rows = info["model"]["max_seq"]
    # the position table, called with a 1-D index: a pass per call, tokens known, batch and kind not
    p = forward_passes(trace, vocab=pos_rows)
    assert len(p) == len(_expected()) and (p["kind"] == "unknown").all() and (p["batch"] == -1).all()
    assert (p["new_tokens"].to_numpy() == _expected()["new_tokens"] // _expected()["batch"]).all()
    with pytest.raises(ValueError, match="gen_False.json.gz.*no aten::embedding has a table of 7 rows"):
        forward_passes(trace, vocab=7)


def _hand_trace(tmp_path: Path, annotations: list[tuple[str, float, float]] = ()) -> aonkit.Trace:
    """Two passes on one thread, each launching two kernels; the second pass's last kernel ends late."""
    def op(name: str, ts: float, dur: float, dims: list | None = None) -> dict:
        args = {"Input Dims": dims} if dims is not None else {}
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}

    def launch(ts: float, corr: int, k_ts: float, k_dur: float) -> list[dict]:
        return [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts,
                 "dur": 2, "args": {"correlation": corr}},
                {"ph": "X", "cat": "kernel", "name": f"k{corr}", "pid": 0, "tid": 7, "ts": k_ts, "dur": k_dur,
                 "args": {"correlation": corr, "device": 0, "stream": 7}}]  # fmt: skip

    ev = [op("aten::embedding", 100, 10, [[50, 8], [2, 6]]), op("aten::embedding", 112, 5, [[20, 8], [6]]),
          op("aten::scaled_dot_product_attention", 120, 30, [[2, 2, 6, 4], [2, 1, 6, 4], [2, 1, 6, 4]]),
          *launch(125, 1, 130, 40), *launch(140, 2, 175, 10), op("aten::argmax", 150, 20),
          op("aten::embedding", 300, 10, [[50, 8], [2, 1]]),
          op("aten::scaled_dot_product_attention", 320, 30, [[2, 2, 1, 4], [2, 1, 7, 4], [2, 1, 7, 4]]),
          *launch(325, 3, 330, 20), *launch(340, 4, 360, 100), op("aten::argmax", 355, 5)]  # fmt: skip
    ev.append(op("generate", 100, 390))  # a caller's op around both passes: the end of neither
    ev += [{"ph": "X", "cat": "user_annotation", "name": n, "pid": 1, "tid": 1, "ts": ts, "dur": dur}
           for n, ts, dur in annotations]  # fmt: skip
    path = tmp_path / "hand.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": ev}, f)
    return aonkit.load(path)


def test_the_innermost_annotation_of_one_pass_is_its_span(tmp_path: Path) -> None:
    # GIVEN the hand trace with annotations: one around both passes, one around pass 1 (its request), and an
    # engine step inside that
    trace = _hand_trace(tmp_path, annotations=[("run", 95, 400), ("request", 290, 190), ("engine_step", 295, 80)])
    p = forward_passes(trace)
    # THEN pass 1 is its engine step (its kernels still end it), pass 0 is read from its ops: "run" holds both
    assert p["annotated"].tolist() == [False, True]
    assert p["ts_ns"].tolist() == [100_000, 295_000] and p["dur_ns"].tolist() == [85_000, 165_000]


def test_gpu_work_is_counted_in_the_pass_that_launched_it(tmp_path: Path) -> None:
    p = forward_passes(_hand_trace(tmp_path))
    assert p["kind"].astype(str).tolist() == ["prefill", "decode"]
    assert p["batch"].tolist() == [2, 2] and p["new_tokens"].tolist() == [12, 2]
    assert p["context_tokens"].tolist() == [12, 14] and p["layers"].tolist() == [1, 1]
    assert p["kernel_ns"].tolist() == [50_000, 120_000]
    # pass 0's CPU ops end at 170 us (its argmax), its second kernel at 185; pass 1's at 360 and 460
    assert p["dur_ns"].tolist() == [85_000, 160_000]
    assert p["interval_ns"].tolist() == [200_000, -1]


def test_a_trace_without_shapes_has_no_passes(tmp_path: Path) -> None:
    path = tmp_path / "bare.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::embedding", "pid": 1,
                                                 "tid": 1, "ts": 1, "dur": 2}]}))  # fmt: skip
    empty = forward_passes(aonkit.load(path))
    assert len(empty) == 0 and list(empty.columns)[:3] == ["pass_id", "ts_ns", "dur_ns"]


def test_a_traced_forward_on_a_gpu() -> None:
    # a real H100 trace of one HF forward (batch 16): the pass and the GPU work its ops launched
    trace = aonkit.load(require_shared("traces/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"))
    p = forward_passes(trace)
    assert len(p) == 1 and p["kind"].iloc[0] == "prefill" and p["batch"].iloc[0] == 16
    assert p["layers"].iloc[0] == 24 and p["context_tokens"].iloc[0] == p["new_tokens"].iloc[0]
    k = trace.kernels
    assert 0 < p["kernel_ns"].iloc[0] <= k["dur_ns"].clip(lower=0).sum()


def test_the_bundled_generation_sample_is_what_its_script_ran() -> None:
    # sample_traces/cpu_generate.pt.trace.json.gz (tools/make_sample_traces.py): the tool's REQUESTS, annotated
    tool = _tool()
    p = aonkit.analysis.forward_passes(aonkit.load(ROOT / "sample_traces" / "cpu_generate.pt.trace.json.gz"))
    want = [("prefill", b, b * n0, b * n0) if k == 0 else ("decode", b, b, b * (n0 + k))
            for b, n0, n in tool.REQUESTS for k in range(n)]  # type: ignore[attr-defined]  # fmt: skip
    assert list(p[["kind", "batch", "new_tokens", "context_tokens"]].astype({"kind": str}).itertuples(
        index=False, name=None)) == want  # fmt: skip
    assert p["annotated"].all() and (p["layers"] == tool.SHAPE["layers"]).all()  # type: ignore[attr-defined]


CUDA_GEN = ROOT / "sample_traces" / "cuda" / "gpt_generate.pt.trace.json.gz"


@pytest.mark.skipif(not CUDA_GEN.exists(), reason="sample_traces/cuda/gpt_generate.pt.trace.json.gz is made on a GPU "
                    "machine (tools/make_cuda_samples.py); not made yet")  # fmt: skip
def test_a_real_cuda_generation() -> None:
    # GIVEN the decoder generating on a real GPU (tools/make_cuda_samples.py: each pass annotated, then synchronized)
    manifest = json.loads((CUDA_GEN.parent / "MANIFEST.json").read_text())["generate"]
    p = aonkit.analysis.forward_passes(aonkit.load(CUDA_GEN))
    # THEN every pass is found with its tokens, and each launched GPU work that its span holds
    want = [("prefill", b, b * n0) if k == 0 else ("decode", b, b) for b, n0, n in manifest["requests"]
            for k in range(n)]  # fmt: skip
    assert list(p[["kind", "batch", "new_tokens"]].astype({"kind": str}).itertuples(index=False, name=None)) == want
    assert (p["kernel_ns"] > 0).all() and (p["dur_ns"] >= p["kernel_ns"]).all() and p["annotated"].all()
    fit = fit_step_time(p)
    assert all(c >= 0 for c in (*fit.step_time.prefill_time_s, *fit.step_time.decode_time_s))


def test_odd_shapes_are_passed_over_not_trusted(tmp_path: Path) -> None:
    # sizes that are not counts are no pass; an empty index is a pass of unknown kind; an odd key no context
    def op(name: str, ts: float, dims: object) -> dict:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 5,
                "args": {"Input Dims": dims}}  # fmt: skip

    ev = [op("aten::embedding", 10, [[50, 8], ["2", 6]]), op("aten::embedding", 20, [[50, 8], [2.5, 6]]),
          op("aten::embedding", 30, [[50, -8], [2, 6]]), op("aten::embedding", 40, "[[50, 8], [2, 6]]"),
          op("aten::embedding", 50, [[50, 8], [2, 0]]), op("aten::embedding", 60, [[50, 8], [3, 1]]),
          op("aten::scaled_dot_product_attention", 62, [[3, 2, 1, 4], [3, 2, 7.0, 4], [3, 2, 7, 4]]),
          op("aten::embedding", 70, [[50, 8], [True, 4]])]  # fmt: skip
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    p = forward_passes(aonkit.load(path))
    assert p["kind"].astype(str).tolist() == ["unknown", "decode"] and p["ts_ns"].tolist() == [50_000, 60_000]
    assert p["new_tokens"].tolist() == [0, 3] and p["context_tokens"].tolist() == [-1, -1]
    assert p["layers"].tolist() == [0, 1]
