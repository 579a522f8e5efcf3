"""What :class:`~aonkit.widgets.disagg.DisaggPanel` shows: its sweeps, its sizing and its summary line.

A mixin of the panel: it reads the panel's last evaluation (``_colocated``, ``_apart``, ``_sizing``, ``_error``,
``_transfer_s``, ``_gpus``, ``_computed_s``), its controls and ``_request`` (a change waiting in a kernel is
simulated before a result is read).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import pandas as pd

from ..model.serving_analysis import goodput
from ..views import theme

GOODPUT_TARGET = 0.9
"""The share of requests within both objectives that goodput is read at (DistServe's 90%)."""


@dataclass(frozen=True)
class Sizing:
    """GPUs for the objectives at the chosen rate: replicas colocated, prefill and decode replicas apart.

    A count is None when ``max_replicas`` replicas do not meet the objectives (the decode count also when the
    prefill pool's does not: it is sized second); ``why_colocated`` and ``why_apart`` then say when no number can
    (the requests each served alone miss an objective: :mod:`aonkit.model.serving_floor`), "" otherwise.
    """

    colocated: int | None
    prefill: int | None
    decode: int | None
    why_colocated: str = ""
    why_apart: str = ""


class DisaggResults:
    """The results of :class:`~aonkit.widgets.disagg.DisaggPanel` and its summary line."""

    @property
    def colocated(self) -> pd.DataFrame:
        """The last colocated sweep (one row per rate)."""
        self._request.flush()
        return self._colocated

    @property
    def apart(self) -> pd.DataFrame:
        """The last disaggregated sweep (one row per rate)."""
        self._request.flush()
        return self._apart

    @property
    def sizing(self) -> Sizing:
        """Replicas each way for both objectives at the chosen rate."""
        self._request.flush()
        return self._sizing

    @property
    def error(self) -> str:
        """Why the last change could not be simulated ("" when it could)."""
        self._request.flush()
        return self._error

    def numbers(self) -> dict[str, float]:
        """Each deployment's p99 TTFT and TPOT at the chosen rate, replicas needed (NaN: over the most) and goodput.

        ``<deployment>_goodput_per_s``: :func:`~aonkit.model.goodput` of its sweep (NaN: even its lowest rate has
        fewer than 90% of requests within both objectives; its highest rate when none has).
        """
        self._request.flush()
        rate = float(self.rate.value)
        out = {}
        for name, sweep in (("colocated", self._colocated), ("apart", self._apart)):
            at = sweep.iloc[(sweep["arrival_rate_per_s"] - rate).abs().argmin()]
            out |= {f"{name}_ttft_p99_s": float(at["ttft_p99_s"]), f"{name}_tpot_p99_s": float(at["tpot_p99_s"])}
        s = self._sizing
        for key in ("colocated", "prefill", "decode"):
            v = getattr(s, key)
            out[f"{key}_replicas_needed"] = math.nan if v is None else v
        for name, sweep in (("colocated", self._colocated), ("apart", self._apart)):
            out[f"{name}_goodput_per_s"] = goodput(sweep, GOODPUT_TARGET)["goodput_per_s"]
        return out

    def text(self) -> str:
        """A plain-text summary (the widget's ``text/plain``)."""
        n, s = self.numbers(), self.sizing
        p, d = int(self.n_prefill.value), int(self.n_decode.value)
        tp, dec_tp, dec_device = self._gpus

        def ms(v: float) -> str:
            return theme.fmt_ns(v * 1e9)

        def rate(g: float, sweep: pd.DataFrame) -> str:
            if not math.isfinite(g):
                return f"below {sweep['arrival_rate_per_s'].min():.3g} req/s"
            return f"{g:.3g} req/s" + (" or more" if g >= sweep["arrival_rate_per_s"].max() else "")

        def never(why: str) -> str:
            return f"no number meets them ({why})" if why else f"not met with {self.max_replicas} replicas"

        def gpus(*counts: int) -> str:
            total = sum(c * t for c, t in zip(counts, (tp, dec_tp)))
            return f" ({total} GPU{'s' if total > 1 else ''})" if max(tp, dec_tp) > 1 else ""

        need_apart = never(s.why_apart) if s.prefill is None else (
            f"{s.prefill} + {s.decode} = {s.prefill + s.decode}{gpus(s.prefill, s.decode)}")  # fmt: skip
        if s.prefill is not None and s.decode is None:
            need_apart = f"{s.prefill} prefill, decode {never(s.why_apart)}"
        need_colo = never(s.why_colocated) if s.colocated is None else f"{s.colocated}{gpus(s.colocated, 0)}"
        where = f" on {dec_device}" if dec_device else ""
        return (f"at {float(self.rate.value):.3g} req/s: colocated ({p + d} replicas) p99 TTFT "
                f"{ms(n['colocated_ttft_p99_s'])}, p99 TPOT {ms(n['colocated_tpot_p99_s'])}; disaggregated ({p} "
                f"prefill + {d} decode{where}, KV transfer {ms(self._transfer_s)} for the mean prompt) p99 TTFT "
                f"{ms(n['apart_ttft_p99_s'])}, p99 TPOT {ms(n['apart_tpot_p99_s'])}. Replicas for "
                f"p99 TTFT <= {ms(float(self.ttft_slo.value))} and p99 TPOT <= {ms(float(self.tpot_slo.value))}: "
                f"colocated {need_colo}, disaggregated {need_apart}. Goodput of these (90% of requests within both): "
                f"{rate(n['colocated_goodput_per_s'], self._colocated)} colocated, "
                f"{rate(n['apart_goodput_per_s'], self._apart)} disaggregated")  # fmt: skip

    def plain_text(self) -> str:
        """The comparison, in a few lines."""
        return "disaggregation: " + self.text()

    def _show(self) -> None:
        status = (f"<div style='color:#D62728'>cannot simulate this setting, showing the last valid one: "
                  f"{html.escape(self._error)}</div>" if self._error else "")  # fmt: skip
        took = f" (computed in {self._computed_s * 1e3:.0f} ms)" if math.isfinite(self._computed_s) else ""
        self.summary.value = f"<div>{html.escape(self.text() + took)}</div>{status}"
