"""``aonkit.profile``: run code with live samplers and, when torch is there, torch.profiler; keep a bundle.

>>> with aonkit.profile(out="runs/step") as p:     # doctest: +SKIP
...     for batch in loader:
...         train_step(batch)
...         aonkit.step()                           # advances the profiler's schedule, if any
>>> p.trace, p.path                                 # doctest: +SKIP

The samplers are the host sampler and, when NVML answers, the GPU sampler
(:func:`aonkit.sources.nvml.open_gpu_sampler`); without a driver the run
samples the host only and says so once. The bundle (:mod:`aonkit.sources.bundle`)
is written when the run stops, also when the code raised: the exception
propagates after it is written. ``%%aon_profile`` (:mod:`aonkit.magic`) and
``aonkit profile -- python train.py`` are shells over :class:`Profile`.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .sources.bundle import write_bundle
from .sources.samplers import HostSampler, samples_table
from .trace import Trace

_ACTIVE: list[Profile] = []
FIRST_SAMPLE_WAIT_S = 1.0
"""How long :meth:`Profile.start` waits, at most, for the samplers' first samples (a host sample takes tens of
µs; a GPU sampler blocked in its driver is not waited for longer)."""


def _default_out() -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path("aon-profiles")
    n = 0
    while (base / f"{stamp}-{n}").exists():
        n += 1
    return base / f"{stamp}-{n}"


class Profile:
    """One profiling run: samplers, optionally torch.profiler, and the bundle written at the end.

    Parameters
    ----------
    out : path-like, optional
        Bundle folder (default ``aon-profiles/<date>-<time>-<n>``).
    interval_s : float
        Sampling interval (default 0.1 s: 10 Hz).
    trace : bool
        Run torch.profiler when torch is importable (CPU, plus CUDA when
        available; shapes, FLOPs and memory recorded).
    wait, warmup, active : int, optional
        A torch.profiler schedule over the run's steps (``aonkit.step()``);
        without them the whole run is traced.
    gpu : bool
        Sample the GPUs through NVML when a driver answers.
    pids : list of int, optional
        Processes whose GPU memory the GPU sampler watches (default: this one).
    """

    def __init__(self, out: str | Path | None = None, *, interval_s: float = 0.1, trace: bool = True,
                 wait: int | None = None, warmup: int | None = None, active: int | None = None, gpu: bool = True,
                 pids: list[int] | None = None) -> None:  # fmt: skip
        self.path = Path(out) if out is not None else _default_out()
        self.interval_s, self.tracing, self.gpu = interval_s, trace, gpu
        self.pids = list(pids) if pids is not None else [os.getpid()]
        self.schedule = (wait, warmup, active)
        self.messages: list[str] = []
        self.status = "not started"
        self.value: Any = None
        self._samplers: list[Any] = []
        self._drained: _Drain | None = None
        self._prof: Any = None
        self._tmp_json: Path | None = None
        self._trace: Trace | None = None
        self.t0_ns = self.t1_ns = 0

    # -- running -----------------------------------------------------------------------------------
    def start(self) -> Profile:
        """Start the samplers and the profiler."""
        if self.status == "running":
            return self
        self.t0_ns = time.time_ns()  # the run's span starts before anything samples or traces
        self._samplers = [HostSampler(self.interval_s)]
        if self.gpu:
            self._samplers += self._gpu_sampler()
        for s in self._samplers:
            s.start()
        deadline = time.monotonic() + FIRST_SAMPLE_WAIT_S  # each sampler's first sample before the run's code
        for s in self._samplers:
            s.wait_first(max(0.0, deadline - time.monotonic()))
        self._drained = _Drain(self._samplers, self.messages)
        if self.tracing:
            self._start_torch()
        self.status = "running"
        _ACTIVE.append(self)
        return self

    def _gpu_sampler(self) -> list[Any]:
        try:
            from .sources.nvml import open_gpu_sampler
        except ImportError:  # pragma: no cover - the module ships with aonkit
            return []
        sampler, why = open_gpu_sampler(interval_s=self.interval_s, pids=self.pids)
        self.messages.append(why)  # which GPUs and metrics, or why none
        return [sampler] if sampler is not None else []

    def _start_torch(self) -> None:
        try:
            import torch
            from torch.profiler import ProfilerActivity, profile, schedule
        except ImportError:
            self.messages.append("torch is not importable: samples only, no trace")
            self.tracing = False
            return
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        wait, warmup, active = self.schedule
        sched = None
        if active is not None or wait is not None or warmup is not None:
            sched = schedule(wait=wait or 0, warmup=warmup or 0, active=active or 1, repeat=1)
        self._prof = profile(activities=acts, schedule=sched, record_shapes=True, profile_memory=True,
                             with_flops=True)
        self._prof.__enter__()

    def step(self) -> None:
        """Advance the profiler's schedule by one step (no-op without tracing)."""
        if self._prof is not None:
            self._prof.step()

    def stop(self, error: BaseException | None = None) -> Path:
        """Stop everything and write the bundle; return its folder. Safe to call twice."""
        if self.status != "running":
            return self.path
        self.t1_ns = time.time_ns()
        _ACTIVE.remove(self)
        trace_json = None
        if self._prof is not None:
            try:
                self._prof.__exit__(None, None, None)
                self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
                trace_json = Path(tempfile.mkstemp(suffix=".json", dir=self.path)[1])
                self._prof.export_chrome_trace(str(trace_json))
            except Exception as exc:  # noqa: BLE001 - a profiler failure must not lose the samples
                self.messages.append(f"torch.profiler failed ({type(exc).__name__}: {exc}); samples only")
                if trace_json is not None:
                    trace_json.unlink(missing_ok=True)  # no half-written export left in the bundle
                trace_json = None
        for s in self._samplers:
            if s.stop() is False:  # a thread blocked in a driver call is not waited for: the bundle is written
                self.messages.append(f"{type(s).__name__}: {s.stuck}; its samples until then are kept")
        if self._drained is not None:
            self._drained.stop()
        self.status = "ok" if error is None else f"raised {type(error).__name__}"
        write_bundle(self.path, trace_json, self.samples, self._manifest())
        return self.path

    # -- results -----------------------------------------------------------------------------------
    @property
    def samples(self) -> pd.DataFrame:
        """Every sample of the run, long form, in time order."""
        raw = self._drained.frames() if self._drained is not None else []
        parts = [samples_table(f) for f in raw]
        parts = [p for p in parts if len(p)]
        if not parts:
            return samples_table(pd.DataFrame({c: [] for c in ("ts_ns", "device", "metric", "value")}))
        return samples_table(pd.concat([p.astype({"metric": str}) for p in parts], ignore_index=True))

    @property
    def trace(self) -> Trace:
        """The bundle loaded back: the trace with its samples (after :meth:`stop`)."""
        if self._trace is None:
            from .sources import load_trace

            self._trace = load_trace(self.path)
        return self._trace

    def _manifest(self) -> dict[str, Any]:
        torch_version = sys.modules["torch"].__version__ if "torch" in sys.modules else None
        samplers = [{"type": type(s).__name__, "interval_s": s.interval_s, "metrics": list(s.metrics),
                     **{k: _plain(getattr(s, k)) for k in ("unsupported", "gaps") if hasattr(s, k)}}
                    for s in self._samplers]  # fmt: skip
        return {
            "status": self.status, "t0_ns": self.t0_ns, "t1_ns": self.t1_ns, "traced": self._prof is not None,
            "schedule": dict(zip(("wait", "warmup", "active"), self.schedule)), "clock": "time.time_ns",
            "versions": {"aonkit": _version(), "python": platform.python_version(), "torch": torch_version},
            "samplers": samplers, "messages": self.messages,
        }  # fmt: skip

    def summary_text(self) -> str:
        """What a terminal shows: status, span, bundle, samplers and the trace's summary."""
        from .analysis.summary import summarize
        from .report.text import format_summary

        lines = [f"aon_profile: {self.status}, {(self.t1_ns - self.t0_ns) / 1e9:.3f} s, bundle {self.path}"]
        lines += [f"  note: {m}" for m in self.messages]
        lines.append(format_summary(summarize(self.trace), "profile"))
        lines += alignment_lines(self.trace)
        return "\n".join(lines)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        from .widgets import Dashboard

        bundle = Dashboard(self.trace)._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = self.summary_text()
        return bundle

    def __enter__(self) -> Profile:
        return self.start()

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.stop(exc)


def alignment_lines(trace: Trace) -> list[str]:
    """The summary's lines on GPU samples against the kernels; none without GPU activity samples or kernels."""
    from .analysis.sample_align import ACTIVITY_METRICS, sample_alignment
    from .report.text import format_alignment

    s = trace.samples
    if s is None or s.empty or trace.kernels.empty or not s["metric"].astype(str).isin(ACTIVITY_METRICS).any():
        return []
    head = "GPU samples against the kernels (aonkit.analysis.sample_align):"
    return [head, *format_alignment(sample_alignment(trace))]


def _version() -> str:
    from . import __version__

    return __version__


def _plain(value: Any) -> Any:
    if isinstance(value, pd.DataFrame):
        return value.astype(object).where(value.notna(), None).to_dict("records")
    return value


def profile(out: str | Path | None = None, **options: Any) -> Profile:
    """A :class:`Profile` to use as ``with aonkit.profile(...) as p:`` (options as :class:`Profile`).

    Parameters
    ----------
    out : str or path-like, optional
        Bundle folder. Default None: ``aon-profiles/<date>-<time>-<n>``.
    **options
        Keywords of :class:`Profile`: ``interval_s`` (float, sampling interval in seconds; default 0.1),
        ``trace`` (bool, run torch.profiler when torch is importable; default True), ``wait``, ``warmup``,
        ``active`` (int, a torch.profiler schedule over ``aonkit.step()`` calls; default None: the whole run is
        traced), ``gpu`` (bool, sample GPUs through NVML; default True) and ``pids`` (list of int, processes
        whose GPU memory is watched; default: this one).

    Returns
    -------
    Profile
        Not started: entering the ``with`` block (or :meth:`Profile.start`) starts it, leaving it (or
        :meth:`Profile.stop`) writes the bundle.
    """
    return Profile(out, **options)


def step() -> None:
    """Advance the schedule of the innermost running profile (no-op when none runs)."""
    if _ACTIVE:
        _ACTIVE[-1].step()


class _Drain:
    """Copies each sampler's new samples out of its ring now and then, so a run longer than a ring loses none.

    A ring holds ``capacity`` samples (12 min of the host's at 10 Hz); this
    thread reads each ring at a quarter of its span (at most a minute apart)
    and once more at the end. Samples a ring overwrote all the same (a
    stalled process) are counted in ``messages``. A ring sampler's rows are
    kept as the ring holds them (times and a values block: 8 bytes a value,
    where the long form took 25) and made long form when asked.
    """

    def __init__(self, samplers: list[Any], messages: list[str]) -> None:
        self.samplers, self.messages = samplers, messages
        self.cursors = [0] * len(samplers)
        self.parts: list[list[Any]] = [[] for _ in samplers]  # per sampler: (ts, values) blocks, or frames
        self.lost = [0] * len(samplers)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        spans = [s.capacity * s.interval_s for s in samplers] or [60.0]
        self.every_s = max(0.05, min(60.0, min(spans) / 4))
        self._thread = threading.Thread(target=self._run, name="aonkit-profile-drain", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.drain()

    def drain(self) -> None:
        """Read every ring from where the last read stopped."""
        with self._lock:
            for k, s in enumerate(self.samplers):
                if _rows(s):
                    ts, values, _, end = s.read_rows(self.cursors[k])
                    part, got = (ts, values), len(ts)
                else:
                    part, end = s.read(self.cursors[k])
                    got = len(part) // max(1, len(s.channels))
                self.lost[k] += (end - self.cursors[k]) - got
                self.cursors[k] = end
                if got:
                    self.parts[k].append(part)

    def stop(self) -> None:
        """Stop the thread, read the rest, and say what was lost."""
        self._stop.set()
        self._thread.join()
        self.drain()
        for s, n in zip(self.samplers, self.lost):
            if n:
                self.messages.append(f"{type(s).__name__}: {n} sample(s) were overwritten in its ring before "
                                     "they could be saved (the process stalled)")

    def frames(self) -> list[pd.DataFrame]:
        """Each sampler's samples so far, one frame per sampler."""
        if not self._stop.is_set():
            self.drain()
        with self._lock:
            out = []
            for s, p in zip(self.samplers, self.parts):
                if p and _rows(s):
                    out.append(s.long_form(np.concatenate([t for t, _ in p]), np.concatenate([v for _, v in p])))
                elif p:
                    out.append(pd.concat(p, ignore_index=True) if len(p) > 1 else p[0])
            return out


def _rows(sampler: Any) -> bool:
    """Whether ``sampler`` gives its ring's rows as they are and makes them long form (a ring sampler)."""
    return callable(getattr(sampler, "read_rows", None)) and callable(getattr(sampler, "long_form", None))
