"""A KV-cache limit in the serving simulation: admission by reserved tokens, refusals, lazy replicas kept exact."""

from __future__ import annotations

import numpy as np
import pytest

from aonkit._kernels.serving import LAZY_REPLICAS, simulate
from aonkit.model import ArrivalProcess, Lengths, StepTime, simulate_serving
from aonkit.model.serving import prepare

from .test_serving import ENGINE, assert_same_run, kernel_args, simpy_serving, workload
from .test_serving_central import BATCHED, tied_load

ROUTINGS = ("jsq", "round_robin", "central")


def peak_reserved(start, fin, rep, tokens, replicas: int) -> list[int]:
    """Per replica, the most prompt-plus-output tokens its admitted, unfinished requests held at any instant.

    At one instant the finishes come before the admissions (a step's sequences finish, then the next step admits).
    """
    peaks = []
    for r in range(replicas):
        m = rep == r
        t = np.concatenate([start[m], fin[m]])
        w = np.concatenate([tokens[m], -tokens[m]])
        o = np.lexsort((w, t))
        peaks.append(int(np.cumsum(w[o]).max()) if o.size else 0)
    return peaks


@pytest.mark.parametrize(("chunked", "budget"), [(False, 2048), (True, 256)])
def test_kv_admission_matches_an_independent_simpy_model(chunked, budget):
    # GIVEN 3,000 requests of 16-600 prompt tokens on two engines of max batch 8, and a KV cache that holds about
    # seven mean requests (2,500 tokens) or fewer than two (700: the longest are refused)
    arr, prompt, output = workload(3000, 7)
    for kv in (2500, 700):
        # WHEN the kernel and a SimPy model written from the policy's words serve them
        res = simulate_serving(arr, prompt, output, token_budget=budget, chunked_prefill=chunked, kv_tokens=kv,
                               **ENGINE)  # fmt: skip
        start, first, fin = simpy_serving(arr, prompt, output, budget=budget, chunked=chunked, kv=kv, **ENGINE)
        # THEN every request starts, gets its first token and finishes at the same instants, or is refused by both
        r = res.requests
        for got, want in ((r["start_s"], start), (r["first_token_s"], first), (r["finish_s"], fin)):
            np.testing.assert_allclose(got, want, rtol=1e-9)
        refused = (prompt + output > kv)
        assert np.array_equal(r["replica"] == -1, refused) and res.summary["rejected"] == refused.sum()
        assert refused.any() == (kv == 700)
        # AND the cache was what held the batch back: fewer sequences ran than the max batch allows
        assert max(peak_reserved(r["start_s"].to_numpy(), r["finish_s"].to_numpy(), r["replica"].to_numpy(),
                                 prompt + output, 2)) <= kv  # fmt: skip
        free = simulate_serving(arr, prompt, output, token_budget=budget, chunked_prefill=chunked, **ENGINE)
        assert r["queue_s"].mean() > 1.2 * free.requests["queue_s"].mean()


@pytest.mark.parametrize("routing", ROUTINGS)
def test_requests_of_one_length_in_a_kv_cache_are_a_max_batch(routing):
    # GIVEN requests of 100 + 28 tokens and a cache of 700 tokens: five of them fit, not six
    run = prepare(ArrivalProcess(90.0, 1.5), 100, 28, step_time=ENGINE["step_time"], n_requests=3000, replicas=6,
                  max_batch=16, routing=routing, kv_tokens=5 * 128 + 60, seed=3)  # fmt: skip
    five = prepare(ArrivalProcess(90.0, 1.5), 100, 28, step_time=ENGINE["step_time"], n_requests=3000, replicas=6,
                   max_batch=5, routing=routing, seed=3)  # fmt: skip
    # WHEN the kernel runs each (lazy replicas and all)
    cached, batch = simulate(*kernel_args(run)), simulate(*kernel_args(five))
    # THEN the cache admits as a max batch of five does (the decode tables' grids differ: rounding only)
    assert_same_run(cached, batch, 1e-12)
    assert not np.array_equal(batch[0], simulate(*kernel_args(prepare(
        ArrivalProcess(90.0, 1.5), 100, 28, step_time=ENGINE["step_time"], n_requests=3000, replicas=6,
        max_batch=6, routing=routing, seed=3)))[0])  # a sixth would have changed the starts  # fmt: skip


@pytest.mark.parametrize("routing", ROUTINGS)
def test_lazy_replicas_with_a_kv_cache_give_the_event_loops_results(routing):
    # GIVEN 24 random engines per routing (1-19 replicas, batches of 1-11, whole or chunked prompts, light to
    # saturated) with caches of 700-4,000 tokens, so that a replica with room in its batch often has none in its
    # cache for the first waiting request
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    held_back = 0
    for seed in range(24):
        rng = np.random.default_rng(seed)
        chunked, mb = bool(seed % 2), int(rng.integers(1, 12))
        replicas = int(rng.integers(1, 5)) if seed % 3 else int(rng.integers(LAZY_REPLICAS, 20))
        kv = int(rng.integers(700, 4000))
        spec = (ArrivalProcess(float(rng.uniform(0.5, 40)), float(rng.uniform(0, 3))),
                Lengths.lognormal(200, 1.0) if chunked else Lengths.uniform(1, 300),
                Lengths.geometric(float(rng.uniform(1, 60 if seed % 3 else 300))) if seed % 5 else 16)
        kw = dict(step_time=st, n_requests=2000, replicas=replicas, max_batch=mb, chunked_prefill=chunked,
                  routing=routing, token_budget=int(rng.integers(max(mb, 16), 600)) if chunked else None, seed=seed)
        run = prepare(*spec, kv_tokens=kv, **kw)
        args = kernel_args(run)
        # WHEN the kernel runs decode-only steps in closed form (ahead, or lazily) and every step as an event
        ahead, plain = simulate(*args, True), simulate(*args, False)
        # THEN every count and replica is the same, every time up to rounding
        assert_same_run(ahead, plain, 1e-12)
        # AND no replica's requests ever reserved more than its cache; exactly the longer ones were refused
        start, _, fin, rep = plain[:4]
        tokens = args[1] + args[2]
        assert max(peak_reserved(start, fin, rep, tokens, replicas)) <= kv
        assert np.array_equal(rep == -1, tokens > kv)
        free = simulate(*kernel_args(prepare(*spec, **kw)), False)
        held_back += int(not np.array_equal(start[rep >= 0], free[0][rep >= 0]) and replicas >= LAZY_REPLICAS)
    assert held_back >= 6  # the cache changed when lazy replicas' requests started


@pytest.mark.parametrize("routing", ["central", "jsq"])
def test_a_kv_cache_with_step_ends_on_arrival_instants_matches_the_event_loop(routing):
    # GIVEN 3-32 replicas, batches of 2-6 whose steps take longer with more sequences, bursts of requests at
    # multiples of 1/32 s (step ends tie with arrivals and with each other) and caches of 100-400 tokens
    for seed in range(40):
        rng = np.random.default_rng(seed)
        p, replicas, max_batch = rng.uniform(0.01, 0.3), int(rng.integers(3, 33)), int(rng.integers(2, 7))
        arrivals, outputs = tied_load(rng, p, 1500)
        run = prepare(arrivals, rng.integers(1, 64, arrivals.size), outputs, step_time=BATCHED, replicas=replicas,
                      max_batch=max_batch, routing=routing, kv_tokens=int(rng.integers(100, 400)), seed=0)
        # WHEN the kernel runs with lazy replicas and with every step as an event
        # THEN the runs are the same to the bit, ties included
        assert_same_run(simulate(*kernel_args(run), True), simulate(*kernel_args(run), False), 0.0)


def test_a_request_longer_than_the_cache_is_refused_and_counted():
    # GIVEN 400 requests of 50 + 10 tokens, every tenth with a 5,000-token prompt, and caches of 4,000 tokens
    prompt = np.where(np.arange(400) % 10 == 3, 5000, 50)
    res = simulate_serving(np.arange(400) * 0.05, prompt, 10, step_time=ENGINE["step_time"], replicas=2,
                           max_batch=8, kv_tokens=4000, warmup=0.1)  # fmt: skip
    r = res.requests
    # THEN the long ones have no replica and no times, the others are served, and the summary counts the refused
    # measured ones
    long = prompt > 4000
    assert (r["replica"][long] == -1).all() and r.loc[long, ["start_s", "first_token_s", "finish_s"]].isna().all().all()
    assert (r["replica"][~long] >= 0).all() and r["finish_s"][~long].notna().all()
    assert res.summary["rejected"] == 36 and res.summary["measured"] == 360
    assert res.replicas["requests"].sum() == 360 and np.isfinite(res.summary["window_s"])
    assert res.summary["throughput_per_s"] == pytest.approx(r["finish_s"][~long].ge(r["arrival_s"][40]).sum()
                                                            / res.summary["window_s"])  # fmt: skip
    # AND a cache of no tokens is an error before anything runs
    for bad in (0, 2.5, -1):
        with pytest.raises(ValueError, match="kv_tokens must be a positive integer"):
            simulate_serving([0.0], 10, 10, step_time=ENGINE["step_time"], kv_tokens=bad)
