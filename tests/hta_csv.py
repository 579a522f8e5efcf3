"""Compare aonkit's ``hta-report`` CSVs with HTA's own, cell by cell (the differential test's rules)."""

from __future__ import annotations

import json
import math
from pathlib import Path

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
