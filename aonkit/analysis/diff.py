"""Statistical comparison of two traces: what got faster or slower, by how much, and how sure we are.

Per kernel name (or CPU op name) the durations of its events in each trace are
the samples (repeated launches, steps and iterations are repeats). For each
name: counts, totals, the change of the mean with a bootstrap confidence
interval, and a two-sided Mann-Whitney U test (normal approximation with tie
correction) for whether one trace's durations tend to be longer.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import erf, sqrt

import numpy as np
import pandas as pd

from .. import schema
from ..trace import Trace
from ..units import fmt_ns


def _samples(trace: Trace | Mapping[int, Trace], by: str) -> dict[str, np.ndarray]:
    traces = [trace] if isinstance(trace, Trace) else list(trace.values())
    cats = schema.GPU_CATS if by == "kernel" else schema.CPU_OP_CATS
    parts = []
    for t in traces:
        ev = t.events[t.events["cat"].isin(cats) & (t.events["dur_ns"] >= 0)]
        parts.append(pd.DataFrame({"name": ev["name"].astype(str).to_numpy(), "dur": ev["dur_ns"].to_numpy()}))
    df = pd.concat(parts, ignore_index=True)
    return {name: g.to_numpy(np.float64) for name, g in df.groupby("name", sort=False)["dur"]}


def mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation, tie-corrected)."""
    n1, n2 = a.shape[0], b.shape[0]
    if n1 == 0 or n2 == 0:
        return float("nan")
    both = np.concatenate([a, b])
    ranks = pd.Series(both).rank(method="average").to_numpy()
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2
    _, counts = np.unique(both, return_counts=True)
    n = n1 + n2
    tie = (counts**3 - counts).sum() / (n * (n - 1)) if n > 1 else 0.0
    var = n1 * n2 / 12 * ((n + 1) - tie)
    if var <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / sqrt(var)
    return float(max(0.0, min(1.0, 2 * (1 - 0.5 * (1 + erf(max(z, 0.0) / sqrt(2)))))))


def _bootstrap_ci(a: np.ndarray, b: np.ndarray, rng: np.random.Generator, reps: int, level: float,
                  cap: int = 2000) -> tuple[float, float]:  # fmt: skip
    if a.shape[0] < 2 or b.shape[0] < 2:
        return float("nan"), float("nan")
    a = a if a.shape[0] <= cap else rng.choice(a, cap, replace=False)
    b = b if b.shape[0] <= cap else rng.choice(b, cap, replace=False)
    ma = a[rng.integers(0, a.shape[0], (reps, a.shape[0]))].mean(axis=1)
    mb = b[rng.integers(0, b.shape[0], (reps, b.shape[0]))].mean(axis=1)
    lo, hi = np.quantile(mb - ma, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def trace_diff(
    base: Trace | Mapping[int, Trace],
    new: Trace | Mapping[int, Trace],
    by: str = "kernel",
    alpha: float = 0.01,
    reps: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per-name change from ``base`` to ``new``, with how sure it is.

    Parameters
    ----------
    base, new : Trace or TraceSet
        The two traces (or jobs: their ranks' events pooled per name).
    by : {"kernel", "op"}
        Compare GPU kernels, or CPU ops.
    alpha : float
        Significance level of the Mann-Whitney test.
    reps : int
        Bootstrap resamples for the interval of the change of the mean.
    seed : int
        Seed of the bootstrap (the result is reproducible).

    Returns
    -------
    pandas.DataFrame
        ``name``, ``count_base``, ``count_new``, ``total_base_ns``, ``total_new_ns``, ``delta_total_ns``,
        ``mean_base_ns``, ``mean_new_ns``, ``delta_mean_ns``, ``delta_mean_pct``, ``ci_low_ns``/``ci_high_ns``
        (95% bootstrap interval of the change of the mean), ``p_value`` and ``significant`` (p < ``alpha`` and
        the interval excludes 0), sorted by ``|delta_total_ns|``. :func:`aonkit.views.diff.diff_figure` draws it.
    """
    sa, sb = _samples(base, by), _samples(new, by)
    rng = np.random.default_rng(seed)
    rows = []
    for name in list(dict.fromkeys([*sa, *sb])):
        a, b = sa.get(name, np.empty(0)), sb.get(name, np.empty(0))
        ma = a.mean() if a.shape[0] else np.nan
        mb = b.mean() if b.shape[0] else np.nan
        lo, hi = _bootstrap_ci(a, b, rng, reps, 0.95)
        p = mann_whitney_p(a, b)
        rows.append((name, a.shape[0], b.shape[0], a.sum(), b.sum(), b.sum() - a.sum(), ma, mb, mb - ma,
                     100 * (mb - ma) / ma if ma else np.nan, lo, hi, p,
                     bool(p < alpha and (lo > 0 or hi < 0))))  # fmt: skip
    cols = [
        "name",
        "count_base",
        "count_new",
        "total_base_ns",
        "total_new_ns",
        "delta_total_ns",
        "mean_base_ns",
        "mean_new_ns",
        "delta_mean_ns",
        "delta_mean_pct",
        "ci_low_ns",
        "ci_high_ns",
        "p_value",
        "significant",
    ]
    out = pd.DataFrame(rows, columns=cols)
    order = out["delta_total_ns"].abs().sort_values(ascending=False, kind="stable").index
    return out.loc[order].reset_index(drop=True)


def diff_summary(d: pd.DataFrame, n: int = 5) -> str:
    """A few lines: total change, and the biggest significant slowdowns and speed-ups."""
    tb, tn = d["total_base_ns"].sum(), d["total_new_ns"].sum()
    lines = [f"total {fmt_ns(tb)} -> {fmt_ns(tn)} ({100 * (tn - tb) / tb:+.1f}%)" if tb else "no base time"]
    sig = d[d["significant"]]
    for label, part in (("slower", sig[sig["delta_mean_ns"] > 0]), ("faster", sig[sig["delta_mean_ns"] < 0])):
        for r in part.head(n).itertuples():
            lines.append(f"{label}: {r.name[:70]} {r.delta_mean_pct:+.1f}% per call "
                         f"({fmt_ns(r.delta_total_ns)} total, p={r.p_value:.1e})")  # fmt: skip
    new = d[(d["count_base"] == 0) & (d["count_new"] > 0)]
    gone = d[(d["count_new"] == 0) & (d["count_base"] > 0)]
    if len(new) or len(gone):
        lines.append(f"{len(new)} name(s) only in the new trace, {len(gone)} only in the base")
    return "\n".join(lines)
