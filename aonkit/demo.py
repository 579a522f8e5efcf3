"""``aonkit demo``: load the bundled sample traces, summarise them, write an HTML page."""

from __future__ import annotations

from pathlib import Path

from .analysis.summary import summarize
from .errors import AonkitError
from .report.html_report import write_report
from .report.html_summary import summary_html
from .report.text import format_summary
from .sources import load
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
    print(f"loading {src} (the first run on a machine compiles aonkit's Numba kernels once: about a minute)\n",
          flush=True)
    traces = load(src)
    assert isinstance(traces, TraceSet)
    sections = []
    for rank, trace in traces.items():
        s = summarize(trace)
        print(format_summary(s, f"rank {rank}"))
        print()
        sections.append((f"rank {rank}", s))
        stem = Path(trace.meta.path or f"rank{rank}").name.removesuffix(".gz").removesuffix(".json")
        trace.save(out_dir / f"{stem}.parquet")
        report = write_report(trace, out_dir / f"{stem}.report.html")
        print(f"interactive report: {report}\n")
    page = out_dir / "summary.html"
    page.write_text(summary_html(sections, f"aonkit demo: {src.name}"), encoding="utf-8")
    return page
