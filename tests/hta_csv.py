"""Compare aonkit's ``hta-report`` CSVs with HTA's own, cell by cell (the differential test's rules)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def compare_csv(got: Path, want: Path, rtol: float = 1e-9) -> list[str]:
    """Differences between two CSV files: shape, then each cell (numbers within ``rtol``, NaN equal to NaN).

    Integers and sums must be equal; ``rtol`` only absorbs the last digits
    of floats that pandas writes from different summation orders.
    """
    if not got.exists():
        return [f"{want.name}: aonkit wrote no such file"]
    read = dict(header=None, dtype=str, keep_default_na=False)
    g = pd.read_csv(got, **read) if got.stat().st_size else pd.DataFrame()
    w = pd.read_csv(want, **read) if want.stat().st_size else pd.DataFrame()
    if want.name.startswith("gpu_kernel_breakdown_type"):
        # rows of zero time: HTA makes them at equal edge times in the order of numpy's unstable sort, which
        # differs by CPU (docs/hta-compat.md); aonkit's fixed rule may make others. They carry no time.
        g, w = (x[(x[1] != "0") | (x.index == 0)].reset_index(drop=True) for x in (g, w))
        # rows of equal time: HTA sorts by time with numpy's unstable sort too; both must be in time order
        for x in (g, w):
            if not x.empty and not pd.Series(x[1].iloc[1:].astype(float).to_numpy()).is_monotonic_decreasing:
                return [f"{want.name}: rows not in decreasing time order"]
        g, w = (pd.concat([x.iloc[:1], x.iloc[1:].sort_values([1, 0])]).reset_index(drop=True) for x in (g, w))
    if g.shape != w.shape:
        return [f"{want.name}: shape {g.shape} != HTA's {w.shape}"]
    out = []
    for (i, j), a in g.stack().items():
        b = w.iat[i, j]
        if a == b:
            continue
        x, y = _number(a), _number(b)
        if x is not None and y is not None:
            if (math.isnan(x) and math.isnan(y)) or abs(x - y) <= rtol * max(1.0, abs(x), abs(y)):
                continue
        elif a in ("", "nan") and b in ("", "nan"):
            continue
        out.append(f"{want.name} row {i} col {j} ({w.iat[0, j]}): aonkit {a!r}, HTA {b!r}")
    return out


def compare_dir(got: Path, want: Path) -> list[str]:
    """Every CSV HTA wrote in ``want`` against aonkit's file of the same name in ``got``."""
    out = []
    for csv in sorted(want.glob("*.csv")):
        out += compare_csv(got / csv.name, csv)
    return out


def hta_errors(want: Path) -> dict[str, str]:
    """The calls HTA could not answer for this input (no CSV of theirs to compare)."""
    path = want / "_errors.json"
    return {k: v for k, v in json.loads(path.read_text()).items() if not k.endswith("_where")} if path.exists() else {}


def tie_envelope(want: pd.DataFrame, lo: pd.DataFrame, hi: pd.DataFrame, bounded: list[str]) -> list[str]:
    """HTA's summary against aonkit's under the two extreme tie orders (docs/hta-compat.md, "ties").

    HTA sorts with numpy's unstable sort, whose tie order differs between CPUs
    (AVX-512, AVX2, neither) and numpy builds, so HTA's values are one
    machine's. A row that both tie orders give alike does not depend on ties:
    it must equal HTA's. Elsewhere every statistic in ``bounded`` (monotone in
    the series, which the extremes bound at every position) must lie between
    the two; the others (std) depend on the order and are not compared.
    Returns the problems found (none: HTA's values are explained by ties).
    """
    if lo.shape != want.shape or hi.shape != want.shape:
        return [f"shape {lo.shape} != HTA's {want.shape}"]
    same = np.isclose(lo.to_numpy(float), hi.to_numpy(float), rtol=0, atol=0, equal_nan=True).all(axis=1)
    w = want.to_numpy(float)
    out = []
    if not np.allclose(lo.to_numpy(float)[same], w[same], rtol=1e-9, atol=1e-12, equal_nan=True):
        out.append("rows that do not depend on ties differ")
    for col in bounded:
        a, b, v = lo[col].to_numpy(float)[~same], hi[col].to_numpy(float)[~same], want[col].to_numpy(float)[~same]
        low, high = np.minimum(a, b), np.maximum(a, b)
        slack = 1e-9 * np.maximum(np.abs(low), np.abs(high)) + 1e-9
        if not np.all((v >= low - slack) & (v <= high + slack)):
            out.append(f"{col} outside the tie envelope")
    return out
