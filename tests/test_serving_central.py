"""One central queue: which replica takes a request at an instant, and lazy replicas woken only when requests wait.

The whole kernel with and without lazy replicas is compared on random engines in ``tests/test_serving.py``
(``test_decode_steps_in_closed_form_give_the_event_loops_results``, central routing included, exact ties too).
"""

from __future__ import annotations

import numba
import numpy as np

from aonkit._kernels.serving import LAZY_REPLICAS, simulate
from aonkit.model import ArrivalProcess, Lengths, StepTime
from aonkit.model.serving import prepare

from .test_serving import assert_same_run, kernel_args

EXACT = StepTime(prefill_time_s=(0.25, 0.0), decode_time_s=(0.125, 0.0, 0.0))  # binary fractions: exact sums


def _run(arrivals, outputs, replicas: int, ahead: bool = True, max_batch: int = 4):
    run = prepare(np.asarray(arrivals, float), 8, np.asarray(outputs), step_time=EXACT, replicas=replicas,
                  max_batch=max_batch, routing="central", seed=0)  # fmt: skip
    return simulate(*kernel_args(run), ahead)


def test_an_idle_replica_takes_a_request_before_one_whose_step_ends_at_its_arrival() -> None:
    # GIVEN request 0 on replica 0 (prefill 0-0.25, decode steps of 0.125), and request 1 arriving at 0.5, the very
    # instant replica 0's second decode step ends, while replica 1 is idle
    for ahead in (True, False):
        start, first, fin, rep, *_ = _run([0.0, 0.5], [40, 2], replicas=2, ahead=ahead)
        # THEN the idle replica takes it at once (replica 0 could, but it is serving a batch already)
        assert rep.tolist() == [0, 1] and start.tolist() == [0.0, 0.5] and first[1] == 0.75
    # AND with both replicas full (a batch of one), it waits for the first that can take it: both finish at 5.125
    # (a prefill step and 39 decode steps), and the lower index goes first
    start, first, fin, rep, *_ = _run([0.0, 0.0, 0.5], [40, 40, 2], replicas=2, max_batch=1)
    assert rep.tolist() == [0, 1, 0] and start[2] == fin[0] == fin[1] == 0.25 + 39 * 0.125


def test_lazy_replicas_of_one_queue_wake_only_when_requests_are_left_waiting() -> None:
    # GIVEN many replicas on one central queue, lightly loaded (requests mostly find an idle replica) and then loaded
    # so that requests wait, with step ends that fall exactly on arrival instants
    rng = np.random.default_rng(5)
    light = np.cumsum(rng.integers(1, 9, 300)) * 0.125
    heavy = np.cumsum(rng.integers(0, 2, 600)) * 0.125
    for arrivals, replicas in ((light, 16), (heavy, max(LAZY_REPLICAS, 6)), (light, LAZY_REPLICAS)):
        outputs = rng.integers(1, 120, len(arrivals))
        # WHEN the kernel runs with lazy replicas and with every step as an event
        ahead, plain = _run(arrivals, outputs, replicas), _run(arrivals, outputs, replicas, ahead=False)
        # THEN the runs are the same to the bit, ties included
        assert_same_run(ahead, plain, 0.0)
        assert np.isin(plain[1], arrivals).sum() > 5  # first tokens at arrival instants: steps end at them


def test_a_lazy_replica_with_a_full_batch_takes_a_waiting_request_at_its_finish() -> None:
    # GIVEN three replicas with full batches of two (never woken for a request), lazy while others are idle, then a
    # burst that the idle ones leave waiting: at each of its finishes, a full one takes the next waiting request
    arrivals = [0.0, 0.0, 0.125, 0.125, 0.25, 0.25, *([5.0] * 12)]
    outputs = [120, 200] * 3 + [400] * 12
    ahead, plain = _run(arrivals, outputs, 6, max_batch=2), _run(arrivals, outputs, 6, ahead=False, max_batch=2)
    assert_same_run(ahead, plain, 0.0)
    start, fin = plain[0], plain[2]
    assert plain[3][:6].tolist() == [0, 0, 1, 1, 2, 2] and np.isin(fin[0:6:2], start[6:]).all()


def test_a_central_queue_with_many_replicas_matches_the_event_loop_on_random_loads() -> None:
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    for seed, replicas in ((0, 64), (1, 24), (2, 8)):
        run = prepare(ArrivalProcess(20.0, 1.0), Lengths.lognormal(512, 1.0), Lengths.geometric(128), step_time=st,
                      n_requests=3000, replicas=replicas, max_batch=64, token_budget=2048, chunked_prefill=True,
                      routing="central", seed=seed)  # fmt: skip
        args = kernel_args(run)
        assert_same_run(simulate(*args, True), simulate(*args, False), 1e-12)


BATCHED = StepTime(prefill_time_s=(0.25, 0.0), decode_time_s=(0.125, 0.0625, 0.0))  # a batch's steps take longer


def tied_load(rng: np.random.Generator, p: float, slots: int, longest: int = 120) -> tuple[np.ndarray, np.ndarray]:
    """Arrival times and output lengths of bursts of 1-3 requests at multiples of 1/32 s (``p``: a slot's chance).

    With :data:`BATCHED` step times every sum is exact, so step ends tie with arrivals and with each other; 30% of
    the outputs are short (1-19 tokens), the others 17 to ``longest - 1``.
    """
    at = np.arange(slots) * 0.03125
    arrivals = np.repeat(at, rng.integers(1, 4, at.size) * (rng.random(at.size) < p))
    outputs = np.where(rng.random(arrivals.size) < 0.3, rng.integers(1, 20, arrivals.size),
                       rng.integers(17, longest, arrivals.size))  # fmt: skip
    return arrivals, outputs


def test_requests_left_waiting_wake_the_lazy_replicas_whose_steps_end_first_and_no_fewer() -> None:
    # GIVEN 16-32 replicas on one central queue (lazy ones woken only as many as the waiting requests need), batches
    # of 2-6 whose decode steps take longer with more sequences, and bursts of 1-3 requests at multiples of 1/32 s
    # (exact sums, so step ends tie among replicas), some of them short: requests left waiting one and a few at a
    # time, replicas woken for a request that another replica took first, and replicas that go lazy after them
    from aonkit._kernels.serving import CENTRAL_LAZY_REPLICAS

    assert CENTRAL_LAZY_REPLICAS <= 16  # (so that these replicas go lazy whenever their next finish is far)
    for seed in (69, 254, 489):  # the loads, of 1,500 tried, on which variants of the wake rule went wrong
        rng = np.random.default_rng(seed)
        p, replicas, max_batch = rng.uniform(0.01, 0.2), int(rng.integers(16, 33)), int(rng.integers(2, 7))
        arrivals, outputs = tied_load(rng, p, 4000)
        run = prepare(arrivals, 8, outputs, step_time=BATCHED, replicas=replicas, max_batch=max_batch,
                      routing="central", seed=0)  # fmt: skip
        args = kernel_args(run)
        # WHEN the kernel runs with lazy replicas and with every step as an event
        ahead, plain = simulate(*args, True), simulate(*args, False)
        # THEN the runs are the same to the bit
        assert_same_run(ahead, plain, 0.0)
        waited = plain[0] > arrivals
        assert waited.sum() > 50 and np.unique(plain[0][waited]).size > 40  # requests waited, at many instants


def _engine(seed: int) -> tuple:
    """The kernel's arguments for one of the random central engines of ``test_serving.py``'s closed-form test."""
    rng = np.random.default_rng(seed)
    chunked, mb = bool(seed % 2), int(rng.integers(1, 9))
    replicas = int(rng.integers(1, 5)) if seed % 3 else int(rng.integers(LAZY_REPLICAS, 17))
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    run = prepare(ArrivalProcess(float(rng.uniform(0.5, 40)), float(rng.uniform(0, 3))),
                  Lengths.lognormal(200, 1.0) if chunked else Lengths.uniform(1, 300),
                  Lengths.geometric(float(rng.uniform(1, 60 if seed % 3 else 300))) if seed % 5 else 16,
                  step_time=st, n_requests=2000, replicas=replicas, max_batch=mb, chunked_prefill=chunked,
                  routing="central", token_budget=int(rng.integers(max(mb, 16), 600)) if chunked else None,
                  seed=seed)  # fmt: skip
    return kernel_args(run)


@numba.njit(cache=False)
def _freed_nan(shape: tuple) -> float:
    """An array of NaN made and freed in Numba's allocator: the kernel's next one of that size is likely this memory."""
    a = np.empty(shape)
    a[:] = np.nan
    return a[0, 0]


def test_a_simulation_reads_nothing_of_its_scratch_memory_before_writing_it() -> None:
    # GIVEN 30 random central engines (lazy replicas woken for waiting requests among them)
    for seed in range(30):
        args = _engine(seed)
        n, n_rep, max_batch = len(args[0]), args[3], args[4]
        clean = simulate(*args, True)
        # WHEN each runs again just after arrays of NaN of the sizes of its scratch arrays were freed (glibc's
        # allocator hands the last chunk freed of a size to the next request of that size: the kernel's own arrays
        # then start as NaN; with another allocator this test checks less)
        for shape in ((n_rep, 1), (n_rep, 4), (n_rep, max_batch), (n, 1), (2 * n_rep, 1)):
            _freed_nan(shape)
        poisoned = simulate(*args, True)
        # THEN the result is the same to the bit (a woken replica whose step already reached the instant once ran
        # zero steps of a cell never found, and 0 * NaN made its end NaN)
        assert_same_run(poisoned, clean, 0.0)
