"""``aonkit warmup``: compile every Numba kernel ahead, into Numba's on-disk cache.

A new machine (a fresh image, a CI runner) otherwise pays each kernel's
compilation on its first use: about 26-30 s for the trace parser alone on a
2-core machine. Warm-up runs the user entry points (load on one and on
several threads, every catalogued analysis, the job analyses, what-if,
the timeline, the report and the serving model) on the bundled sample traces,
so the kernels are compiled with the argument types real calls use. After it,
a new process compiles nothing for these entry points
(``tests/test_warmup.py`` counts Numba's compile events to check it).
"""

from __future__ import annotations

import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .demo import SAMPLE_DIR
from .errors import AonkitError

STEPS = ("parse", "analyses", "job", "whatif", "views", "models", "live")


def _samples(src: Path) -> dict[str, Any]:
    from .sources import load_each

    if not src.is_dir():
        raise AonkitError(f"sample traces not found at {src}; run from a source checkout or pass --traces DIR")
    return load_each(src)


def _quiet(fn: Callable[[], Any]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn()
        except (AonkitError, ValueError, KeyError):  # an analysis that does not apply to this trace
            pass


def _parse(src: Path) -> dict[str, Any]:
    from .sources import _parallel
    from .sources._io import read_buffer

    traces = _samples(src)  # one thread per file: the small samples
    for path in sorted(src.glob("*.json*")):
        buf, _ = read_buffer(path)
        _parallel.scan(buf, threads=2)  # the parallel scan of large files (pieces, tail, merge)
    return traces


def _analyses(traces: dict[str, Any]) -> None:
    from .analysis import hta_compat
    from .analysis.catalog import ENTRIES
    from .timeline import timeline_index, timeline_tiles

    for trace in traces.values():
        frames = None
        for e in ENTRIES:
            if e.takes == "trace":
                _quiet(lambda e=e, t=trace: e.run(t))
            elif e.takes == "frames":
                frames = frames if frames is not None else hta_compat.hta_frames(trace)
                _quiet(lambda e=e, f=frames: e.run(f))
        if frames is not None:  # the HTA report's step numbers, outside the catalogue
            _quiet(lambda f=frames: hta_compat.profiler_step_numbers(f))
        idx = timeline_index(trace)
        if len(idx.ts):
            _quiet(lambda idx=idx: timeline_tiles(idx, int(idx.ts.min()), int(idx.end.max()) + 1, 800))
        _quiet(lambda t=trace: [t.arg_numbers("Bytes"), t.arg_ints("External id"), t.event_args(0)])


def _job_of(traces: dict[str, Any]) -> Any:
    """The samples that form a job (by rank), as a TraceSet; None with fewer than two ranks."""
    from .traceset import TraceSet

    ranked = [t for t in traces.values() if t.meta.rank is not None]
    return TraceSet.from_traces(ranked) if len(ranked) > 1 else None


def _job(traces: dict[str, Any]) -> None:
    from .analysis.catalog import ENTRIES

    job = _job_of(traces)
    for e in ENTRIES if job is not None else ():
        if e.takes == "job":
            _quiet(lambda e=e: e.run(job))


def _whatif(traces: dict[str, Any]) -> None:
    from .analysis.critical_path import critical_path, what_if

    for trace in traces.values():
        _quiet(lambda t=trace: critical_path(t))
        # a rule's re-time, its path walked back and its starts; the Monte Carlo spread
        _quiet(lambda t=trace: _read(what_if(t, [{"kind": "gpu", "scale": 0.5}], samples=4)))
    job = _job_of(traces)
    if job is not None:
        _quiet(lambda: what_if(job, [{"gpu_class": "communication", "scale": 0.5}]))


def _read(result: Any) -> None:
    """What a what-if compiles only when read: its critical path and its starts."""
    result.critical_path, result.start_ns  # noqa: B018 - read for what they compile


def _views(traces: dict[str, Any]) -> None:
    from .report.html_report import report_html
    from .sources import load

    with tempfile.TemporaryDirectory() as tmp:
        for name, trace in traces.items():
            _quiet(lambda t=trace: report_html(t))
            _quiet(lambda t=trace, n=name: t.save(Path(tmp) / f"{n}.aon.parquet"))
            _quiet(lambda n=name: load(Path(tmp) / f"{n}.aon.parquet"))
    _quiet(_worker_save)


def _worker_save() -> None:
    """What a job's worker process compiles to write a cache: the text gathered into its kept buffer."""
    import numpy as np

    from ._fresh import fresh
    from ._kernels.inputs import frozen
    from ._kernels.spans import copy_spans, span_offsets

    buf, starts = frozen(np.frombuffer(b"{}  ", np.uint8)), frozen(np.zeros(1, np.int64))
    copy_spans(buf, starts, span_offsets(buf, starts, frozen(np.array([3], np.int64))), fresh(4, np.uint8))


def _models(traces: dict[str, Any]) -> None:
    from .model import StepTime, simulate_serving
    from .model.serving_spec import Speculation

    st = StepTime(prefill_time_s=(0.004, 2e-5), decode_time_s=(0.01, 1e-4, 1e-8))
    _quiet(lambda: simulate_serving([0.0, 0.1, 0.15, 0.2], [10, 20, 30, 40], [3, 2, 1, 4], max_batch=2,
                                    token_budget=100, step_time=st, replicas=2))
    # speculative engines: the iterations' draw (the simulation's own signature is the one above)
    _quiet(lambda: simulate_serving([0.0, 0.1], [10, 20], [9, 5], step_time=st, max_batch=2, seed=0,
                                    speculative=Speculation(2, 0.5)))


def _live(traces: dict[str, Any]) -> None:
    from .sources.host_compiled import kernel

    kernel(compile=True)  # the host sampler's compiled loop (compiled, not run)


_RUN = {"analyses": _analyses, "job": _job, "whatif": _whatif, "views": _views,
        "models": _models, "live": _live}


def first_views(src: Path = SAMPLE_DIR) -> None:
    """Compile what the first dashboard or report of a trace needs, on the bundled GPU sample (read quickly).

    The background process of a first load (:mod:`aonkit.sources.first_run`) runs this before it compiles the
    parser: a new user's next step after a load is a view, and the quick reader covers the next loads meanwhile.
    The analyses only (both timelines' data, kernel table, op tree, roofline, overview, in that order: see the
    comment below), not the bokeh models: Python's work, which no cache keeps. Nothing when the samples are
    absent (an installed wheel).
    """
    import os

    from .analysis.kernels import kernel_stats
    from .analysis.op_tree import op_tree
    from .analysis.overview import overview
    from .analysis.roofline import roofline_table
    from .sources import load_trace
    from .timeline import timeline_index, timeline_pyramid, timeline_tiles

    path = src / "gpu_synthetic_rank0.json.gz"
    if not path.is_file():
        return
    os.environ["AONKIT_QUICK_PARSE"] = "1"  # this process compiles the parser next, on purpose
    os.environ["AONKIT_STANDINS"] = "0"  # but the views' kernels here, not their stand-ins (analysis.standin)
    trace = load_trace(path)
    # Last needed first: a caller that goes straight on (``aonkit demo``) compiles the summary's kernels
    # itself meanwhile and finds the timeline's and the kernel table's in the cache when it gets there.
    _quiet(lambda: timeline_pyramid(trace, 1400))
    idx = timeline_index(trace)
    if len(idx.ts):
        _quiet(lambda: timeline_tiles(idx, int(idx.ts.min()), int(idx.end.max()) + 1, 1200))
    for step in (kernel_stats, op_tree, roofline_table, overview):
        _quiet(lambda f=step: f(trace))


BACKGROUND_REST = tuple(s for s in STEPS if s != "parse")
"""What a first load's background process compiles after the first views and the parser: the rest of the warm-up."""


def _rest() -> None:
    run_steps(list(BACKGROUND_REST), SAMPLE_DIR, quiet=True)


def _background() -> int:
    """``python -m aonkit.warmup --background``: a first load's background compile (views, parser, the rest)."""
    from .sources.first_run import compile_once

    return compile_once(first_views, _rest)


def run_steps(steps: list[str], src: Path, quiet: bool = False) -> None:
    """Run the named warm-up steps in this process; the samples are loaded once (by ``parse``, or first needed)."""
    import os

    names = ("AONKIT_QUICK_PARSE", "AONKIT_STANDINS")
    before = {k: os.environ.get(k) for k in names}
    for k in names:  # compile the parser and the analyses' kernels here, not read or stood in around them
        os.environ[k] = "0"
    try:
        _run_steps(steps, src, quiet)
    finally:  # a warm-up called from a notebook leaves the session's settings as they were
        for k, v in before.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


def _run_steps(steps: list[str], src: Path, quiet: bool) -> None:
    traces = None
    for s in steps:
        t = time.perf_counter()
        if s == "parse":
            traces = _parse(src)
        else:
            traces = traces if traces is not None else _samples(src)
            _RUN[s](traces)
        if not quiet:
            print(f"warmup: {s} ({time.perf_counter() - t:.1f} s)", flush=True)


def warmup(traces_dir: Path | None = None, *, quiet: bool = False) -> float:
    """Compile aonkit's kernels for this machine ahead of use; returns the seconds it took.

    Parameters
    ----------
    traces_dir : Path, optional
        Sample traces to exercise the kernels on (default: the bundled ``sample_traces/``).
    quiet : bool
        No progress lines.

    Notes
    -----
    One process: splitting the steps over two processes took longer on 2 cores
    (84 s against 76 s, ``bench/RESULTS.md``), as each compiled the shared
    helpers again.
    """
    src = traces_dir or SAMPLE_DIR
    t0 = time.perf_counter()
    run_steps(list(STEPS), src, quiet)
    if not quiet:
        print(f"warmup: done in {time.perf_counter() - t0:.1f} s", flush=True)
    return time.perf_counter() - t0


if __name__ == "__main__":
    import sys

    sys.exit(_background() if sys.argv[1:] == ["--background"] else 2)
