"""A prompt prefix every request shares (a system prompt), computed by each prefill or held in a prefix cache."""

from __future__ import annotations

import numpy as np
import pytest

from aonkit._kernels.serving import simulate
from aonkit.model import Lengths, StepTime, saturation_knee, serving_sweep, simulate_serving
from aonkit.model.hardware import devices
from aonkit.model.llm import PRESETS
from aonkit.model.serving import prepare
from aonkit.model.serving_steps import model_step_time, serving_memory

from .test_serving import ENGINE, assert_same_run, kernel_args, simpy_serving, workload


@pytest.mark.parametrize(("chunked", "budget"), [(False, 2048), (True, 256)])
def test_a_cached_prefix_matches_an_independent_simpy_model(chunked, budget):
    # GIVEN 3,000 requests of 16-600 own prompt tokens after a shared prefix of 300, on two engines of max batch 8
    # whose caches of 2,300 tokens hold the prefix once and about four requests' own tokens beside it, or of 900
    # (the longest requests, prefix included, are refused)
    arr, prompt, output = workload(3000, 7)
    for kv in (2300, 900):
        # WHEN the kernel and the SimPy model serve them, the prefix cached
        res = simulate_serving(arr, prompt, output, token_budget=budget, chunked_prefill=chunked, kv_tokens=kv,
                               prefix_tokens=300, prefix_cache=True, **ENGINE)  # fmt: skip
        start, first, fin = simpy_serving(arr, prompt, output, budget=budget, chunked=chunked, kv=kv, prefix=300,
                                          **ENGINE)  # fmt: skip
        # THEN every request starts, gets its first token and finishes at the same instants, or both refuse it
        r = res.requests
        for got, want in ((r["start_s"], start), (r["first_token_s"], first), (r["finish_s"], fin)):
            np.testing.assert_allclose(got, want, rtol=1e-9)
        refused = 300 + prompt + output > kv
        assert np.array_equal(r["replica"] == -1, refused) and refused.any() == (kv == 900)
        # AND the table gives whole prompts, while the replicas computed only the requests' own tokens
        assert np.array_equal(r["prompt_tokens"], prompt + 300)
        assert res.replicas["prefill_tokens"].sum() == prompt[~refused].sum()
        assert r["queue_s"].max() > 0.05  # (the cache held requests back)


def test_an_uncached_prefix_is_the_same_as_longer_prompts():
    # GIVEN a shared prefix of 200 tokens that nothing caches, with prompts drawn and given as arrays
    arr, prompt, output = workload(2000, 3)
    kw = dict(token_budget=1024, kv_tokens=3000, seed=5, **ENGINE)
    for prompts in (prompt, Lengths.uniform(16, 600)):
        # WHEN the requests are simulated with the prefix, and with prompts 200 tokens longer
        with_prefix = simulate_serving(arr, prompts, output, prefix_tokens=200, **kw)
        whole = with_prefix.requests["prompt_tokens"].to_numpy()
        longer = simulate_serving(arr, whole, output, **kw)
        # THEN the table's prompts are the requests' own (as given, or as drawn without a prefix) plus the prefix
        own = simulate_serving(arr, prompts, output, **kw).requests["prompt_tokens"].to_numpy()
        assert np.array_equal(whole, own + 200) and (prompts is not prompt or np.array_equal(own, prompt))
        # AND the runs are the same as with the longer prompts: each prefill computed the prefix
        assert with_prefix.requests.equals(longer.requests)
        assert with_prefix.replicas.equals(longer.replicas)
        assert with_prefix.replicas["prefill_tokens"].sum() == whole[with_prefix.requests["replica"] >= 0].sum()


def test_a_cached_prefix_is_attended_to_by_every_decoding_sequence():
    # GIVEN one engine decoding alone: a request of 10 own prompt tokens and 5 output tokens after a 1,000-token
    # cached prefix, decode steps of 0.01 s + 1e-5 s per token of context
    step = StepTime(prefill_time_s=(0.0, 0.001), decode_time_s=(0.01, 0.0, 1e-5))
    res = simulate_serving([0.0], 10, 5, step_time=step, prefix_tokens=1000, prefix_cache=True, max_batch=4)
    r = res.requests.iloc[0]
    # THEN its prefill computed its 10 own tokens (10 ms) and each of its four decode steps attended to the prefix,
    # its prompt and the tokens it had: 1,000 + 10 + 1..4
    assert r["first_token_s"] == pytest.approx(0.010)
    decode = sum(0.01 + 1e-5 * (1010 + k) for k in range(1, 5))
    assert r["finish_s"] == pytest.approx(0.010 + decode)
    # AND a function of (batch, context) gives the same as the linear coefficients
    f = StepTime(prefill_time_s=(0.0, 0.001), decode_time_s=lambda b, c: 0.01 + 0.0 * b + 1e-5 * c)
    again = simulate_serving([0.0], 10, 5, step_time=f, prefix_tokens=1000, prefix_cache=True, max_batch=4)
    assert again.requests.iloc[0]["finish_s"] == pytest.approx(r["finish_s"], rel=1e-12)


def test_step_time_with_prefix_shifts_decode_context_only():
    lin = StepTime(prefill_time_s=(0.002, 1e-5), decode_time_s=(0.01, 1e-4, 1e-6), overhead_s=0.001)
    fn = StepTime(prefill_time_s=lambda p: 0.002 + 1e-5 * p, decode_time_s=lambda b, c: 0.01 + 1e-4 * b + 1e-6 * c)
    for st in (lin, fn):
        base, shifted = st.tables(500, 8, 4000), st.with_prefix(700).tables(500, 8, 4000)
        np.testing.assert_array_equal(base[0], shifted[0])  # prefill: the tokens computed
        ctx = base[4] + base[5] * np.arange(base[3].shape[1])
        b = np.arange(1, 9)[:, None]
        np.testing.assert_allclose(shifted[3][1:], 0.01 + 1e-4 * b + 1e-6 * (ctx + 700 * b), rtol=1e-12)
    assert lin.with_prefix(0) is lin and StepTime(decode_time_s=0.02).with_prefix(700).decode_time_s == 0.02
    assert fn.with_prefix(700) == fn.with_prefix(700)  # (equal values: a panel's cache keys on step times)


def test_paged_runs_with_a_cached_prefix_give_the_event_loops_results():
    # GIVEN paged caches that fill, with a cached prefix, under each routing
    arr, prompt, output = workload(3000, 9, rate=60.0)
    for routing in ("jsq", "round_robin", "central"):
        run = prepare(arr, prompt, output, replicas=5, max_batch=16, token_budget=256, chunked_prefill=True,
                      kv_tokens=2500, kv_policy="paged", prefix_tokens=400, prefix_cache=True, routing=routing,
                      step_time=ENGINE["step_time"])  # fmt: skip
        # WHEN the kernel runs steps ahead and lazily, and every step as an event
        ahead, plain = simulate(*kernel_args(run), True), simulate(*kernel_args(run), False)
        # THEN the runs agree, and the cache (2,100 tokens beside the prefix) preempted
        assert_same_run(ahead, plain, 1e-12)
        assert plain[8].sum() > 0


def test_prefix_caching_answers_what_a_system_prompt_costs():
    # GIVEN Llama-3 70B on two H100s (8,827 tokens of cache), chunked prefill, a 1,500-token system prompt before
    # prompts of mean 256 and outputs of mean 128
    config, device = PRESETS["Llama-3 70B"], {d.name: d for d in devices()}["H100 SXM"]
    engine = dict(step_time=model_step_time(config, device, 2, "bf16"), max_batch=64, token_budget=2048,
                  chunked_prefill=True, kv_tokens=serving_memory(config, device, 2, "bf16").kv_tokens,
                  kv_policy="paged", prefix_tokens=1500)  # fmt: skip
    rates = [0.5, 1.0, 2.0, 4.0, 8.0]
    # WHEN the rates are swept with the prefix computed by every prefill and with it cached
    got = {cache: serving_sweep(rates, Lengths.lognormal(256, 1.0), Lengths.geometric(128), n_requests=3000,
                                prefix_cache=cache, **engine) for cache in (False, True)}  # fmt: skip
    # THEN caching it serves more before saturating and answers the first token sooner at the lowest rate
    cap = {c: saturation_knee(s)["capacity_per_s"] for c, s in got.items()}
    assert cap[True] > 1.5 * cap[False], cap
    assert got[True]["ttft_p50_s"].iloc[0] < 0.5 * got[False]["ttft_p50_s"].iloc[0]


@pytest.mark.parametrize(("kw", "match"), [
    ({"prefix_tokens": -1}, "prefix_tokens must be a whole number"),
    ({"prefix_tokens": 2.5}, "prefix_tokens must be a whole number"),
    ({"prefix_tokens": "500"}, "prefix_tokens must be a whole number"),
    ({"prefix_tokens": 500, "prefix_cache": True, "kv_tokens": 500}, "no room beside the cached prefix of 500"),
    ({"prefix_tokens": 100, "token_budget": 120}, "exceeds token_budget=120"),
])
def test_bad_prefixes_are_refused_before_anything_runs(kw, match):
    with pytest.raises(ValueError, match=match):
        simulate_serving([0.0, 1.0], 50, 4, step_time=StepTime(), max_batch=2, **kw)
