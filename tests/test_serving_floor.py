"""The latency floor (every request served alone) and the searches that stop on it."""

from __future__ import annotations

import numpy as np
import pytest

from aonkit.model import ArrivalProcess, Lengths, StepTime, replicas_needed
from aonkit.model.serving import prepare, rerun, summarize
from aonkit.model.serving_floor import GAP_S, alone, beyond_floor, served_apart

ST = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.01, 1e-4, 1e-7), overhead_s=0.001)
LATENCY_KEYS = [f"{m}_{s}_s" for m in ("queue", "ttft", "tpot", "e2e") for s in ("mean", "p50", "p90", "p99")]


@pytest.mark.parametrize("case", range(8))
def test_no_replica_count_goes_below_the_requests_served_alone(case):
    # GIVEN random engines (chunked or whole prompts, each routing, a KV cache reserving or paged) under a load that
    # queues on one replica
    rng = np.random.default_rng(case)
    chunked = bool(case % 2)
    engine = dict(step_time=ST, max_batch=int(rng.integers(2, 32)), token_budget=4096, chunked_prefill=chunked,
                  routing=("jsq", "round_robin", "central")[case % 3], kv_tokens=[None, 20000][case // 4],
                  kv_policy=("reserve", "paged")[(case // 2) % 2], max_new_tokens=1024)  # fmt: skip
    base = prepare(ArrivalProcess(float(rng.uniform(5, 40)), 1.5), Lengths.lognormal(500, 1.0).capped(3000),
                   Lengths.geometric(60).capped(1024), n_requests=1500, seed=case, warmup=0.1, **engine)
    floor = alone(base)
    # THEN every latency key at every count is at least the floor's (the floor's own rounding aside)
    for row in summarize([rerun(base, replicas=c) for c in (1, 2, 4, 8)], 2):
        assert all(row[k] >= floor[k] - 1e-6 for k in LATENCY_KEYS), [k for k in LATENCY_KEYS if row[k] < floor[k]]
        assert row["rejected"] == floor["rejected"]
    assert floor["queue_p99_s"] == 0.0 and floor["ttft_p50_s"] > 0.005


def test_a_request_that_outlasts_the_gap_gives_no_floor():
    # GIVEN decode steps of 10 s: a 2,000-token output takes longer than the gap between arrivals
    slow = StepTime(prefill_time_s=(0.01, 0.0), decode_time_s=(10.0, 0.0, 0.0))
    base = prepare([0.0, 1.0], 10, 2000, step_time=slow, max_batch=4)
    assert 1999 * 10.0 > GAP_S and alone(base) is None
    assert beyond_floor(None, "ttft_p99_s", 0.001) == ""
    assert served_apart(np.array([0.0, 5.0, 6.0]), np.array([4.0, np.nan, 7.0]))
    assert not served_apart(np.array([0.0, 5.0]), np.array([5.0, 6.0]))


def test_only_latencies_are_bounded_and_with_a_margin():
    floor = {"ttft_p99_s": 0.5, "throughput_per_s": 10.0}
    assert beyond_floor(floor, "ttft_p99_s", 0.4) == "served alone, the requests' ttft_p99_s is 0.5 s"
    assert beyond_floor(floor, "ttft_p99_s", 0.5 - 5e-6) == ""  # within the rounding margin: the search decides
    assert beyond_floor(floor, "throughput_per_s", 1.0) == ""


def test_replicas_needed_stops_at_the_first_failing_count_when_the_floor_misses():
    # GIVEN an objective of p99 TTFT 10 ms: a 500-token prompt alone takes 16 ms
    rows = []
    with pytest.raises(ValueError, match="not met with any number of replicas: served alone, the requests' "
                                         "ttft_p99_s is 0.016 s"):  # fmt: skip
        replicas_needed(50.0, 0.010, 500, 20, n_requests=500, step_time=ST, max_batch=8, start=4,
                        on_row=lambda c, r: rows.append(c))  # fmt: skip
    # THEN it simulated the first count only (and the floor)
    assert rows == [4]
    # AND an objective the floor meets is searched as before: the answer meets it, one fewer does not
    plan = replicas_needed(50.0, 0.1, 500, 20, n_requests=500, step_time=ST, max_batch=8, start=4)
    got = plan.tried.set_index("replicas")["ttft_p99_s"]
    assert got[plan.replicas] <= 0.1 and (plan.replicas == 1 or got[plan.replicas - 1] > 0.1)


def test_the_floor_is_simulated_only_while_every_count_tried_fails(monkeypatch):
    import aonkit.model.serving_analysis as analysis

    calls = []
    monkeypatch.setattr(analysis, "alone", lambda run: calls.append(run) or alone(run))
    kw = dict(n_requests=500, step_time=ST, max_batch=8)
    # GIVEN a search that starts at a count meeting the objective (then one fewer fails): no floor is needed
    plan = replicas_needed(50.0, 0.1, 500, 20, start=6, **kw)
    assert len(plan.tried) >= 2 and calls == []
    # GIVEN one that starts below the answer: its first count fails, the floor meets the objective, it goes on
    assert replicas_needed(50.0, 0.1, 500, 20, start=1, **kw).replicas == plan.replicas and len(calls) == 1


def test_replicas_needed_with_more_objectives_meets_them_all():
    # GIVEN TTFT and TPOT objectives each needing its own count
    kw = dict(n_requests=800, step_time=ST, max_batch=8, token_budget=2048, chunked_prefill=True)
    ttft = replicas_needed(60.0, 0.1, 500, 40, **kw).replicas
    tpot = replicas_needed(60.0, 0.03, 500, 40, metric="tpot_p99_s", **kw).replicas
    # THEN both together need the larger, and the message of an impossible pair names both
    both = replicas_needed(60.0, 0.1, 500, 40, also={"tpot_p99_s": 0.03}, **kw)
    assert both.replicas == max(ttft, tpot) and ttft != tpot
    with pytest.raises(ValueError, match=r"ttft_p99_s <= 0.1 s and tpot_p99_s <= 0.001 s not met with any number"):
        replicas_needed(60.0, 0.1, 500, 40, also={"tpot_p99_s": 0.001}, **kw)
