"""What a replica's GPUs hold when serving (weights, KV cache), the precision of model step times, and the serving
panel's batch capped by memory."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from aonkit.model.hardware import devices
from aonkit.model.llm import PRESETS, decode_time, prefill_time
from aonkit.model.serving_steps import model_step_time, serving_memory
from aonkit.widgets import ServingPanel

DEV = {d.name: d for d in devices()}
N = 1500  # requests per simulation: enough to tell sweeps apart, quick


def test_serving_memory_by_hand() -> None:
    # Llama-3 8B: 32 layers, 8 KV heads of 128: 2 * 8 * 128 values a token and layer, 2 bytes each
    cfg, h100 = PRESETS["Llama-3 8B"], DEV["H100 SXM"]
    per_token = 32 * 2 * 8 * 128 * 2
    m = serving_memory(cfg, h100)
    assert m.weights_bytes == cfg.num_params() * 2 and m.kv_bytes_per_token == per_token
    assert m.usable_bytes == 0.9 * 80e9
    assert m.kv_tokens == math.floor((0.9 * 80e9 - cfg.num_params() * 2) / per_token)
    assert m.sequences(640) == m.kv_tokens // 640
    # tensor parallelism splits the weights and the KV heads; FP8 stores a weight in one byte, the cache stays 16-bit
    m2 = serving_memory(cfg, h100, tp=2, dtype="fp8")
    assert m2.weights_bytes == cfg.num_params() / 2 and m2.kv_bytes_per_token == per_token / 2
    # weights that do not fit leave no cache
    big = serving_memory(PRESETS["Llama-3 405B"], h100, tp=8)
    assert big.weights_bytes > big.usable_bytes and big.kv_tokens == 0 and big.sequences(1) == 0
    assert serving_memory(PRESETS["Llama-3 405B"], h100, tp=8, dtype="fp8").sequences(640) > 64
    with pytest.raises(ValueError, match="no memory_bytes"):
        serving_memory(cfg, dataclasses.replace(h100, memory_bytes=None))
    with pytest.raises(ValueError, match="memory_fraction"):
        serving_memory(cfg, h100, memory_fraction=0.0)


def test_fp8_step_times_read_one_byte_a_weight() -> None:
    cfg, h100 = PRESETS["Llama-3 8B"], DEV["H100 SXM"]
    b, c = np.array([1.0, 8.0, 64.0]), np.array([600.0, 8 * 600.0, 64 * 600.0])
    fp8, bf16 = model_step_time(cfg, h100, 1, "fp8"), model_step_time(cfg, h100, 1)
    want = decode_time(cfg, h100, b, c / b, dtype="fp8", weight_bytes=1).seconds
    np.testing.assert_array_equal(fp8.decode_time_s(b, c), want)
    np.testing.assert_array_equal(fp8.prefill_time_s(np.array([512.0])),
                                  prefill_time(cfg, h100, 1, np.array([512.0]), dtype="fp8", weight_bytes=1).seconds)
    # a decode step of one sequence reads the weights: about half the time in FP8
    ratio = fp8.decode_time_s(b, c)[0] / bf16.decode_time_s(b, c)[0]
    assert 0.45 < ratio < 0.6, ratio


def test_the_panel_admits_by_its_kv_cache_and_says_so() -> None:
    # GIVEN Llama-3 70B on two H100s: 70.6 GB of weights a GPU leave 8,827 tokens of cache, 13 sequences of
    # 512 + 128 tokens (sent with max_new_tokens=128, all reached)
    kw = {"n_requests": N, "lengths": "fixed", "model": "Llama-3 70B", "device": "H100 SXM", "tp": 2,
          "max_new_tokens": 128}
    p = ServingPanel(2.0, max_batch=64, **kw)
    assert p.memory().sequences(640) == 13 and p.engine()["kv_tokens"] == p.memory().kv_tokens == 8827
    assert p.engine()["max_batch"] == 64
    # THEN with requests of one length the cache admits 13 at once: the answer of a max batch of 13 (under which
    # the cache never fills), not of 12; and the summary says why
    pd.testing.assert_frame_equal(p.sweep, ServingPanel(2.0, max_batch=13, **kw).sweep)
    assert not p.sweep.equals(ServingPanel(2.0, max_batch=12, **kw).sweep)
    assert "13 sequences of 640 (mean prompt + max new tokens, reserved)" in p.summary.value
    assert "the cache, not the max batch 64, bounds the batch" in p.summary.value
    # AND with a smaller max batch no note
    p.max_batch.value = 8
    assert "bounds the batch" not in p.memory_text()
    # AND on four GPUs the cache holds far more than the control's 64
    p.max_batch.value, p.tp.value = 64, 4
    assert p.memory().sequences(640) > 600 and "bounds the batch" not in p.memory_text()


def test_the_panel_says_how_many_requests_its_cache_refuses() -> None:
    # GIVEN Llama-3 70B on two H100s (8,827 tokens of cache) and random prompts of mean 2,048 (lognormal, CV 1)
    p = ServingPanel(0.5, n_requests=N, model="Llama-3 70B", device="H100 SXM", tp=2, prompt_tokens=2048,
                     max_batch=16)  # fmt: skip
    # THEN the requests longer than the cache are refused, and the panel's line says what share
    row = p.sweep.iloc[(p.sweep["arrival_rate_per_s"] - 0.5).abs().argmin()]
    share = p.numbers()["rejected_fraction"]
    assert 0.005 < share < 0.1 and share == row["rejected"] / row["measured"]
    assert f"; {100 * share:.2g}% of requests refused (their prompt and max new tokens exceed a replica's KV " \
           "cache)" in p.text()
    # AND with the prompts fixed at the mean, none is, and the line says nothing of it
    p.lengths.value = "fixed"
    assert p.numbers()["rejected_fraction"] == 0 and "refused" not in p.text()


def test_the_panel_refuses_what_does_not_fit_and_a_precision_the_device_lacks() -> None:
    p = ServingPanel(2.0, n_requests=N, lengths="fixed")
    before = p.numbers()
    # WHEN the model's weights do not fit on the GPU
    p.model.value = "Llama-3 405B"
    # THEN the panel says so and keeps the last valid answer
    assert "does not fit on H100 SXM with TP 1" in p.error and "weights do not fit" in p.error
    assert p.error.endswith("(it fits in fp8 with TP 8)")  # where it would: no TP up to 8 in 16 bits
    p.model.value = "Mixtral 8x7B"
    assert p.error.endswith("(it fits with TP 2)")
    p.model.value = "DeepSeek-V3"
    assert p.error.endswith("the weights do not fit")  # 84 GB a GPU even in FP8 on eight: nowhere here
    p.model.value = "Llama-3 405B"
    assert p.numbers() == before and "cannot simulate" in p.summary.value
    # AND with FP8 weights on eight GPUs it serves
    p.tp.value, p.dtype.value = 8, "fp8"
    assert not p.error and p.engine()["kv_tokens"] > 64 * 640
    # WHEN the device has no such peak, the panel names the precisions it has
    p.model.value, p.tp.value, p.dtype.value = "Llama-3 8B", 1, "bf16"
    p.device.value = "V100 SXM2"
    assert p.error == "ValueError: V100 SXM2 has no bf16 peak: choose a precision it has (fp16)"
    p.dtype.value = "fp16"
    assert not p.error and p.numbers() != before


def test_linear_step_times_and_a_device_of_unknown_memory_are_not_capped() -> None:
    p = ServingPanel(2.0, n_requests=N, lengths="fixed", step_time="linear", max_batch=300)
    assert p.memory() is None and p.engine()["kv_tokens"] is None and p.memory_text() == ""
    q = ServingPanel(2.0, n_requests=N, lengths="fixed")
    q.devices["H100 SXM"] = dataclasses.replace(q.devices["H100 SXM"], memory_bytes=None)
    assert q.memory() is None and q.engine()["kv_tokens"] is None


def test_the_llm_panels_inference_curves_mark_where_the_kv_cache_fills() -> None:
    from aonkit.widgets import LLMModelPanel

    # GIVEN the LLM panel: Llama-3 70B, inference on eight H100s, one sequence of 8192 tokens
    p = LLMModelPanel()
    kv = serving_memory(PRESETS["Llama-3 70B"], DEV["H100 SXM"], 8).kv_tokens
    assert p.inference_context.value == 8192 and p.numbers()["inference_kv_tokens"] == kv == p.kv.kv_tokens
    # THEN the batch curve marks the batch whose sequences fill the cache (162), and the context curve, which ends
    # at 131,072 tokens of one sequence, nothing
    assert p.sources["kv_batch"].data == {"x": [kv / 8192]} and 160 < kv / 8192 < 165
    assert p.sources["kv_context"].data == {"x": []}
    assert "1% full" in p.summary.value
    # WHEN the batch grows to 512: the context curve's mark moves in, and the summary says the cache is over-full
    p.inference_batch.value = 512
    assert p.sources["kv_context"].data == {"x": [kv / 512]}
    assert p.numbers()["inference_kv_fraction"] == 512 * 8192 / kv
    assert "316% full" in p.summary.value and "color:#D62728'>316% full" in p.summary.value
    # WHEN one GPU holds the weights alone: no room, no mark
    p.inference_tp.value = 1
    assert p.numbers()["inference_kv_tokens"] == 0 and "weights do not fit" in p.summary.value
    assert p.sources["kv_batch"].data == p.sources["kv_context"].data == {"x": []}
    # AND a device of unknown memory has neither
    q = LLMModelPanel(device=dataclasses.replace(DEV["H100 SXM"], name="H100 unknown memory", memory_bytes=None))
    assert math.isnan(q.numbers()["inference_kv_tokens"]) and q.sources["kv_batch"].data == {"x": []}
    assert "KV cache (inference)" not in q.summary.value


def test_the_llm_panels_fp8_inference_reads_one_byte_a_weight_as_the_serving_panel_does() -> None:
    from aonkit.widgets import LLMModelPanel

    cfg, h100 = PRESETS["Llama-3 70B"], DEV["H100 SXM"]
    p = LLMModelPanel(dtype="fp8")
    # THEN the inference curves are those of FP8 weights (one byte), and the KV mark counts them at one byte too
    t = p.inference[p.inference["sweep"] == "batch"]
    want = decode_time(cfg, h100, t["x"].to_numpy(), 8192, tp=8, dtype="fp8", weight_bytes=1).seconds * 1e3
    np.testing.assert_allclose(p.sources["batch"].data["tpot_ms"], want, rtol=1e-12)
    assert p.kv == serving_memory(cfg, h100, 8, "fp8") and p.kv.weights_bytes == cfg.num_params() / 8
    # AND the same setting in 16 bits holds fewer tokens, and decodes one sequence slower (the weights read twice
    # over; the KV cache and the all-reduces the same: 17.8 against 14.6 ms)
    p.dtype.value = "bf16"
    assert p.kv.kv_tokens < serving_memory(cfg, h100, 8, "fp8").kv_tokens
    assert p.sources["batch"].data["tpot_ms"][0] > 1.15 * want[0]


def test_the_panels_paged_cache_admits_more_and_says_how_often_it_preempted() -> None:
    # GIVEN Llama-3 70B on two H100s (8,827 tokens of cache), random lengths, at 1.5 requests/s
    p = ServingPanel(1.5, n_requests=N, model="Llama-3 70B", device="H100 SXM", tp=2, max_batch=64)
    reserve = p.numbers()
    assert reserve["preemptions"] == 0 and "preemptions" not in p.text()
    # WHEN the cache is paged (vLLM's way)
    p.kv_policy.value = "paged"
    assert p.engine()["kv_policy"] == "paged" and not p.error
    paged = p.numbers()
    # THEN more sequences run at once: a higher capacity, bought with preemptions, which the line counts
    assert paged["capacity_per_s"] > 1.1 * reserve["capacity_per_s"]
    assert paged["preemptions"] > 0 and f"; {paged['preemptions']:,} preemptions (a full KV cache)" in p.text()
    assert p.sweep["preemptions"].max() > 0


def test_the_panel_reserves_max_new_tokens_and_caps_random_outputs_there() -> None:
    # GIVEN Llama-3 70B on two H100s (8,827 tokens of cache) and requests of 512 + 128 tokens sent with
    # max_new_tokens=1,024 (the panel's default for outputs of 128: eight means)
    kw = {"n_requests": N, "lengths": "fixed", "model": "Llama-3 70B", "device": "H100 SXM", "tp": 2}
    p = ServingPanel(2.0, max_batch=64, **kw)
    assert p.max_new.value == 1024 and p.engine()["max_new_tokens"] == 1024
    # THEN the reserving cache holds 5 requests at once (8,827 // 1,536), not the 13 their outputs would fill: the
    # answer of a max batch of 5, and the memory line says so
    pd.testing.assert_frame_equal(p.sweep, ServingPanel(2.0, max_batch=5, max_new_tokens=128, **kw).sweep)
    assert "5 sequences of 1,536 (mean prompt + max new tokens, reserved)" in p.memory_text()
    # AND a paged cache holds what the contexts grow to: more at once, a higher capacity; its line counts prompts
    # and outputs
    reserve = p.numbers()
    p.kv_policy.value = "paged"
    assert p.numbers()["capacity_per_s"] > 1.5 * reserve["capacity_per_s"]
    assert "13 sequences of 640 (mean prompt + output)" in p.memory_text()
    # AND random outputs stop at max new tokens; a fixed output over it is an error naming both
    p.lengths.value = "random"
    assert p.workload()[1].cap == 1024 and not p.error
    assert p.numbers()["stopped_fraction"] < 0.001 and "stop at max new tokens" not in p.text()
    p.max_new.value = 100
    assert p.workload()[1].cap == 100 and not p.error
    # (and the line says how many: (1 - 1/128)**100 of geometric outputs of mean 128 are longer than 100)
    assert p.numbers()["stopped_fraction"] == pytest.approx((1 - 1 / 128) ** 100)
    assert "; 46% of outputs stop at max new tokens" in p.text()
    p.lengths.value = "fixed"
    assert p.error == "ValueError: output tokens 128 exceed max new tokens 100: a request stops there"
    # AND a request whose prompt and max new tokens the cache cannot hold makes the setting an error
    p.max_new.value, p.prompt.value = 8000, 1000
    assert "does not fit" in p.error and "mean prompt + max new tokens" in p.error


def test_the_panel_holds_a_system_prompt_once_in_its_prefix_cache_or_in_every_sequence() -> None:
    # GIVEN Llama-3 70B on two H100s (8,827 tokens of cache), fixed requests of 256 + 128 tokens sent with
    # max_new_tokens=128 after a 1,500-token system prompt that every prefill computes (no prefix cache)
    kw = {"n_requests": N, "lengths": "fixed", "model": "Llama-3 70B", "device": "H100 SXM", "tp": 2,
          "prompt_tokens": 256, "max_new_tokens": 128}  # fmt: skip
    p = ServingPanel(2.0, max_batch=64, prefix_tokens=1500, prefix_cache=False, **kw)
    assert p.engine()["prefix_tokens"] == 1500 and p.engine()["prefix_cache"] is False
    # THEN each reservation holds the system prompt too: 4 at once (8,827 // 1,884), as prompts of 1,756 would
    assert "4 sequences of 1,884 (system prompt + mean prompt + max new tokens, reserved)" in p.memory_text()
    pd.testing.assert_frame_equal(p.sweep, ServingPanel(2.0, max_batch=64, **{**kw, "prompt_tokens": 1756}).sweep)
    computed = p.numbers()
    # WHEN the prefix cache holds it once
    p.prefix_cache.value = True
    # THEN 19 requests fit beside it ((8,827 - 1,500) // 384), the capacity grows with them and the first token
    # comes sooner (the prefill computes 256 tokens, not 1,756)
    assert "the 1,500-token cached system prompt once and 19 sequences of 384" in p.memory_text()
    cached = p.numbers()
    assert cached["capacity_per_s"] > 3 * computed["capacity_per_s"], (cached, computed)
    assert p.sweep["ttft_p50_s"].iloc[0] < 0.5 * ServingPanel(2.0, max_batch=64, prefix_tokens=1500,
                                                              prefix_cache=False, **kw).sweep["ttft_p50_s"].iloc[0]
    # AND a system prompt the cache cannot hold with one request makes the setting an error naming it
    p.prefix.value = 8500
    assert "does not fit" in p.error and "the 8,500-token cached system prompt once" in p.error
