"""``max_new_tokens`` in the serving simulation: what an engine that does not know output lengths reserves."""

from __future__ import annotations

import numpy as np
import pytest

from aonkit._kernels.serving import LAZY_REPLICAS, simulate
from aonkit.model import ArrivalProcess, Lengths, StepTime, simulate_serving
from aonkit.model.serving import prepare

from .test_serving import ENGINE, assert_same_run, kernel_args, simpy_serving, workload
from .test_serving_central import BATCHED, tied_load
from .test_serving_kv import ROUTINGS, peak_reserved


@pytest.mark.parametrize(("chunked", "budget"), [(False, 2048), (True, 256)])
def test_reserving_max_new_tokens_matches_an_independent_simpy_model(chunked, budget):
    # GIVEN 3,000 requests of 16-600 prompt tokens and geometric outputs (mean 24) capped at 96 new tokens, on two
    # engines of max batch 8 with caches of 2,500 tokens (room for about four prompts and their 96 tokens each) or
    # 600 (the longest prompts plus 96 are refused)
    arr, prompt, output = workload(3000, 7)
    output = np.minimum(output, 96)
    for kv in (2500, 600):
        # WHEN the kernel and the SimPy model serve them, each request holding its prompt plus 96 tokens
        res = simulate_serving(arr, prompt, output, token_budget=budget, chunked_prefill=chunked, kv_tokens=kv,
                               max_new_tokens=96, **ENGINE)  # fmt: skip
        start, first, fin = simpy_serving(arr, prompt, output, budget=budget, chunked=chunked, kv=kv, reserve=96,
                                          **ENGINE)  # fmt: skip
        # THEN every request starts, gets its first token and finishes at the same instants, or is refused by both
        r = res.requests
        for got, want in ((r["start_s"], start), (r["first_token_s"], first), (r["finish_s"], fin)):
            np.testing.assert_allclose(got, want, rtol=1e-9)
        refused = prompt + 96 > kv
        assert np.array_equal(r["replica"] == -1, refused) and res.summary["rejected"] == refused.sum()
        assert refused.any() == (kv == 600) and not (prompt + output > kv)[~refused].any()
        # AND no replica ever reserved more than its cache; where none is refused the reservation held requests
        # back: they waited longer than when each reserved only its own output
        assert max(peak_reserved(r["start_s"].to_numpy(), r["finish_s"].to_numpy(), r["replica"].to_numpy(),
                                 prompt + 96, 2)) <= kv  # fmt: skip
        oracle = simulate_serving(arr, prompt, output, token_budget=budget, chunked_prefill=chunked, kv_tokens=kv,
                                  **ENGINE)  # fmt: skip
        if kv == 2500:
            assert r["queue_s"].mean() > 1.2 * oracle.requests["queue_s"].mean()


@pytest.mark.parametrize("routing", ROUTINGS)
def test_requests_that_reserve_max_new_tokens_are_a_max_batch_whatever_their_outputs(routing):
    # GIVEN prompts of 100 tokens, outputs of 1-28 tokens sent with max_new_tokens=28, and a cache of 700 tokens:
    # five reservations of 128 tokens fit, not six, however short the outputs
    rng = np.random.default_rng(4)
    output = rng.integers(1, 29, 3000)
    spec = (ArrivalProcess(90.0, 1.5), 100, output)
    kw = dict(step_time=ENGINE["step_time"], n_requests=3000, replicas=6, routing=routing, seed=3)
    run = prepare(*spec, max_batch=16, kv_tokens=5 * 128 + 60, max_new_tokens=28, **kw)
    five = prepare(*spec, max_batch=5, **kw)
    # WHEN the kernel runs each (lazy replicas and all)
    # THEN the cache admits as a max batch of five does (the decode tables' grids differ: rounding only)
    assert_same_run(simulate(*kernel_args(run)), simulate(*kernel_args(five)), 1e-12)
    # AND reserving each request's own output (the oracle) admits more than five at once
    oracle = simulate(*kernel_args(prepare(*spec, max_batch=16, kv_tokens=5 * 128 + 60, **kw)))
    assert max(peak_reserved(oracle[0], oracle[2], oracle[3], np.ones(3000, np.int64), 6)) > 5


@pytest.mark.parametrize("routing", ROUTINGS)
def test_lazy_replicas_reserving_max_new_tokens_give_the_event_loops_results(routing):
    # GIVEN 24 random engines per routing (1-19 replicas, batches of 1-11, whole or chunked prompts, light to
    # saturated), caches of 700-4,000 tokens and capped outputs reserved at their cap, and 16 loads whose step ends
    # tie with arrivals (binary fractions, bursts at multiples of 1/32 s) on 3-32 replicas
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    for seed in range(40):
        rng = np.random.default_rng(seed)
        chunked, mb = bool(seed % 2), int(rng.integers(1, 12))
        replicas = int(rng.integers(1, 5)) if seed % 3 else int(rng.integers(LAZY_REPLICAS, 20))
        if seed >= 24:
            arrivals, outputs = tied_load(rng, rng.uniform(0.01, 0.3), 1500)
            run = prepare(arrivals, rng.integers(1, 64, arrivals.size), outputs, step_time=BATCHED,
                          replicas=int(rng.integers(3, 33)), max_batch=int(rng.integers(2, 7)), routing=routing,
                          max_new_tokens=119, kv_tokens=int(rng.integers(200, 700)), seed=0)  # fmt: skip
        else:
            cap = int(rng.integers(20, 400))
            run = prepare(ArrivalProcess(float(rng.uniform(0.5, 40)), float(rng.uniform(0, 3))),
                          Lengths.lognormal(200, 1.0) if chunked else Lengths.uniform(1, 300),
                          Lengths.geometric(float(rng.uniform(1, 60 if seed % 3 else 300))).capped(cap),
                          step_time=st, n_requests=2000, replicas=replicas, max_batch=mb, chunked_prefill=chunked,
                          routing=routing, token_budget=int(rng.integers(max(mb, 16), 600)) if chunked else None,
                          kv_tokens=int(rng.integers(700, 4000)), max_new_tokens=cap, seed=seed)  # fmt: skip
        args = kernel_args(run)
        # WHEN the kernel runs decode-only steps in closed form (ahead, or lazily) and every step as an event
        ahead, plain = simulate(*args, True), simulate(*args, False)
        # THEN every count and replica is the same, every time up to rounding (to the bit on the tied loads)
        assert_same_run(ahead, plain, 0.0 if seed >= 24 else 1e-12)
        # AND no replica ever reserved more than its cache; exactly the requests whose prompt and cap exceed it
        # were refused
        kv, resv = run.kernel_args[3:5]
        start, _, fin, rep = plain[:4]
        assert max(peak_reserved(start, fin, rep, args[1] + resv, run.replicas)) <= kv
        assert np.array_equal(rep == -1, args[1] + resv > kv)


def test_one_central_queue_wakes_lazy_replicas_by_their_room_for_max_new_tokens():
    # GIVEN 16-32 replicas on one central queue (lazy ones woken only as many as the waiting requests need), bursts
    # of requests at multiples of 1/32 s whose outputs are under 120 tokens but reserve 400, and caches of 500-1,500
    # tokens: a replica with room for any output may have none for 400 more tokens
    for seed in range(40):
        rng = np.random.default_rng(seed)
        arrivals, outputs = tied_load(rng, rng.uniform(0.01, 0.3), 1500)
        run = prepare(arrivals, rng.integers(1, 64, arrivals.size), outputs, step_time=BATCHED,
                      replicas=int(rng.integers(16, 33)), max_batch=int(rng.integers(2, 7)), routing="central",
                      max_new_tokens=400, kv_tokens=int(rng.integers(500, 1500)), seed=0)  # fmt: skip
        # WHEN the kernel runs with lazy replicas and with every step as an event
        # THEN the runs are the same to the bit (woken by their room for 400 tokens, not for the outputs: 5 of
        # these 40 loads differ otherwise)
        assert_same_run(simulate(*kernel_args(run), True), simulate(*kernel_args(run), False), 0.0)


def test_a_paged_cache_refuses_by_max_new_tokens_and_admits_as_before():
    # GIVEN requests of 50-700 prompt tokens and outputs of at most 200, on a paged cache of 800 tokens
    rng = np.random.default_rng(1)
    arr = np.sort(rng.uniform(0, 60, 1500))
    prompt, output = rng.integers(50, 701, 1500), rng.integers(1, 201, 1500)
    kw = dict(step_time=ENGINE["step_time"], replicas=3, max_batch=8, kv_tokens=800, kv_policy="paged",
              chunked_prefill=True, token_budget=512)  # fmt: skip
    sent = simulate_serving(arr, prompt, output, max_new_tokens=200, **kw)
    known = simulate_serving(arr, prompt, output, **kw)
    # THEN the requests whose prompt plus 200 exceed the cache are refused (they could outgrow it), more than
    # when each output is known
    refused = sent.requests["replica"] == -1
    assert np.array_equal(refused, prompt + 200 > 800)
    assert refused.sum() > (known.requests["replica"] == -1).sum() > 0
    # AND max_new_tokens changes no admission of a paged cache: with no request refused the runs are the same
    small = prompt <= 600
    a = simulate_serving(arr[small], prompt[small], output[small], max_new_tokens=200, **kw).requests
    b = simulate_serving(arr[small], prompt[small], output[small], **kw).requests
    assert (a["replica"] >= 0).all() and a.equals(b) and a["preemptions"].sum() > 0


def test_outputs_over_max_new_tokens_are_an_error_and_lengths_can_be_capped():
    st = ENGINE["step_time"]
    with pytest.raises(ValueError, match=r"2 of 3 output lengths exceed max_new_tokens=10 \(the longest 30\)"):
        simulate_serving([0.0, 0.1, 0.2], 10, [5, 20, 30], step_time=st, max_new_tokens=10)
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError, match="max_new_tokens must be a positive integer"):
            simulate_serving([0.0], 10, 5, step_time=st, max_new_tokens=bad)
    # a capped distribution draws the same numbers, those above the cap cut to it
    geo = Lengths.geometric(100)
    raw, cut = geo.sample(5000, np.random.default_rng(0)), geo.capped(150).sample(5000, np.random.default_rng(0))
    assert np.array_equal(cut, np.minimum(raw, 150)) and (raw > 150).sum() > 500
    with pytest.raises(ValueError, match="cap of lengths must be >= 1"):
        geo.capped(0)
    # AND with every output at its cap, reserving max_new_tokens is reserving the outputs
    res = simulate_serving(ArrivalProcess(40.0), Lengths.uniform(10, 300), 64, step_time=st, n_requests=2000,
                           max_batch=8, kv_tokens=1500, max_new_tokens=64, seed=5)  # fmt: skip
    same = simulate_serving(ArrivalProcess(40.0), Lengths.uniform(10, 300), 64, step_time=st, n_requests=2000,
                            max_batch=8, kv_tokens=1500, seed=5)  # fmt: skip
    assert res.requests.equals(same.requests)


@pytest.mark.parametrize(("lengths", "tokens"), [
    (Lengths.fixed(100), 99), (Lengths.fixed(100), 100), (Lengths.geometric(128), 256), (Lengths.geometric(1), 1),
    (Lengths.geometric(8), 16), (Lengths.uniform(1, 10), 4),
    (Lengths.uniform(10, 300), 200), (Lengths.uniform(10, 300), 5), (Lengths.lognormal(512, 1.0), 1024),
    (Lengths.lognormal(3, 0.5), 3), (Lengths.lognormal(40, 0.0), 40), (Lengths.empirical([1, 5, 9, 200]), 9)])
def test_the_share_of_draws_over_a_cap_is_what_sampling_finds(lengths, tokens):
    # GIVEN 400,000 draws of each distribution
    draws = lengths.sample(400_000, np.random.default_rng(11))
    p = lengths.share_over(tokens)
    # THEN the exact share over the cap is the sampled one within four binomial standard errors
    assert abs(p - (draws > tokens).mean()) <= 4 * np.sqrt(max(p * (1 - p), 1e-12) / draws.size) + 1e-12
    assert (draws > tokens).any() == (p > 0) and 0 <= p <= 1
