"""Speculative decoding in the analytic model (aonkit.model.llm.speculative) and the verify pass it rests on.

The expected tokens per iteration are Leviathan, Kalman and Matias 2023 (ICML), section 3, checked here against a
slow draw-by-draw reference; the pass's FLOPs by hand on a small config; the rest by its parts.
"""

from __future__ import annotations

import numpy as np
import pytest

from aonkit.model import device_spec
from aonkit.model.llm import (
    DEEPSEEK_V3,
    LLAMA3_8B,
    LLAMA32_1B,
    MIXTRAL_8X7B,
    TransformerConfig,
    accepted_tokens,
    best_draft_length,
    decode_time,
    preset,
    speculative_decode_time,
    verify_time,
)

H100 = device_spec("H100 SXM")


def _drawn_tokens(a: float, k: int, iterations: int, rng: np.random.Generator) -> float:
    """Tokens an iteration yields, drawn the slow obvious way: accept drafts until one is rejected, then one more."""
    total = 0
    for _ in range(iterations):
        kept = 0
        while kept < k and rng.random() < a:
            kept += 1
        total += kept + 1
    return total / iterations


@pytest.mark.parametrize(("a", "k"), [(0.0, 3), (0.5, 4), (0.8, 2), (0.9, 7), (1.0, 5)])
def test_accepted_tokens_is_what_iterations_yield(a: float, k: int) -> None:
    e = accepted_tokens(a, k)
    assert e == pytest.approx(k + 1 if a == 1 else (1 - a ** (k + 1)) / (1 - a), rel=1e-12)
    n = 40_000
    drawn = _drawn_tokens(a, k, n, np.random.default_rng(k))
    # the count's variance is at most k**2 / 4 (a variable within [1, k + 1]): 5 standard errors
    assert abs(drawn - e) <= 5 * (k / 2) / np.sqrt(n)


def test_accepted_tokens_rejects_what_is_not_a_probability_or_a_count() -> None:
    assert accepted_tokens(0.5, 0) == 1.0
    assert np.allclose(accepted_tokens(np.array([0.0, 0.5, 1.0]), 2), [1.0, 1.75, 3.0])
    for a, k in ((1.5, 2), (-0.1, 2), (0.5, -1), (0.5, 1.5)):
        with pytest.raises(ValueError):
            accepted_tokens(a, k)


@pytest.mark.parametrize("config", [LLAMA3_8B, MIXTRAL_8X7B, DEEPSEEK_V3], ids=lambda c: c.name)
@pytest.mark.parametrize("tp", [1, 8])
def test_verify_of_one_token_is_a_decode_step_to_the_bit(config: TransformerConfig, tp: int) -> None:
    b, c = np.array([1.0, 7.0, 64.0, 300.0]), np.array([[17.0], [1024.0], [30_000.0]])
    v, d = verify_time(config, H100, b, c, 1, tp=tp), decode_time(config, H100, b, c, tp=tp)
    assert np.array_equal(v.seconds, d.seconds) and np.array_equal(v.flops, d.flops)
    assert np.array_equal(v.bytes, d.bytes)
    assert all(np.array_equal(*np.broadcast_arrays(v.parts[p], d.parts[p])) for p in d.parts)  # (shapes broadcast)


def test_verify_flops_by_hand() -> None:
    """2 layers, h 64, 4 heads of 16, MLP 256, vocabulary 100; 3 sequences check 5 tokens after 10 cached."""
    cfg = TransformerConfig(layers=2, hidden=64, heads=4, ffn=256, vocab=100, seq=32)
    b, c, q = 3, 10, 5
    linear = 2 * (b * q) * (4 * 64 * 64 + 2 * 64 * 256)  # Q, K, V, output; MLP up and down
    pairs = sum(c + j for j in range(q))  # the j-th new token attends to c + j keys (decode's convention at j = 0)
    attention = 2 * b * pairs * 4 * (16 + 16)
    logits = 2 * (b * q) * 100 * 64  # every checked token's logits
    assert verify_time(cfg, H100, b, c, q).flops == 2 * (linear + attention) + logits


def test_verify_reads_the_weights_once_for_all_the_tokens_it_checks() -> None:
    one, five = verify_time(LLAMA3_8B, H100, 1, 1024, 1), verify_time(LLAMA3_8B, H100, 1, 1024, 5)
    assert five.flops == pytest.approx(5 * one.flops, rel=0.01)  # compute grows with the tokens...
    assert five.bytes < 1.01 * one.bytes  # ...traffic hardly: memory-bound at batch 1, about one step's time
    assert one.seconds < five.seconds < 1.01 * one.seconds
    with pytest.raises(ValueError, match="tokens"):
        verify_time(LLAMA3_8B, H100, 1, 1024, 0)


def test_an_iteration_is_its_draft_steps_and_the_check() -> None:
    b, c, k, a = np.array([1.0, 16.0, 256.0]), 2048.0, 3, 0.6
    t = speculative_decode_time(LLAMA3_8B, H100, b, c, k=k, acceptance=a, draft=LLAMA32_1B)
    draft = sum(decode_time(LLAMA32_1B, H100, b, c + j).seconds for j in range(k))
    verify = verify_time(LLAMA3_8B, H100, b, c, k + 1).seconds
    e = 1 + a + a**2 + a**3
    assert np.allclose(t.draft_s, draft, rtol=1e-12) and np.allclose(t.verify_s, verify, rtol=1e-12)
    assert np.allclose(t.iteration_s, draft + verify, rtol=1e-12) and t.tokens_per_iteration == pytest.approx(e)
    assert np.allclose(t.seconds, (draft + verify) / e, rtol=1e-12)
    assert np.allclose(t.tokens_per_s, b * e / (draft + verify), rtol=1e-12)
    assert np.allclose(t.speedup, decode_time(LLAMA3_8B, H100, b, c).seconds / t.seconds, rtol=1e-12)
    free = speculative_decode_time(LLAMA3_8B, H100, b, c, k=k, acceptance=a)
    assert np.all(free.draft_s == 0) and np.all(free.speedup > t.speedup)
    wide = speculative_decode_time(LLAMA3_8B, H100, b, c, k=k, acceptance=a, draft=LLAMA32_1B, tp=2, draft_tp=1)
    assert np.allclose(wide.draft_s, draft, rtol=1e-12)  # the draft on one GPU of the two


def test_speculation_pays_at_small_batches_and_costs_at_large_ones() -> None:
    """Memory-bound (batch 1): about E times faster with a free draft; compute-bound (large batch, short context):
    the check costs about k + 1 steps and speculation is slower, so no draft length is chosen."""
    batch = np.array([1.0, 4.0, 16.0, 64.0, 256.0, 1024.0])
    t = speculative_decode_time(LLAMA3_8B, H100, batch, 256, k=4, acceptance=0.5)
    assert 0.97 * t.tokens_per_iteration < t.speedup[0] <= t.tokens_per_iteration
    assert np.all(np.diff(t.speedup) <= 0) and t.speedup[-1] < 1
    assert best_draft_length(LLAMA3_8B, H100, 1024, 256, acceptance=0.5) == (0, None)
    # a draft of 1.2 B parameters costs about a sixth of the 8 B target's step each: fewer drafted tokens pay
    k_free, _ = best_draft_length(LLAMA3_8B, H100, 1, 1024, acceptance=0.8)
    k_draft, _ = best_draft_length(LLAMA3_8B, H100, 1, 1024, acceptance=0.8, draft=LLAMA32_1B)
    assert k_free == 8 and 1 <= k_draft < k_free


def test_best_draft_length_is_the_fastest_of_those_tried() -> None:
    for batch, a in ((1, 0.7), (32, 0.6), (128, 0.8)):
        k, t = best_draft_length(LLAMA3_8B, H100, batch, 4096, acceptance=a, draft=LLAMA32_1B, ks=range(1, 7))
        times = {j: float(speculative_decode_time(LLAMA3_8B, H100, batch, 4096, k=j, acceptance=a,
                                                  draft=LLAMA32_1B).seconds) for j in range(1, 7)}  # fmt: skip
        assert k == min(times, key=times.get) and float(t.seconds) == times[k]
    with pytest.raises(ValueError, match="scalars"):
        best_draft_length(LLAMA3_8B, H100, np.array([1, 2]), 1024)
    with pytest.raises(ValueError, match="k must"):
        speculative_decode_time(LLAMA3_8B, H100, k=0)


def test_the_draft_preset_by_hand() -> None:
    """Llama-3.2 1B: embedding V*h (tied), 16 layers of Q, K, V, O (GQA 8 of 32 heads), gated MLP, 2 RMSNorms."""
    h, f, v, kv = 2048, 8192, 128256, 8 * 64
    layer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h
    assert preset("llama3.2-1b").num_params() == v * h + 16 * layer + h == 1_235_814_400


# ---- in LLMModelPanel's inference tab ------------------------------------------------------------------------------
def test_the_panel_draws_what_the_model_says_and_nothing_when_off() -> None:
    from aonkit.model.llm import weight_bytes
    from aonkit.views.llm import DEFAULT_BATCHES, DEFAULT_CONTEXTS
    from aonkit.widgets import LLMModelPanel

    # GIVEN the panel as it opens: plain decoding, no speculative curve or number
    p = LLMModelPanel("Llama-3 70B", inference_batch=8, inference_context=4096, inference_tp=4)
    assert all(v is None for v in p.sources["batch"].data["spec_ms"]) and "speculative" not in p.summary.value
    assert np.isnan(p.numbers()["spec_tpot_s"])
    # WHEN a draft is chosen, with 3 tokens an iteration accepted at 0.8, at FP8
    p.dtype.value, p.draft.value, p.draft_k.value, p.acceptance.value = "fp8", "Llama-3.2 1B", 3, 0.8
    # THEN both curves and the numbers are the model's (the draft on the same 4 GPUs, weights of one byte)
    at = {"tp": 4, "dtype": "fp8", "weight_bytes": weight_bytes("fp8"), "k": 3, "acceptance": 0.8,
          "draft": LLAMA32_1B}  # fmt: skip
    cfg, dev = preset("Llama-3 70B"), p.device_spec()
    by_batch = speculative_decode_time(cfg, dev, DEFAULT_BATCHES.astype(float), 4096.0, **at)
    by_context = speculative_decode_time(cfg, dev, 8.0, DEFAULT_CONTEXTS.astype(float), **at)
    assert np.allclose(p.sources["batch"].data["spec_ms"], by_batch.seconds * 1e3, rtol=1e-12)
    assert np.allclose(p.sources["context"].data["spec_ms"], by_context.seconds * 1e3, rtol=1e-12)
    n = p.numbers()
    one = speculative_decode_time(cfg, dev, 8, 4096, **at)
    assert n["spec_tpot_s"] == pytest.approx(float(one.seconds), rel=1e-12)
    assert n["spec_speedup"] == pytest.approx(float(one.speedup), rel=1e-12)
    at.pop("k")
    assert n["spec_best_k"] == best_draft_length(cfg, dev, 8, 4096, **at)[0] > 0
    assert "TPOT, speculative" in p.summary.value and f"k = {n['spec_best_k']}" in p.summary.value
    # WHEN the draft costs nothing, THEN decoding is faster than with the 1B draft
    p.draft.value = "no-cost draft"
    assert p.numbers()["spec_speedup"] > n["spec_speedup"]
    # WHEN no draft is accepted at a large batch, THEN the panel says plain decoding is faster
    p.acceptance.value, p.inference_batch.value = 0.0, 512
    assert p.numbers()["spec_speedup"] < 1 and "none: plain is faster" in p.summary.value and not p.error
    # WHEN it is switched off again, THEN the curves and numbers go
    p.draft.value = "off"
    assert all(v is None for v in p.sources["context"].data["spec_ms"]) and "speculative" not in p.summary.value
