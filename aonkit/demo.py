"""``aonkit demo``: load the bundled sample traces, summarise them, write an HTML page."""

from __future__ import annotations

from pathlib import Path

from .analysis.summary import summarize
from .cache import CACHE_SUFFIX, cache_path_for
from .errors import AonkitError
from .report.html_report import write_report
from .report.html_summary import summary_html
from .report.text import format_summary
from .sources import load_each

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
    print(f"loading {src} (the first run on a machine compiles aonkit's Numba kernels once, about 45 s on 2 cores;"
          " `aonkit warmup` does it ahead)\n", flush=True)
    traces = load_each(src)  # the samples are a 2-rank job and an unrelated CPU run: each on its own
    sections = []
    for name, trace in traces.items():
        label = name if trace.meta.rank is None else f"{name} (rank {trace.meta.rank})"
        s = summarize(trace)
        print(format_summary(s, label))
        print()
        sections.append((label, s))
        cache = trace.save(cache_path_for(name, out_dir))
        report = write_report(trace, cache.with_name(cache.name.removesuffix(CACHE_SUFFIX) + ".report.html"))
        print(f"interactive report: {report}\n")
    page = out_dir / "summary.html"
    page.write_text(summary_html(sections, f"aonkit demo: {src.name}"), encoding="utf-8")
    return page
