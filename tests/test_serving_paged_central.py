"""A paged KV cache on one central queue: replicas run ahead and lazily, and give the event loop's results.

A preempted request joins the central queue between arrivals, so a replica running its steps ahead stops before
any other may preempt (``serving_paged.horizon``), and at an instant at which one may preempt every lazy replica
with room is woken and none goes lazy. The kernel's run with every step an event is the reference.
"""

from __future__ import annotations

import numpy as np
import pytest

from aonkit._kernels.serving import simulate
from aonkit.model import ArrivalProcess, Lengths, StepTime
from aonkit.model.serving import prepare

from .test_serving import assert_same_run, kernel_args
from .test_serving_central import BATCHED, tied_load

ST = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))


def _runs(run) -> tuple[tuple, tuple]:
    return simulate(*kernel_args(run), True), simulate(*kernel_args(run), False)


def tied_paged(seed: int, replicas: tuple[int, int] = (16, 40), batches: tuple[int, int] = (2, 12),
               kv: tuple[int, int] = (300, 1500)):
    """Bursts at multiples of 1/32 s (step ends tie with arrivals and each other); replicas, batches and cache
    tokens drawn from the half-open ranges given (by default 16-39 replicas, batches of 2-11, 300-1,499 tokens)."""
    rng = np.random.default_rng(seed)
    chunked, mb, n_rep = bool(seed % 2), int(rng.integers(*batches)), int(rng.integers(*replicas))
    arr, outputs = tied_load(rng, rng.uniform(0.05, 0.5), 1500, longest=200)
    return prepare(arr, rng.integers(1, 64, arr.size), outputs, step_time=BATCHED, replicas=n_rep, max_batch=mb,
                   routing="central", kv_policy="paged", chunked_prefill=chunked, kv_tokens=int(rng.integers(*kv)),
                   token_budget=max(mb, 64) if chunked else 4096, seed=0)  # fmt: skip


def random_paged(seed: int, replicas: tuple[int, int]):
    """Poisson-to-bursty loads of 3,000 requests at 1-200 per second, caches of 500-30,000 tokens."""
    rng = np.random.default_rng(seed)
    chunked, mb, n_rep = bool(seed % 2), int(rng.integers(2, 40)), int(rng.integers(*replicas))
    return prepare(ArrivalProcess(float(rng.uniform(1, 200)), float(rng.uniform(0, 2))),
                   Lengths.lognormal(200, 1.0) if chunked else Lengths.uniform(1, 300),
                   Lengths.geometric(float(rng.uniform(20, 300))), step_time=ST, n_requests=3000, replicas=n_rep,
                   max_batch=mb, routing="central", kv_policy="paged", chunked_prefill=chunked,
                   token_budget=int(rng.integers(max(mb, 16), 600)) if chunked else 8192,
                   kv_tokens=int(rng.integers(500, 30000)), seed=seed)  # fmt: skip


def test_lazy_paged_replicas_on_one_queue_take_preempted_requests_as_the_event_loop_does():
    # GIVEN 60 loads whose step ends tie with arrivals and with each other, on 16-39 replicas (lazy ones), with
    # caches that fill (thousands of preemptions)
    preemptions = 0
    for seed in range(60):
        run = tied_paged(seed)
        # WHEN the kernel runs replicas lazily and every step as an event
        ahead, plain = _runs(run)
        # THEN the runs are the same to the bit (seed 57: a replica whose sequence finished at the instant another
        # preempted took the preempted request there, after it in replica order)
        assert_same_run(ahead, plain, 0.0)
        preemptions += int(plain[8].sum())
    assert preemptions > 10_000


@pytest.mark.parametrize("load", ["random, 1-15 replicas", "random, 16-39 replicas", "tied, 1-15 replicas"])
def test_paged_replicas_on_one_queue_run_ahead_only_until_another_may_preempt(load):
    # GIVEN engines on one queue: 1-15 replicas (they run ahead up to the next arrival or the earliest instant
    # another may preempt), and 16-39 (lazy as well), with caches from nearly full to never full, on random loads
    # and on loads whose step ends tie with arrivals
    preemptions = 0
    for seed in range(120, 150) if load.startswith("random") else range(0, 30, 3):
        if load.startswith("tied"):  # 1-15 replicas, batches of 2-39, caches of 100-1,999 tokens
            run = tied_paged(seed, (1, 16), (2, 40), (100, 2000))
        else:
            run = random_paged(seed, (1, 16) if "1-15" in load else (16, 40))
        # WHEN the kernel runs decode-only steps ahead and lazily, and every step as an event
        ahead, plain = _runs(run)
        # THEN every count and replica is the same, every time up to rounding (to the bit on the tied loads)
        assert_same_run(ahead, plain, 0.0 if load.startswith("tied") else 1e-12)
        preemptions += int(plain[8].sum())
    assert preemptions > 5_000
