"""Write docs/analyses.md from the catalog (:mod:`aonkit.analysis.catalog`), with each analysis's output columns.

Usage: ``python tools/analyses_doc.py [--check]``. The columns come from
running each analysis on the bundled sample job (``sample_traces/``), so the
page shows what the code returns today. ``--check`` exits 1 when the page is
out of date (``tests/test_catalog.py`` runs it).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "analyses.md"

HEAD = """# What aonkit can answer

Every public analysis is a pure function from a trace (or a job of ranks, or HTA-semantics frames) to pandas tables,
with units in the column names. `aonkit.analysis` exposes the native ones by name (`aonkit.analysis.__all__`); the
HTA-compatible ones live in `aonkit.analysis.hta_compat`, `hta_counters` and `hta_queues` and keep HTA 0.5's column
names. The naming rules are in [conventions.md](conventions.md).

This page is generated from `aonkit/analysis/catalog.py` by `tools/analyses_doc.py`; the columns are what each
function returns on the bundled sample job. Takes: `trace` is an `aonkit.Trace`; `job` a `TraceSet` of ranks;
`frames` is `hta_compat.hta_frames(trace_or_job)`; `pair` is two traces (or jobs); `projection` is the output of
`range_projection`.

| question | function | takes | output columns | HTA / TraceLens counterpart |
|---|---|---|---|---|
"""


def _columns(obj: Any) -> str:
    import pandas as pd

    if isinstance(obj, pd.DataFrame):
        return ", ".join(f"`{c}`" for c in obj.columns)
    if isinstance(obj, pd.Series):
        return f"Series `{obj.name}` by `{obj.index.name or 'row'}`"
    if isinstance(obj, tuple):
        return "; ".join(f"({i + 1}) {_columns(o)}" for i, o in enumerate(obj))
    if hasattr(obj, "__dataclass_fields__"):
        return f"`{type(obj).__name__}`: " + ", ".join(f"`{k}`" for k in obj.__dataclass_fields__)
    if hasattr(obj, "critical_path") and hasattr(obj, "step_time_ns"):
        return ("`WhatIf`: `step_time_ns`, `model_ns`, `measured_ns`, `speedup`, `critical_path` ("
                + _columns(obj.critical_path) + ")")
    return f"`{type(obj).__name__}`"


def subjects() -> dict[str, Any]:
    """What each kind of entry takes, built from the sample job."""
    import aonkit
    from aonkit.analysis.hta_compat import hta_frames
    from aonkit.analysis.projection import range_projection

    job = aonkit.load([ROOT / "sample_traces" / f"gpu_synthetic_rank{r}.json.gz" for r in (0, 1)])
    trace = job[0]
    return {"trace": trace, "job": job, "frames": hta_frames(trace), "pair": (job[0], job[1]),
            "projection": range_projection(trace)}


def render() -> str:
    from aonkit.analysis.catalog import ENTRIES

    subj = subjects()
    rows = []
    for e in ENTRIES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = e.resolve()(*subj["pair"], **e.kwargs) if e.takes == "pair" else e.run(subj[e.takes])
        args = "".join(f", {k}={v!r}" for k, v in e.kwargs.items())
        rows.append(f"| {e.question} | `{e.function}({e.takes}{args})` | {e.takes} | {_columns(out)} | "
                    f"{e.counterpart or '-'} |")
    return HEAD + "\n".join(rows) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/analyses.md is not what render() gives")
    args = ap.parse_args()
    text = render()
    if args.check:
        same = DOC.exists() and DOC.read_text(encoding="utf-8") == text
        print("docs/analyses.md is current" if same else "docs/analyses.md is out of date: run tools/analyses_doc.py")
        return 0 if same else 1
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
