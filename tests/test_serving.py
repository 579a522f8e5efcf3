"""The serving queue model: hand-checked cases, closed-form queues, an independent SimPy model, invariants.

Statistical checks run ``N = 200,000`` requests, drop the first 10% (the queue
starts empty) and take the standard error from 20 batch means of 9,000 requests
each (waits are correlated from one request to the next, so ``sd / sqrt(N)`` would
understate it). A simulated mean must lie within 3 standard errors of the closed
form: a correct simulator fails that about 0.7% of the time per check (t with 19
degrees of freedom), and the seeds are fixed, so the outcome is reproducible.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from aonkit.model import (
    ArrivalProcess,
    Lengths,
    StepTime,
    erlang_c,
    ggc,
    md1,
    mg1,
    mm1,
    mmc,
    mmc_servers_needed,
    mmc_wait_quantile,
    replicas_needed,
    saturation_knee,
    serving_sweep,
    simulate_serving,
)

N = 200_000
SCALE = 1_000_000  # prompt tokens per second of service: service time = prompt / SCALE
SERVICE = StepTime(prefill_time_s=(0.0, 1.0 / SCALE))


def batch_mean(x: np.ndarray, batches: int = 20, warmup: float = 0.1) -> tuple[float, float]:
    """Mean and its standard error from batch means, after a warm-up (``x`` in arrival order)."""
    x = np.asarray(x, dtype=np.float64)[int(warmup * len(x)):]
    x = x[: len(x) // batches * batches].reshape(batches, -1).mean(axis=1)
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(batches))


def assert_within(sim: np.ndarray, expected: float, k: float = 3.0) -> None:
    mean, se = batch_mean(sim)
    assert abs(mean - expected) <= k * se, f"simulated {mean:.5g} +- {se:.2g}, expected {expected:.5g}"


def single_queue(rate: float, prompt: object, *, replicas: int = 1, routing: str = "central", cv: float = 1.0,
                 seed: int = 1):
    res = simulate_serving(ArrivalProcess(rate, cv), prompt, 1, n_requests=N, step_time=SERVICE, replicas=replicas,
                           max_batch=1, routing=routing, seed=seed)
    return res.requests.sort_values("arrival_s")


def gi_m1_sigma(laplace, mu: float) -> float:
    """GI/M/1's root: sigma = A*(mu (1 - sigma)), the smallest in (0, 1) (fixed-point iteration from 0)."""
    s = 0.0
    for _ in range(100_000):
        s, prev = laplace(mu * (1 - s)), s
        if abs(s - prev) < 1e-15:
            break
    return s


# --- hand-checked cases ---------------------------------------------------------------------------


def test_hand_case_prefill_then_decode():
    # r0 prefill 0->0.2 (0.1 + 0.01*10); r1 prefill 0.2->0.5 (batch full, r2 waits); decode of 2 with context
    # (10+1)+(20+1)=32: 0.05+0.01*2+0.001*32 = 0.102 -> 0.602, r1 done; r2 prefill 0.602->1.002 (0.1+0.3), done;
    # decode of 1, context 10+2: 0.072 -> 1.074, r0 done
    res = simulate_serving([0.0, 0.1, 0.15], [10, 20, 30], [3, 2, 1], max_batch=2, token_budget=100,
                           step_time=StepTime(prefill_time_s=(0.1, 0.01), decode_time_s=(0.05, 0.01, 0.001)))
    r = res.requests
    np.testing.assert_allclose(r["start_s"], [0.0, 0.2, 0.602], atol=1e-12)
    np.testing.assert_allclose(r["first_token_s"], [0.2, 0.5, 1.002], atol=1e-12)
    np.testing.assert_allclose(r["finish_s"], [1.074, 0.602, 1.002], atol=1e-12)
    np.testing.assert_allclose(r["ttft_s"], [0.2, 0.4, 0.852], atol=1e-12)
    np.testing.assert_allclose(r["tpot_s"], [(1.074 - 0.2) / 2, 0.102, np.nan], atol=1e-12)
    assert res.replicas["steps"].tolist() == [5]
    assert res.replicas["prefill_tokens"].tolist() == [60] and res.replicas["decode_tokens"].tolist() == [3]


def test_hand_case_functions_equal_coefficients():
    # the same engine as functions; the decode one only takes scalars (called point by point)
    def decode(b, c):
        return 0.05 + 0.01 * b + 0.001 * c if b > 0 else 0.0

    st = StepTime(prefill_time_s=lambda p: 0.1 + 0.01 * p, decode_time_s=decode)
    res = simulate_serving([0.0, 0.1, 0.15], [10, 20, 30], [3, 2, 1], max_batch=2, token_budget=100, step_time=st)
    np.testing.assert_allclose(res.requests["finish_s"], [1.074, 0.602, 1.002], atol=1e-12)


def test_hand_case_chunked_prefill():
    # budget 16, step = 0.01 + 0.001/prompt token + 0.002/decoding sequence.
    # 0: r0's first 16 tokens -> 0.026; r0's last 4 + r1's 8 -> 0.048 (r0, r1 first tokens; r1 done);
    # r0 decodes while r2 (arrived 0.04) prefills 4: 0.01+0.004+0.002 -> 0.064 (r0 done, r2 first token);
    # r2 decodes alone twice: 0.012 each -> 0.076, 0.088
    st = StepTime(prefill_time_s=(0.0, 0.001), decode_time_s=(0.0, 0.002, 0.0), overhead_s=0.01)
    res = simulate_serving([0.0, 0.0, 0.04], [20, 8, 4], [2, 1, 3], max_batch=4, token_budget=16,
                           chunked_prefill=True, step_time=st)
    r = res.requests
    np.testing.assert_allclose(r["start_s"], [0.0, 0.026, 0.048], atol=1e-12)
    np.testing.assert_allclose(r["first_token_s"], [0.048, 0.048, 0.064], atol=1e-12)
    np.testing.assert_allclose(r["finish_s"], [0.064, 0.048, 0.088], atol=1e-12)
    assert res.replicas["steps"].tolist() == [5]


@pytest.mark.parametrize(("routing", "replica", "r2_finish"), [
    ("jsq", [0, 1, 1], 1.3),  # replica 1 finishes r1 at 1.0, just as r2 arrives: r2 joins the empty replica
    ("central", [0, 1, 1], 1.3),  # replica 1 is the one free at 1.0
    ("round_robin", [0, 1, 0], 5.3),  # r2 waits behind r0 on replica 0 until 5.0
])
def test_hand_case_routing(routing, replica, r2_finish):
    # 0.1 s per prompt token, one output token: r0 takes 5 s, r1 0.5 s, r2 0.3 s
    res = simulate_serving([0.0, 0.5, 1.0], [50, 5, 3], 1, replicas=2, routing=routing,
                           step_time=StepTime(prefill_time_s=(0.0, 0.1)))
    r = res.requests
    np.testing.assert_allclose(r["finish_s"], [5.0, 1.0, r2_finish], atol=1e-12)
    assert r["replica"].tolist() == replica
    assert res.replicas["requests"].tolist() == [replica.count(0), replica.count(1)]


# --- closed forms ---------------------------------------------------------------------------------


def test_mm1():
    r = single_queue(0.7, Lengths.geometric(SCALE))  # geometric with mean 1e6: exponential to 1 part in 1e6
    q = mm1(0.7, 1.0)
    assert_within(r["queue_s"].to_numpy(), q.wait_s)
    assert_within(r["e2e_s"].to_numpy(), q.response_s)
    assert_within((r["queue_s"] > 0).to_numpy(), q.wait_probability)


def test_md1():
    r = single_queue(0.8, SCALE)
    assert_within(r["queue_s"].to_numpy(), md1(0.8, 1.0).wait_s)
    assert_within((r["queue_s"] > 0).to_numpy(), 0.8)


def test_mg1_pollaczek_khinchine():
    values = np.array([0.25, 0.25, 0.25, 3.25]) * SCALE  # mean 1 s, cv^2 = 1.6875
    cv = values.std() / values.mean()
    r = single_queue(0.6, Lengths.empirical(values))
    assert_within(r["queue_s"].to_numpy(), mg1(0.6, 1.0, cv).wait_s)


def test_mmc_central_queue():
    r = single_queue(3.2, Lengths.geometric(SCALE), replicas=4)
    q = mmc(3.2, 1.0, 4)
    assert_within(r["queue_s"].to_numpy(), q.wait_s)
    assert_within((r["queue_s"] > 0).to_numpy(), q.wait_probability)  # Erlang C


@pytest.mark.parametrize("case", ["round_robin", "deterministic_arrivals", "bursty_arrivals"])
def test_gi_m1(case):
    # GI/M/1 is exact: Wq = sigma / (mu (1 - sigma)), P(wait) = sigma, sigma = A*(mu (1 - sigma)), A* the
    # Laplace transform of the gaps. Round robin over c replicas gives each Erlang-c gaps of rate lam / c.
    lam, replicas, cv = {"round_robin": (2.1, 3, 1.0), "deterministic_arrivals": (0.7, 1, 0.0),
                         "bursty_arrivals": (0.6, 1, 2.0)}[case]
    if case == "round_robin":
        laplace = lambda s: (lam / (lam + s)) ** replicas  # noqa: E731
    elif cv == 0:
        laplace = lambda s: math.exp(-s / lam)  # noqa: E731
    else:
        k = 1 / cv**2
        laplace = lambda s: (1 + s / (k * lam)) ** -k  # noqa: E731
    sigma = gi_m1_sigma(laplace, 1.0)
    r = single_queue(lam, Lengths.geometric(SCALE), replicas=replicas, routing="round_robin", cv=cv)
    assert_within(r["queue_s"].to_numpy(), sigma / (1 - sigma))
    assert_within((r["queue_s"] > 0).to_numpy(), sigma)


def test_jsq_between_central_queue_and_round_robin():
    waits = {rt: batch_mean(single_queue(2.4, Lengths.geometric(SCALE), replicas=3, routing=rt)["queue_s"])
             for rt in ("central", "jsq", "round_robin")}
    (central, se), (jsq, _), (rr, _) = waits["central"], waits["jsq"], waits["round_robin"]
    assert central - 3 * se <= jsq < 0.8 * rr
    assert jsq < 1.3 * mmc(2.4, 1.0, 3).wait_s


# --- capacity helpers -----------------------------------------------------------------------------


def test_sweep_and_knee_of_md1():
    sweep = serving_sweep([0.3, 0.6, 0.9, 1.2, 1.5], SCALE, 1, n_requests=50_000, step_time=SERVICE)
    below = sweep[sweep["arrival_rate_per_s"] < 1]
    np.testing.assert_allclose(below["throughput_per_s"], below["arrival_rate_per_s"], rtol=0.02)
    knee = saturation_knee(sweep, metric="e2e_mean_s", factor=3.0)
    assert knee["saturated"] and knee["knee_rate_per_s"] == 0.6  # M/D/1 response 1.75 s at 0.6, 5.5 s at 0.9
    assert abs(knee["capacity_per_s"] - 1.0) < 0.01  # one request per second of service


def test_replicas_needed_matches_erlang_c():
    # M/M/c at 10/s with 1 s service: p99 wait 0.71 s with 14 servers, 0.46 s with 15
    assert mmc_servers_needed(10, 1.0, 0.6, 0.99) == 15
    plan = replicas_needed(10, 0.6, Lengths.geometric(SCALE), 1, n_requests=N, metric="queue_p99_s",
                           step_time=SERVICE, routing="central", max_batch=1)
    assert plan.replicas == 15
    assert plan.tried.set_index("replicas").loc[14, "queue_p99_s"] > 0.6


@pytest.mark.parametrize("start", [1, 2, 7, 14, 15, 16, 40, 10_000])
def test_replicas_needed_from_any_start_finds_the_same_count(start):
    # GIVEN the Erlang C case above (15 servers), searched from a start below, at or above the answer
    kw = {"n_requests": N // 4, "metric": "queue_p99_s", "step_time": SERVICE, "routing": "central", "max_batch": 1}
    plan = replicas_needed(10, 0.6, Lengths.geometric(SCALE), 1, start=start, max_replicas=64, **kw)
    # THEN the count is the same, with the certificate: it meets the objective and one fewer does not
    assert plan.replicas == replicas_needed(10, 0.6, Lengths.geometric(SCALE), 1, **kw).replicas
    rows = plan.tried.set_index("replicas")["queue_p99_s"]
    assert rows[plan.replicas] <= 0.6 < rows[plan.replicas - 1]
    # AND a start at the answer takes two simulations, one off by one three or four, and from 1 eight
    if start == plan.replicas:
        assert list(rows.index) == [start - 1, start]
    elif abs(start - plan.replicas) == 1:
        assert len(rows) <= 4
    elif start == 1:
        assert list(rows.index) == [1, 2, 4, 8, 12, 14, 15, 16]  # doubling, then bisection


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("start", [1, 5, 14, 15, 16, 30, 64])
def test_replicas_needed_with_counts_side_by_side_finds_the_same_count_in_fewer_rounds(start, threads, monkeypatch):
    import aonkit.model.serving_analysis as analysis

    rounds, real = [], analysis.summarize

    def counted(runs, threads=None):
        rounds.append(len(runs))
        return real(runs, threads)

    monkeypatch.setattr(analysis, "summarize", counted)
    kw = {"n_requests": N // 4, "metric": "queue_p99_s", "step_time": SERVICE, "routing": "central", "max_batch": 1,
          "start": start, "max_replicas": 64}  # fmt: skip
    # GIVEN the Erlang C case (15 servers) searched one count at a time and several at once
    one = replicas_needed(10, 0.6, Lengths.geometric(SCALE), 1, **kw)
    rounds_one, rounds[:] = len(rounds), []
    wide = replicas_needed(10, 0.6, Lengths.geometric(SCALE), 1, threads=threads, **kw)
    # THEN the answer is the same, with its certificate, and every row is the simulation at its count
    assert wide.replicas == one.replicas == 15
    rows = wide.tried.set_index("replicas")
    assert rows.loc[15, "queue_p99_s"] <= 0.6 < rows.loc[14, "queue_p99_s"]
    both = sorted(set(rows.index) & set(one.tried["replicas"]))
    pd.testing.assert_frame_equal(rows.loc[both], one.tried.set_index("replicas").loc[both])
    # AND the first two rounds are one count each (the guess, then one more or fewer), the third on takes several
    assert rounds[:2] == [1, 1][:len(rounds)] and all(r > 1 for r in rounds[2:3]), rounds
    if start in (14, 15):  # a guess at the answer or one below costs what it did
        assert list(rows.index) == list(one.tried["replicas"])
    elif start == 16:  # one above: as many rounds, the third (two fewer) with more counts beside it
        assert len(rounds) == rounds_one and set(one.tried["replicas"]) < set(rows.index), (rounds, rows.index)
    else:  # a guess further off takes fewer rounds (more simulations, side by side)
        assert len(rounds) < rounds_one and max(rounds) == threads, (rounds, rounds_one)


@pytest.mark.parametrize(("threads", "cv"), [(1, 1.0), (3, 1.0), (2, 0.0), (2, 2.5)])
def test_sweep_rows_are_each_rates_simulation_summary(threads, cv):
    # GIVEN a sweep of continuous batching on 2 replicas (random lengths), run on 1 to 3 threads at once, with
    # Poisson, evenly spaced or bursty arrivals
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    eng = {"step_time": st, "max_batch": 16, "token_budget": 512, "chunked_prefill": True}
    rates, lengths = [4.0, 9.0, 15.0, 30.0], (Lengths.lognormal(300, 1.0), Lengths.geometric(40))
    sweep = serving_sweep(rates, *lengths, n_requests=4000, seed=5, threads=threads, replicas=2, arrival_cv=cv,
                          **eng)  # fmt: skip
    # THEN each row is, to the last bit, the summary simulate_serving gives for that rate alone
    for row, rate in zip(sweep.to_dict("records"), rates):
        res = simulate_serving(ArrivalProcess(rate, cv), *lengths, n_requests=4000, seed=5, warmup=0.1, replicas=2,
                               **eng)  # fmt: skip
        assert row == {"arrival_rate_per_s": rate, **res.summary,
                       "busy_fraction": float(res.replicas["busy_fraction"].mean()),
                       "preemptions": int(res.replicas["preemptions"].sum())}  # fmt: skip
    # AND replicas_needed's rows are those of the same simulations
    plan = replicas_needed(30.0, 0.08, *lengths, n_requests=4000, seed=5, arrival_cv=cv, **eng)
    assert len(plan.tried) >= 3
    for row in plan.tried.to_dict("records"):
        res = simulate_serving(ArrivalProcess(30.0, cv), *lengths, n_requests=4000, seed=5, warmup=0.1,
                               replicas=row["replicas"], **eng)  # fmt: skip
        assert row == {"replicas": row["replicas"], **res.summary,
                       "busy_fraction": float(res.replicas["busy_fraction"].mean()),
                       "preemptions": int(res.replicas["preemptions"].sum())}  # fmt: skip


@pytest.mark.parametrize("cv", [0.0, 0.5, 1.0, 2.5])
def test_arrivals_from_one_set_of_draws_are_each_rates_own_to_the_bit(cv):
    # GIVEN the draws of one process of a cv, from a seeded generator
    draws = ArrivalProcess(3.0, cv).draws(5000, np.random.default_rng(11))
    for rate in (0.01, 3.0, 7.3, 1e4):
        # WHEN another rate's process turns them into arrival times
        got = ArrivalProcess(rate, cv).from_draws(draws, 5000)
        # THEN they are the renewal process's times from the same seed, gamma gaps of mean 1/rate, to the bit
        if cv == 0:
            want = np.cumsum(np.full(5000, 1.0 / rate))
        else:
            shape = 1.0 / cv**2
            want = np.cumsum(np.random.default_rng(11).standard_gamma(shape, 5000) * ((1.0 / rate) / shape))
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, ArrivalProcess(rate, cv).sample(5000, np.random.default_rng(11)))
    assert (draws is None) == (cv == 0)


def _sweep_in_child(queue) -> None:
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    sweep = serving_sweep([4.0, 9.0], 300, 40, n_requests=500, seed=5, threads=2, step_time=st, max_batch=16)
    queue.put(sweep["ttft_p99_s"].tolist())


def test_a_forked_child_runs_sweeps_on_its_own_threads() -> None:
    # the sweep's threads are kept between calls; a forked child's copy of them has no threads and must not be used
    import multiprocessing

    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    here = serving_sweep([4.0, 9.0], 300, 40, n_requests=500, seed=5, threads=2, step_time=st, max_batch=16)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_sweep_in_child, args=(queue,))
    child.start()
    try:
        got = queue.get(timeout=120)
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
    assert got == here["ttft_p99_s"].tolist()


def test_closed_forms():
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert mmc(0.5, 1.0, 1) == mm1(0.5, 1.0)
    assert md1(0.5, 1.0).wait_s == pytest.approx(mm1(0.5, 1.0).wait_s / 2)
    assert ggc(3.2, 1.0, 1.0, 1.0, 4) == mmc(3.2, 1.0, 4)
    t = mmc_wait_quantile(3.2, 1.0, 4, 0.99)
    assert erlang_c(4, 3.2) * math.exp(-(4 - 3.2) * t) == pytest.approx(0.01)
    assert math.isinf(mm1(1.0, 1.0).wait_s) and math.isinf(mmc(4.0, 1.0, 4).response_s)
    assert mmc_wait_quantile(0.1, 1.0, 4, 0.99) == 0.0


def test_arrival_process_moments():
    rng = np.random.default_rng(3)
    gaps = np.diff(ArrivalProcess(5.0, cv=2.0).sample(N, rng), prepend=0.0)
    assert abs(gaps.mean() - 0.2) < 3 * gaps.std() / math.sqrt(N)
    assert abs(gaps.std() / gaps.mean() - 2.0) < 0.05
    assert np.all(np.diff(ArrivalProcess(5.0, cv=0.0).sample(10, rng)) == pytest.approx(0.2))


# --- an independent model in SimPy ----------------------------------------------------------------


def simpy_serving(arr, prompt, output, *, replicas, max_batch, budget, chunked, step_time, kv=None, reserve=None,
                  prefix=0):
    """The same batching policy written directly in SimPy: explicit per-sequence counters, lists, JSQ.

    ``kv``: a request is admitted only while the prompt plus output tokens of the running ones and its own are at
    most ``kv``; one with more than ``kv`` is refused at arrival (no times). ``reserve``: the tokens held for every
    request's output instead of its own output length (a client's ``max_new_tokens``). ``prefix``: tokens of a
    cached prefix every request shares, held once in each engine's cache (``kv`` less them) and attended to by
    every decoding sequence beside its own prompt and tokens.
    """
    simpy = pytest.importorskip("simpy")
    env = simpy.Environment()
    n = len(arr)
    start, first, fin = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    (pa, pb), (da, db, dc) = step_time.prefill_time_s, step_time.decode_time_s
    waiting = [[] for _ in range(replicas)]
    running = [[] for _ in range(replicas)]  # [request, prompt tokens done, tokens generated], in admission order
    wake = [None] * replicas

    def holds(j):
        return prompt[j] + (output[j] if reserve is None else reserve)

    def engine(r):
        while True:
            done = [s for s in running[r] if s[1] == prompt[s[0]]]
            decoding = done if chunked else []
            room = budget - len(decoding) if chunked else budget
            plan, used = [], 0
            for s in running[r]:
                if s[1] < prompt[s[0]] and used < room:
                    plan.append((s, min(prompt[s[0]] - s[1], room - used)))
                    used += plan[-1][1]
            while waiting[r] and len(running[r]) < max_batch and used < room:
                j = waiting[r][0]
                take = min(prompt[j], room - used) if chunked else prompt[j]
                if used + take > room:
                    break
                held = sum(holds(s[0]) for s in running[r])
                if kv is not None and held + holds(j) > kv - prefix:
                    break
                waiting[r].pop(0)
                s = [j, 0, 0]
                running[r].append(s)
                start[j] = env.now
                plan.append((s, take))
                used += take
            if not chunked and not plan:
                decoding = done
            if not plan and not decoding:
                wake[r] = env.event()
                yield wake[r]
                continue
            ctx = sum(prefix + prompt[s[0]] + s[2] for s in decoding)
            dur = step_time.overhead_s + (pa + pb * used if used else 0.0)
            dur += da + db * len(decoding) + dc * ctx if decoding else 0.0
            yield env.timeout(dur)
            for s in decoding:
                s[2] += 1
            for s, take in plan:
                s[1] += take
                if s[1] == prompt[s[0]]:
                    first[s[0]] = env.now
                    s[2] = 1
            for s in list(running[r]):
                if s[1] == prompt[s[0]] and s[2] == output[s[0]]:
                    fin[s[0]] = env.now
                    running[r].remove(s)

    def source():
        for j in np.argsort(arr, kind="stable"):
            yield env.timeout(arr[j] - env.now)
            if kv is not None and holds(j) > kv - prefix:
                continue
            r = min(range(replicas), key=lambda k: len(waiting[k]) + len(running[k]))
            waiting[r].append(j)
            if wake[r] is not None and not wake[r].triggered:
                wake[r].succeed()

    for r in range(replicas):
        env.process(engine(r))
    env.process(source())
    env.run()
    return start, first, fin


ENGINE = dict(replicas=2, max_batch=8, step_time=StepTime(prefill_time_s=(0.004, 2e-5),
                                                          decode_time_s=(0.008, 2e-4, 1e-6), overhead_s=0.001))


def workload(n, seed, rate=30.0):
    rng = np.random.default_rng(seed)
    return (ArrivalProcess(rate).sample(n, rng), Lengths.uniform(16, 600).sample(n, rng),
            Lengths.geometric(24).sample(n, rng))


@pytest.mark.parametrize(("chunked", "budget"), [(False, 2048), (True, 256)])
def test_simpy_model_same_requests(chunked, budget):
    arr, prompt, output = workload(3000, 7)
    res = simulate_serving(arr, prompt, output, token_budget=budget, chunked_prefill=chunked, **ENGINE)
    start, first, fin = simpy_serving(arr, prompt, output, budget=budget, chunked=chunked, **ENGINE)
    r = res.requests
    assert r["finish_s"].notna().all() and r["queue_s"].max() > 0.05  # requests did queue
    np.testing.assert_allclose(r["start_s"], start, rtol=1e-9)
    np.testing.assert_allclose(r["first_token_s"], first, rtol=1e-9)
    np.testing.assert_allclose(r["finish_s"], fin, rtol=1e-9)


@pytest.mark.parametrize("chunked", [False, True])
def test_simpy_model_independent_draws(chunked):
    # independent workloads: mean TTFT and end-to-end latency agree within 3 standard errors of the difference
    budget = 256 if chunked else 2048
    arr, prompt, output = workload(20_000, 11)
    start, first, fin = simpy_serving(arr, prompt, output, budget=budget, chunked=chunked, **ENGINE)
    r = simulate_serving(*workload(N, 12), token_budget=budget, chunked_prefill=chunked, **ENGINE).requests
    for sim, ref in ((r["ttft_s"], first - arr), (r["e2e_s"], fin - arr)):
        (m1, s1), (m2, s2) = batch_mean(sim.to_numpy()), batch_mean(ref)
        assert abs(m1 - m2) <= 3 * math.hypot(s1, s2), (m1, s1, m2, s2)


# --- invariants and validation --------------------------------------------------------------------


def kernel_args(run) -> tuple:
    """The simulation kernel's arguments for a prepared run (:func:`aonkit.model.serving.prepare`), all but
    ``ahead``: arrivals, prompts and outputs in arrival order, then the run's other arguments."""
    return (run.arrivals[run.order], run.prompt[run.order], run.output[run.order], *run.kernel_args)


def assert_same_run(ahead: tuple, plain: tuple, rtol: float) -> None:
    """Two kernel results: every count and replica equal, every time within ``rtol`` (NaN where the other's is)."""
    for a, b in zip(ahead, plain):
        if a.dtype.kind == "f" and rtol > 0:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=0)
        else:
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("routing", ["jsq", "round_robin", "central"])
def test_decode_steps_in_closed_form_give_the_event_loops_results(routing):
    from aonkit._kernels.serving import LAZY_REPLICAS, simulate
    from aonkit.model.serving import prepare

    # GIVEN 30 random engines and loads per routing (1-16 replicas, batches of 1-8, light to saturated, bursty
    # or even arrivals, whole or chunked prompts, short and long outputs, sequences that finish together)
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    ran_ahead = lazy = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        chunked, mb = bool(seed % 2), int(rng.integers(1, 9))
        replicas = int(rng.integers(1, 5)) if seed % 3 else int(rng.integers(LAZY_REPLICAS, 17))
        run = prepare(ArrivalProcess(float(rng.uniform(0.5, 40)), float(rng.uniform(0, 3))),
                      Lengths.lognormal(200, 1.0) if chunked else Lengths.uniform(1, 300),
                      Lengths.geometric(float(rng.uniform(1, 60 if seed % 3 else 300))) if seed % 5 else 16,
                      step_time=st, n_requests=2000, replicas=replicas, max_batch=mb, chunked_prefill=chunked,
                      routing=routing, token_budget=int(rng.integers(max(mb, 16), 600)) if chunked else None,
                      seed=seed)  # fmt: skip
        args = kernel_args(run)
        # WHEN the kernel runs decode-only steps in closed form (ahead of the event loop, or lazily), and when it
        # runs every step as an event
        ahead, plain = simulate(*args, True), simulate(*args, False)
        # THEN every count and replica is the same, and every time up to rounding (sums in another order)
        assert_same_run(ahead, plain, 1e-12)
        ran_ahead += int(plain[4].sum() > 2 * len(run.arrivals))  # mostly decode steps: ahead had work
        lazy += int(replicas >= LAZY_REPLICAS)
    assert ran_ahead >= 10 and lazy >= 8
    # AND where arrivals come exactly as decode steps end (binary fractions: exact sums), the step end is handled
    # first, then the arrival, then the next step (the arrival's prefill), both ways, to the bit, run ahead (2
    # replicas) or lazily (5)
    exact = StepTime(prefill_time_s=(0.25, 0.0), decode_time_s=(0.125, 0.0, 0.0))
    for replicas, output in ((2, 12), (max(5, LAZY_REPLICAS), 60)):
        run = prepare(np.arange(1, 400) * 0.5, 8, Lengths.geometric(output), step_time=exact, replicas=replicas,
                      max_batch=4, routing=routing, seed=1)  # fmt: skip
        args = kernel_args(run)
        ahead, plain = simulate(*args, True), simulate(*args, False)
        assert_same_run(ahead, plain, 0.0)
        assert np.isin(plain[2], run.arrivals).sum() > 20  # finishes at an arrival's instant


@pytest.mark.parametrize(("chunked", "routing"), [(False, "jsq"), (True, "jsq"), (False, "central"),
                                                  (True, "round_robin")])
def test_invariants(chunked, routing):
    arr, prompt, output = workload(20_000, 5, rate=45.0)
    budget = 256 if chunked else 2048
    res = simulate_serving(arr, prompt, output, token_budget=budget, chunked_prefill=chunked,
                           **dict(ENGINE, replicas=3), routing=routing)
    r = res.requests
    assert (r["start_s"] >= r["arrival_s"]).all() and (r["first_token_s"] > r["start_s"]).all()
    assert (r["finish_s"] >= r["first_token_s"]).all()
    assert ((r["output_tokens"] == 1) == (r["finish_s"] == r["first_token_s"])).all()
    assert res.replicas["prefill_tokens"].sum() == prompt.sum()
    assert res.replicas["decode_tokens"].sum() == (output - 1).sum()
    assert res.replicas["requests"].sum() == len(r) and (res.replicas["busy_fraction"] <= 1 + 1e-12).all()
    for _, g in r.sort_values("arrival_s").groupby("replica"):
        assert np.all(np.diff(g["start_s"].to_numpy()) >= 0)  # FIFO admission
        # at most max_batch sequences admitted and unfinished at once
        t = np.concatenate([g["start_s"], g["finish_s"]])
        step = np.concatenate([np.ones(len(g)), -np.ones(len(g))])
        order = np.lexsort((step, t))  # finishes before admissions at one instant
        assert np.cumsum(step[order]).max() <= 8
    if routing == "central":
        assert np.all(np.diff(r.sort_values("arrival_s")["start_s"].to_numpy()) >= 0)
    # arrival order in the input does not matter
    perm = np.random.default_rng(0).permutation(len(arr))
    again = simulate_serving(arr[perm], prompt[perm], output[perm], token_budget=budget, chunked_prefill=chunked,
                             **dict(ENGINE, replicas=3), routing=routing).requests
    np.testing.assert_array_equal(again["finish_s"].to_numpy(), r["finish_s"].to_numpy()[perm])


def test_decode_function_is_tabulated_exactly_in_batch_and_linearly_in_context():
    st = StepTime(prefill_time_s=lambda p: 1e-3 * np.sqrt(p), decode_time_s=lambda b, c: 1e-3 * b**0.5 + 1e-9 * c)
    pf, pf_x0, pf_h, dc, dc_x0, dc_h = st.tables(1000, 16, 10**6, context_points=101)
    assert pf_h == 1.0 and pf[0, 399] == pytest.approx(1e-3 * 20)  # every token count up to 65,536
    assert dc.shape == (17, 101) and dc_h == pytest.approx((10**6 - 1) / 100)
    assert dc[9, 50] == pytest.approx(3e-3 + 1e-9 * (1 + 50 * dc_h))


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(prompt_tokens=5000), "exceeds token_budget"),
    (dict(chunked_prefill=True, token_budget=4, max_batch=8), "must be >= max_batch"),
    (dict(routing="random"), "routing"),
    (dict(prompt_tokens=[1, 2]), "use Lengths.empirical"),
    (dict(output_tokens=0), ">= 1"),
    (dict(step_time=StepTime(prefill_time_s=(-1.0, 0.0))), "finite times >= 0"),
    (dict(arrivals=ArrivalProcess(1.0)), "n_requests"),
    (dict(replicas=0), "positive integer"),
])
def test_invalid_input(kwargs, match):
    args = dict(arrivals=[0.0, 1.0, 2.0], prompt_tokens=10, output_tokens=2, token_budget=4096, step_time=SERVICE)
    with pytest.raises(ValueError, match=match):
        simulate_serving(**{**args, **kwargs})


def test_quantile_and_objective_arguments_are_checked() -> None:
    import math

    for q in (1.0, 1.5, -0.1, math.nan):
        with pytest.raises(ValueError, match="quantile q"):
            mmc_wait_quantile(10, 0.05, 2, q)
        with pytest.raises(ValueError, match="quantile q"):
            mmc_servers_needed(10, 1.0, 0.6, q)
    with pytest.raises(ValueError, match="wait_s must be >= 0"):
        mmc_servers_needed(10, 1.0, -1.0)  # refused at once, not after counting to max_servers
    assert mmc_wait_quantile(10, 0.05, 2, 0.0) == 0.0


def test_a_sweep_starts_its_busiest_rates_first(monkeypatch):
    # GIVEN a sweep of four rates on two threads, each simulation's start recorded (the real kernel runs); the first
    # two wait for each other, so that no third can start before both are recorded (a thread descheduled between
    # taking its task and recording it would otherwise let the other run two short ones first)
    import threading

    import aonkit.model.serving as serving

    started, kernel, both = [], serving._kernel, threading.Barrier(2, timeout=60)

    def recorded(run, arr, output):
        started.append(run.arrivals.size / float(arr[-1] - arr[0]))
        if len(started) <= 2:
            both.wait()
        return kernel(run, arr, output)

    monkeypatch.setattr(serving, "_kernel", recorded)
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    rates = [4.0, 9.0, 15.0, 30.0]
    sweep = serving_sweep(rates, 300, 40, n_requests=2000, seed=5, threads=2, step_time=st, max_batch=16)
    # THEN the two highest rates (the longest simulations) are the first two started, so that the short ones fill the
    # threads' ends, and the rows are still in the rates' order
    assert len(started) == 4
    assert sorted(started[:2], reverse=True) == pytest.approx([30.0, 15.0], rel=0.1)
    assert sweep["arrival_rate_per_s"].tolist() == rates
