"""aonkit: GPU and ML performance analysis in Jupyter.

>>> import aonkit
>>> trace = aonkit.load("sample_traces/cpu_mlp.pt.trace.json.gz")  # doctest: +SKIP
>>> trace.kernels.groupby("name", observed=True)["dur_ns"].sum()   # doctest: +SKIP
"""

from __future__ import annotations

import importlib as _importlib
from os import environ as _environ
from typing import TYPE_CHECKING
from typing import Any as _Any

from .errors import AonkitError, AonkitWarning, JobError, MissingInputError, TraceFormatError, TraceTooLargeError

if TYPE_CHECKING:
    from .trace import Trace
    from .traceset import TraceSet

__version__ = "0.1.0"

# The rest is imported on first use: ``import aonkit`` loads neither numpy, pandas nor numba, so it is quick,
# the daemon (``aonkit daemon run``) never loads pandas, and ``aonkit daemon status`` not even numpy.
_LAZY = {
    "Profile": "profiling", "profile": "profiling", "step": "profiling",
    "load": "sources", "load_each": "sources", "load_job": "sources", "load_trace": "sources",
    "counter_tiles": "timeline", "timeline_index": "timeline", "timeline_tiles": "timeline",
    "TS_MISSING": "schema", "Trace": "trace", "TraceMeta": "trace", "TraceSet": "traceset",
    "LazyTraceSet": "lazyset", "open_job": "lazyset",
}  # fmt: skip


def __getattr__(name: str) -> _Any:
    if name in _LAZY:
        value = getattr(_importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value  # the next look-up is a plain attribute
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def what_if(trace: Trace, rules: object = (), **options: object) -> object:
    """Re-time a trace or a job (a TraceSet) with what-if ``rules``.

    See :func:`aonkit.analysis.critical_path.what_if`.

    Parameters
    ----------
    trace : Trace or TraceSet
        A trace, or a job's ranks.
    rules : sequence of Rule or dict
        Each scales the durations of the dependency-graph nodes it matches (see
        :class:`aonkit.analysis.critical_path.Rule`); default ``()``, the identity.
    **options
        Passed on: ``step`` (int, time only ``ProfilerStep#step``), ``window`` (``(t0_ns, t1_ns)``, absolute ns,
        time only the nodes starting in ``[t0_ns, t1_ns)``), ``samples`` (int, Monte Carlo draws of the step
        time; default 0: none) and ``seed`` (int, seed of those draws; default 0).

    Returns
    -------
    WhatIf
        ``step_time_ns``, ``model_ns``, ``measured_ns``, ``speedup``, ``critical_path``, ``per_rank_ns``,
        ``retimed_trace()`` and, with ``samples``, ``samples_ns``.

    Raises
    ------
    ValueError
        ``step`` names no ``ProfilerStep`` of the trace, or no node of the dependency graph starts in the step
        or window.
    """
    from .analysis.critical_path import what_if as _what_if

    return _what_if(trace, rules, **options)  # type: ignore[arg-type]


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext aonkit``: register the ``%aon_profile`` / ``%%aon_profile`` magics."""
    from .magic import register

    register(ipython)


def to_html(trace: Trace | TraceSet, path: str | None = None, **kwargs: object) -> str:
    """Self-contained HTML report of ``trace`` (see :mod:`aonkit.report.html_report`); written to ``path`` if given.

    Returns the page text. BokehJS is inlined; the page needs no network.

    Parameters
    ----------
    trace : Trace or TraceSet
        The trace to report on; a job (a :class:`TraceSet`, lazy or not) is reported as its ranks combined
        on one clock (:func:`~aonkit.analysis.combine.combine_ranks`).
    path : str, optional
        File to write the page to (UTF-8; an existing file is overwritten). Default None: nothing is written.
    **kwargs
        Passed to :func:`aonkit.report.html_report.report_html`: ``title`` (str; default
        ``"aonkit report: <file name>"``), ``width_px`` (int, width of the timeline in pixels, also of the
        icicle up to 1400; default 1400), ``timeline`` (bool, include the timeline; default True) and
        ``critical_path`` (bool, outline the critical path on the timeline; default False).

    Returns
    -------
    str
        The HTML page.

    Raises
    ------
    OSError
        ``path`` cannot be opened for writing.
    """
    from .report.html_report import report_html
    from .traceset import TraceSet

    if isinstance(trace, TraceSet):  # a job: its ranks on one clock, as `aonkit report --combined` draws them
        from .analysis.combine import combine_ranks

        trace = trace[trace.ranks[0]] if len(trace) == 1 else combine_ranks(trace)
    page = report_html(trace, **kwargs)  # type: ignore[arg-type]
    if path is not None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
    return page


if _environ.get("AONKIT_SERVE", "") not in ("", "0"):  # opt in to on-demand traces: aonkit.live.serve()
    from .live.serve import serve_from_env

    serve_from_env()

__all__ = [
    "AonkitError",
    "MissingInputError",
    "AonkitWarning",
    "JobError",
    "LazyTraceSet",
    "Profile",
    "TS_MISSING",
    "Trace",
    "TraceFormatError",
    "TraceMeta",
    "TraceSet",
    "TraceTooLargeError",
    "__version__",
    "counter_tiles",
    "load",
    "load_each",
    "load_job",
    "load_trace",
    "open_job",
    "profile",
    "step",
    "timeline_index",
    "timeline_tiles",
    "to_html",
    "what_if",
]
