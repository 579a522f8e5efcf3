"""Engine step times measured from a trace: the serving model's :class:`StepTime` fitted to traced forward passes.

:func:`fit_step_time` takes the table of :func:`aonkit.analysis.forward_passes` (one row per prefill or decode
pass, with its tokens, batch and context) and fits, by non-negative least squares,

* prefill passes: ``Ip + bp * P`` seconds for ``P`` prompt tokens in the pass;
* decode passes: ``Id + bd * batch + cd * context`` seconds (``context``: tokens attended to, all sequences).

The fixed cost of a pass is put in ``overhead_s = min(Ip, Id)``, and the rest of each intercept in the prefill's
or decode's ``a``: a step that mixes both (chunked prefill) pays one pass's fixed cost, as it runs one forward. A
coefficient the passes cannot tell (the batch never varies, every prompt has one length) is left out and
said so in ``notes``; with one prompt length, the prefill intercept is taken to be the decode one. Coefficients
are never negative (a step never gets faster with more work); one that would be is 0, also in ``notes``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .serving_inputs import StepTime

NEEDED = ("kind", "batch", "new_tokens", "context_tokens")


@dataclass(frozen=True)
class StepFit:
    """Step times fitted to traced forward passes (:func:`fit_step_time`).

    Attributes
    ----------
    step_time : StepTime
        Linear coefficients for :func:`~aonkit.model.simulate_serving`: ``prefill_time_s=(a, b)``,
        ``decode_time_s=(a, b, c)`` and ``overhead_s``.
    residuals : DataFrame
        One row per pass fitted: ``pass_id`` (when the table had it), ``kind``, ``batch``, ``new_tokens``,
        ``context_tokens``, ``measured_s``, ``fitted_s``, ``residual_s`` (measured - fitted) and ``relative``
        (residual / measured).
    ranges : dict of str to tuple
        ``(min, max)`` of what the passes covered: ``prompt_tokens`` (prefill), ``batch`` and ``context_tokens``
        (decode). The fit is a measurement there and an extrapolation elsewhere.
    notes : tuple of str
        What the passes could not tell and what was assumed instead; empty when every coefficient was fitted.
    time : str
        The column fitted (``"dur_ns"`` or ``"interval_ns"``).
    """

    step_time: StepTime
    residuals: pd.DataFrame
    ranges: dict[str, tuple[int, int]]
    notes: tuple[str, ...]
    time: str

    def summary(self) -> pd.DataFrame:
        """Per kind: ``passes``, ``rms_s`` (root mean square residual) and ``median_abs_relative``."""
        r = self.residuals
        g = r.groupby("kind", observed=True)
        return pd.DataFrame({
            "passes": g.size(), "rms_s": g["residual_s"].apply(lambda x: float(np.sqrt(np.mean(x * x)))),
            "median_abs_relative": g["relative"].apply(lambda x: float(np.median(np.abs(x)))),
        })  # fmt: skip

    def predict(self, passes: pd.DataFrame) -> np.ndarray:
        """Seconds of each pass of a ``forward_passes`` table by the fitted step times (NaN for kind "unknown")."""
        return _predict(self.step_time, passes["kind"].astype(str).to_numpy(),
                        *(passes[c].to_numpy(dtype=np.float64) for c in ("new_tokens", "batch", "context_tokens")))

    def beyond(self, max_batch: int, token_budget: int) -> list[str]:
        """Where an engine's batch and prompt tokens per step go beyond the passes measured, in words.

        ``max_batch`` against ``ranges["batch"]``, ``token_budget`` against ``ranges["prompt_tokens"]`` (a
        prefill step's tokens); an empty list when neither goes beyond.
        """
        out = []
        for what, value, top in (("batch", max_batch, self.ranges["batch"][1]),
                                 ("prompt tokens per step", token_budget, self.ranges["prompt_tokens"][1])):
            if value > top:
                out.append(f"{what} up to {value:,} (measured up to {top:,})")
        return out

    def text(self) -> str:
        """The fitted step times in words, with the fit's quality and notes."""
        st = self.step_time
        (ap, bp), (ad, bd, cd) = st.prefill_time_s, st.decode_time_s  # type: ignore[misc]
        s = self.summary()
        lines = [f"step time fitted to {len(self.residuals)} traced passes ({self.time}):",
                 f"  overhead {st.overhead_s * 1e3:.4g} ms per step",
                 f"  prefill {ap * 1e3:.4g} ms + {bp * 1e6:.4g} us per prompt token",
                 f"  decode {ad * 1e3:.4g} ms + {bd * 1e6:.4g} us per sequence + {cd * 1e9:.4g} ns per context "
                 "token"]  # fmt: skip
        for kind, row in s.iterrows():
            lines.append(f"  {kind}: {int(row['passes'])} passes, rms residual {row['rms_s'] * 1e3:.3g} ms, "
                         f"median |relative| {row['median_abs_relative']:.1%}")  # fmt: skip
        lines += [f"  measured over {k} {lo:,}..{hi:,}" for k, (lo, hi) in self.ranges.items()]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def fit_step_time(passes: pd.DataFrame, time: str = "dur_ns") -> StepFit:
    """Fit the serving model's engine step times to traced forward passes.

    Parameters
    ----------
    passes : DataFrame
        :func:`aonkit.analysis.forward_passes` (or any table with ``kind``, ``batch``, ``new_tokens``,
        ``context_tokens`` and the ``time`` column, in ns). Rows of kind ``"unknown"`` and those whose time is
        negative (the last pass's ``interval_ns``) are left out. Filter the table first to leave out warm-up
        passes or another model's.
    time : {"dur_ns", "interval_ns"}
        The pass's own span, or the time to the next pass's start (the engine's whole step, what it did
        between passes included; gaps between requests too).

    Returns
    -------
    StepFit
        ``step_time`` for :func:`~aonkit.model.simulate_serving` (or ``ServingPanel(step_time=fit)``), the
        residuals per pass, the ranges measured and the notes.

    Raises
    ------
    ValueError
        When a column is missing, or there is no decode pass with a batch and context, or no prefill pass with
        a prompt length (each with a time that is not negative); the message counts the passes of each kind.
    """
    missing = [c for c in (*NEEDED, time) if c not in passes.columns]
    if missing:
        raise ValueError(f"fit_step_time needs the columns {missing} (a forward_passes table)")
    kind = passes["kind"].astype(str).to_numpy()
    y = passes[time].to_numpy(dtype=np.float64) / 1e9
    batch = passes["batch"].to_numpy(dtype=np.float64)
    tokens = passes["new_tokens"].to_numpy(dtype=np.float64)
    context = passes["context_tokens"].to_numpy(dtype=np.float64)
    ok = (y >= 0) & np.isfinite(y)
    pre = ok & (kind == "prefill") & (tokens > 0)
    dec = ok & (kind == "decode") & (batch > 0) & (context >= 0)
    for mask, what, known in ((dec, "decode", "a batch and context"), (pre, "prefill", "a prompt length")):
        if not mask.any():
            seen = ", ".join(f"{n} {k}" for k, n in zip(*np.unique(kind, return_counts=True))) or "none"
            raise ValueError(f"no {what} pass with {known} and a time to fit (passes: {seen}): the step time "
                             "needs both kinds (a trace of a generation: its prompt, then its tokens one by one)")
    notes: list[str] = []
    (i_d, bd, cd), dec_notes = _fit(y[dec], {"sequence": batch[dec], "context token": context[dec]})
    notes += [f"decode: {n}" for n in dec_notes]
    if np.unique(tokens[pre]).size >= 2:
        (i_p, bp), pre_notes = _fit(y[pre], {"prompt token": tokens[pre]})
        notes += [f"prefill: {n}" for n in pre_notes]
    else:
        p = float(tokens[pre][0])
        i_p, bp = i_d, max(0.0, float(np.mean(y[pre])) - i_d) / p
        notes.append(f"prefill: one prompt length ({int(p):,} tokens) cannot split a fixed cost from a cost per "
                     "token: the fixed cost is taken to be the decode passes'")  # fmt: skip
    over = min(i_p, i_d)
    st = StepTime(prefill_time_s=(i_p - over, bp), decode_time_s=(i_d - over, bd, cd), overhead_s=over)
    fitted = _predict(st, kind, tokens, batch, context)
    used = pre | dec
    res = pd.DataFrame({"kind": kind[used], "batch": batch[used].astype(np.int64),
                        "new_tokens": tokens[used].astype(np.int64), "context_tokens": context[used].astype(np.int64),
                        "measured_s": y[used], "fitted_s": fitted[used]})  # fmt: skip
    if "pass_id" in passes.columns:
        res.insert(0, "pass_id", passes["pass_id"].to_numpy()[used])
    res["residual_s"] = res["measured_s"] - res["fitted_s"]
    res["relative"] = res["residual_s"] / res["measured_s"].where(res["measured_s"] > 0)
    ranges = {"prompt_tokens": _span(tokens[pre]), "batch": _span(batch[dec]), "context_tokens": _span(context[dec])}
    return StepFit(st, res, ranges, tuple(notes), time)


def _predict(st: StepTime, kind: np.ndarray, tokens: np.ndarray, batch: np.ndarray,
             context: np.ndarray) -> np.ndarray:  # fmt: skip
    """A pure prefill or pure decode step's seconds by linear step times (NaN for another kind)."""
    (ap, bp), (ad, bd, cd) = st.prefill_time_s, st.decode_time_s  # type: ignore[misc]
    step = st.overhead_s + np.where(kind == "prefill", ap + bp * tokens, ad + bd * batch + cd * context)
    return np.where((kind == "prefill") | (kind == "decode"), step, np.nan)


def _span(x: np.ndarray) -> tuple[int, int]:
    return int(x.min()), int(x.max())


def _fit(y: np.ndarray, xs: dict[str, np.ndarray]) -> tuple[tuple[float, ...], list[str]]:
    """Non-negative least squares of ``y`` on an intercept and the columns that vary; coefficients in order."""
    from scipy.optimize import nnls

    notes = []
    names = [k for k, x in xs.items() if np.ptp(x) > 0]
    notes += [f"one value of the {k} count ({int(xs[k][0]):,}): its cost is in the fixed cost"
              for k in xs if k not in names]  # fmt: skip
    cols = [np.ones_like(y)] + [xs[k] for k in names]
    while len(cols) > 1 and np.linalg.matrix_rank(np.column_stack([c / np.abs(c).max() for c in cols])) < len(cols):
        dropped = names.pop(0)  # the batch goes first: the context carries it when the two move together
        cols.pop(1)
        notes.append(f"the {dropped} count moves with the others: its cost is in theirs")
    scale = np.array([np.abs(c).max() for c in cols])
    design = np.column_stack(cols) / scale
    coef = nnls(design, y)[0] / scale
    free = np.linalg.lstsq(design, y, rcond=None)[0]
    labels = ["fixed cost", *(f"cost per {k}" for k in names)]
    notes += [f"the {k} would be negative by least squares: non-negative least squares gives "
              f"{'0' if c == 0 else f'{c:.3g} s'}" for k, f, c in zip(labels, free, coef) if f < 0]  # fmt: skip
    out = dict.fromkeys(xs, 0.0)
    out.update({k: float(c) for k, c in zip(names, coef[1:])})
    return (float(coef[0]), *out.values()), notes


def linear_coefficients(step: StepFit | StepTime) -> tuple[str, tuple[float, float], tuple[float, float, float], float]:
    """``("linear", prefill (a, b), decode (a, b, c), overhead_s)`` of a fit or of a linear :class:`StepTime`.

    Raises
    ------
    ValueError
        When the step times are functions (only coefficients fill the panel's boxes), or not a StepFit or
        StepTime.
    """
    st = step.step_time if isinstance(step, StepFit) else step
    if not isinstance(st, StepTime):
        raise ValueError(f"step_time must be 'model', 'linear', a StepFit or a StepTime, not {type(step).__name__}")
    pf, dc = st.prefill_time_s, st.decode_time_s
    pf = (float(pf), 0.0) if isinstance(pf, (int, float)) else pf
    dc = (float(dc), 0.0, 0.0) if isinstance(dc, (int, float)) else dc
    if not (isinstance(pf, tuple) and len(pf) == 2 and isinstance(dc, tuple) and len(dc) == 3):
        raise ValueError("only step times given as linear coefficients, (a, b) and (a, b, c), fill the panel")
    return "linear", (float(pf[0]), float(pf[1])), (float(dc[0]), float(dc[1]), float(dc[2])), float(st.overhead_s)
