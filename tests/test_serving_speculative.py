"""Speculative decoding in the serving simulation (aonkit.model.serving_spec, the kernel's ``cs`` and ``dq``).

The iterations are checked against a draw-by-draw reference on the same uniforms; the kernel's closed forms (runs
ahead, lazy replicas, wakes) against its own event loop with a context that grows by a fraction of tokens a step;
acceptance 0 against plain decoding to the bit; one request's times by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

from aonkit._kernels.serving import LAZY_REPLICAS, simulate
from aonkit.model import ArrivalProcess, Lengths, StepTime, serving_sweep, simulate_serving
from aonkit.model.serving import kernel_output, prepare, summarize
from aonkit.model.serving_spec import Speculation, draw_iterations, speculative_step_time, tokens_per_step

from .test_serving import assert_same_run

ST = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))


def _reference_iterations(left: np.ndarray, u: np.ndarray, a: float, k: int) -> np.ndarray:
    """Draw by draw: an iteration accepts drafted tokens while ``u' < a**j`` holds for the next j, then adds one."""
    out, at = [], 0
    for rest in left:
        it = 0
        while rest > 0:
            v = 1.0 - u[at]
            at += 1
            accepted = 0
            while accepted < k and v <= a ** (accepted + 1):  # P(at least j accepted) = a**j
                accepted += 1
            rest -= accepted + 1
            it += 1
        out.append(it)
    return np.array(out)


@pytest.mark.parametrize(("a", "k"), [(0.3, 1), (0.7, 4), (0.95, 8)])
def test_iterations_are_those_drawn_one_by_one(a: float, k: int) -> None:
    from aonkit._kernels.serving_spec import draw_iterations as kernel

    rng = np.random.default_rng(k)
    left = np.concatenate([[0, 1, 2], rng.integers(0, 300, 400)]).astype(np.int64)
    u = rng.random(int(left.sum()) + 10)
    want = _reference_iterations(left, u, a, k)
    # WHEN the kernel gets the uniforms in pieces of 37 (it stops where they run out and goes on)
    steps, pos, at = np.zeros(left.size, np.int64), np.array([0, -1, 0], np.int64), 0
    while pos[0] < left.size:
        at += kernel(left, u[at:at + 37], np.array([a**j for j in range(k + 1)]), steps, pos)
    # THEN each request's iterations are the reference's, and so is the number of uniforms used
    np.testing.assert_array_equal(steps, want)
    assert at == int(want.sum())


def test_iterations_average_what_an_iteration_yields() -> None:
    spec = Speculation(4, 0.7)
    out = np.full(20_000, 1001)
    it = draw_iterations(spec, out, np.random.default_rng(0))
    # each iteration yields E tokens but the last, cut: 1000 tokens take about 1000 / E + 1/2 iterations
    assert it.mean() == pytest.approx(1000 / spec.tokens_per_iteration + 0.5, rel=0.01)
    assert np.all((it >= 1000 // 5) & (it <= 1000))
    assert tokens_per_step(out, it) == pytest.approx(1000 / it.mean(), rel=1e-12)
    np.testing.assert_array_equal(draw_iterations(Speculation(3, 0.0), out[:5], None), out[:5] - 1)
    np.testing.assert_array_equal(draw_iterations(Speculation(3, 1.0), np.array([1, 2, 5, 6, 9]), None),
                                  [0, 1, 1, 2, 2])  # fmt: skip


def test_acceptance_zero_is_plain_decoding_to_the_bit() -> None:
    # GIVEN one token an iteration: the speculative run is the plain one (same draws: the iterations have their own)
    work = (ArrivalProcess(30.0), Lengths.lognormal(300, 1.0), Lengths.geometric(60))
    for routing, replicas in (("jsq", 2), ("central", 8), ("round_robin", 5)):
        kw = {"step_time": ST, "n_requests": 3000, "replicas": replicas, "max_batch": 16, "routing": routing,
              "seed": 3}  # fmt: skip
        plain = simulate_serving(*work, **kw)
        spec = simulate_serving(*work, **kw, speculative=Speculation(3, 0.0))
        # THEN every time is the same, and every replica's count
        assert spec.requests.equals(plain.requests) and spec.summary == plain.summary
        assert spec.replicas.equals(plain.replicas)
    # AND chunked, a decoding sequence takes k + 1 tokens of a step's budget: prompts get less of it, later
    kw = {"step_time": ST, "n_requests": 3000, "max_batch": 16, "chunked_prefill": True, "token_budget": 96,
          "seed": 3}  # fmt: skip
    work = (ArrivalProcess(10.0), *work[1:])
    plain = simulate_serving(*work, **kw)
    spec = simulate_serving(*work, **kw, speculative=Speculation(1, 0.0))
    assert spec.summary["ttft_p50_s"] > 1.2 * plain.summary["ttft_p50_s"]  # (0.178 s against 0.132)


def test_closed_forms_are_the_event_loop_with_a_fractional_context_per_step() -> None:
    # GIVEN random engines and loads with speculative decoding (context growing by a fraction of tokens a step),
    # every routing, lazy replicas too, chunked prompts that share their budget with k + 1 tokens a sequence
    lazy = 0
    for seed in range(18):
        rng = np.random.default_rng(100 + seed)
        routing = ("jsq", "round_robin", "central")[seed % 3]
        chunked, mb, k = bool(seed % 2), int(rng.integers(1, 9)), int(rng.integers(1, 6))
        replicas = int(rng.integers(1, 4)) if seed % 4 else int(rng.integers(LAZY_REPLICAS, 17))
        run = prepare(ArrivalProcess(float(rng.uniform(0.5, 40)), float(rng.uniform(0, 3))),
                      Lengths.lognormal(200, 1.0) if chunked else Lengths.uniform(1, 300),
                      Lengths.geometric(float(rng.uniform(2, 200))), step_time=ST, n_requests=1500,
                      replicas=replicas, max_batch=mb, chunked_prefill=chunked, routing=routing,
                      token_budget=int(rng.integers(mb * (k + 1), 900)) if chunked else None, seed=seed,
                      speculative=Speculation(k, float(rng.uniform(0.2, 0.95))))  # fmt: skip
        assert run.spec[0] > 1 and run.spec[1] == k + 1
        args = (run.arrivals[run.order], run.prompt[run.order], kernel_output(run)[run.order], *run.kernel_args)
        # WHEN decode-only steps run in closed form (ahead, lazily) and when every step is an event
        ahead, plain = simulate(*args, True, *run.spec), simulate(*args, False, *run.spec)
        # THEN every count is the same, and every time up to rounding
        assert_same_run(ahead, plain, 1e-12)
        lazy += int(replicas >= LAZY_REPLICAS)
    assert lazy >= 4


def test_one_request_by_hand() -> None:
    # GIVEN one request of 100 prompt tokens and 21 output tokens, every drafted token accepted, k = 4: its first
    # token from the prefill, then 20 tokens in 4 iterations of 5; decode steps 10 ms + 1 ms a sequence + 2 us a
    # token of context, which grows by 5 tokens an iteration
    st = StepTime(prefill_time_s=(0.05, 0.0), decode_time_s=(0.010, 0.001, 2e-6), overhead_s=0.0)
    res = simulate_serving([0.0], 100, 21, step_time=st, max_batch=4, speculative=Speculation(4, 1.0))
    r = res.requests.iloc[0]
    steps = [0.010 + 0.001 + 2e-6 * (100 + 5 * m) for m in range(1, 5)]
    assert r["first_token_s"] == pytest.approx(0.05, abs=1e-12)
    assert r["finish_s"] == pytest.approx(0.05 + sum(steps), rel=1e-12)
    # TPOT counts the request's tokens, not its iterations
    assert r["tpot_s"] == pytest.approx(sum(steps) / 20, rel=1e-12)
    assert res.replicas["steps"].tolist() == [5]  # a prefill step and 4 iterations
    assert res.replicas["decode_tokens"].tolist() == [20]  # and the tokens they gave


def test_the_engine_must_be_one_this_models() -> None:
    spec = Speculation(4, 0.7)
    kw = {"step_time": ST, "n_requests": 10, "seed": 0, "speculative": spec, "max_batch": 8}
    with pytest.raises(ValueError, match="that reserves needs max_new_tokens"):
        simulate_serving(ArrivalProcess(1.0), 100, 50, kv_tokens=1000, **kw)
    # (a paged cache needs no max_new_tokens: it holds what contexts grow to, tests/test_serving_spec_paged.py)
    assert simulate_serving(ArrivalProcess(1.0), 100, 50, kv_tokens=1000, kv_policy="paged", **kw).summary[
        "rejected"] == 0  # fmt: skip
    with pytest.raises(ValueError, match=r"\(k \+ 1\) \* max_batch \(40\)"):
        simulate_serving(ArrivalProcess(1.0), 100, 50, chunked_prefill=True, token_budget=32, **kw)
    for bad in ({"k": 0}, {"acceptance": 1.5}):
        with pytest.raises(ValueError, match="Speculation"):
            Speculation(**bad)
    # a KV limit with max_new_tokens reserves prompt plus max_new_tokens, as without speculation
    res = simulate_serving(ArrivalProcess(1.0), 100, 50, kv_tokens=1000, max_new_tokens=64, **kw)
    assert res.summary["requests"] == 10 and res.summary["rejected"] == 0


def test_sweeps_and_searches_take_it_and_a_draft_pays_at_low_load() -> None:
    from aonkit.model import device_spec, replicas_needed
    from aonkit.model.llm import LLAMA3_8B, LLAMA32_1B
    from aonkit.model.serving_steps import model_step_time

    # GIVEN Llama-3 8B on an H100 plainly and with a Llama-3.2 1B draft (k = 4, acceptance 0.7)
    h100 = device_spec("H100 SXM")
    plain = {"step_time": model_step_time(LLAMA3_8B, h100), "max_batch": 64}
    spec = {"step_time": speculative_step_time(LLAMA3_8B, h100, k=4, draft=LLAMA32_1B), "max_batch": 64,
            "speculative": Speculation(4, 0.7)}  # fmt: skip
    work = {"n_requests": 3000, "seed": 1, "warmup": 0.1}
    rows = {name: serving_sweep([1.0, 40.0], 512, Lengths.geometric(256), **work, **kw)
            for name, kw in (("plain", plain), ("spec", spec))}  # fmt: skip
    # THEN at 1 request/s speculation cuts TPOT by more than a third, and the summaries are summarize's
    assert rows["spec"]["tpot_mean_s"][0] < 0.66 * rows["plain"]["tpot_mean_s"][0]
    run = prepare(ArrivalProcess(1.0), 512, Lengths.geometric(256), **work, **spec)
    assert summarize([run])[0]["tpot_mean_s"] == rows["spec"]["tpot_mean_s"][0]
    # AND the replica search runs it: fewer replicas for a p99 TPOT of 8 ms at 40 requests/s than plainly
    need = {name: replicas_needed(40.0, 0.008, 512, Lengths.geometric(256), metric="tpot_p99_s", **work, **kw)
            for name, kw in (("plain", plain), ("spec", spec))}  # fmt: skip
    assert need["spec"].replicas < need["plain"].replicas  # (3 against 5)
    tried = need["spec"].tried.set_index("replicas")["tpot_p99_s"]
    assert tried[need["spec"].replicas] <= 0.008 < tried[need["spec"].replicas - 1]


def test_the_serving_panel_simulates_the_draft_it_is_given() -> None:
    import pandas as pd

    from aonkit.model import device_spec, replicas_needed
    from aonkit.model.llm import LLAMA3_8B, LLAMA32_1B
    from aonkit.model.serving_spec import speculative_memory
    from aonkit.widgets import ServingPanel

    # GIVEN the serving panel on Llama-3 8B and one H100, plainly and with a Llama-3.2 1B draft of 3 tokens
    kw = {"n_requests": 2000, "lengths": "fixed", "slo_s": 0.2}
    plain = ServingPanel(20.0, **kw)
    p = ServingPanel(20.0, **kw, draft="Llama-3.2 1B", draft_tokens=3, acceptance=0.8)
    h100 = device_spec("H100 SXM")
    eng = p.engine()
    # THEN its engine is the speculative one: an iteration's step times, the draft's memory, its acceptance
    assert eng["speculative"] == Speculation(3, 0.8) and not p.error
    assert eng["kv_tokens"] == speculative_memory(LLAMA3_8B, LLAMA32_1B, h100).kv_tokens
    b, c = np.array([[1.0], [16.0]]), np.array([[600.0, 9000.0]])
    want = speculative_step_time(LLAMA3_8B, h100, k=3, draft=LLAMA32_1B).decode_time_s(b, c)
    np.testing.assert_allclose(eng["step_time"].decode_time_s(b, c), want, rtol=1e-12)
    # AND its sweep and replica count are the model's with them; TPOT falls against plain decoding
    pd.testing.assert_frame_equal(p.sweep, serving_sweep(p.rates(), 512, 128, n_requests=2000, replicas=1, **eng))
    assert p.replicas_for_slo() == replicas_needed(20.0, 0.2, 512, 128, n_requests=2000, **eng).replicas
    assert p.numbers()["tpot_p50_s"] < 0.8 * plain.numbers()["tpot_p50_s"]
    assert "the Llama-3.2 1B draft proposes 3 tokens a step" in p.summary.value
    # WHEN the draft goes, THEN the panel is the plain one again
    p.draft.value = "off"
    pd.testing.assert_frame_equal(p.sweep, plain.sweep)
    # AND a paged cache with a draft is simulated (the cache grows by the tokens an iteration gives); linear step
    # times take no draft
    p.draft.value, p.kv_policy.value = "no-cost draft", "paged"
    assert not p.error and p.engine()["kv_policy"] == "paged" and p.engine()["speculative"] == Speculation(3, 0.8)
    pd.testing.assert_frame_equal(p.sweep, serving_sweep(p.rates(), 512, 128, n_requests=2000, replicas=1,
                                                         **p.engine()))  # fmt: skip
    p.kv_policy.value, p.step_kind.value = "reserve", "linear"
    assert p.engine()["speculative"] is None and not p.error


@pytest.mark.parametrize("case", range(4))
def test_no_replica_count_goes_below_the_speculative_requests_served_alone(case: int) -> None:
    from aonkit.model.serving import rerun
    from aonkit.model.serving_floor import alone

    # GIVEN random speculative engines (chunked or whole prompts, each routing, a reserving KV cache or none)
    rng = np.random.default_rng(40 + case)
    k = int(rng.integers(1, 6))
    engine = {"step_time": ST, "max_batch": int(rng.integers(2, 32)), "token_budget": 4096,
              "chunked_prefill": bool(case % 2), "routing": ("jsq", "round_robin", "central")[case % 3],
              "kv_tokens": [None, 20000][case // 2], "max_new_tokens": 1024,
              "speculative": Speculation(k, float(rng.uniform(0.3, 0.9)))}  # fmt: skip
    base = prepare(ArrivalProcess(float(rng.uniform(5, 40)), 1.5), Lengths.lognormal(500, 1.0).capped(3000),
                   Lengths.geometric(60).capped(1024), n_requests=1500, seed=case, warmup=0.1, **engine)
    floor = alone(base)
    keys = [f"{m}_{s}_s" for m in ("queue", "ttft", "tpot", "e2e") for s in ("mean", "p50", "p90", "p99")]
    # THEN every latency key at every count is at least the floor's: the searches may stop on it
    for row in summarize([rerun(base, replicas=c) for c in (1, 2, 4, 8)], 2):
        assert all(row[key] >= floor[key] - 1e-6 for key in keys), [key for key in keys if row[key] < floor[key]]


def _exact(arr, prompt, output, a: float, k: int, st: StepTime, max_batch: int, rng) -> tuple[np.ndarray, ...]:
    """One replica serving whole prompts first, no KV limit, step by step: each sequence's tokens an iteration drawn
    (accepted drafts, then the target's own, cut at its output) and its context its own prompt and tokens so far."""
    (pa, pb), (da, db, dc) = st.prefill_time_s, st.decode_time_s
    n = len(arr)
    first, fin = np.full(n, np.nan), np.full(n, np.nan)
    t, i, waiting, running = 0.0, 0, [], {}
    while i < n or waiting or running:
        while i < n and arr[i] <= t:
            waiting.append(i)
            i += 1
        if not waiting and not running:
            t = arr[i]
            continue
        taken = []
        while waiting and len(running) + len(taken) < max_batch:
            taken.append(waiting.pop(0))
        if taken:  # a prefill step: first tokens at its end
            t += pa + pb * sum(prompt[j] for j in taken)
            for j in taken:
                first[j] = t
                if output[j] == 1:
                    fin[j] = t
                else:
                    running[j] = 1
            continue
        t += da + db * len(running) + dc * sum(prompt[j] + running[j] for j in running)
        for j in list(running):
            g = 1
            while g <= k and rng.random() < a:
                g += 1
            running[j] = min(running[j] + g, output[j])
            if running[j] == output[j]:
                fin[j] = t
                del running[j]
    return first, fin


def exact_workload(rate: float) -> tuple:
    """3,000 Poisson arrivals at ``rate``, prompts of 50-799 tokens, geometric outputs of mean 120 capped at 600,
    step times growing with context; and which requests have more than one output token."""
    rng = np.random.default_rng(7)
    arr = np.cumsum(rng.exponential(1 / rate, 3000))
    prompt, output = rng.integers(50, 800, 3000), rng.geometric(1 / 120, 3000).clip(1, 600)
    st = StepTime(prefill_time_s=(0.02, 2e-5), decode_time_s=(0.012, 2e-4, 4e-7))
    return arr, prompt, output, st, output > 1


def test_the_runs_mean_context_growth_matches_each_sequences_own_within_sampling_error() -> None:
    # GIVEN 3,000 requests on one replica and step times that grow with the context, simulated by the kernel (the
    # context of every sequence grows by the run's mean tokens an iteration) and by an exact step-by-step model
    # (each sequence's context grows by its own draws), three seeds each
    arr, prompt, output, st, many = exact_workload(6.0)
    for a, k in ((0.6, 3), (0.8, 5)):
        sim, exact = [], []
        for seed in range(3):
            r = simulate_serving(arr, prompt, output, step_time=st, max_batch=32, seed=seed,
                                 speculative=Speculation(k, a)).requests  # fmt: skip
            sim.append((r.tpot_s[many].mean(), r.ttft_s.mean(), r.e2e_s.mean()))
            first, fin = _exact(arr, prompt, output, a, k, st, 32, np.random.default_rng(100 + seed))
            exact.append((((fin - first)[many] / (output[many] - 1)).mean(), (first - arr).mean(), (fin - arr).mean()))
        # THEN mean TPOT, TTFT and end-to-end agree within 1% (measured: 0.15% at most; seeds spread 0.2-0.4%)
        np.testing.assert_allclose(np.mean(sim, axis=0), np.mean(exact, axis=0), rtol=0.01)


def test_random_serving_panel_changes_with_drafts_give_an_answer_or_a_reason() -> None:
    from aonkit.widgets import ServingPanel

    from .panel_changes import random_changes

    # GIVEN a small serving panel with a draft and 60 changes of random controls, the draft's among them
    p = ServingPanel(8.0, n_requests=400, max_replicas=8, draft="Llama-3.2 1B")
    values = {"rate": [0.5, 8.0, 200.0], "prompt": [1, 512, 4096], "output": [1, 128, 2048], "max_new": [64, 4096],
              "max_batch": [1, 64, 256], "token_budget": [512, 8192], "chunked": [True, False],
              "kv_policy": ["reserve", "reserve", "paged"], "draft": ["off", "no-cost draft", "Llama-3.2 1B",
                                                                        "Llama-3 8B"],
              "draft_k": [1, 8], "acceptance": [0.0, 0.7, 1.0], "model": ["Llama-3 8B", "Llama-3.2 1B", "Llama-3 70B"],
              "device": ["H100 SXM", "A100 SXM4 80GB", "L4", "MI300X"], "tp": [1, 2, 8], "dtype": ["bf16", "fp8"],
              "step_kind": ["model", "model", "linear"]}  # fmt: skip
    answered = refused = speculative = 0
    for _ in random_changes(p, values, seed=12):  # (a draw that meets each refusal of speculation, answers often)
        # THEN each is answered, or refused with a reason while the last answer stays
        if p.error:
            refused += 1
            assert p.error.startswith("ValueError: ") and "cannot simulate" in p.summary.value
        else:
            answered += 1
            speculative += p.speculation() is not None
            assert len(p.sweep) >= 7 and np.isfinite(p.sweep["throughput_per_s"]).all()
    assert answered >= 5 and refused >= 5 and speculative >= 5  # (34, 26 and 18 with this draw)


# ---- a speculative decode pool (disaggregated serving) ------------------------------------------------------------
def _same(a: dict, b: dict) -> list[str]:
    return [key for key, v in a.items() if not (b[key] == v or (np.isnan(b[key]) and np.isnan(v)))]


@pytest.mark.parametrize("case", range(6))
def test_a_speculative_decode_pool_gives_the_same_summary_both_ways(case: int) -> None:
    from aonkit.model import Pool, simulate_disaggregated
    from aonkit.model.serving_pools import prepare_pools, summarize_pools

    # GIVEN random deployments whose decode pool drafts (KV limits with max_new_tokens, every routing), arrivals from
    # a process or recorded in no order with ties
    rng = np.random.default_rng(60 + case)
    spec = Speculation(int(rng.integers(1, 6)), float(rng.uniform(0.3, 0.9)))
    prefill = Pool(int(rng.integers(1, 3)), ST, 16, 4096, bool(case % 2), ("jsq", "round_robin", "central")[case % 3])
    decode = Pool(int(rng.integers(1, 5)), ST, int(rng.integers(2, 48)), routing=("central", "jsq")[case % 2],
                  kv_tokens=[None, 30000][case % 2], speculative=spec)  # fmt: skip
    kw = {"prefill": prefill, "decode": decode, "transfer_s": (0.002, 1e-6), "seed": case, "warmup": 0.1,
          "max_new_tokens": 512}  # fmt: skip
    if case < 3:
        arrivals, prompt, output = ArrivalProcess(float(rng.uniform(3, 30))), Lengths.lognormal(600, 1.0).capped(
            2000), Lengths.geometric(64).capped(512)  # fmt: skip
        kw["n_requests"] = 1500
    else:
        arrivals = np.round(rng.uniform(0, 60, 900), 1)
        prompt, output = rng.integers(1, 2000, arrivals.size), rng.integers(1, 512, arrivals.size)
    ref = simulate_disaggregated(arrivals, prompt, output, **kw)
    got = summarize_pools([prepare_pools(arrivals, prompt, output, **kw)])[0]
    # THEN the summary without tables is the tables' to the last bit (the same iterations reach the same requests)
    assert _same(ref.summary, got) == []
    # AND acceptance 0 is the plain decode pool, to the bit
    plain = dict(kw, decode=Pool(decode.replicas, ST, decode.max_batch, routing=decode.routing,
                                 kv_tokens=decode.kv_tokens))  # fmt: skip
    zero = dict(kw, decode=Pool(decode.replicas, ST, decode.max_batch, routing=decode.routing,
                                kv_tokens=decode.kv_tokens, speculative=Speculation(spec.k, 0.0)))  # fmt: skip
    assert _same(simulate_disaggregated(arrivals, prompt, output, **plain).summary,
                 simulate_disaggregated(arrivals, prompt, output, **zero).summary) == []  # fmt: skip


def test_a_draft_in_the_decode_pool_shortens_tpot_and_a_prefill_pool_takes_none() -> None:
    from aonkit.model import Pool, pools_needed, simulate_disaggregated

    kw = {"transfer_s": (0.001, 0.0), "n_requests": 2000, "seed": 2, "warmup": 0.1}
    prefill = Pool(1, ST, 16, 4096)
    plain = simulate_disaggregated(ArrivalProcess(4.0), 500, 200, prefill=prefill, decode=Pool(1, ST, 32), **kw)
    spec = simulate_disaggregated(ArrivalProcess(4.0), 500, 200, prefill=prefill,
                                  decode=Pool(1, ST, 32, speculative=Speculation(4, 0.8)), **kw)  # fmt: skip
    assert spec.summary["tpot_p50_s"] < 0.5 * plain.summary["tpot_p50_s"]  # (the same step times: E = 3.4)
    assert spec.summary["ttft_p50_s"] == plain.summary["ttft_p50_s"]  # (the prefill pool is the same)
    with pytest.raises(ValueError, match="prefill pool does not decode"):
        simulate_disaggregated(ArrivalProcess(4.0), 500, 200, prefill=Pool(1, ST, 16, 4096, speculative=Speculation()),
                               decode=Pool(1, ST, 32), **kw)  # fmt: skip
    with pytest.raises(ValueError, match="speculative must be a Speculation"):
        Pool(1, ST, 32, speculative=(4, 0.7))
    # the pool search takes it: a drafting decode pool needs fewer replicas for the TPOT objective
    need = {name: pools_needed(20.0, 500, 200, prefill=prefill, decode=pool, ttft_slo_s=2.0, tpot_slo_s=0.03,
                               n_requests=1500, seed=1, max_replicas=16).decode  # fmt: skip
            for name, pool in (("plain", Pool(1, ST, 32)), ("spec", Pool(1, ST, 32, speculative=Speculation(4, 0.8))))}
    assert need["spec"] < need["plain"]  # (1 decode replica against 2)


def test_the_disaggregation_panel_drafts_where_requests_decode() -> None:
    import pandas as pd

    from aonkit.model import Pool, device_spec, disaggregated_sweep, serving_sweep
    from aonkit.model.llm import LLAMA3_8B, LLAMA32_1B, kv_cache_bytes
    from aonkit.model.serving_grid import sweep_rates
    from aonkit.model.serving_spec import speculative_memory
    from aonkit.model.serving_steps import model_step_time
    from aonkit.widgets import DisaggPanel

    # GIVEN the disaggregation panel (Llama-3 8B on H100s, 1 prefill + 2 decode against 3 colocated) with a 1B draft
    p = DisaggPanel(6.0, n_requests=2000, tpot_slo_s=0.015, draft="Llama-3.2 1B", draft_tokens=3, acceptance=0.8)
    h100, spec = device_spec("H100 SXM"), Speculation(3, 0.8)
    plain, drafting = speculative_memory(LLAMA3_8B, None, h100), speculative_memory(LLAMA3_8B, LLAMA32_1B, h100)
    iteration = speculative_step_time(LLAMA3_8B, h100, k=3, draft=LLAMA32_1B)
    load = {"prompt_tokens": Lengths.lognormal(4096, 1.0), "output_tokens": Lengths.geometric(256).capped(2048),
            "n_requests": 2000, "slos": (1.0, 0.015)}  # fmt: skip
    # THEN the colocated replicas and the decode pool draft (an iteration's step times, the draft's memory); the
    # prefill pool computes prompts alone, and the transfer sends the target's cache
    colocated = serving_sweep(sweep_rates(6.0), **load, replicas=3, step_time=iteration, max_batch=128,
                              kv_tokens=drafting.kv_tokens, token_budget=8192, chunked_prefill=True,
                              max_new_tokens=2048, speculative=spec)  # fmt: skip
    pd.testing.assert_frame_equal(p.colocated, colocated)
    pools = {"prefill": Pool(1, model_step_time(LLAMA3_8B, h100), 128, 8192, True, kv_tokens=plain.kv_tokens),
             "decode": Pool(2, iteration, 128, kv_tokens=drafting.kv_tokens, speculative=spec)}  # fmt: skip
    transfer = (1e-3, kv_cache_bytes(LLAMA3_8B, 1, 1, 1) / 50e9)
    pd.testing.assert_frame_equal(p.apart, disaggregated_sweep(sweep_rates(6.0), **load, transfer_s=transfer,
                                                               max_new_tokens=2048, **pools))  # fmt: skip
    # AND without the draft the panel is the plain one again
    p.draft.value = "off"
    pd.testing.assert_frame_equal(p.apart, DisaggPanel(6.0, n_requests=2000, tpot_slo_s=0.015).apart)
