"""The model widgets: ``LLMModelPanel`` and ``ServingPanel`` agree with direct calls of the model functions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aonkit.model import Lengths, StepTime, device_spec, replicas_needed, saturation_knee, serving_sweep
from aonkit.model.llm import (
    DGX_A100,
    GPT3_175B,
    LLAMA3_8B,
    LLAMA3_70B,
    LLAMA3_405B,
    Parallelism,
    decode_time,
    gpt_config,
    prefill_time,
    training_memory,
    training_step,
)
from aonkit.model.serving_grid import sweep_rates
from aonkit.model.serving_steps import ModelStepTimes, model_step_time
from aonkit.views.llm import (
    CAPACITY_COLOR,
    OVER_COLOR,
    STEP_PARTS,
    capacity_data,
    inference_table,
    memory_data,
    memory_table,
    step_data,
    step_table,
)
from aonkit.views.serving import knee_data, sweep_data
from aonkit.widgets import LLMModelPanel, ServingPanel
from aonkit.widgets.llm import parse_efficiency

H100 = device_spec("H100 SXM")


def _direct(panel: LLMModelPanel):
    kw = panel.inputs()
    return training_step(**kw), training_memory(kw["config"], kw["parallel"], kw["global_batch"], flash=kw["flash"])


# ---- the views' tables -------------------------------------------------------------------------------------------
def test_step_table_adds_up_to_the_step_and_stacks_per_group() -> None:
    st = training_step(LLAMA3_70B, H100, Parallelism(tp=8, pp=4, dp=8, vpp=2, sp=True, zero=1), 1024)
    t = step_table(st)
    assert list(t["part"]) == [p for _, p, _, _ in STEP_PARTS]
    assert t["seconds"].sum() == pytest.approx(st.step_s, rel=1e-12)
    d = step_data(t)
    for group in ("compute", "communication"):
        rows = [i for i, g in enumerate(d["group"]) if g == group]
        assert d["left"][rows[0]] == 0.0
        assert all(d["right"][a] == pytest.approx(d["left"][b]) for a, b in zip(rows, rows[1:]))
        assert d["right"][rows[-1]] == pytest.approx(sum(getattr(st, group if group == "compute" else
                                                                 "communication").values()))  # fmt: skip
    assert d["right"][d["part"].index("bubble")] == pytest.approx(st.bubble_s)


def test_capacity_line_is_red_only_when_memory_exceeds_it() -> None:
    assert capacity_data(90e9, 80e9)["over"] == [True] and capacity_data(90e9, 80e9)["color"] == [OVER_COLOR]
    assert capacity_data(70e9, 80e9)["over"] == [False] and capacity_data(70e9, 80e9)["color"] == [CAPACITY_COLOR]
    assert capacity_data(70e9, None)["gb"] == []  # unknown capacity: nothing drawn
    mem = training_memory(LLAMA3_8B, Parallelism(dp=8, zero=1), 8)
    d = memory_data(memory_table(mem))
    assert d["top"][-1] == pytest.approx(mem.total / 1e9)


def test_inference_table_matches_prefill_and_decode() -> None:
    t = inference_table(LLAMA3_70B, H100, batch=4, context=2048, tp=8, batches=[1, 16], contexts=[512, 8192])
    by_batch, by_ctx = t[t["sweep"] == "batch"], t[t["sweep"] == "context"]
    b, c = np.array([1, 16]), np.array([512, 8192])
    np.testing.assert_allclose(by_batch["ttft_s"], prefill_time(LLAMA3_70B, H100, b, 2048, tp=8).seconds)
    np.testing.assert_allclose(by_batch["tpot_s"], decode_time(LLAMA3_70B, H100, b, 2048, tp=8).seconds)
    np.testing.assert_allclose(by_ctx["tpot_s"], decode_time(LLAMA3_70B, H100, 4, c, tp=8).seconds)
    np.testing.assert_allclose(by_ctx["ttft_s"], prefill_time(LLAMA3_70B, H100, 4, c, tp=8).seconds)


def test_parse_efficiency() -> None:
    assert parse_efficiency("") == {}
    assert parse_efficiency("matmul=0.7, attention = 0.5") == {"matmul": 0.7, "attention": 0.5}
    assert parse_efficiency('{"memory": 0.9, "dp_overlap": 0}') == {"memory": 0.9, "dp_overlap": 0.0}
    for bad in ("gemm=0.7", "matmul=1.5", "matmul", "matmul=0"):
        with pytest.raises(ValueError):
            parse_efficiency(bad)


# ---- LLMModelPanel -----------------------------------------------------------------------------------------------
def test_llm_panel_numbers_match_the_model() -> None:
    # GIVEN the default panel (Llama-3 70B on H100, TP8 PP4 DP8, SP, ZeRO-1, selective recompute)
    p = LLMModelPanel()
    st, mem = _direct(p)
    # THEN its numbers and sources are those of the model functions called directly
    assert p.kwargs["config"] is LLAMA3_70B and p.kwargs["parallel"] == Parallelism(
        tp=8, pp=4, dp=8, sp=True, zero=1, recompute="selective")
    n = p.numbers()
    assert n["step_s"] == pytest.approx(st.step_s, rel=1e-12) and n["mfu"] == pytest.approx(st.mfu, rel=1e-12)
    assert n["tokens_per_s"] == pytest.approx(st.tokens_per_s, rel=1e-12) and n["gpus"] == 256
    assert p.sources["step"].data["seconds"] == step_data(step_table(st))["seconds"]
    assert p.sources["memory"].data["top"][-1] == pytest.approx(mem.total / 1e9)
    assert p.sources["capacity"].data["gb"] == [80.0] and p.sources["capacity"].data["over"] == [False]
    assert not p.error


def test_llm_panel_slider_changes_re_evaluate() -> None:
    p = LLMModelPanel()
    before = list(p.sources["step"].data["seconds"])
    # WHEN the pipeline, ZeRO stage, recomputation, device and network change one at a time
    for ctrl, value in ((p.pp, 8), (p.zero, 3), (p.recompute, "full"), (p.vpp, 2), (p.device, "H200 SXM"),
                        (p.network, DGX_A100.name), (p.micro_batch, 2), (p.dp, 16), (p.tp, 4)):  # fmt: skip
        ctrl.value = value
        st, mem = _direct(p)
        # THEN every change is re-evaluated, equal to a direct call with the same inputs
        assert not p.error, (ctrl.description, p.error)
        assert p.sources["step"].data["seconds"] == pytest.approx(step_data(step_table(st))["seconds"], rel=1e-12)
        assert p.sources["memory"].data["gb"] == pytest.approx(memory_data(memory_table(mem))["gb"], rel=1e-12)
        assert p.numbers()["mfu"] == pytest.approx(st.mfu, rel=1e-12)
        assert np.isfinite(p.update_s)
    assert p.kwargs["parallel"] == Parallelism(tp=4, pp=8, dp=16, sp=True, vpp=2, micro_batch=2, zero=3,
                                               recompute="full")  # fmt: skip
    assert p.kwargs["device"].name == "H200 SXM" and p.kwargs["network"] is DGX_A100
    assert p.sources["capacity"].data["gb"] == [141.0]
    assert p.sources["step"].data["seconds"] != before


def test_llm_panel_preset_and_overrides() -> None:
    p = LLMModelPanel()
    # WHEN the preset changes, the override controls take its values and the model is the preset itself
    p.preset.value = "GPT-3 175B"
    assert p.kwargs["config"] is GPT3_175B and p.overrides["hidden"].value == 12288
    assert p.numbers()["params"] == GPT3_175B.num_params()
    # WHEN an override moves, the model is the preset with that field replaced
    p.overrides["layers"].value = 48
    assert p.kwargs["config"] == GPT3_175B.replace(layers=48)
    st, _ = _direct(p)
    assert p.numbers()["step_s"] == pytest.approx(st.step_s, rel=1e-12)
    p.overrides["seq"].value = 4096
    assert p.kwargs["config"] == GPT3_175B.replace(layers=48, seq=4096)
    # and the inference curves follow the model
    t = p.inference
    ctx = p.inference_context.value
    np.testing.assert_allclose(p.sources["batch"].data["tpot_ms"],
                               decode_time(p.kwargs["config"], H100, t[t["sweep"] == "batch"]["x"].to_numpy(), ctx,
                                           tp=p.inference_tp.value).seconds * 1e3)  # fmt: skip
    p.inference_batch.value = 32
    t = p.inference
    np.testing.assert_allclose(p.sources["context"].data["ttft_ms"],
                               prefill_time(p.kwargs["config"], H100, 32, t[t["sweep"] == "context"]["x"].to_numpy(),
                                            tp=p.inference_tp.value).seconds * 1e3)  # fmt: skip


def test_llm_panel_reproduces_a_documented_config() -> None:
    # GIVEN Korthikanti et al.'s 175B run with SP + selective recompute (docs/llm-model.md: 12.93 s, MFU 54.6%)
    p = LLMModelPanel(gpt_config(96, 12288, 96), device="A100 SXM4 80GB", global_batch=64, network=DGX_A100,
                      parallel=Parallelism(tp=8, pp=8, sp=True, recompute="selective"), dtype="fp16", flash=False)
    n = p.numbers()
    assert n["step_s"] == pytest.approx(12.93, abs=0.005) and n["mfu"] == pytest.approx(0.546, abs=0.0005)
    # WHEN flash attention is switched on, the score matrix traffic goes and the step is shorter
    p.flash.value = True
    assert p.numbers()["step_s"] < n["step_s"] and not p.error


def test_llm_panel_efficiency_overrides() -> None:
    p = LLMModelPanel("Llama-3 8B", parallel=Parallelism(tp=1, dp=8, zero=1), global_batch=64)
    base = p.numbers()["step_s"]
    p.efficiency.value = "matmul=0.4"
    st = training_step(LLAMA3_8B, H100, Parallelism(tp=1, dp=8, zero=1), 64, efficiency={"matmul": 0.4})
    assert p.numbers()["step_s"] == pytest.approx(st.step_s, rel=1e-12) and st.step_s > base


def test_llm_panel_memory_over_capacity_turns_the_line_red() -> None:
    # GIVEN Llama-3 405B on TP8 PP4 DP8 (about 180 GB per GPU on an 80 GB H100)
    p = LLMModelPanel("Llama-3 405B")
    mem = training_memory(LLAMA3_405B, p.kwargs["parallel"], 1024)
    assert mem.total > 80e9
    cap = p.sources["capacity"].data
    assert cap["over"] == [True] and cap["color"] == [OVER_COLOR] and p.numbers()["over_capacity"]
    assert "OVER CAPACITY" in p.text()
    # WHEN the pipeline is deep enough and ZeRO-3 shards the states, it fits and the line is no longer red
    p.pp.value, p.zero.value, p.recompute.value = 16, 3, "full"
    cap = p.sources["capacity"].data
    assert cap["over"] == [False] and cap["color"] == [CAPACITY_COLOR] and not p.numbers()["over_capacity"]


def test_llm_panel_invalid_setting_keeps_the_last_result() -> None:
    p = LLMModelPanel()
    good = dict(p.sources["step"].data)
    p.global_batch.value = 1000  # a multiple of micro-batch x DP = 8
    assert not p.error
    p.global_batch.value = 1001
    assert "global_batch" in p.error and "ValueError" in p.summary.value
    p.device.value = "V100 SXM2"  # no bf16 peak (and the batch is still bad)
    assert p.error
    p.global_batch.value = 1024
    assert "bf16" in p.error
    p.dtype.value = "fp16"
    assert not p.error and p.kwargs["device"].name == "V100 SXM2"
    assert p.sources["step"].data["seconds"] != good["seconds"]


def test_llm_panel_text_fallback_and_custom_inputs() -> None:
    cfg = LLAMA3_8B.replace(layers=16, name="tiny llama")
    dev = H100.with_ceilings(name="my H100", bf16=700e12)
    p = LLMModelPanel(cfg, device=dev, parallel=Parallelism(dp=8), global_batch=64, efficiency={"matmul": 0.9})
    assert p.preset.value == "tiny llama" and p.device.value == "my H100" and p.efficiency.value == "matmul=0.9"
    st = training_step(cfg, dev, Parallelism(dp=8), 64, efficiency={"matmul": 0.9})
    assert p.numbers()["step_s"] == pytest.approx(st.step_s, rel=1e-12)
    bundle = p._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith("LLM model: tiny llama") and "MFU" in bundle["text/plain"]


# ---- ServingPanel --------------------------------------------------------------------------------------------------
N = 3000  # requests per point: small, the comparisons are exact (same seed)


def test_serving_panel_matches_sweep_knee_and_replicas() -> None:
    # GIVEN a panel with linear step times
    p = ServingPanel(10.0, step_time="linear", n_requests=N, replicas=1, slo_s=0.5)
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    eng = {"step_time": st, "max_batch": 64, "token_budget": 2048, "chunked_prefill": True, "max_new_tokens": 1024}
    prompts, outputs = Lengths.lognormal(512, 1.0), Lengths.geometric(128).capped(1024)
    # THEN its sweep, knee and replica count are those of the direct calls (outputs stop at max new tokens: 8 means
    # by default)
    sweep = serving_sweep(sweep_rates(10.0), prompts, outputs, n_requests=N, replicas=1, **eng)
    pd.testing.assert_frame_equal(p.sweep, sweep)
    assert p.knee == saturation_knee(sweep, "ttft_p99_s")
    assert p.sources["sweep"].data["ttft_p99_ms"] == pytest.approx(sweep_data(sweep)["ttft_p99_ms"], nan_ok=True)
    assert p.sources["knee"].data == knee_data(p.knee)
    plan = replicas_needed(10.0, 0.5, prompts, outputs, n_requests=N, **eng)
    assert p.replicas_for_slo() == plan.replicas
    # WHEN the replicas and the objective change
    p.replicas.value = 3
    sweep3 = serving_sweep(sweep_rates(10.0), prompts, outputs, n_requests=N, replicas=3, **eng)
    pd.testing.assert_frame_equal(p.sweep, sweep3)
    assert p.sources["sweep"].data["e2e_p99_ms"] == pytest.approx(sweep_data(sweep3)["e2e_p99_ms"])
    p.slo.value = 0.1
    assert p.sources["slo"].data["ms"] == [pytest.approx(100.0)]
    assert p.replicas_for_slo() == replicas_needed(10.0, 0.1, prompts, outputs, n_requests=N, **eng).replicas
    assert not p.error and np.isfinite(p.update_s)


def test_serving_panel_routing_is_the_simulations_routing() -> None:
    # GIVEN a panel of 4 replicas joining the shortest queue
    p = ServingPanel(30.0, step_time="linear", n_requests=N, replicas=4, slo_s=0.3, lengths="fixed")
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    eng = {"step_time": st, "max_batch": 64, "token_budget": 2048, "chunked_prefill": True}
    jsq = p.sweep
    for routing in ("central", "round_robin"):
        # WHEN the routing changes
        p.routing.value = routing
        # THEN the sweep and the replica search are the simulations with that routing
        sweep = serving_sweep(sweep_rates(30.0), 512, 128, n_requests=N, replicas=4, routing=routing, **eng)
        pd.testing.assert_frame_equal(p.sweep, sweep)
        assert not sweep.equals(jsq)
        plan = replicas_needed(30.0, 0.3, 512, 128, n_requests=N, routing=routing, **eng)
        assert p.replicas_for_slo() == plan.replicas
    assert p.engine()["routing"] == "round_robin" and not p.error


def test_serving_panel_model_step_times() -> None:
    p = ServingPanel(20.0, n_requests=N, lengths="fixed", model="Llama-3 8B", device="H100 SXM", tp=1)
    eng = {"step_time": model_step_time(LLAMA3_8B, H100, 1), "max_batch": 64, "token_budget": 2048,
           "chunked_prefill": True}  # fmt: skip
    sweep = serving_sweep(sweep_rates(20.0), 512, 128, n_requests=N, replicas=1, **eng)
    pd.testing.assert_frame_equal(p.sweep, sweep)
    # the step times are the model's
    pf = p.step_time().prefill_time_s(np.array([512.0]))
    np.testing.assert_allclose(pf, prefill_time(LLAMA3_8B, H100, 1, 512).seconds)
    # switching to linear coefficients and back changes the sweep, and hides the other boxes
    p.step_kind.value = "linear"
    assert p.model_box.layout.display == "none" and p.linear_box.layout.display == ""
    assert not p.sweep["ttft_p50_s"].equals(sweep["ttft_p50_s"])
    p.step_kind.value = "model"
    pd.testing.assert_frame_equal(p.sweep, sweep)


def test_kept_step_times_go_back_to_a_device_without_tabulating_the_model_again(monkeypatch) -> None:
    import aonkit.model.serving_steps as steps

    calls = []
    real = steps.decode_time

    def tabulate(*a, **k):  # a table (not request_seconds' one point, for the replica search's first guess)
        if np.size(a[2]) > 1:
            calls.append(a[1].name)
        return real(*a, **k)

    monkeypatch.setattr(steps, "decode_time", tabulate)
    # GIVEN a panel on H100s, switched to A100s
    p = ServingPanel(20.0, n_requests=N, lengths="fixed", model="Llama-3 8B", device="H100 SXM", tp=1)
    h100 = p.sweep
    p.device.value = "A100 SXM4 80GB"
    a100 = p.sweep
    assert calls == ["H100 SXM", "A100 SXM4 80GB"]  # one decode table per device
    # WHEN it goes back to the H100s
    p.device.value = "H100 SXM"
    # THEN the model is not tabulated again, and the sweep is the one it had
    assert calls == ["H100 SXM", "A100 SXM4 80GB"]
    pd.testing.assert_frame_equal(p.sweep, h100)
    p.device.value = "A100 SXM4 80GB"
    pd.testing.assert_frame_equal(p.sweep, a100)
    assert len(calls) == 2
    # AND only the last 8 (preset, device, TP) are kept: the oldest is tabulated again
    kept = ModelStepTimes(kept=2)
    first = kept(LLAMA3_8B, H100, 1)
    assert kept(LLAMA3_8B, H100, 1) is first and kept(LLAMA3_8B, H100, 2) is not first
    kept(LLAMA3_8B, H100, 4)
    assert kept(LLAMA3_8B, H100, 1) is not first


def test_serving_panel_bad_setting_and_text() -> None:
    p = ServingPanel(10.0, n_requests=N, step_time="linear", lengths="fixed")
    p.chunked.value = False
    good = p.sweep
    p.prompt.value = 4096  # a whole prompt larger than the 2048-token budget
    assert "token_budget" in p.error and p.sweep is good
    p.token_budget.value = 4096
    assert not p.error
    bundle = p._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith("serving: 1 replica(s) at 10 req/s") and "knee" in bundle["text/plain"]


# ---- what goes to the page -------------------------------------------------------------------------------------
def _patches(view) -> list[dict]:
    """Record the state updates the charts widget ``view`` sends from now on: per message, the sources whose
    columns differ from the previous message's (or from the state at the start)."""
    sent: list[dict] = []
    view._send = lambda msg, buffers=None: sent.append(msg)
    last = {"data": dict(view.data)}

    def decoded() -> list[dict]:
        out = []
        for msg in sent:
            assert msg["method"] == "update" and set(msg["state"]) == {"data"}, msg
            data = msg["state"]["data"]
            out.append({"changed": {k for k, v in data.items() if last["data"].get(k) != v}})
            last["data"] = data
        sent.clear()
        return out

    return decoded


def test_a_panel_update_reaches_the_page_as_one_message_per_view() -> None:
    from aonkit.widgets.charts import Charts

    # GIVEN the LLM panel (two canvas chart views: training, inference), sending nothing yet
    p = LLMModelPanel()
    assert all(isinstance(v, Charts) for v in p.views)
    got = [_patches(v) for v in p.views]
    # WHEN a control changes (a GPU with more memory: the step time and the capacity line change, not the memory)
    p.device.value = "H200 SXM"
    # THEN each view sends one message holding all its sources' new data
    training, inference = (g() for g in got)
    assert len(training) == 1 and len(inference) == 1
    assert training[0]["changed"] == {"step", "capacity"}
    assert inference[0]["changed"] == {"batch", "context", "kv_batch"}  # (more room: the KV cache mark moves)
    # AND outside a panel update, changes go out one message each
    p.device.value = "H100 SXM"
    got[0]()
    p.sources["step"].data = {**p.sources["step"].data, "seconds": [1.0] * len(p.sources["step"].data["seconds"])}
    p.sources["memory"].data = {**p.sources["memory"].data, "gb": [1.0] * len(p.sources["memory"].data["gb"])}
    assert [m["changed"] for m in got[0]()] == [{"step"}, {"memory"}]


def test_serving_panel_update_is_one_message_and_an_error_sends_nothing() -> None:
    p = ServingPanel(10.0, step_time="linear", n_requests=2000, replicas=1, lengths="fixed")
    got = _patches(p.view)
    p.max_batch.value = 32
    (patch,) = got()
    assert patch["changed"] == {"sweep", "knee"}  # the rate and objective markers stay where they were
    # WHEN a setting cannot be simulated (a prompt beyond the token budget without chunking)
    p.chunked.value = False
    assert not p.error and len(got()) == 1
    p.prompt.value = 4096
    # THEN the figures keep the last valid answer: nothing is sent for it
    assert "exceeds token_budget" in p.error and got() == []


def test_serving_panel_reruns_only_the_parts_a_change_needs_and_agrees_with_a_fresh_panel() -> None:
    # GIVEN a panel
    kw = {"step_time": "linear", "n_requests": 2000, "lengths": "fixed"}
    p = ServingPanel(10.0, replicas=1, slo_s=0.5, **kw)
    got = _patches(p.view)
    sweep, plan = p.sweep, p.plan
    # WHEN only the objective changes: the sweep is kept, the replica search runs, only the objective line moves
    p.slo.value = 0.05
    assert p.sweep is sweep and p.plan is not plan
    (patch,) = got()
    assert patch["changed"] == {"slo"}
    # WHEN only the replica count changes: the sweep runs, the replica search (its own counts) is kept
    plan = p.plan
    p.replicas.value = 2
    assert p.sweep is not sweep and p.plan is plan
    # WHEN controls change in turn, one of them to a setting that cannot be simulated and back
    steps = [("rate", 14.0), ("max_batch", 16), ("chunked", False), ("prompt", 4096), ("token_budget", 8192),
             ("slo", 0.2), ("cv", 2.0), ("replicas", 3), ("output", 64), ("slo", 0.3)]  # fmt: skip
    for name, value in steps:
        getattr(p, name).value = value
        assert bool(p.error) == (name == "prompt"), name  # a whole 4096-token prompt over a 2048-token budget
    assert not p.error
    # THEN every number equals a panel built with the final values
    fresh = ServingPanel(14.0, replicas=3, slo_s=0.3, cv=2.0, max_batch=16, token_budget=8192, prompt_tokens=4096,
                         output_tokens=64, chunked_prefill=False, **kw)  # fmt: skip
    pd.testing.assert_frame_equal(p.sweep, fresh.sweep)
    assert p.knee == fresh.knee and p.replicas_for_slo() == fresh.replicas_for_slo()
    # the search started elsewhere (the last answer, scaled): the counts both tried gave the same rows
    a, b = (x.plan.tried.set_index("replicas") for x in (p, fresh))
    shared = a.index.intersection(b.index)
    assert p.plan.replicas in shared and p.plan.replicas - 1 in shared
    pd.testing.assert_frame_equal(a.loc[shared], b.loc[shared])
    assert p.text() == fresh.text()
    assert p.sources["sweep"].data["ttft_p99_ms"] == pytest.approx(fresh.sources["sweep"].data["ttft_p99_ms"])


def test_serving_panel_simulates_changes_that_arrive_together_once_and_a_read_applies_a_waiting_one() -> None:
    import asyncio

    p = ServingPanel(10.0, step_time="linear", n_requests=2000, lengths="fixed")
    assert all(c.continuous_update for c in (p.rate, p.slo, p.replicas, p.max_batch))  # live while dragged
    on_release = ServingPanel(10.0, step_time="linear", n_requests=500, lengths="fixed", live=False)
    assert not any(c.continuous_update for c in (on_release.rate, on_release.slo, on_release.cv, on_release.output))

    async def in_a_kernel() -> None:  # a running loop, as in an IPython kernel
        n0 = p.updates
        # WHEN a dragged slider's values arrive together (the kernel was busy meanwhile)
        for rate in (11.0, 12.0, 13.0, 14.0):
            p.rate.value = rate
        assert p.updates == n0 and p._sweep["arrival_rate_per_s"].max() == sweep_rates(10.0).max()  # none run yet
        await asyncio.sleep(0.1)
        # THEN one update ran, with the last value
        assert p.updates == n0 + 1 and p._sweep["arrival_rate_per_s"].max() == sweep_rates(14.0).max()
        # WHEN a change waits and a result is read at once (a notebook cell that sets and reads)
        p.slo.value = 0.05
        assert p.updates == n0 + 1
        direct = replicas_needed(14.0, 0.05, 512, 128, n_requests=2000, step_time=p.step_time(), max_batch=64,
                                 token_budget=2048, chunked_prefill=True)  # fmt: skip
        # THEN the read simulates it first, and it is not simulated again
        assert p.replicas_for_slo() == direct.replicas and p.updates == n0 + 2
        await asyncio.sleep(0.1)
        assert p.updates == n0 + 2

    asyncio.run(in_a_kernel())


def test_latest_joins_requests_to_the_scheduled_call_without_postponing_it_and_answers_the_last() -> None:
    import asyncio

    from aonkit.widgets._loop import Latest

    seen: list[int] = []
    value = [0]
    latest = Latest(lambda: seen.append(value[0]), 0.005)

    async def bursts() -> None:
        for burst in range(4):  # requests that arrive together (a kernel busy meanwhile): one call, the last value
            for k in range(3):
                value[0] = 10 * burst + k
                latest()
            await asyncio.sleep(0.03)
        # a request while a call is scheduled joins it and does not move it (a debounce would: a steady stream
        # of requests would then be answered only when it stops)
        latest()
        when = latest._handle.when()
        await asyncio.sleep(0)
        value[0] = 99
        latest()
        assert latest._handle.when() == when
        await asyncio.sleep(0.03)

    asyncio.run(bursts())
    assert seen == [2, 12, 22, 32, 99] and not latest.pending
    latest()  # without a running loop: at once
    assert seen == [2, 12, 22, 32, 99, 99]


def test_a_choice_is_simulated_as_soon_as_the_loop_is_free_and_a_slider_waits_for_its_company() -> None:
    import asyncio

    from aonkit.widgets.serving import COALESCE_S

    p = ServingPanel(10.0, step_time="linear", n_requests=500, lengths="fixed")

    async def in_a_kernel() -> None:
        loop = asyncio.get_running_loop()
        # WHEN a dropdown-like choice arrives (the routing toggles): its call is due now, not COALESCE_S later
        p.routing.value = "central"
        assert p._request.pending and p._request._handle.when() <= loop.time() + COALESCE_S / 5
        await asyncio.sleep(0.05)
        assert not p._request.pending and p.sweep is not None and p.engine()["routing"] == "central"
        # WHEN a slider's value arrives: its call waits COALESCE_S for the values of the same drag
        before = loop.time()
        p.rate.value = 12.0
        assert p._request._handle.when() >= before + COALESCE_S
        # AND a choice meanwhile joins that call, without moving it
        when = p._request._handle.when()
        p.lengths.value = "random"
        assert p._request._handle.when() == when
        n = p.updates
        await asyncio.sleep(0.1)
        assert p.updates == n + 1

    asyncio.run(in_a_kernel())


def test_in_a_real_kernel_a_cells_changes_wait_and_a_read_simulates_them_first() -> None:
    from tests.kernel_run import run_cells, text_of

    out = run_cells(
        "from aonkit.widgets import ServingPanel\n"
        "p = ServingPanel(10.0, step_time='linear', n_requests=2000, lengths='fixed')\n"
        "n0 = p.updates\n"
        "for r in (11.0, 12.0, 13.0):\n"
        "    p.rate.value = r\n"
        "print('waiting', p.updates - n0)\n"
        "print('read', sorted({11.0, 12.0, 13.0} & set(p.sweep['arrival_rate_per_s'])), p.updates - n0)\n",
        "p.cv.value = 2.0\n",  # left waiting at the end of the cell
        "import time\ntime.sleep(0.2)\n",
        "print('later', p.updates - n0, p.numbers() == ServingPanel(13.0, cv=2.0, step_time='linear', "
        "n_requests=2000, lengths='fixed').numbers())\n",
    )  # fmt: skip
    assert "waiting 0\nread [13.0] 1\n" in text_of(out[0])  # one update, for the last of the three values
    assert "later 2 True" in text_of(out[3])  # the waiting change ran between cells, once


def test_the_sweep_takes_the_row_the_replica_search_shares_instead_of_simulating_it_twice(monkeypatch) -> None:
    import aonkit.model.serving as sv

    kernel, runs = sv._kernel, []
    monkeypatch.setattr(sv, "_kernel", lambda run, arr, out: runs.append(run.replicas) or kernel(run, arr, out))
    kw = {"step_time": "linear", "n_requests": 2000, "lengths": "fixed"}
    p = ServingPanel(4.0, replicas=1, slo_s=5.0, **kw)  # one replica meets the objective: the search tries only it
    for value in (16, 32):  # a change both parts need; the search starts at the last answer, the panel's count
        runs.clear()
        p.max_batch.value = value
        assert p.plan.tried["replicas"].tolist() == [1]
        assert len(runs) == len(p.rates())  # the chosen rate's row simulated once, by the search
        fresh = ServingPanel(4.0, replicas=1, slo_s=5.0, max_batch=value, **kw)
        pd.testing.assert_frame_equal(p.sweep, fresh.sweep)
        pd.testing.assert_frame_equal(p.sweep, serving_sweep(p.rates(), 512, 128, n_requests=2000, replicas=1,
                                                             **p.engine()))  # fmt: skip
    runs.clear()
    p.replicas.value = 2  # the search keeps its rows: the sweep simulates every rate
    assert len(runs) == len(p.rates()) and set(runs) == {2}
    runs.clear()
    p.max_batch.value = 48  # the search starts at 1, the panel has 2: nothing to share
    assert len(runs) == len(p.rates()) + 1 and sorted(runs) == [1] + [2] * len(p.rates())
    runs.clear()
    p.max_batch.value = 64  # the first setting again (with 2 replicas): its search is kept, the sweep is not
    assert len(runs) == len(p.rates()) and set(runs) == {2} and p.plan.tried["replicas"].tolist() == [1]
