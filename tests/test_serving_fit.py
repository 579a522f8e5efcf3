"""The serving model's step times fitted to forward passes: recovery, what cannot be told, the simulator's agreement."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aonkit.model import StepTime, simulate_serving
from aonkit.model.serving_fit import fit_step_time, linear_coefficients
from aonkit.widgets.serving import ServingPanel

OVER, AP, BP, AD, BD, CD = 2e-3, 1e-3, 50e-6, 0.5e-3, 0.2e-3, 1e-6


def _passes(batches: list[tuple[int, int, int]], noise: float = 0.0, seed: int = 0,
            truth: tuple[float, ...] = (OVER, AP, BP, AD, BD, CD)) -> pd.DataFrame:  # fmt: skip
    """Passes of generations (batch, prompt, outputs), timed by the linear truth (times relative noise)."""
    over, ap, bp, ad, bd, cd = truth
    rng = np.random.default_rng(seed)
    rows = []
    for b, p, n in batches:
        rows.append(("prefill", b, b * p, b * p, over + ap + bp * b * p))
        rows += [("decode", b, b, b * (p + k), over + ad + bd * b + cd * b * (p + k)) for k in range(1, n)]
    df = pd.DataFrame(rows, columns=["kind", "batch", "new_tokens", "context_tokens", "s"])
    df["dur_ns"] = np.round(df.pop("s") * (1 + noise * rng.standard_normal(len(df))) * 1e9).astype(np.int64)
    return df.rename_axis("pass_id").reset_index()


def test_exact_linear_steps_are_recovered() -> None:
    passes = _passes([(1, 100, 20), (4, 300, 10), (8, 50, 30), (2, 700, 5)])
    fit = fit_step_time(passes)
    st = fit.step_time
    # predict is what the residuals were fitted with; a pass of unknown kind has no prediction
    np.testing.assert_array_equal(fit.predict(passes), fit.residuals["fitted_s"])
    odd = passes.iloc[:2].assign(kind=["unknown", "decode"])
    assert np.isnan(fit.predict(odd)[0]) and fit.predict(odd)[1] == fit.residuals["fitted_s"].iloc[1]
    assert st.overhead_s == pytest.approx(OVER + AD, rel=1e-6)  # the smaller intercept: decode's, 2.5 ms
    np.testing.assert_allclose(st.prefill_time_s, (AP - AD, BP), rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(st.decode_time_s, (0.0, BD, CD), rtol=1e-5, atol=1e-9)
    assert fit.notes == () and np.abs(fit.residuals["relative"]).max() < 1e-6
    assert fit.ranges == {"prompt_tokens": (100, 1400), "batch": (1, 8), "context_tokens": (101, 1408)}  # 2 x (700 + 4)
    assert list(fit.summary().index) == ["decode", "prefill"] and fit.summary()["passes"].sum() == 65


def test_noisy_steps_are_recovered_within_their_noise() -> None:
    fit = fit_step_time(_passes([(b, p, 40) for b in (1, 2, 4, 8, 16) for p in (64, 256, 1024)], noise=0.02))
    bp, (bd, cd) = fit.step_time.prefill_time_s[1], fit.step_time.decode_time_s[1:]
    assert bp == pytest.approx(BP, rel=0.05) and cd == pytest.approx(CD, rel=0.1)
    assert bd == pytest.approx(BD, rel=0.1)
    assert 0.01 < fit.summary().loc["decode", "median_abs_relative"] < 0.03  # the 2% noise, seen in the residuals


def test_what_the_passes_cannot_tell_is_said() -> None:
    # one batch size and one prompt length: no cost per sequence, and the prefill's fixed cost is decode's
    fit = fit_step_time(_passes([(4, 300, 10), (4, 300, 12)]))
    assert fit.step_time.decode_time_s[1] == 0.0
    # the batch's cost is in the fixed cost, and the prefill's fixed cost is the decode's: all in overhead_s
    assert fit.step_time.overhead_s == pytest.approx(OVER + AD + BD * 4, rel=1e-6)
    assert fit.step_time.prefill_time_s[0] == 0.0 and fit.step_time.decode_time_s[0] == 0.0
    assert fit.step_time.prefill_time_s[1] == pytest.approx((AP - AD - BD * 4) / 1200 + BP, rel=1e-6)
    assert any("one value of the sequence count (4)" in n for n in fit.notes)
    assert any("one prompt length (1,200 tokens)" in n for n in fit.notes)
    # the decode passes still fit exactly (the per-sequence cost is in the fixed cost), and so does the prefill
    assert np.abs(fit.residuals["relative"]).max() < 1e-6
    assert "note: decode: one value of the sequence count" in fit.text()


def test_coefficients_are_never_negative() -> None:
    # a cost per context token below zero (cached steps getting faster) is clipped at 0, and said
    fit = fit_step_time(_passes([(1, 100, 20), (4, 300, 10), (8, 50, 30)], truth=(OVER, AP, BP, AD, BD, -1e-7)))
    assert fit.step_time.decode_time_s[2] == 0.0
    assert any("cost per context token would be negative" in n for n in fit.notes)
    assert all(c >= 0 for c in (*fit.step_time.prefill_time_s, *fit.step_time.decode_time_s))


def test_bad_tables_are_refused() -> None:
    p = _passes([(1, 100, 20)])
    with pytest.raises(ValueError, match=r"no prefill pass with a prompt length .*\(passes: 19 decode\)"):
        fit_step_time(p[p["kind"] == "decode"])
    with pytest.raises(ValueError, match=r"no decode pass with a batch and context .*\(passes: 1 prefill\)"):
        fit_step_time(p[p["kind"] == "prefill"])
    unknown = p.assign(kind="unknown")  # a flattened-token engine's passes: no kind known
    with pytest.raises(ValueError, match=r"\(passes: 20 unknown\)"):
        fit_step_time(unknown)
    with pytest.raises(ValueError, match=r"columns \['interval_ns'\]"):
        fit_step_time(p, time="interval_ns")


def test_the_simulator_replays_the_fitted_passes() -> None:
    # GIVEN step times fitted to generations of one batch of requests each
    batches = [(1, 100, 20), (4, 300, 10), (8, 50, 30)]
    fit = fit_step_time(_passes(batches, noise=0.05, seed=3))
    res = fit.residuals
    # WHEN each batch is simulated as requests arriving at once on one replica (whole-prompt prefill)
    for b, p, n in batches:
        sim = simulate_serving(np.zeros(b), p, n, step_time=fit.step_time, max_batch=b, token_budget=b * p,
                               n_requests=b, seed=0)  # fmt: skip
        # THEN its first token comes after the fitted prefill pass, its last after the fitted decode passes
        mine = res[(res["batch"] == b) & (res["context_tokens"] >= b * p) & (res["context_tokens"] <= b * (p + n))]
        assert sim.requests["ttft_s"].to_numpy() == pytest.approx(mine["fitted_s"].iloc[0], rel=1e-12)
        assert sim.requests["e2e_s"].to_numpy() == pytest.approx(mine["fitted_s"].sum(), rel=1e-12)


def test_the_panel_takes_a_fit() -> None:
    fit = fit_step_time(_passes([(1, 100, 20), (4, 300, 10), (8, 50, 30)]))
    panel = ServingPanel(5.0, step_time=fit, n_requests=2000, max_batch=16, token_budget=4096)
    assert panel.step_kind.value == "linear" and panel.step_time() == fit.step_time
    assert linear_coefficients(fit) == ("linear", fit.step_time.prefill_time_s, fit.step_time.decode_time_s,
                                        fit.step_time.overhead_s)  # fmt: skip
    with pytest.raises(ValueError, match="linear coefficients"):
        ServingPanel(5.0, step_time=StepTime(prefill_time_s=lambda p: 1e-3 * p))
    with pytest.raises(ValueError, match=r"out of the panel's range .*'decode b \(s/seq\) = 2.0'"):
        ServingPanel(5.0, step_time=StepTime(prefill_time_s=(0.1, 1e-5), decode_time_s=(0.1, 2.0, 0.0)))


def test_the_panel_says_when_it_goes_beyond_the_passes_measured() -> None:
    fit = fit_step_time(_passes([(1, 100, 20), (4, 300, 10), (8, 50, 30)]))  # batch 1-8, prefills of 100-1,200
    panel = ServingPanel(5.0, step_time=fit, n_requests=2000, max_batch=8, token_budget=1024, lengths="fixed",
                         prompt_tokens=256, output_tokens=16)  # fmt: skip
    assert panel.extrapolated() == [] and "beyond" not in panel.summary.value
    panel.max_batch.value, panel.token_budget.value = 32, 2048
    assert panel.extrapolated() == ["batch up to 32 (measured up to 8)",
                                    "prompt tokens per step up to 2,048 (measured up to 1,200)"]  # fmt: skip
    assert "used beyond what it measured: batch up to 32" in panel.summary.value
    panel.coeffs["decode_c"].value = 2e-6  # edited coefficients are not the fit's: nothing to say about it
    assert panel.extrapolated() == [] and "beyond" not in panel.summary.value
