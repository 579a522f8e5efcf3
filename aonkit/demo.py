"""``aonkit demo``: load the bundled sample traces, summarise them, write an HTML page."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .analysis.engine_passes import forward_passes
from .analysis.findings import COLUMNS, findings
from .analysis.summary import summarize
from .cache import CACHE_SUFFIX, cache_path_for
from .errors import AonkitError, JobError
from .model.serving_fit import StepFit, fit_step_time
from .report.html_report import write_report
from .report.html_summary import summary_html
from .report.text import format_summary
from .sources import load_each
from .trace import Trace
from .traceset import TraceSet

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "sample_traces"


def run_demo(out_dir: Path, traces_dir: Path | None = None) -> Path:
    """Summarise every trace in ``traces_dir`` (default ``sample_traces/``) into ``out_dir``.

    Writes ``summary.html``, and per trace a Parquet cache and a
    self-contained interactive report (``<name>.report.html``: dashboard,
    roofline, zoomable timeline); prints the text summaries. Returns the
    summary page's path.
    """
    src = traces_dir or SAMPLE_DIR
    if not src.is_dir():
        raise AonkitError(
            f"sample traces not found at {src}; run from a source checkout (pip install -e .) or pass --traces DIR"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"loading {src} (the first run on a machine compiles aonkit's analysis kernels once, about 15 s on 2 cores;"
          " `aonkit warmup` does it ahead)\n", flush=True)
    traces = load_each(src)  # the samples are a 2-rank job and two unrelated CPU runs: each on its own
    sections = []
    for name, trace in traces.items():
        label = name if trace.meta.rank is None else f"{name} (rank {trace.meta.rank})"
        s = summarize(trace)
        print(format_summary(s, label))
        print()
        cache = trace.save(cache_path_for(name, out_dir))
        report = write_report(trace, cache.with_name(cache.name.removesuffix(CACHE_SUFFIX) + ".report.html"))
        print(f"interactive report: {report}\n")
        sections.append((label, s, report.name))
    found = what_to_look_at(traces)
    if len(found):
        print("What to look at first (aonkit.analysis.findings):")
        for text in found["text"]:
            print(f"  - {text}")
    for name, trace in traces.items():  # a traced generation: the serving model's step times, measured
        fit = measured_step_times(trace)
        if fit is not None:
            print(f"\n{name}: {fit.text()}")
    page = out_dir / "summary.html"
    page.write_text(summary_html(sections, f"aonkit demo: {src.name}", found), encoding="utf-8")
    return page


def measured_step_times(trace: Trace) -> StepFit | None:
    """:func:`~aonkit.model.fit_step_time` of the trace's forward passes; None when it has no prefill or no decode."""
    passes = forward_passes(trace)
    kinds = set(passes["kind"].astype(str))
    return fit_step_time(passes) if {"prefill", "decode"} <= kinds else None


def what_to_look_at(traces: dict[str, Trace]) -> pd.DataFrame:
    """:func:`~aonkit.analysis.findings.findings` of the traces that form a job (by rank), then of each other one.

    A trace outside the job has its file name before its findings' text.
    """
    ranked = {n: t for n, t in traces.items() if t.meta.rank is not None}
    rest = {n: t for n, t in traces.items() if t.meta.rank is None}
    parts = []
    if len(ranked) >= 2:
        try:
            parts.append(findings(TraceSet.from_traces(list(ranked.values()))))
        except JobError:  # ranks of different jobs: each on its own
            rest.update(ranked)
    else:
        rest.update(ranked)
    for name, t in rest.items():
        f = findings(t)
        parts.append(f.assign(text=[f"{name}: {x}" for x in f["text"]]))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)
