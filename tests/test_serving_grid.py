"""The serving sweep's rate grid and its rows kept per rate: the same table as a fresh sweep, with fewer simulations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from aonkit.model import Lengths, StepTime, serving_sweep
from aonkit.model.hardware import devices
from aonkit.model.llm import PRESETS
from aonkit.model.serving_analysis import sweep_rows
from aonkit.model.serving_grid import PER_DECADE, Kept, SweepRows, grid_rate, sweep_rates
from aonkit.model.serving_steps import ModelStepTimes, model_step_time, request_seconds
from aonkit.widgets import ServingPanel

STEP = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
ENGINE = {"step_time": STEP, "max_batch": 64, "token_budget": 2048, "chunked_prefill": True}


def _k(rate: float) -> float:
    return PER_DECADE * math.log10(rate)


@pytest.mark.parametrize("rate", [0.1, 0.37, 1.0, 14.0, 20.0, 10 ** 1.35, 999.0, 10_000.0])
def test_sweep_rates_span_an_eighth_to_twice_the_rate_on_the_grid(rate: float) -> None:
    got = sweep_rates(rate)
    assert np.all(np.diff(got) > 0) and rate in got and 7 <= got.size <= 8
    # from an eighth to a quarter of the rate, to twice it (or a little above), within a tenth of a step
    tol = 10 ** (0.1 / PER_DECADE)
    assert rate / 8 / tol <= got[0] < rate / 4 and 2 * rate / tol <= got[-1] < 2 * rate * 1.42
    # every other point is a grid point: a multiple of 3 steps, of 6 below half the rate
    for r in got[got != rate]:
        k = round(_k(r))
        assert r == grid_rate(k) and k % 3 == 0 and (k % 6 == 0 or r >= rate / 2 / 1.01), (r, k)
    # no gap wider than a factor of 1.5 from half the rate up (1.41, and 6% where a point near the rate is left out),
    # nor 2.01 below
    ratio = got[1:] / got[:-1]
    assert ratio.max() < 2.01 and ratio[got[:-1] >= rate / 2 / 1.01].max() < 1.5


def test_a_rate_dragged_along_the_sliders_steps_needs_one_or_two_new_points_a_step() -> None:
    seen: set[float] = set()
    new = []
    for i in range(0, 3 * PER_DECADE + 1):  # three decades, step by step, then back
        seen_before = len(seen)
        seen |= set(sweep_rates(10.0 ** (1 + i / PER_DECADE)).tolist())
        new.append(len(seen) - seen_before)
    assert new[0] >= 7 and max(new[1:]) <= 3 and sum(new[1:]) <= 1.5 * (len(new) - 1)
    for i in range(3 * PER_DECADE, -1, -1):
        assert set(sweep_rates(10.0 ** (1 + i / PER_DECADE)).tolist()) <= seen


def test_sweep_rates_refuses_bad_input() -> None:
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="rate_per_s"):
            sweep_rates(bad)
    with pytest.raises(ValueError, match="multiple of fine_every"):
        sweep_rates(1.0, fine_every=4, coarse_every=6)
    with pytest.raises(ValueError, match="low <= fine"):
        sweep_rates(1.0, low=0.6, fine=0.5)


def _simulate(rates: np.ndarray) -> list[dict]:
    return sweep_rows(rates, Lengths.lognormal(256, 1.0), Lengths.geometric(64), n_requests=1500, replicas=2,
                         **ENGINE)  # fmt: skip


def test_rows_kept_per_rate_give_a_fresh_sweeps_table() -> None:
    rows = SweepRows()
    asked: list[int] = []

    def simulate(rates: np.ndarray) -> list[dict]:
        asked.append(rates.size)
        return _simulate(rates)

    for rate in (20.0, 21.0, 22.4, 20.0, 10 ** 1.35):
        got = rows.sweep("a", sweep_rates(rate), simulate)
        pd.testing.assert_frame_equal(got, serving_sweep(sweep_rates(rate), Lengths.lognormal(256, 1.0),
                                      Lengths.geometric(64), n_requests=1500, replicas=2, **ENGINE), check_exact=True)
    # 21 and 22.4 are new (the grid's 22.387 is not asked again); 20.0 again and the grid's 22.387: nothing new
    assert asked[0] == sweep_rates(20.0).size and asked[1:] == [1, 1]
    assert rows.simulated == sum(asked)
    # a new key (another setting of the rest) drops the kept rows
    rows.sweep("b", sweep_rates(20.0), simulate)
    assert asked[-1] == sweep_rates(20.0).size


def test_rows_keep_nothing_from_a_failed_simulation_and_evict_the_oldest() -> None:
    rows = SweepRows(keep=10)
    rows.sweep("a", np.array([1.0, 2.0]), _simulate)

    def fail(rates: np.ndarray) -> list[dict]:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        rows.sweep("a", np.array([1.0, 3.0]), fail)
    assert rows.simulated == 2 and rows.sweep("a", np.array([2.0, 1.0]), fail)["arrival_rate_per_s"].tolist() == [
        2.0, 1.0]  # fmt: skip
    rows.sweep("a", np.arange(3.0, 12.0), _simulate)  # 9 more: 11 > 10, the oldest (1.0) goes
    assert rows.sweep("a", np.array([2.0]), fail)["arrival_rate_per_s"].tolist() == [2.0]
    with pytest.raises(ValueError, match="no"):
        rows.sweep("a", np.array([1.0]), fail)


def test_rows_are_kept_for_the_last_settings_the_least_recently_used_dropped() -> None:
    rows = SweepRows(settings=2)
    asked: list[str] = []

    def simulating(key: str):
        def simulate(rates: np.ndarray) -> list[dict]:
            asked.append(key)
            return _simulate(rates)
        return simulate

    rates = sweep_rates(20.0)
    a = rows.sweep("a", rates, simulating("a"))
    rows.sweep("b", rates, simulating("b"))
    # going back to a setting seen a moment ago simulates nothing: the table it had
    pd.testing.assert_frame_equal(rows.sweep("a", rates, simulating("a")), a, check_exact=True)
    assert asked == ["a", "b"]
    # a third setting drops the one used least recently (b, as a was used since)
    rows.sweep("c", rates, simulating("c"))
    rows.sweep("a", rates, simulating("a"))
    rows.sweep("b", rates, simulating("b"))
    assert asked == ["a", "b", "c", "b"] and rows.simulated == 4 * rates.size


def test_kept_values_drop_the_least_recently_used() -> None:
    kept = Kept(2)
    kept.put("a", 1)
    kept.put("b", None)  # (a search over max_replicas is kept as None)
    assert "b" in kept and kept["b"] is None and kept["a"] == 1
    kept.put("c", 3)  # b was used before a: b goes
    assert "b" not in kept and kept["a"] == 1 and kept["c"] == 3
    kept.put("a", 4)  # a again: the latest; c goes next
    kept.put("d", 5)
    assert "c" not in kept and kept["a"] == 4 and kept["d"] == 5
    with pytest.raises(KeyError):
        kept["b"]  # noqa: B018


def test_going_back_to_a_setting_simulates_nothing_and_equals_a_fresh_panel(monkeypatch) -> None:
    import aonkit.widgets.serving as panel

    searches, real = [], panel.replicas_needed
    monkeypatch.setattr(panel, "replicas_needed", lambda *a, **k: searches.append(k["start"]) or real(*a, **k))
    kw = {"n_requests": 1500, "lengths": "random", "replicas": 2}
    # GIVEN a panel on H100s, then A100s at TP 2
    p = ServingPanel(20.0, **kw)
    h100 = p.text()
    p.device.value = "A100 SXM4 80GB"
    p.tp.value = 2
    simulated, searched = p.rows.simulated, len(searches)
    # WHEN it goes back through the A100 at TP 1 (seen) to the H100s
    p.tp.value = 1
    p.device.value = "H100 SXM"
    # THEN nothing is simulated or searched again, and every number is a fresh panel's
    assert p.text() == h100 and p.rows.simulated == simulated and len(searches) == searched
    fresh = ServingPanel(20.0, **kw)
    pd.testing.assert_frame_equal(p.sweep, fresh.sweep, check_exact=True)
    assert p.plan.replicas == fresh.plan.replicas and p.text() == fresh.text()
    # AND a new setting still searches
    searched = len(searches)
    p.tp.value = 4
    assert not p.error and len(searches) == searched + 1


def test_a_dragged_rate_simulates_few_rates_and_the_panel_equals_a_fresh_one() -> None:
    kw = {"step_time": "linear", "n_requests": 1500, "lengths": "random", "replicas": 2}
    p = ServingPanel(20.0, **kw)
    start = p.rows.simulated
    drag = [10 ** (1.30 + i / PER_DECADE) for i in range(1, 13)]
    searched = []
    for rate in drag:
        p.rate.value = rate
        searched.append(len(p.plan.tried))  # a read applies the change
    assert p.rows.simulated - start <= 1.5 * len(drag)
    # the replica search starts at the last answer scaled to the new rate: mostly the answer and one fewer
    assert max(searched) <= 4 and sum(searched) <= 2.5 * len(drag)
    fresh = ServingPanel(drag[-1], **kw)
    pd.testing.assert_frame_equal(p.sweep, fresh.sweep, check_exact=True)
    assert p.knee == fresh.knee and p.text() == fresh.text()
    # another control changes: every rate is simulated again, and going back finds the old rows dropped too
    before = p.rows.simulated
    p.max_batch.value = 32
    p.sweep  # noqa: B018
    assert p.rows.simulated - before == p.rates().size


def test_request_seconds_is_a_requests_share_of_the_steps_it_takes() -> None:
    # GIVEN linear step times: prefill 5 ms + 20 us a token, decode 10 ms + 0.1 ms a sequence + 0.1 us a context
    # token, 1 ms of overhead a step
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7), overhead_s=0.001)
    # THEN a 512-token prompt and 128 outputs, decoded 16 at once halfway through (context 16 * 576), take by hand
    decode = 0.010 + 1e-4 * 16 + 1e-7 * 16 * 576
    want = 0.001 * (1 + 128 / 16) + (0.005 + 2e-5 * 512) + 128 * decode / 16
    assert request_seconds(st, 512, 128, 16) == pytest.approx(want, rel=1e-12)
    # AND model step times are evaluated without replacing the tables they keep for the simulations
    model = ModelStepTimes()(PRESETS["Llama-3 8B"], next(d for d in devices() if d.name == "H100 SXM"))
    grid = (np.array([[1.0], [2.0]]), np.array([[100.0, 200.0]]))
    kept = model.decode_time_s(*grid)
    assert request_seconds(model, 512, 128) > 0 and model.decode_time_s.last[1] is kept


def test_a_change_of_device_starts_the_replica_search_at_the_last_answer_scaled_by_engine_speed() -> None:
    # GIVEN a panel that answered the replicas needed on one device (6 at 200 requests/s)
    p = ServingPanel(200.0, replicas=8, n_requests=4000, max_replicas=64)
    first = p.plan
    assert first.replicas == 6
    # WHEN the device changes in turn: answers from 3 to 12 replicas
    answers = []
    for dev in ("A100 SXM4 80GB", "H200 SXM", "B200", "MI300X"):
        p.device.value = dev
        answers.append(p.plan.replicas)
        # THEN the search starts at the last answer times the engines' ratio of request_seconds: it tries the answer
        # and one fewer (from the last answer alone, 12 after 6 took six simulations)
        assert p.plan.tried["replicas"].tolist() == [p.plan.replicas - 1, p.plan.replicas], dev
    assert min(answers) <= 3 and max(answers) >= 12
    # AND back on the first device (a setting kept) the first answer is given again, with what it tried
    p.device.value = "H100 SXM"
    assert p.plan is first


def test_after_a_search_that_found_too_few_replicas_the_next_starts_from_the_most_it_tried() -> None:
    # GIVEN Llama-3 8B on an L4 at 20 requests/s: p99 TTFT stays over 0.5 s with any count (its long prompts' own
    # prefill), so the search ends with more than max_replicas (outputs sent with max_new_tokens=4096, which none
    # reaches: on the A10 p99 TTFT is within 0.45-0.53 s from 12 replicas to 64, and the default cap of 1,024,
    # which cuts one or two of these outputs, moves the answer from 33 to 21)
    p = ServingPanel(20.0, n_requests=4000, max_replicas=64, device="L4", max_new_tokens=4096)
    assert p.plan is None and p.replicas_for_slo() is None
    # WHEN the device becomes an A10 (about twice the L4's speed)
    p.device.value = "A10"
    # THEN its search starts at max_replicas scaled by the engines' speeds (not from one replica): it tries the
    # answer and one fewer, and nothing far below them
    dev = {d.name: d for d in devices()}
    speed = [request_seconds(model_step_time(PRESETS["Llama-3 8B"], dev[d]), 512, 128) for d in ("A10", "L4")]
    tried = p.plan.tried["replicas"].tolist()
    # (the third round tries two counts at once, 2 and 4 below the second)
    assert p.plan.replicas - 1 in tried and min(tried) >= round(64 * speed[0] / speed[1]) - 8, (tried, speed)
    assert len(tried) <= 6, tried


def test_an_engine_of_zero_step_times_and_back_gives_a_search_from_the_rate_alone() -> None:
    # GIVEN a panel on linear step times, all set to zero (request_seconds 0: no ratio of engine speeds to scale by)
    p = ServingPanel(20.0, step_time="linear", n_requests=500, lengths="fixed")
    for box in p.coeffs.values():
        box.value = 0.0
    assert not p.error and p.plan.replicas == 1
    # WHEN a step time becomes positive again THEN the search starts from the last answer scaled by the rate only
    p.coeffs["decode_a"].value = 0.01
    assert not p.error and p.plan.replicas >= 1 and p.plan.tried["replicas"].iloc[0] == 1
