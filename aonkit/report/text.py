"""Plain-text rendering of a :class:`~aonkit.analysis.TraceSummary`.

Only derived facts are printed; the file's raw top-level metadata (which can
hold environment dumps and tokens) never is.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..analysis.summary import TraceSummary
from ..units import cut_text, fmt_ns

if TYPE_CHECKING:
    import pandas as pd


def _short(name: str, width: int = 70) -> str:
    return cut_text(name, width, mark="...")


def _paren(name: str) -> str:
    """``name`` in parentheses, unless it is already a parenthesised placeholder such as ``(unnamed)``."""
    return name if name.startswith("(") and name.endswith(")") else f"({name})"


def format_summary(s: TraceSummary, rank_label: str | None = None) -> str:
    """Multi-line text summary of one trace."""
    lines = []
    title = Path(s.path).name if s.path else "<memory>"
    lines.append(f"== {title}" + (f" ({rank_label})" if rank_label else ""))
    rank = "-" if s.rank is None else str(s.rank)
    ws = "-" if s.world_size is None else str(s.world_size)
    lines.append(f"rank {rank} of world size {ws}; {s.n_events:,} events over {fmt_ns(s.span_ns)}")
    used = s.gpus[s.gpus["used"]]
    if len(s.gpus):
        names = ", ".join(f"device {r.device} {_paren(str(r.name))}" for r in used.itertuples()) or "none ran GPU work"
        lines.append(f"GPUs: {len(s.gpus)} listed; used: {names}")
    else:
        lines.append("GPUs: none listed")
    busy = f" ({100 * s.gpu_busy_ns / s.span_ns:.1f}% of the span)" if s.span_ns else ""
    lines.append(f"GPU busy (any kernel running): {fmt_ns(s.gpu_busy_ns)}{busy}")
    lines.append("events per category: " + ", ".join(f"{r.cat} {r.events:,}" for r in s.categories.itertuples()))
    if len(s.top_kernels):
        lines.append("top kernels by total time:")
        for r in s.top_kernels.itertuples():
            lines.append(f"  {100 * r.share:5.1f}%  {fmt_ns(r.total_ns):>9}  x{r.count:<6} {_short(str(r.name))}")
    for w in s.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def format_alignment(table: pd.DataFrame) -> list[str]:
    """Lines saying whether each GPU's activity samples line up with its kernels (:func:`sample_alignment`)."""
    out = []
    for r in table.itertuples(index=False):
        where = f"{r.metric} of GPU {r.device}"
        if r.lag_ns != r.lag_ns:  # NaN: no shift correlates (a GPU busy or idle throughout, too few samples)
            out.append(f"  {where}: no shift matches the kernels (too few samples, or no change in activity)")
            continue
        verdict = "on the trace's clock" if r.aligned else "NOT lined up with the kernels"
        due = getattr(r, "expected_lag_ns", 0)
        driver = f"; the driver's own delay ~{due / 1e6:.0f} ms" if due else ""
        out.append(f"  {where}: best match {r.lag_ns / 1e6:+.1f} ms (r {r.r:.2f}, interval "
                   f"{r.interval_ns / 1e6:.0f} ms{driver}): {verdict}")  # fmt: skip
    return out
