"""Disaggregated summaries without tables (``serving_pools``): ``simulate_disaggregated``'s, to the last bit."""

from __future__ import annotations

import numpy as np
import pytest

from aonkit.model import ArrivalProcess, Lengths, Pool, StepTime, simulate_disaggregated
from aonkit.model.serving_pools import prepare_pools, rerun_pools, summarize_pools

ST = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.01, 1e-4, 1e-7), overhead_s=0.001)
ROUTINGS = ("jsq", "round_robin", "central")


def same(a: dict, b: dict) -> list[str]:
    """Keys of ``a`` whose values differ in ``b`` (NaN equal to NaN, nothing else approximate)."""
    return [k for k, v in a.items() if not (b[k] == v or (np.isnan(b[k]) and np.isnan(v)))]


def busy(res) -> dict:
    mean = res.replicas.groupby("pool")["busy_fraction"].mean()
    return {f"{p}_busy_fraction": float(mean.get(p, np.nan)) for p in ("prefill", "decode")}


@pytest.mark.parametrize("case", range(12))
def test_random_deployments_give_the_summary_of_the_tables(case):
    # GIVEN a random deployment: pool sizes, batches, budgets, routings, KV caches that refuse some requests in
    # either pool, a transfer time, a max_new_tokens or none, arrivals from a process of CV 0, 1 or 2
    rng = np.random.default_rng(case)
    chunked = bool(case % 2)
    prefill = Pool(int(rng.integers(1, 4)), ST, int(rng.integers(1, 32)), int(rng.choice([2048, 8192])), chunked,
                   str(rng.choice(ROUTINGS)), [None, 20000, 1500][case % 3])  # fmt: skip
    decode = Pool(int(rng.integers(1, 5)), ST, int(rng.integers(1, 64)), routing=str(rng.choice(ROUTINGS)),
                  kv_tokens=[None, 30000, 2500][(case // 3) % 3])  # fmt: skip
    prompt = Lengths.lognormal(600, 1.0).capped(2000)
    kw = dict(prefill=prefill, decode=decode, transfer_s=(float(rng.uniform(0, 0.01)), float(rng.uniform(0, 1e-5))),
              n_requests=1500, seed=case, warmup=0.1, max_new_tokens=[None, 512][(case // 2) % 2])  # fmt: skip
    process = ArrivalProcess(float(rng.uniform(2, 40)), [0.0, 1.0, 2.0][case % 3])
    ref = simulate_disaggregated(process, prompt, Lengths.geometric(64).capped(512), **kw)
    got = summarize_pools([prepare_pools(process, prompt, Lengths.geometric(64).capped(512), **kw)])[0]
    # THEN every summary value is the tables' to the last bit, and each pool's busy share their mean
    assert same(ref.summary, got) == []
    assert {k: got[k] for k in busy(ref)} == pytest.approx(busy(ref), rel=1e-12, nan_ok=True)


def test_recorded_arrivals_with_ties_in_any_order_give_the_same_summary():
    # GIVEN recorded arrivals to a tenth of a second (many ties, in the prefill pool and at the decode pool's door:
    # no transfer time), in no order, some too long for the prefill pool's cache and some for the decode pool's
    rng = np.random.default_rng(7)
    arr = np.round(rng.uniform(0, 20, 600), 1)
    prompt, output = rng.integers(1, 3000, arr.size), rng.integers(1, 300, arr.size)
    for dec_kv in (None, 2000):
        kw = dict(prefill=Pool(2, ST, 8, 4096, True, kv_tokens=2500), decode=Pool(3, ST, 16, kv_tokens=dec_kv),
                  transfer_s=(0.0, 0.0), warmup=0.1)  # fmt: skip
        ref = simulate_disaggregated(arr, prompt, output, **kw)
        got = summarize_pools([prepare_pools(arr, prompt, output, **kw)])[0]
        # THEN the summary is the tables' to the last bit (requests refused by each pool counted alike)
        assert ref.summary["rejected"] > 0
        assert same(ref.summary, got) == []


def test_no_request_reaching_the_decode_pool_leaves_it_idle():
    # GIVEN a decode pool whose cache holds no request's prompt and output
    kw = dict(prefill=Pool(1, ST, 8, 2048), decode=Pool(2, ST, 8, kv_tokens=10), transfer_s=(0.0, 0.0))
    got = summarize_pools([prepare_pools([0.0, 0.5, 1.0], 100, 20, **kw)])[0]
    ref = simulate_disaggregated([0.0, 0.5, 1.0], 100, 20, **kw)
    # THEN every request is refused, as the tables say, and neither pool has a busy share
    assert got["rejected"] == 3 and same(ref.summary, got) == []
    assert np.isnan(got["prefill_busy_fraction"]) and np.isnan(got["decode_busy_fraction"])


def test_other_pool_sizes_and_rates_are_a_fresh_preparation():
    # GIVEN one preparation, rerun with other pool sizes and with the arrivals of another rate (same draws)
    load = dict(prompt_tokens=Lengths.lognormal(800, 1.0).capped(4000), output_tokens=Lengths.geometric(50),
                n_requests=2000, seed=3, warmup=0.1, transfer_s=(0.001, 2e-6))  # fmt: skip
    pools = dict(prefill=Pool(1, ST, 16, 4096, True), decode=Pool(1, ST, 32, kv_tokens=40000))
    base = prepare_pools(ArrivalProcess(5.0), **load, **pools)
    draws = ArrivalProcess(5.0).draws(2000, np.random.default_rng(3))
    runs = [rerun_pools(base, prefill=3, decode=2),
            rerun_pools(base, arrivals=ArrivalProcess(12.0).from_draws(draws))]
    got = summarize_pools(runs, threads=2)
    # THEN each is what a fresh simulation of that deployment and rate gives
    other = dict(prefill=Pool(3, ST, 16, 4096, True), decode=Pool(2, ST, 32, kv_tokens=40000))
    assert same(simulate_disaggregated(ArrivalProcess(5.0), **load, **other).summary, got[0]) == []
    assert same(simulate_disaggregated(ArrivalProcess(12.0), **load, **pools).summary, got[1]) == []
    assert got[0]["ttft_p99_s"] < got[1]["ttft_p99_s"]
    with pytest.raises(ValueError, match="takes arrivals in order"):
        rerun_pools(base, arrivals=np.arange(2000.0)[::-1])
