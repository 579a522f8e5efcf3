"""A paged KV cache in the serving simulation: blocks as contexts grow, preemption and recompute, against SimPy."""

from __future__ import annotations

import numpy as np
import pytest

from aonkit._kernels.serving import simulate
from aonkit.model import ArrivalProcess, Lengths, StepTime, serving_sweep, simulate_serving
from aonkit.model.serving import prepare

from .test_serving import ENGINE, assert_same_run, kernel_args, workload
from .test_serving_central import BATCHED, tied_load


def simpy_paged(arr, prompt, output, *, replicas, max_batch, budget, chunked, step_time, kv, central=False, cs=1.0,
                dq=1, ku=1, kg=1):  # fmt: skip
    """The paged policy in SimPy, from its description: explicit sequences, lists, a shared queue or JSQ.

    A sequence is a dict: request, prompt tokens to compute (prompt plus tokens made before a preemption), how many
    of them are done, cache units held, its admission number and the request's outputs when its prefill ended.
    Speculative decoding (the kernel's ``cs``, ``dq``, ``ku``, ``kg``): ``output`` counts a request's first token
    and its iterations, a decoding sequence takes ``dq`` tokens of a chunked step's budget, the cache holds ``ku``
    units a token and grows by ``kg`` an iteration, a sequence's context by ``cs`` tokens, and a preempted request
    computes again the tokens it made (``kg / ku`` an iteration, rounded down, and one for each prefill).
    """
    simpy = pytest.importorskip("simpy")
    env = simpy.Environment()
    n = len(arr)
    start, first, fin = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    preempted = [0] * replicas
    per_request = np.zeros(n, np.int64)
    idle_then = [0]  # preemptions on the shared queue while another replica was idle
    (pa, pb), (da, db, dc) = step_time.prefill_time_s, step_time.decode_time_s
    queues = [[] for _ in range(1 if central else replicas)]
    running = [[] for _ in range(replicas)]
    generated = np.zeros(n, np.int64)  # outputs (tokens, or the first and iterations) in all
    made = np.zeros(n, np.int64)  # tokens made before the request's current admission
    wake = [None] * replicas
    stamp = [0]

    def queue(r):
        return queues[0] if central else queues[r]

    def held(r):
        return sum(s["held"] for s in running[r])

    def preempt_latest(r):
        v = max(running[r], key=lambda s: s["adm"])
        running[r].remove(v)
        if v["done"] == v["ctx"]:  # decoding: the token of its prefill and those of its decode steps
            made[v["j"]] += 1 + (generated[v["j"]] - v["g0"]) * kg // ku
        preempted[r] += 1
        per_request[v["j"]] += 1
        queue(r).insert(0, v["j"])
        for k in range(replicas):  # an idle replica may take it now
            if central and wake[k] is not None and not wake[k].triggered:
                wake[k].succeed()
                idle_then[0] += 1

    def engine(r):
        while True:
            q = queue(r)
            decoding = [s for s in running[r] if s["done"] == s["ctx"]]

            def admissible(j):
                ctx = prompt[j] + made[j]
                return len(running[r]) < max_batch and held(r) + (ctx + 1) * ku + len(running[r]) * kg <= kv * ku

            decode_step = bool(decoding) and (chunked or not (q and admissible(q[0])))
            if decode_step:
                while held(r) + len([s for s in running[r] if s["done"] == s["ctx"]]) * kg > kv * ku:
                    preempt_latest(r)
                decoding = [s for s in running[r] if s["done"] == s["ctx"]]
                for s in decoding:
                    s["held"] += kg
            room = budget - dq * len(decoding) if chunked else budget
            plan, used = [], 0
            for s in sorted(running[r], key=lambda s: s["adm"]):
                if s["done"] < s["ctx"] and used < room:
                    plan.append((s, min(s["ctx"] - s["done"], room - used)))
                    used += plan[-1][1]
            while q and used < room and admissible(q[0]):
                j = q[0]
                ctx = prompt[j] + made[j]
                take = min(ctx, room - used) if chunked else ctx
                if used + take > room:
                    break
                q.pop(0)
                s = {"j": j, "ctx": ctx, "done": 0, "held": (ctx + 1) * ku, "adm": stamp[0]}
                stamp[0] += 1
                running[r].append(s)
                if np.isnan(start[j]):
                    start[j] = env.now
                plan.append((s, take))
                used += take
            if not chunked and plan:
                decoding = []
            if not plan and not decoding:
                wake[r] = env.event()
                yield wake[r]
                continue
            ctx = sum(prompt[s["j"]] + made[s["j"]] + cs * (generated[s["j"]] - s["g0"] + 1) for s in decoding)
            dur = step_time.overhead_s + (pa + pb * used if used else 0.0)
            dur += da + db * len(decoding) + dc * ctx if decoding else 0.0
            yield env.timeout(dur)
            for s in decoding:
                generated[s["j"]] += 1
            for s, take in plan:
                s["done"] += take
                if s["done"] == s["ctx"]:
                    generated[s["j"]] += 1
                    s["g0"] = generated[s["j"]]
                    if np.isnan(first[s["j"]]):
                        first[s["j"]] = env.now
            for s in list(running[r]):
                if s["done"] == s["ctx"] and generated[s["j"]] == output[s["j"]]:
                    fin[s["j"]] = env.now
                    running[r].remove(s)

    def source():  # the requests of one instant all arrive before any engine looks at its queue
        order = np.argsort(arr, kind="stable")
        for t in np.unique(arr):
            yield env.timeout(t - env.now)
            for j in order[arr[order] == t]:
                if (prompt[j] + 1) * ku + (output[j] - 1) * kg > kv * ku:
                    continue
                r = 0 if central else min(range(replicas), key=lambda k: len(queues[k]) + len(running[k]))
                queue(r).append(j)
                for k in range(replicas) if central else (r,):
                    if wake[k] is not None and not wake[k].triggered:
                        wake[k].succeed()

    for r in range(replicas):
        env.process(engine(r))
    env.process(source())
    env.run()
    return start, first, fin, preempted, idle_then[0], per_request


@pytest.mark.parametrize(("chunked", "budget", "routing"), [(False, 2048, "jsq"), (True, 256, "jsq"),
                                                            (False, 2048, "central"), (True, 256, "central")])
def test_paged_admission_and_preemption_match_an_independent_simpy_model(chunked, budget, routing):
    # GIVEN 3,000 requests of 16-600 prompt tokens on two engines of max batch 8 with caches of 2,500 tokens (about
    # seven mean requests at their end) and 900 (the longest refused)
    arr, prompt, output = workload(3000, 7)
    engine = ENGINE
    for kv in (2500, 900):
        # WHEN the kernel and a SimPy model written from the policy's words serve them
        res = simulate_serving(arr, prompt, output, token_budget=budget, chunked_prefill=chunked, kv_tokens=kv,
                               kv_policy="paged", routing=routing, **engine)  # fmt: skip
        start, first, fin, preempted, _, per_request = simpy_paged(arr, prompt, output, budget=budget,
                                                                   chunked=chunked, kv=kv,
                                                                   central=routing == "central", **engine)  # fmt: skip
        # THEN every request starts, gets its first token and finishes at the same instants, or is refused by both,
        # and the replicas preempted as often
        r = res.requests
        for got, want in ((r["start_s"], start), (r["first_token_s"], first), (r["finish_s"], fin)):
            np.testing.assert_allclose(got, want, rtol=1e-9)
        assert res.replicas["preemptions"].tolist() == preempted and sum(preempted) > 20
        assert np.array_equal(r["preemptions"], per_request) and per_request.sum() == sum(preempted)
        assert np.array_equal(r["replica"] == -1, prompt + output > kv)
        # AND a preempted request's prompt and tokens were computed again: more prefill tokens than prompts
        assert res.replicas["prefill_tokens"].sum() > prompt[prompt + output <= kv].sum()
        # (the token after a recompute comes from that prefill, not a decode step; a prompt preempted in its
        # prefill had none)
        decoded, pre = res.replicas["decode_tokens"].sum(), sum(preempted)
        want = (output - 1)[prompt + output <= kv].sum()
        assert decoded == want - pre if not chunked else want - pre <= decoded < want


def test_a_request_preempted_on_one_queue_goes_to_an_idle_replica_at_once():
    # GIVEN three requests of 20 + 30 tokens arriving together at two idle replicas on one queue, caches of 100
    # tokens, a prefill step of 0.25 s and decode steps of 0.125 s: replica 0 admits all three (21 + 22 + 23 tokens
    # with a token of room for each running one), replica 1 none
    exact = StepTime(prefill_time_s=(0.25, 0.0), decode_time_s=(0.125, 0.0, 0.0))
    kw = dict(step_time=exact, replicas=2, max_batch=4, token_budget=4096, kv_tokens=100, kv_policy="paged",
              routing="central")  # fmt: skip
    res = simulate_serving([0.0, 0.0, 0.0], 20, 30, **kw)
    r = res.requests
    # THEN after 12 decode steps (63 + 36 tokens held) the 13th would not fit: the latest admitted is preempted at
    # 1.75 s, replica 1 (idle) takes it at once and computes its 20 + 13 tokens again, its next token at 2.0 s and
    # its last 16 decode steps later; the other two finish on replica 0 with the room it left
    assert r["replica"].tolist() == [0, 0, 1] and r["first_token_s"].tolist() == [0.25] * 3
    assert r["finish_s"].tolist() == [0.25 + 29 * 0.125] * 2 + [2.0 + 16 * 0.125]
    assert res.replicas["preemptions"].tolist() == [1, 0] and res.replicas["prefill_tokens"].tolist() == [60, 33]
    assert r["preemptions"].tolist() == [0, 0, 1]
    # AND the SimPy model agrees
    start, first, fin, preempted, idle, _ = simpy_paged(np.zeros(3), np.full(3, 20), np.full(3, 30), budget=4096,
                                                     chunked=False, kv=100, central=True, step_time=exact,
                                                     replicas=2, max_batch=4)  # fmt: skip
    assert fin.tolist() == r["finish_s"].tolist() and preempted == [1, 0] and idle == 1


def test_paged_admits_more_than_reserving_and_pays_in_preemptions():
    # GIVEN a loaded engine whose cache holds a few whole requests (geometric outputs of mean 200)
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    kw = dict(step_time=st, n_requests=20_000, replicas=2, max_batch=32, token_budget=512, chunked_prefill=True,
              kv_tokens=6000, seed=3, warmup=0.1)  # fmt: skip
    spec = (ArrivalProcess(6.0), Lengths.lognormal(300, 1.0), Lengths.geometric(200))
    paged = simulate_serving(*spec, kv_policy="paged", **kw)
    reserve = simulate_serving(*spec, kv_policy="reserve", **kw)
    # THEN holding only what contexts have grown to runs more sequences at once: shorter queues, more output per
    # second, at the cost of preemptions (none when reserving)
    assert paged.summary["queue_mean_s"] < 0.5 * reserve.summary["queue_mean_s"]
    assert paged.replicas["preemptions"].sum() > 0 and reserve.replicas["preemptions"].sum() == 0
    # AND with no cache limit the two policies are the same simulation
    free = {k: v for k, v in kw.items() if k != "kv_tokens"}
    a, b = simulate_serving(*spec, kv_policy="paged", **free), simulate_serving(*spec, **free)
    assert a.summary == b.summary


def test_a_cache_no_batch_can_fill_is_no_limit():
    # GIVEN requests of at most 300 + 60 tokens, batches of 8: a cache of 8 x 361 tokens never fills
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    spec = (ArrivalProcess(40.0), Lengths.uniform(1, 300), Lengths.uniform(1, 60))
    kw = dict(step_time=st, n_requests=3000, replicas=4, max_batch=8, seed=2)
    top = prepare(*spec, **kw)
    need = 8 * (int((top.prompt + top.output).max()) + 1)
    for policy in ("reserve", "paged"):
        run = prepare(*spec, kv_tokens=need, kv_policy=policy, **kw)
        # THEN it is simulated as no limit (lazy replicas and all), with the results the limit gives step by step
        assert run.kernel_args[3] == 2**62 and run.kernel_args[5] is False
        args = (run.arrivals[run.order], run.prompt[run.order], run.output[run.order])
        limited = simulate(*args, *run.kernel_args[:3], need, 0, policy == "paged", *run.kernel_args[6:], False)
        assert_same_run(simulate(*args, *run.kernel_args), limited, 1e-12)
        # AND a token less is a limit
        assert prepare(*spec, kv_tokens=need - 1, kv_policy=policy, **kw).kernel_args[3] == need - 1


def test_paged_without_chunking_needs_a_budget_for_a_recomputed_context():
    with pytest.raises(ValueError, match="must hold the 749 tokens a preempted request"):
        simulate_serving([0.0, 0.1], [500, 10], [250, 5], step_time=ENGINE["step_time"], max_batch=2,
                         token_budget=600, kv_tokens=1000, kv_policy="paged")  # fmt: skip
    with pytest.raises(ValueError, match="kv_policy must be one of"):
        simulate_serving([0.0], 10, 10, step_time=ENGINE["step_time"], kv_tokens=100, kv_policy="vllm")


@pytest.mark.parametrize("routing", ["jsq", "round_robin", "central"])
def test_paged_runs_keep_their_invariants_and_match_the_event_loop(routing):
    # GIVEN 15 random paged engines per routing (1-23 replicas: run ahead, lazy with a queue each; batches of 2-39;
    # whole or chunked prompts) with caches that fill, on random loads and on loads whose step ends tie with
    # arrivals (binary fractions, bursts at multiples of 1/32 s)
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    preemptions = 0
    for seed in range(15):
        rng = np.random.default_rng(seed)
        chunked, mb, replicas = bool(seed % 2), int(rng.integers(2, 40)), int(rng.integers(1, 24))
        kv = int(rng.integers(500, 8000))
        common = dict(replicas=replicas, max_batch=mb, routing=routing, kv_policy="paged", chunked_prefill=chunked)
        if seed % 3 == 0:
            arr, outputs = tied_load(rng, rng.uniform(0.05, 0.5), 1500, longest=200)
            run = prepare(arr, rng.integers(1, 64, arr.size), outputs, step_time=BATCHED,
                          kv_tokens=int(rng.integers(100, 600)), token_budget=max(mb, 64) if chunked else 4096, seed=0,
                          **common)  # fmt: skip
        else:
            run = prepare(ArrivalProcess(float(rng.uniform(1, 80)), float(rng.uniform(0, 2))),
                          Lengths.lognormal(200, 1.0) if chunked else Lengths.uniform(1, 300),
                          Lengths.geometric(float(rng.uniform(20, 300))), step_time=st, n_requests=3000,
                          token_budget=int(rng.integers(max(mb, 16), 600)) if chunked else 8192, kv_tokens=kv,
                          seed=seed, **common)  # fmt: skip
        args = kernel_args(run)
        # WHEN the kernel runs replicas ahead and lazily (up to a finish or a full cache), and every step as an event
        ahead, plain = simulate(*args, True), simulate(*args, False)
        # THEN the runs are the same (to the bit where step times are binary fractions)
        assert_same_run(ahead, plain, 0.0 if seed % 3 == 0 else 1e-12)
        # AND exactly the requests longer than the cache were refused; the others' times are in order; every output
        # token was decoded once or made by the prefill of a recompute
        start, first, fin, rep = plain[:4]
        served = rep >= 0
        assert np.array_equal(~served, args[1] + args[2] > run.kernel_args[3])
        assert np.all(first[served] > start[served]) and np.all(fin[served] >= first[served])
        want = (args[2] - 1)[served].sum()
        assert want - plain[8].sum() <= plain[7].sum() <= want
        preemptions += int(plain[8].sum())
    assert preemptions > 1000


def test_a_paged_runs_prefill_table_reaches_what_a_preempted_request_computes_again():
    # GIVEN prompts of at most 100 tokens and outputs of up to 500, batches of 4, a paged cache and a budget of 4,096
    prompt, output = np.arange(1, 101), np.tile([500, 20], 50)
    kw = dict(step_time=StepTime(prefill_time_s=lambda x: 1e-3 + 1e-9 * x * x), max_batch=4, token_budget=4096,
              kv_tokens=1200)  # fmt: skip
    # THEN the prefill table reaches the four longest prompts plus outputs (what recomputes may take in one step),
    # not only the four longest prompts; reserving, the prompts only
    for policy, top in (("paged", sum(sorted(prompt + output - 1)[-4:])), ("reserve", sum(sorted(prompt)[-4:]))):
        run = prepare(np.arange(100) * 0.01, prompt, output, kv_policy=policy, **kw)
        pf_tab, pf_x0, pf_h = run.kernel_args[9:12]
        assert pf_x0 + pf_h * (pf_tab.shape[1] - 1) == top


def test_sweep_rows_with_refusals_and_preemptions_are_each_rates_summary():
    # GIVEN a sweep of two replicas with a paged cache that refuses some requests and preempts others
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    eng = dict(step_time=st, max_batch=16, token_budget=512, chunked_prefill=True, kv_tokens=2000,
               kv_policy="paged", replicas=2)  # fmt: skip
    lengths = (Lengths.lognormal(400, 1.0), Lengths.geometric(100))
    rates = [2.0, 6.0, 12.0]
    sweep = serving_sweep(rates, *lengths, n_requests=3000, seed=4, threads=2, **eng)
    # THEN each row is, to the bit, the summary of simulate_serving at that rate, with its refusals and preemptions
    for row, rate in zip(sweep.to_dict("records"), rates):
        res = simulate_serving(ArrivalProcess(rate), *lengths, n_requests=3000, seed=4, warmup=0.1, **eng)
        assert row == {"arrival_rate_per_s": rate, **res.summary,
                       "busy_fraction": float(res.replicas["busy_fraction"].mean()),
                       "preemptions": int(res.replicas["preemptions"].sum())}  # fmt: skip
        assert res.summary["rejected"] == res.requests["replica"].iloc[300:].eq(-1).sum() > 0
    assert sweep["preemptions"].iloc[-1] > 0
