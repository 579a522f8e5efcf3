"""``DisaggPanel``: colocated against disaggregated serving, sized for two objectives, under sliders."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from aonkit.model import (
    ArrivalProcess,
    Lengths,
    Pool,
    disaggregated_sweep,
    goodput,
    pools_needed,
    serving_sweep,
    simulate_serving,
)
from aonkit.model.hardware import devices
from aonkit.model.llm import PRESETS
from aonkit.model.serving_grid import sweep_rates
from aonkit.model.serving_steps import model_step_time, serving_memory
from aonkit.views.model_charts import pools_charts
from aonkit.views.serving import pools_data
from aonkit.widgets import DisaggPanel

N = 2000  # requests per simulation: small; every comparison is exact (one seed)
H100 = {d.name: d for d in devices()}["H100 SXM"]


def engine(link_gb_s: float = 50.0, latency_ms: float = 1.0) -> dict:
    """What the default panel simulates, computed here from the model: Llama-3 8B on one H100 per replica."""
    mem = serving_memory(PRESETS["Llama-3 8B"], H100)
    return {"step_time": model_step_time(PRESETS["Llama-3 8B"], H100), "kv_tokens": mem.kv_tokens,
            "max_batch": 128, "transfer_s": (latency_ms / 1e3, mem.kv_bytes_per_token / (link_gb_s * 1e9))}


def test_the_panel_shows_the_model_s_sweeps_and_the_fewest_replicas_each_way():
    # GIVEN the default panel at 6 requests/s (1 prefill + 2 decode replicas against 3 colocated; mean prompt 4096
    # tokens, lognormal; outputs geometric of mean 256 stopped at 2048), objectives p99 TTFT 1 s, p99 TPOT 15 ms
    p = DisaggPanel(6.0, n_requests=N, tpot_slo_s=0.015)
    e = engine()
    prompts, outputs = Lengths.lognormal(4096, 1.0), Lengths.geometric(256).capped(2048)
    step = {"step_time": e["step_time"], "max_batch": 128, "kv_tokens": e["kv_tokens"]}
    colo_engine = {**step, "token_budget": 8192, "chunked_prefill": True, "max_new_tokens": 2048}
    pools = {"prefill": Pool(1, token_budget=8192, chunked_prefill=True, **step), "decode": Pool(2, **step)}
    # THEN its sweeps are the model's, over the same rates, and the charts' columns are drawn from them
    rates = sweep_rates(6.0)
    slos = (1.0, 0.015)
    pd.testing.assert_frame_equal(p.colocated, serving_sweep(rates, prompts, outputs, n_requests=N, replicas=3,
                                                             slos=slos, **colo_engine))  # fmt: skip
    pd.testing.assert_frame_equal(p.apart, disaggregated_sweep(rates, prompts, outputs, n_requests=N, slos=slos,
                                                               transfer_s=e["transfer_s"], max_new_tokens=2048,
                                                               **pools))  # fmt: skip
    assert p.sources["pools"].data["apart_tpot_ms"] == pytest.approx(
        pools_data(p.colocated, p.apart)["apart_tpot_ms"], nan_ok=True)
    # AND the colocated count meets both objectives where one fewer does not
    def meets(n: int) -> bool:
        s = simulate_serving(ArrivalProcess(6.0), prompts, outputs, n_requests=N, seed=0, warmup=0.1, replicas=n,
                             **colo_engine).summary  # fmt: skip
        return s["ttft_p99_s"] <= 1.0 and s["tpot_p99_s"] <= 0.015
    c = p.sizing.colocated
    assert c >= 2 and meets(c) and not meets(c - 1)
    # AND the pools are pools_needed's (searched from one replica each), more than one of each
    plan = pools_needed(6.0, prompts, outputs, ttft_slo_s=1.0, tpot_slo_s=0.015, n_requests=N,
                        transfer_s=e["transfer_s"], max_new_tokens=2048, **pools)  # fmt: skip
    assert (p.sizing.prefill, p.sizing.decode) == (plan.prefill, plan.decode) and min(plan[:2]) >= 2
    n = p.numbers()
    assert n["colocated_replicas_needed"] == c and n["prefill_replicas_needed"] == plan.prefill
    assert n["apart_tpot_p99_s"] == p.apart.set_index("arrival_rate_per_s").loc[6.0, "tpot_p99_s"]
    assert f"colocated {c}, disaggregated {plan.prefill} + {plan.decode} = " in p.text()
    assert p.plain_text().startswith("disaggregation: at 6 req/s: colocated (3 replicas)")
    # AND each deployment's goodput is read from its sweep, between the swept rates around it
    for name, sweep in (("colocated", p.colocated), ("apart", p.apart)):
        assert n[f"{name}_goodput_per_s"] == goodput(sweep)["goodput_per_s"]
        assert sweep.query("slo_attainment >= 0.9")["arrival_rate_per_s"].max() <= n[f"{name}_goodput_per_s"]
    assert f"Goodput of these (90% of requests within both): {n['colocated_goodput_per_s']:.3g} req/s colocated" in (
        p.text())


def test_a_change_reruns_only_what_it_needs_and_agrees_with_a_fresh_panel(monkeypatch):
    import aonkit.widgets.disagg_engine as panel

    searches = []

    def counted(real):
        return lambda *a, **k: searches.append(1) or real(*a, **k)

    for name in ("replicas_needed", "pools_needed"):
        monkeypatch.setattr(panel, name, counted(getattr(panel, name)))
    # GIVEN a panel
    p = DisaggPanel(3.0, n_requests=N)
    colo, apart, sizing = p.colocated, p.apart, p.sizing
    # WHEN only an objective changes: the searches run; no rate is simulated again, the kept rows' requests within
    # the new objectives are counted
    done = [r.simulated for r in p.rows]
    p.ttft_slo.value = 0.6
    assert p.sizing is not sizing and [r.simulated for r in p.rows] == done
    assert (p.colocated["slo_attainment"] <= colo["slo_attainment"]).all()  # (a tighter TTFT objective)
    assert (p.apart["slo_attainment"] < apart["slo_attainment"]).any()
    assert p.colocated.drop(columns="slo_attainment").equals(colo.drop(columns="slo_attainment"))
    assert p.sources["ttft_slo"].data["ms"] == [pytest.approx(600.0)]
    # WHEN only a pool's size changes: the sweeps run, the searches (their own counts) are kept
    sizing = p.sizing
    p.n_decode.value = 3
    assert p.colocated is not colo and p.sizing is sizing
    # WHEN only the rate changes: the rates of the grid seen at the last rate are not simulated again
    done = [r.simulated for r in p.rows]
    p.rate.value = 4.0
    assert [r.simulated - d for r, d in zip(p.rows, done)] == [1, 1]  # (4/s: the grid points are the same)
    p.rate.value = 3.0
    assert [r.simulated - d for r, d in zip(p.rows, done)] == [1, 1]  # (3/s and its grid: all seen)
    # WHEN other controls change in turn (the searches start from the last answers, scaled)
    for name, value in [("rate", 6.0), ("device", "H200 SXM"), ("link", 10.0), ("tpot_slo", 0.05), ("prompt", 2048),
                        ("n_prefill", 2), ("rate", 12.0)]:  # fmt: skip
        getattr(p, name).value = value
        assert not p.error, name
    # THEN every number is a fresh panel's with the final values
    fresh = DisaggPanel(12.0, n_requests=N, ttft_slo_s=0.6, tpot_slo_s=0.05, decode_replicas=3, prefill_replicas=2,
                        device="H200 SXM", link_gb_s=10.0, prompt_tokens=2048)  # fmt: skip
    pd.testing.assert_frame_equal(p.colocated, fresh.colocated)
    pd.testing.assert_frame_equal(p.apart, fresh.apart)
    assert p.sizing == fresh.sizing and p.text() == fresh.text() and p.sizing != sizing
    # AND going back to the H100s and back (settings seen a moment ago) simulates and searches nothing again
    p.device.value = "H100 SXM"
    done, h100, searched = [r.simulated for r in p.rows], p.sizing, len(searches)
    p.device.value = "H200 SXM"
    assert p.sizing == fresh.sizing and p.text() == fresh.text()
    p.device.value = "H100 SXM"
    assert p.sizing == h100 and [r.simulated for r in p.rows] == done and len(searches) == searched


def test_a_slower_link_delays_first_tokens_decode_steps_never():
    # GIVEN the panel with a fast link, then one 100 times slower
    p = DisaggPanel(2.0, n_requests=N, link_gb_s=400.0)
    fast = p.apart.copy()
    p.link.value = 4.0
    # THEN TTFT is unchanged (the first token is the prefill pool's), TPOT (counted from it) grows by the transfer
    # of about a 4096-token prompt's 128 KiB per token at 4 GB/s (more than 0.1 s over 256 tokens: 0.5 ms a token)
    assert p.apart["ttft_p99_s"].tolist() == fast["ttft_p99_s"].tolist()
    assert (p.apart["tpot_p50_s"] - fast["tpot_p50_s"]).min() > 3e-4
    assert "KV transfer 135 ms for the mean prompt" in p.text()  # 1 ms + 4096 x 131,072 B / 4 GB/s


def test_settings_that_cannot_be_served_say_why_and_keep_the_last_answer():
    # GIVEN a panel that searches at most 4 replicas
    p = DisaggPanel(4.0, n_requests=N, max_replicas=4)
    before = p.text()
    # WHEN the model does not fit on one GPU
    p.model.value = "Llama-3 70B"
    # THEN the error says so, and the last answer stays
    assert "does not fit on H100 SXM with TP 1" in p.error and p.text() == before
    assert "cannot simulate this setting" in p.summary.value
    p.model.value = "Llama-3 8B"
    assert not p.error
    # WHEN an objective no count of replicas meets (a p99 TTFT of 10 ms: the longest prompts take longer alone)
    p.ttft_slo.value = 0.01
    # THEN neither deployment is sized, and the text says why: the requests served alone miss it
    assert p.sizing.colocated is None and p.sizing.prefill is None and p.sizing.decode is None
    floor = "(served alone, the requests' ttft_p99_s is 0.4841 s)"
    assert f"colocated no number meets them {floor}, disaggregated no number meets them {floor}" in p.text()
    assert math.isnan(p.numbers()["prefill_replicas_needed"])
    # WHEN the objectives are met alone but not by 4 replicas of either kind at 40 requests/s
    p.ttft_slo.value, p.rate.value = 1.0, 40.0
    # THEN the text says how far the searches went
    assert p.sizing.colocated is None and p.sizing.why_colocated == "" and p.sizing.prefill is None
    assert "colocated not met with 4 replicas, disaggregated not met with 4 replicas" in p.text()


def test_the_comparison_columns_and_charts():
    # GIVEN two sweeps over the same rates, one with a missing TPOT (one-token outputs)
    rows = {"arrival_rate_per_s": [2.0, 1.0], "ttft_p99_s": [0.2, 0.1], "tpot_p99_s": [0.02, np.nan]}
    colo = pd.DataFrame({**rows, "busy_fraction": [0.5, 0.25]})
    apart = pd.DataFrame({**rows, "prefill_busy_fraction": [0.4, 0.2], "decode_busy_fraction": [0.9, 0.8]})
    d = pools_data(colo, apart)
    # THEN rows go by rate, latencies are in ms with a gap for none, busy shares with their text
    assert d["rate"] == [1.0, 2.0] and d["colocated_ttft_ms"] == pytest.approx([100.0, 200.0])
    assert np.isnan(d["apart_tpot_ms"][0]) and d["apart_tpot_text"][0] == "n/a"
    assert d["decode_busy"] == [0.8, 0.9] and d["prefill_busy_text"] == ["20.0 %", "40.0 %"]
    assert np.isnan(d["apart_attain"]).all()  # (sweeps made without objectives)
    assert pools_data(colo.assign(slo_attainment=[0.7, 1.0]), apart)["colocated_attain_text"] == ["100.0 %", "70.0 %"]
    with pytest.raises(ValueError, match="same arrival rates"):
        pools_data(colo, apart.assign(arrival_rate_per_s=[3.0, 1.0]))
    # AND every mark of the charts reads a column the panel's sources have
    p = DisaggPanel(4.0, n_requests=500)
    for spec in pools_charts():
        for mark in spec["marks"]:
            cols = p.sources[mark["source"]].data
            assert all(mark[k] in cols for k in ("x", "y") if k in mark), (spec["title"], mark)


def test_decode_replicas_of_another_device_and_tp():
    # GIVEN decode replicas of two A100s each (Splitwise's idea: generation on other GPUs than prompts)
    p = DisaggPanel(6.0, n_requests=N, tpot_slo_s=0.015, decode_device="A100 SXM4 80GB", decode_tp=2)
    cfg, a100 = PRESETS["Llama-3 8B"], {d.name: d for d in devices()}["A100 SXM4 80GB"]
    mem, dmem = serving_memory(cfg, H100), serving_memory(cfg, a100, 2)
    prefill = Pool(1, model_step_time(cfg, H100), 128, 8192, True, kv_tokens=mem.kv_tokens)
    decode = Pool(2, model_step_time(cfg, a100, 2), 128, kv_tokens=dmem.kv_tokens)
    # THEN the decode pool has the A100s' step times and cache; each GPU sends or takes its shard of the KV cache
    # (the larger, an H100's whole one, sets the transfer); the colocated replicas stay one H100 each
    load = dict(prompt_tokens=Lengths.lognormal(4096, 1.0), output_tokens=Lengths.geometric(256).capped(2048),
                n_requests=N)
    transfer = (1e-3, max(mem.kv_bytes_per_token, dmem.kv_bytes_per_token) / 50e9)
    assert transfer[1] == mem.kv_bytes_per_token / 50e9 > dmem.kv_bytes_per_token / 50e9
    pd.testing.assert_frame_equal(p.apart, disaggregated_sweep(sweep_rates(6.0), **load, prefill=prefill,
                                                               decode=decode, transfer_s=transfer,
                                                               slos=(1.0, 0.015), max_new_tokens=2048))  # fmt: skip
    pd.testing.assert_frame_equal(p.colocated, DisaggPanel(6.0, n_requests=N, tpot_slo_s=0.015).colocated)
    # AND the text names the decode device and counts GPUs
    s = p.sizing
    assert "1 prefill + 2 decode on A100 SXM4 80GB" in p.text()
    gpus = s.prefill + 2 * s.decode
    assert f"disaggregated {s.prefill} + {s.decode} = {s.prefill + s.decode} ({gpus} GPUs)" in p.text()
    # WHEN the decode replicas cannot hold the model (Llama-3 70B on one H100)
    p.model.value, p.tp.value = "Llama-3 70B", 4
    p.decode_device.value, p.decode_tp.value = "same", 1
    # THEN the error says so
    assert "does not fit on H100 SXM with TP 1" in p.error


def test_random_changes_give_an_answer_or_a_reason_never_an_exception():
    # GIVEN a small panel and 60 changes of random controls to random values in their ranges
    from .panel_changes import random_changes

    p = DisaggPanel(4.0, n_requests=400, max_replicas=8)
    values = {"rate": [0.2, 4.0, 300.0], "cv": [0.0, 2.0], "prompt": [1, 4096, 32768], "output": [1, 64, 4096],
              "max_new": [64, 2048, 16384], "lengths": ["fixed", "random"], "ttft_slo": [0.01, 1.0, 20.0],
              "tpot_slo": [0.002, 0.05], "n_prefill": [1, 32], "n_decode": [1, 32], "token_budget": [64, 32768],
              "max_batch": [1, 512], "chunked": [True, False], "link": [1.0, 900.0], "latency": [0.0, 20.0],
              "model": list(p.model.options), "device": list(p.device.options), "tp": [1, 8],
              "dtype": ["bf16", "bf16", "fp8"], "decode_device": list(p.decode_device.options),
              "decode_tp": ["same", 2]}
    answered = refused = 0
    for _ in random_changes(p, values, seed=7):  # (a draw that takes both paths often: 22 answers, 38 refusals)
        # THEN each change is answered, or refused with a reason while the last answer stays readable
        if p.error:
            refused += 1
            assert p.error.startswith("ValueError: ") and "cannot simulate this setting" in p.summary.value
        else:
            answered += 1
            assert p.colocated["arrival_rate_per_s"].tolist() == p.apart["arrival_rate_per_s"].tolist()
        assert p.text().startswith("at ")
    assert answered >= 5 and refused >= 5  # (both paths taken: a model too big stays refused until TP grows)
