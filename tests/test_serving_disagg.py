"""Disaggregated serving: a prefill pool, a decode pool, and the KV cache sent between them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aonkit.model import (
    ArrivalProcess,
    Lengths,
    Pool,
    StepTime,
    disaggregated_sweep,
    pools_needed,
    saturation_knee,
    simulate_disaggregated,
    simulate_serving,
)
from aonkit.model.hardware import devices
from aonkit.model.llm import PRESETS
from aonkit.model.serving_steps import model_step_time

from .test_serving import simpy_serving, workload

ST = StepTime(prefill_time_s=(0.004, 2e-5), decode_time_s=(0.008, 2e-4, 1e-6), overhead_s=0.001)


def test_a_lone_request_takes_its_prefill_its_transfer_and_its_decode_steps():
    # GIVEN one request of 500 prompt tokens and 5 output tokens, a transfer of 2 ms + 10 us a token
    res = simulate_disaggregated([0.0], 500, 5, prefill=Pool(1, ST, 8, 4096), decode=Pool(1, ST, 8),
                                 transfer_s=(0.002, 1e-5))  # fmt: skip
    r = res.requests.iloc[0]
    # THEN its first token comes after one prefill step (1 + 4 + 10 ms), its cache reaches the decode pool 7 ms
    # later, enters with a step of the pool's overhead (1 ms: nothing else decodes) and decodes its four other
    # tokens, each step attending to its prompt and the tokens so far (501-504)
    assert r["first_token_s"] == pytest.approx(0.015) and r["kv_ready_s"] == pytest.approx(0.022)
    decode = sum(0.001 + 0.008 + 2e-4 + 1e-6 * (500 + k) for k in range(1, 5))
    assert r["finish_s"] == pytest.approx(0.022 + 0.001 + decode)
    assert r["tpot_s"] == pytest.approx((r["finish_s"] - 0.015) / 4)
    assert res.replicas["pool"].tolist() == ["prefill", "decode"]
    assert res.replicas["decode_tokens"].tolist() == [0, 4] and res.replicas["prefill_tokens"].tolist() == [500, 500]


@pytest.mark.parametrize("chunked", [False, True])
def test_the_pools_match_two_independent_simpy_engines(chunked):
    # GIVEN 3,000 requests on two prefill replicas (whole prompts in budgets of 2,048 tokens, or chunks of 256) and
    # three decode replicas of max batch 8 with caches of 3,000 tokens, 3 ms + 1 us a token between them
    arr, prompt, output = workload(3000, 7)
    budget = 256 if chunked else 2048
    assert (prompt + output <= 3000).all()  # (none refused: the SimPy prefill pool would not know)
    res = simulate_disaggregated(arr, prompt, output, prefill=Pool(2, ST, 8, budget, chunked),
                                 decode=Pool(3, ST, 8, kv_tokens=3000), transfer_s=(0.003, 1e-6))  # fmt: skip
    # WHEN the SimPy model serves the prompts as one-token requests, then the decode pool as an engine whose
    # prefill costs nothing, from each first token plus the transfer
    _, first, _ = simpy_serving(arr, prompt, np.ones_like(output), replicas=2, max_batch=8, budget=budget,
                                chunked=chunked, step_time=ST)  # fmt: skip
    ready = first + 0.003 + 1e-6 * prompt
    two = output > 1
    free = StepTime(prefill_time_s=(0.0, 0.0), decode_time_s=ST.decode_time_s, overhead_s=ST.overhead_s)
    _, _, fin = simpy_serving(ready[two], prompt[two], output[two], replicas=3, max_batch=8, budget=10**9,
                              chunked=True, step_time=free, kv=3000)  # fmt: skip
    # THEN every first token and finish is the same
    r = res.requests
    np.testing.assert_allclose(r["first_token_s"], first, rtol=1e-9)
    np.testing.assert_allclose(r["finish_s"][two], fin, rtol=1e-9)
    np.testing.assert_array_equal(r["finish_s"][~two], first[~two])  # (one token: done at the prefill pool)
    assert (r["decode_replica"][~two] == -1).all() and r["kv_ready_s"][~two].isna().all()
    assert (r["decode_start_s"][two] > r["kv_ready_s"][two]).any()  # (some waited for room in the decode pool)


def test_a_request_the_decode_pool_cannot_hold_is_refused_at_arrival():
    # GIVEN decode caches of 400 tokens and prompts of 16-600 tokens with their outputs
    arr, prompt, output = workload(500, 3)
    res = simulate_disaggregated(arr, prompt, output, prefill=Pool(2, ST, 8, 2048),
                                 decode=Pool(2, ST, 8, kv_tokens=400))  # fmt: skip
    # THEN those over 400 never reach the prefill pool and have no times; the summary counts them
    refused = prompt + output > 400
    r = res.requests
    assert refused.any() and np.array_equal(r["first_token_s"].isna(), refused)
    assert r["finish_s"][~refused].notna().all()
    assert res.summary["rejected"] == refused.sum()
    assert res.replicas.query("pool == 'prefill'")["requests"].sum() == (~refused).sum()


def test_disaggregation_keeps_decode_steps_free_of_prompts():
    # GIVEN Llama-3 8B on H100s, prompts of 4,000-12,000 tokens and outputs of 100-400 at 4 requests/s, on two
    # GPUs each serving both phases (whole prompts or chunks of 2,048) or one prefill and one decode GPU (the cache,
    # 128 KB a token, over 50 GB/s)
    st = model_step_time(PRESETS["Llama-3 8B"], {d.name: d for d in devices()}["H100 SXM"])
    load = dict(arrivals=ArrivalProcess(4.0), prompt_tokens=Lengths.uniform(4000, 12000),
                output_tokens=Lengths.uniform(100, 400), n_requests=3000, seed=1)  # fmt: skip
    together = simulate_serving(**load, step_time=st, replicas=2, max_batch=64, token_budget=16384).summary
    chunked = simulate_serving(**load, step_time=st, replicas=2, max_batch=64, token_budget=2048,
                               chunked_prefill=True).summary  # fmt: skip
    apart = simulate_disaggregated(**load, prefill=Pool(1, st, 64, 16384), decode=Pool(1, st, 128),
                                   transfer_s=(0.001, 131072 / 50e9)).summary  # fmt: skip
    # THEN the decode GPU's tokens come steadily (p99 TPOT about half the colocated ones'), while the one prefill
    # GPU makes first tokens wait longer: the trade DistServe sizes the pools by
    assert apart["tpot_p99_s"] < 0.6 * together["tpot_p99_s"] and apart["tpot_p99_s"] < 0.7 * chunked["tpot_p99_s"]
    assert apart["ttft_p99_s"] > 2 * together["ttft_p99_s"]
    assert apart["throughput_per_s"] == pytest.approx(together["throughput_per_s"], rel=0.01)


@pytest.mark.parametrize(("kw", "match"), [
    ({"transfer_s": (-0.001, 0.0)}, "transfer_s must be"),
    ({"transfer_s": (0.0, float("nan"))}, "transfer_s must be"),
    ({"transfer_s": 0.002}, "transfer_s must be"),
    ({"transfer_s": (0.001, 0.0, 1.0)}, "transfer_s must be"),
    ({"prefill": "two GPUs"}, "prefill must be a Pool"),
])
def test_bad_pools_and_transfers_are_refused(kw, match):
    args = {"prefill": Pool(1, ST, 8, 2048), "decode": Pool(1, ST, 8), **kw}
    with pytest.raises(ValueError, match=match):
        simulate_disaggregated([0.0, 1.0], 50, 4, **args)


@pytest.mark.parametrize(("kw", "match"), [
    ({"routing": "random"}, "Pool routing must be one of"),
    ({"kv_tokens": 0}, "Pool kv_tokens must be a positive integer"),
    ({"replicas": 1.5}, "Pool replicas must be a positive integer"),
    ({"max_batch": 0}, "Pool max_batch must be a positive integer"),
    ({"step_time": (0.01, 1e-4)}, "Pool step_time must be a StepTime"),
])
def test_a_bad_pool_is_refused_when_made(kw, match):
    with pytest.raises(ValueError, match=match):
        Pool(**{"step_time": ST, **kw})


def test_pools_needed_sizes_the_prefill_pool_for_ttft_and_the_decode_pool_for_tpot():
    # GIVEN Llama-3 8B on H100s, long prompts at 6 requests/s (more than one prefill GPU computes), objectives of
    # p99 TTFT <= 1 s and p99 TPOT <= 12 ms
    st = model_step_time(PRESETS["Llama-3 8B"], {d.name: d for d in devices()}["H100 SXM"])
    load = dict(prompt_tokens=Lengths.uniform(4000, 12000), output_tokens=Lengths.uniform(100, 400), n_requests=3000,
                seed=1)  # fmt: skip
    pools = dict(prefill=Pool(1, st, 64, 16384), decode=Pool(1, st, 128), transfer_s=(0.001, 131072 / 50e9))
    plan = pools_needed(6.0, **load, **pools, ttft_slo_s=1.0, tpot_slo_s=0.012)
    # THEN the counts found meet both, and one replica fewer in either pool misses its objective
    def at(p, d):
        return simulate_disaggregated(ArrivalProcess(6.0), **load, prefill=Pool(p, st, 64, 16384),
                                      decode=Pool(d, st, 128), transfer_s=pools["transfer_s"], warmup=0.1).summary
    both = at(plan.prefill, plan.decode)
    assert plan.prefill >= 2 and plan.decode >= 2
    assert both["ttft_p99_s"] <= 1.0 and both["tpot_p99_s"] <= 0.012
    assert at(plan.prefill - 1, plan.decode)["ttft_p99_s"] > 1.0
    assert at(plan.prefill, plan.decode - 1)["tpot_p99_s"] > 0.012
    # AND each count was simulated once; the table has them all
    tried = plan.tried[["prefill_replicas", "decode_replicas"]]
    assert not tried.duplicated().any() and (plan.prefill, plan.decode) in set(map(tuple, tried.to_numpy()))


def test_pools_needed_gives_one_answer_from_any_start_and_three_runs_from_a_good_one():
    # GIVEN the deployment above, searched from one replica each, from far too many, and from the answer
    st = model_step_time(PRESETS["Llama-3 8B"], {d.name: d for d in devices()}["H100 SXM"])
    load = dict(prompt_tokens=Lengths.uniform(4000, 12000), output_tokens=Lengths.uniform(100, 400), n_requests=2000,
                seed=1, prefill=Pool(1, st, 64, 16384), decode=Pool(1, st, 128), transfer_s=(0.001, 131072 / 50e9))
    slos = dict(ttft_slo_s=1.0, tpot_slo_s=0.012)
    plans = [pools_needed(6.0, **load, **slos, start=s) for s in ((1, 1), (40, 30), (0, -5))]
    good = pools_needed(6.0, **load, **slos, start=(plans[0].prefill, plans[0].decode))
    # THEN the counts are the same, and from the answer the search ran three deployments: it, one fewer in each pool
    assert {(p.prefill, p.decode) for p in (*plans, good)} == {(plans[0].prefill, plans[0].decode)}
    assert len(good.tried) == 3 < len(plans[1].tried)


def test_first_tokens_do_not_depend_on_the_decode_pool():
    arr, prompt, output = workload(2000, 5, rate=60.0)
    runs = [simulate_disaggregated(arr, prompt, output, prefill=Pool(2, ST, 8, 2048), decode=Pool(d, ST, 4))
            for d in (1, 3)]  # fmt: skip
    a, b = (r.requests for r in runs)
    pd.testing.assert_series_equal(a["first_token_s"], b["first_token_s"])
    assert b["tpot_s"].mean() < 0.5 * a["tpot_s"].mean()  # (one decode replica of batch 4 is the bottleneck)


def test_pools_needed_says_when_no_count_meets_an_objective():
    pools = dict(prefill=Pool(1, ST, 8, 2048), decode=Pool(1, ST, 8), n_requests=300, max_replicas=4)
    # GIVEN an objective four prefill replicas miss at 1,000 requests/s, though a request alone meets it (15 ms)
    with pytest.raises(ValueError, match=r"ttft_p99_s <= 0.05 s not met with 4 replicas"):
        pools_needed(1000.0, 500, 20, ttft_slo_s=0.05, tpot_slo_s=1.0, **pools)
    # GIVEN objectives a request alone misses (a 500-token prompt takes 15 ms; a decode step 8 ms at least)
    # THEN no count is tried past the first: the floor says so
    with pytest.raises(ValueError, match=r"ttft_p99_s <= 0.001 s not met with any number of replicas: served alone, "
                                         r"the requests' ttft_p99_s is 0.015 s"):
        pools_needed(10.0, 500, 20, ttft_slo_s=0.001, tpot_slo_s=1.0, **pools)
    with pytest.raises(ValueError, match=r"tpot_p99_s <= 0.005 s not met with any number of replicas"):
        pools_needed(10.0, 500, 20, ttft_slo_s=1.0, tpot_slo_s=0.005, **pools)


def test_a_disaggregated_sweep_gives_each_rates_summary_and_its_knee():
    # GIVEN one prefill and one decode replica (Llama-3 8B, H100s, long prompts) swept over 1-8 requests/s
    st = model_step_time(PRESETS["Llama-3 8B"], {d.name: d for d in devices()}["H100 SXM"])
    load = dict(prompt_tokens=Lengths.uniform(4000, 12000), output_tokens=Lengths.uniform(100, 400), n_requests=3000,
                seed=1)  # fmt: skip
    pools = dict(prefill=Pool(1, st, 64, 16384), decode=Pool(1, st, 128), transfer_s=(0.001, 131072 / 50e9))
    sweep = disaggregated_sweep([1, 2, 3, 4, 6, 8], **load, **pools, threads=2)
    # THEN each row is the summary of that rate's simulation (threads or not), the prefill pool's busy share grows
    # with the rate, and the capacity the knee reads is the one prefill GPU's: between 4 and 5 requests/s
    one = simulate_disaggregated(ArrivalProcess(3.0), **load, **pools, warmup=0.1).summary
    row = sweep.set_index("arrival_rate_per_s").loc[3.0]
    assert all(row[k] == pytest.approx(v, nan_ok=True) for k, v in one.items())
    pd.testing.assert_frame_equal(sweep, disaggregated_sweep([1, 2, 3, 4, 6, 8], **load, **pools, threads=1))
    assert sweep["prefill_busy_fraction"].is_monotonic_increasing
    knee = saturation_knee(sweep)
    assert 4.0 < knee["capacity_per_s"] < 5.2 and knee["saturated"]
    with pytest.raises(ValueError, match="rates_per_s is empty"):
        disaggregated_sweep([], **load, **pools)


def test_recorded_arrivals_in_any_order_give_each_request_the_same_times():
    # GIVEN recorded arrivals, once sorted and once shuffled (with their lengths)
    arr, prompt, output = workload(1500, 11)
    perm = np.random.default_rng(0).permutation(arr.size)
    pools = dict(prefill=Pool(2, ST, 8, 2048), decode=Pool(2, ST, 8, kv_tokens=2000), transfer_s=(0.002, 1e-6))
    a = simulate_disaggregated(arr, prompt, output, **pools).requests
    b = simulate_disaggregated(arr[perm], prompt[perm], output[perm], **pools).requests
    # THEN each request's row is the same, in the order given
    pd.testing.assert_frame_equal(a.iloc[perm].reset_index(drop=True), b)


def test_one_token_requests_never_reach_the_decode_pool():
    # GIVEN requests of one output token each: done when the prefill pool gives it
    res = simulate_disaggregated([0.0, 0.5, 1.0], 100, 1, prefill=Pool(1, ST, 8, 2048), decode=Pool(2, ST, 8))
    # THEN each finishes at its first token, and the decode pool's two replicas are listed, idle
    r = res.requests
    assert (r["finish_s"] == r["first_token_s"]).all() and (r["decode_replica"] == -1).all()
    dec = res.replicas.query("pool == 'decode'")
    assert dec["replica"].tolist() == [0, 1] and dec["requests"].sum() == 0 and dec["steps"].sum() == 0
    assert list(dec.columns) == list(res.replicas.query("pool == 'prefill'").columns)
