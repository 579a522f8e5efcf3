"""A rank's side of a job board's request (:mod:`.board`): trace, then write its files into the request's folder.

Runs on a thread of the served process (:meth:`aonkit.live.serve.Server._board_trace`), never on the training
thread: that one only starts, steps and stops torch.profiler at its step boundaries. The served process exports
the Kineto JSON; the rest (compressing it, reading the node's daemon samples, writing them as Parquet) runs in a
child process (``python -m aonkit.live.board_rank``), so that the training process never loads pandas and pyarrow
for it, as with ``aonkit trace PID``, where the client does that work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .._filecheck import atomic_write


def trace_for_board(server: Any, req: dict[str, Any], out: Path, base: dict[str, Any]) -> dict[str, Any]:
    """Trace as ``req`` asks; write ``rank<N>.json.gz`` and ``rank<N>.samples.parquet`` into ``out``.

    The start is agreed with the other ranks first (:mod:`.board_steps`): this rank's step marks go to ``out`` at its
    first boundary after the request's instant, and it starts at the boundary ``aonkit trace --job`` answers with.
    ``base`` identifies the rank in its files (id, rank, pid, host, world size). Returns the report's fields: the
    traced window, the steps, the samplers and notes; or ``error`` (no torch, no rank, a trace already running, no
    step boundary before the request expired, no start agreed, the profiler failed).
    """
    from .board_steps import StepCount, wait_start, write_marks
    from .serve import TraceJob

    rank = base["rank"]
    if rank < 0:
        return {"error": f"process {server.pid} knows no rank (set RANK or AONKIT_RANK, or serve(rank=...))"}
    if sys.modules.get("torch") is None:
        return {"error": f"process {server.pid} has not imported torch: nothing to trace"}
    job = TraceJob.asked(req)
    job.agreed = count = StepCount(int(req["start_ns"]))
    if not server.arm(job):
        return {"error": f"a trace is already running in process {server.pid}"}
    expires = int(req["expires_ns"])
    try:
        if count.reached.wait(max(0.0, (expires - time.time_ns()) / 1e9)):
            write_marks(out, base, count.sent or [])
            start = wait_start(out, req["id"], rank, expires)
            if isinstance(start, str):
                server.withdraw(job)
                return {"error": f"process {server.pid}: {start}"}
            count.start = start
    except BaseException:  # (the folder went away): the job must not stay armed
        server.withdraw(job)
        raise
    if not job.done.wait(max(0.0, (expires - time.time_ns()) / 1e9)):
        server.withdraw(job)
        return {"error": f"process {server.pid} reached no step boundary that finished the trace before the request "
                         "expired (does it call an optimizer's step()?)"}  # fmt: skip
    if job.error is not None:
        return {"error": job.error}
    raw = out / f".rank{rank}.trace.json"
    job.prof.export_chrome_trace(str(raw))
    done = finish(raw, out, rank, job.t0_ns, job.t1_ns)
    return {"t0_ns": job.t0_ns, "t1_ns": job.t1_ns, "steps": job.done_steps, **done}


def finish(raw: Path, out: Path, rank: int, t0_ns: int, t1_ns: int, timeout_s: float = 600.0) -> dict[str, Any]:
    """Run :func:`main` in a child process; its report fields (``samples``, ``samplers``, ``notes``), or ``error``."""
    import aonkit

    env = {k: v for k, v in os.environ.items() if k != "AONKIT_SERVE"}  # (the child serves nothing)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(aonkit.__file__).parent.parent), env.get("PYTHONPATH")]))
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    cmd = [sys.executable, "-m", "aonkit.live.board_rank", str(raw), str(out), str(rank), str(t0_ns), str(t1_ns)]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s, cwd="/")
    except subprocess.TimeoutExpired:
        return {"error": f"writing the trace and samples took over {timeout_s:g} s"}
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"writing the trace and samples failed: {tail}"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """``python -m aonkit.live.board_rank RAW OUT RANK T0_NS T1_NS``: ``rank<N>.json.gz`` and its node's samples.

    Prints one JSON line: ``samples`` (rows written), ``samplers`` and ``notes`` (:func:`.trace.daemon_samples`).
    """
    from .trace import daemon_samples, store_rank_trace

    raw, out, rank, t0, t1 = argv if argv is not None else sys.argv[1:]
    folder = Path(out)
    store_rank_trace(Path(raw), folder, int(rank))
    samples, samplers, notes = daemon_samples(int(t0), int(t1))  # this node's daemon, if it runs
    if len(samples):
        atomic_write(folder / f"rank{rank}.samples.parquet", lambda tmp: samples.to_parquet(tmp, index=False), 0o600)
    print(json.dumps({"samples": int(len(samples)), "samplers": samplers, "notes": notes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
