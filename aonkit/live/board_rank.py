"""A rank's side of a job board's request (:mod:`.board`): trace, then write its files into the request's folder.

Runs on a thread of the served process (:meth:`aonkit.live.serve.Server._board_trace`), never on the training
thread: that one only starts, steps and stops torch.profiler at its step boundaries.
"""

from __future__ import annotations

import gzip
import sys
import time
from pathlib import Path
from typing import Any

from .._filecheck import atomic_write


def trace_for_board(server: Any, req: dict[str, Any], out: Path, rank: int | None) -> dict[str, Any]:
    """Trace as ``req`` asks; write ``rank<N>.json.gz`` and ``rank<N>.samples.parquet`` into ``out``.

    Returns the report's fields: the traced window, the steps, the samplers and notes; or ``error`` (no torch, no
    rank, a trace already running, no step boundary before the request expired, the profiler failed).
    """
    from .serve import TraceJob

    if rank is None:
        return {"error": f"process {server.pid} knows no rank (set RANK or AONKIT_RANK, or serve(rank=...))"}
    if sys.modules.get("torch") is None:
        return {"error": f"process {server.pid} has not imported torch: nothing to trace"}
    duration = req.get("duration_s")
    job = TraceJob(None if duration else int(req.get("steps") or 3), float(duration) if duration else None)
    job.not_before_ns = int(req["start_ns"])
    with server.lock:
        if server.job is not None:
            return {"error": f"a trace is already running in process {server.pid}"}
        server.job = job
        server.add_hook()
    if not job.done.wait(max(0.0, (int(req["expires_ns"]) - time.time_ns()) / 1e9)):
        with server.lock:
            job.cancelled = True  # a running profiler is stopped and dropped at the next boundary
            if job.prof is None and server.job is job:
                server.job = None
        return {"error": f"process {server.pid} reached no step boundary that finished the trace before the request "
                         "expired (does it call an optimizer's step()?)"}  # fmt: skip
    if job.error is not None:
        return {"error": job.error}
    raw = out / f".rank{rank}.trace.json"
    job.prof.export_chrome_trace(str(raw))
    data = gzip.compress(raw.read_bytes(), compresslevel=6, mtime=0)
    atomic_write(out / f"rank{rank}.json.gz", lambda tmp: tmp.write_bytes(data), 0o600)
    raw.unlink()
    from .trace import daemon_samples

    samples, samplers, notes = daemon_samples(job.t0_ns, job.t1_ns)  # this node's daemon, if it runs
    if len(samples):
        atomic_write(out / f"rank{rank}.samples.parquet", lambda tmp: samples.to_parquet(tmp, index=False), 0o600)
    return {"t0_ns": job.t0_ns, "t1_ns": job.t1_ns, "steps": job.done_steps, "samples": int(len(samples)),
            "samplers": samplers, "notes": notes}  # fmt: skip
