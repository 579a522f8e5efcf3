"""The shareable HTML report as a file: self-contained, bounded, no secrets; the CLI and to_html."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import aonkit
from aonkit.report.html_report import report_html

from .conftest import ROOT, SAMPLE_TRACES, SHARED

SECRET = "hf_SECRETTOKEN1234567890"


def test_report_is_self_contained_and_keeps_metadata_out(tmp_path: Path) -> None:
    doc = json.loads(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
         "args": {"stream": 7, "correlation": 1}}], "metadata": {"env": {"HF_TOKEN": SECRET}}}))
    (tmp_path / "t.json").write_text(json.dumps(doc))
    trace = aonkit.load(tmp_path / "t.json")
    assert trace.metadata["metadata"]["env"]["HF_TOKEN"] == SECRET
    page = report_html(trace)
    assert SECRET not in page
    # BokehJS inline: scripts carry code, none has a src pointing anywhere
    assert not re.search(r"<script[^>]+src=", page) and "cdn.bokeh.org" not in page
    assert "Bokeh.embed" in page or "embed_items" in page


def test_cli_report_on_sample_and_nsys(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    src = SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"
    proc = subprocess.run([sys.executable, "-m", "aonkit.cli", "report", str(src), "-o", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert out.exists() and 1e6 < out.stat().st_size < 20e6
    nsys = SHARED / "nsys" / "hpcgroup__pipit" / "perlmutter-cloverleaf-cuda.sqlite"
    if nsys.exists():  # every view works on nsys input too
        page = aonkit.to_html(aonkit.load(nsys), tmp_path / "n.html")
        assert "par_ranged2d_kernel" in page and (tmp_path / "n.html").read_text(encoding="utf-8") == page


def test_job_directory_gives_one_report_per_rank(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "aonkit.cli", "report", str(SAMPLE_TRACES), "-o",
                           str(tmp_path / "job.html")], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in tmp_path.glob("job-*.html"))
    # the CPU runs have no rank: named by their files
    assert names == ["job-cpu_generate.html", "job-cpu_mlp.html", "job-rank0.html", "job-rank1.html"]


def test_header_says_when_there_is_no_gpu_event_and_lists_the_reader_warnings(tmp_path: Path) -> None:
    from aonkit.report.html_report import NO_GPU, report_layout

    cpu = aonkit.load(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz")
    cpu.warnings.append("a <b>made-up</b> warning")  # escaped, shown as text
    head = report_layout(cpu, timeline=False).children[0].text
    assert html.escape(NO_GPU) in head
    assert "1 reader warning(s)" in head and "a &lt;b&gt;made-up&lt;/b&gt; warning" in head and "<b>made-up" not in head
    gpu = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    head = report_layout(gpu, timeline=False).children[0].text
    assert html.escape(NO_GPU) not in head and "34,374 events" in head
    gpu.warnings.extend(f"w{i}" for i in range(12))
    head = report_layout(gpu, timeline=False).children[0].text
    assert head.count("<li>") == 11 and "2 more" in head  # ten shown, then a count


def test_timeline_has_a_colour_key_and_the_memory_legend_sits_above_the_plot() -> None:
    from bokeh.models import Div, Legend

    from aonkit.report.html_report import report_layout
    from aonkit.views import theme

    lay = report_layout(aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"))
    key = [d for d in lay.select({"type": Div}) if d.name == "timeline_legend"]
    assert len(key) == 1
    text = key[0].text
    for label, cls in (("GPU: computation", "computation"), ("GPU: communication", "communication")):
        assert label in text and theme.CLASS_COLORS[cls] in text
    assert "CPU op" in text and "Python function" not in text  # only the colours this trace uses
    from bokeh.plotting import figure

    def is_counter(leg: object) -> bool:  # a counter chart's legend: its labels come from the series field
        return isinstance(leg, Legend) and any(getattr(i.label, "field", None) == "series" for i in leg.items)

    counter_legends = [leg for f in lay.select({"type": figure}) for leg in f.above + f.center if is_counter(leg)]
    assert counter_legends and all(leg in f.above for f in lay.select({"type": figure}) for leg in counter_legends
                                   if leg in f.above + f.center)


def test_to_html_of_a_job_draws_its_ranks_on_one_page(tmp_path: Path) -> None:
    from .gen_ranks import write_job

    write_job(tmp_path, ranks=2, straggler=1)
    job = aonkit.load(tmp_path)
    page = aonkit.to_html(job)  # an AttributeError on a TraceSet before
    assert "rank 0" in page and "rank 1" in page
    with aonkit.open_job(tmp_path, scan="head") as lazy:
        assert "rank 1" in aonkit.to_html(lazy, str(tmp_path / "job.html"))
    assert (tmp_path / "job.html").stat().st_size > 100_000


def test_report_layouts_pass_bokehs_checks() -> None:
    """The pages are written without bokeh's document validation (:func:`unvalidated`): the layouts pass it here."""
    from bokeh.core.validation.check import check_integrity
    from bokeh.settings import settings

    from aonkit.report.html_report import report_layout, unvalidated

    paths = [SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz", SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz",
             SAMPLE_TRACES / "nsys" / "synthetic_2proc.sqlite"]  # fmt: skip
    for path in paths:
        issues = check_integrity(list(report_layout(aonkit.load(path), critical_path=True).references()))
        assert not issues.error and not issues.warning, (path.name, issues)
    with unvalidated():
        assert settings.perform_document_validation() is False
    assert settings.perform_document_validation() is True
