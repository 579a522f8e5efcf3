"""Profile bundles: a folder holding a trace, the samples taken beside it and a manifest.

``aonkit.profile`` and ``%%aon_profile`` write one per run::

    <out>/aonkit-bundle.json     manifest: format, version, status, the run's span,
                                 versions, devices, samplers (interval, metrics,
                                 unsupported metrics, gaps), file checks
    <out>/trace.json.gz          the torch.profiler trace (Kineto JSON), or with
                                 tracing off a one-event trace: the run's span
    <out>/samples.parquet        the samplers' long-form table (ts_ns, device, metric, value)

:func:`read_bundle` (what :func:`aonkit.load` does with such a folder) gives
the trace with the samples on ``trace.samples``. Samples and trace share one
clock: ``time.time_ns()`` (CLOCK_REALTIME), which is the clock of Kineto's
``ts`` + ``baseTimeNanoseconds`` (see ``tests/test_profile.py``).
"""

from __future__ import annotations

import gzip
import json
import os
import threading
from pathlib import Path
from typing import Any

import pandas as pd

from .._filecheck import atomic_write, crc32_file
from ..errors import TraceFormatError
from ..trace import Trace

MANIFEST = "aonkit-bundle.json"
FORMAT = "aonkit-bundle"
VERSION = 1
TRACE_FILE = "trace.json.gz"
SAMPLES_FILE = "samples.parquet"


def is_bundle(path: str | os.PathLike[str]) -> bool:
    """True for a folder with a bundle manifest."""
    return (Path(path) / MANIFEST).is_file()


def span_trace(path: Path, t0_ns: int, t1_ns: int, name: str = "aon_profile") -> Path:
    """Write a one-event Kineto-style trace: the run's span as a ``user_annotation`` (tracing off)."""
    dur_ns = t1_ns - t0_ns
    event = {"ph": "X", "cat": "user_annotation", "name": name, "pid": os.getpid(), "tid": threading.get_ident()}
    # ts and dur in exact decimal µs, as JSON numbers (a float would round a ~1e15 µs epoch time)
    times = f'"ts": {t0_ns // 1000}.{t0_ns % 1000:03d}, "dur": {dur_ns // 1000}.{dur_ns % 1000:03d}'
    text = f'{{"schemaVersion": 1, "traceEvents": [{json.dumps(event)[:-1]}, {times}}}]}}'
    atomic_write(path, lambda tmp: tmp.write_bytes(gzip.compress(text.encode(), mtime=0)), 0o600)
    return path


def write_bundle(out: Path, trace_json: Path | None, samples: pd.DataFrame, manifest: dict[str, Any]) -> Path:
    """Finish bundle ``out``: gzip the profiler's JSON (or write the span trace), the samples and the manifest.

    A new bundle folder is owner-only (0700), as its files are (0600): a trace can hold secrets.
    """
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    trace_path = out / TRACE_FILE
    if trace_json is not None and trace_json.exists():
        data = trace_json.read_bytes()
        atomic_write(trace_path, lambda tmp: tmp.write_bytes(gzip.compress(data, compresslevel=6, mtime=0)), 0o600)
        trace_json.unlink()
    else:
        span_trace(trace_path, int(manifest["t0_ns"]), int(manifest["t1_ns"]))
    atomic_write(out / SAMPLES_FILE, lambda tmp: samples.to_parquet(tmp, index=False), 0o600)
    manifest = {"format": FORMAT, "version": VERSION, **manifest,
                "files": {name: dict(zip(("bytes", "crc32"), crc32_file(out / name)))
                          for name in (TRACE_FILE, SAMPLES_FILE)}}
    atomic_write(out / MANIFEST, lambda tmp: tmp.write_text(json.dumps(manifest, indent=1)), 0o600)
    return out


def read_manifest(folder: Path) -> dict[str, Any]:
    """The bundle's manifest, checked for format and version."""
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TraceFormatError(f"unreadable bundle manifest ({type(exc).__name__}: {exc})", path=str(path)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise TraceFormatError(f"not an aonkit bundle manifest of version {VERSION}", path=str(path))
    return manifest


def read_bundle(folder: Path, read_trace: Any) -> Trace:
    """The bundle's trace with its samples on ``trace.samples`` (``read_trace(path)`` reads the trace file).

    Each file is checked against the size and CRC-32 the manifest records; a
    mismatch is a :class:`~aonkit.TraceFormatError` naming the file.
    """
    from .samplers import attach_samples

    manifest = read_manifest(folder)
    for name, check in manifest.get("files", {}).items():
        size_crc = crc32_file(folder / name) if (folder / name).is_file() else (-1, -1)
        if not isinstance(check, dict) or size_crc != (check.get("bytes"), check.get("crc32")):
            raise TraceFormatError("the bundle's file does not match its manifest (missing, changed or corrupt)",
                                   path=str(folder / name))
    trace = read_trace(folder / TRACE_FILE)
    samples = pd.read_parquet(folder / SAMPLES_FILE)
    if len(samples):
        attach_samples(trace, samples)
    trace.bundle = manifest
    return trace
