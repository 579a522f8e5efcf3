"""SLO attainment (both objectives met) and goodput (the highest rate at which enough requests meet them)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aonkit.model import (
    ArrivalProcess,
    Lengths,
    Pool,
    StepTime,
    goodput,
    serving_summary,
    serving_sweep,
    simulate_disaggregated,
    simulate_serving,
)
from aonkit.model.serving import prepare, summarize
from aonkit.model.serving_disagg import disaggregated_rows
from aonkit.model.serving_pools import prepare_pools, summarize_pools
from aonkit.model.serving_stats import attainment

ST = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.01, 1e-4, 1e-7), overhead_s=0.001)


def test_attainment_by_hand():
    # GIVEN five requests: both met; TTFT missed; TPOT missed; one output token (no TPOT) in time; refused
    ttft = np.array([0.1, 0.6, 0.2, 0.3, np.nan])
    tpot = np.array([0.01, 0.01, 0.05, np.nan, np.nan])
    # THEN two of five meet both objectives (0.5 s, 20 ms); an objective exactly met counts; the refused one never
    assert attainment(ttft, tpot, (0.5, 0.02)) == pytest.approx(0.4)
    assert attainment(ttft, tpot, (0.6, 0.05)) == pytest.approx(0.8)
    assert np.isnan(attainment(ttft[:0], tpot[:0], (1.0, 1.0)))


@pytest.mark.parametrize("case", range(4))
def test_the_summaries_without_tables_give_the_tables_attainment(case):
    # GIVEN random engines (some requests refused by the KV cache) and objectives at their p90 TTFT and TPOT
    rng = np.random.default_rng(case)
    engine = dict(step_time=ST, replicas=int(rng.integers(1, 4)), max_batch=16, token_budget=2048,
                  chunked_prefill=bool(case % 2), kv_tokens=[None, 3000][case // 2], max_new_tokens=512)
    load = dict(prompt_tokens=Lengths.lognormal(400, 1.0).capped(2048), output_tokens=Lengths.geometric(40).capped(512),
                n_requests=1500, seed=case, warmup=0.1)  # fmt: skip
    res = simulate_serving(ArrivalProcess(20.0), **load, **engine)
    slos = (res.summary["ttft_p90_s"], res.summary["tpot_p90_s"])
    table = serving_summary(res.requests, 0.1, slos=slos)["slo_attainment"]
    # THEN the fast path's attainment is the table's, and it is what the rows say
    assert summarize([prepare(ArrivalProcess(20.0), **load, **engine)], slos=slos)[0]["slo_attainment"] == table
    # (and the kept latencies count the same: other objectives need no simulation again)
    ttft, tpot = summarize([prepare(ArrivalProcess(20.0), **load, **engine)], keep_latencies=True)[0]["latencies"]
    assert attainment(ttft, tpot, slos) == table and ttft.size == 1350
    r = res.requests.sort_values("arrival_s", kind="stable").iloc[150:]
    ok = (r["ttft_s"] <= slos[0]) & ((r["tpot_s"] <= slos[1]) | (r["output_tokens"] == 1)) & r["finish_s"].notna()
    assert table == pytest.approx(ok.mean()) and 0 < table < 1
    # AND so is the disaggregated one
    pools = dict(prefill=Pool(1, ST, 16, 2048, True), decode=Pool(2, ST, 16, kv_tokens=engine["kv_tokens"]),
                 transfer_s=(0.001, 1e-6))
    apart = simulate_disaggregated(ArrivalProcess(20.0), **load, **pools)
    got = summarize_pools([prepare_pools(ArrivalProcess(20.0), **load, **pools)], slos=slos)[0]["slo_attainment"]
    assert got == serving_summary(apart.requests, 0.1, slos=slos)["slo_attainment"]
    kept = disaggregated_rows([20.0], **load, **pools, keep_latencies=True)[0]["latencies"]
    assert attainment(*kept, slos) == got


def test_goodput_is_interpolated_at_the_first_rate_below_the_target():
    sweep = pd.DataFrame({"arrival_rate_per_s": [8.0, 2.0, 4.0, 6.0], "slo_attainment": [0.5, 1.0, 0.95, 0.85]})
    # (0.95 at 4/s, 0.85 at 6/s: 90% halfway)
    assert goodput(sweep) == {"goodput_per_s": pytest.approx(5.0), "beyond_sweep": False}
    assert goodput(sweep, 0.99)["goodput_per_s"] == pytest.approx(2.0 + 2.0 * 0.01 / 0.05)
    assert goodput(sweep, 0.4) == {"goodput_per_s": 8.0, "beyond_sweep": True}
    assert np.isnan(goodput(sweep.assign(slo_attainment=0.5))["goodput_per_s"])
    with pytest.raises(ValueError, match="no slo_attainment"):
        goodput(sweep.drop(columns="slo_attainment"))
    with pytest.raises(ValueError, match="target must be in"):
        goodput(sweep, 0.0)


def test_a_sweep_s_attainment_falls_with_the_rate_and_goodput_lies_between_its_rates():
    # GIVEN one replica swept from 2 to 40 requests/s with objectives of 0.5 s and 20 ms
    sweep = serving_sweep([2, 5, 10, 20, 40], 400, 40, n_requests=2000, step_time=ST, max_batch=16,
                          token_budget=2048, chunked_prefill=True, slos=(0.5, 0.02))  # fmt: skip
    got = sweep["slo_attainment"].to_numpy()
    # THEN attainment falls from all to few, and the goodput is between the last rate that meets 90% and the next
    assert got[0] == 1.0 and got[-1] < 0.5 and np.all(np.diff(got) <= 1e-9)
    g = goodput(sweep)["goodput_per_s"]
    last = sweep["arrival_rate_per_s"][got >= 0.9].max()
    assert last <= g < sweep["arrival_rate_per_s"][got < 0.9].min()
