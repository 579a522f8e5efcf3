"""``aonkit trace PID``: ask an opted-in process for a torch.profiler trace of its next steps; keep a bundle.

The process (:mod:`.serve`) traces and exports the Kineto JSON; this side adds the daemon's samples that span the
same window (:func:`aonkit.live.attach`, no NVML opened: those inside it, and the one just before and just after
it, :func:`spanning`) and writes:

* one process: a bundle folder (:mod:`aonkit.sources.bundle`): ``aonkit.load(out)`` gives the trace with samples;
* ``--all-ranks``: a job folder of ``rank<N>.json.gz`` files, ``job.samples.parquet`` (the samples of the union
  window; the directory scan skips ``*.samples.parquet``) and ``aonkit-trace.meta.json``:
  ``aonkit.load_job(out)`` gives the ranks with the samples attached and the ranks' step lags
  (:mod:`aonkit.sources.traced_job`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from .._filecheck import atomic_write
from ..sources.bundle import MANIFEST, write_bundle
from ..sources.samplers import SAMPLE_COLUMNS, samples_table
from ..sources.traced_job import JOB_MANIFEST, JOB_SAMPLES
from .board_steps import AGREE_S, SOCKET_LEAD_S, Meeting, NotAgreed, lag_ms
from .paths import DaemonNotRunning, LiveError, NotOwnerError, boot_id, runtime_dir
from .registry import job_members, lookup


def request(entry: dict[str, Any], msg: dict[str, Any], timeout_s: float,
            on_marks: Callable[[list[list[int]]], int] | None = None) -> dict[str, Any]:  # fmt: skip
    """Send ``msg`` to a served process; return its final reply (raise :class:`LiveError` on refusal).

    ``on_marks`` answers the process's step marks with its start (``msg`` with ``agree_ns``: ``--all-ranks``).
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        try:
            s.connect(entry["socket"])
            s.sendall((json.dumps(msg) + "\n").encode())
            lines = s.makefile("r")
            while True:
                line = lines.readline()
                if not line:
                    raise LiveError(f"process {entry['pid']} closed the connection (did it exit?)")
                reply = json.loads(line)
                if not reply.get("ok"):
                    raise LiveError(reply.get("error", "refused"))
                if reply.get("state") == "marks" and on_marks is not None:
                    s.sendall((json.dumps({"start": on_marks(reply["marks"])}) + "\n").encode())
                elif reply.get("state") != "armed":
                    return reply
        except TimeoutError:
            raise LiveError(f"process {entry['pid']} did not finish the trace within {timeout_s:g} s (does it reach "
                            "an optimizer step? the request was withdrawn)") from None
        except OSError as exc:
            raise LiveError(f"cannot reach process {entry['pid']} ({exc})") from None


def daemon_samples(t0_ns: int, t1_ns: int) -> tuple[pd.DataFrame, list[dict[str, Any]], list[str]]:
    """The daemon's samples in [t0, t1], its sampler description and notes (no daemon: empty, and why)."""
    from .reader import attach

    try:
        reader = attach()
    except (DaemonNotRunning, NotOwnerError) as exc:  # none, or another user's: the trace is kept all the same
        empty = samples_table(pd.DataFrame({c: [] for c in SAMPLE_COLUMNS}))
        return empty, [], [f"{exc}: the bundle has no samples"]
    deadline = time.monotonic() + 2 * reader.interval_s + 0.5
    while reader.ring.heartbeat_ns < t1_ns and reader.alive and time.monotonic() < deadline:
        time.sleep(reader.interval_s / 4)  # the sample just after the window, so the window is covered
    pad = int(2 * reader.interval_s * 1e9) + 1
    frame = spanning(reader.window(t0_ns - pad, t1_ns + pad), t0_ns, t1_ns)
    meta = [{"type": "aonkit daemon", "pid": reader.pid, "interval_s": reader.interval_s,
             "metrics": list(reader.metrics), "root": str(reader.root)}]  # fmt: skip
    reader.close()
    inside = int(frame["ts_ns"].between(t0_ns, t1_ns).sum())
    return frame, meta, window_notes(inside, t0_ns, t1_ns, reader.interval_s, kept=len(frame))


def spanning(frame: pd.DataFrame, t0_ns: int, t1_ns: int) -> pd.DataFrame:
    """The samples of ``frame`` in [t0, t1], with the last one before t0 and the first one after t1.

    So a counter lane has a value at each end of the trace, even for a window shorter than the daemon's interval
    (as the samplers of :func:`aonkit.profile` take one at each end of a run).
    """
    ts = frame["ts_ns"].to_numpy()
    before, after = ts[ts < t0_ns], ts[ts > t1_ns]
    lo = before.max() if len(before) else t0_ns
    hi = after.min() if len(after) else t1_ns
    return frame[(ts >= lo) & (ts <= hi)].reset_index(drop=True)


def window_notes(n_rows: int, t0_ns: int, t1_ns: int, interval_s: float, kept: int = 0) -> list[str]:
    """Why a traced window has no samples inside it: shorter than (or about) one of the daemon's intervals.

    Parameters
    ----------
    n_rows : int
        Sample rows the daemon had in [t0_ns, t1_ns].
    t0_ns, t1_ns : int
        The traced window (``time.time_ns`` clock).
    interval_s : float
        The daemon's sampling interval in seconds.
    kept : int
        Sample rows the bundle has all the same: those just before and after the window (:func:`spanning`).

    Returns
    -------
    list of str
        Empty when the window has samples; else one note saying how long the window was against the interval
        and what to change (more steps, a longer ``--duration`` or the daemon's ``--interval``).
    """
    if n_rows:
        return []
    kept_text = "the bundle has the samples just before and after it; for some inside, " if kept else ""
    return [f"no daemon sample fell in the traced window ({(t1_ns - t0_ns) / 1e6:.0f} ms; the daemon samples "
            f"every {interval_s * 1e3:.0f} ms): {kept_text}trace more steps or a longer --duration, or run the "
            "daemon with a shorter --interval"]  # fmt: skip


def check_length(steps: int | None, duration_s: float | None) -> None:
    """ValueError unless ``steps`` is None or a whole number >= 1 and ``duration_s`` None or > 0."""
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ValueError(f"steps must be a whole number >= 1, not {steps!r}")
    if duration_s is not None and not duration_s > 0:
        raise ValueError(f"duration_s must be > 0 seconds, not {duration_s!r}")


def store_rank_trace(src: Path, out: Path, rank: int) -> None:
    """A rank's exported Kineto JSON ``src`` as ``out/rank<N>.json.gz`` (renamed in, 0600); ``src`` removed."""
    data = gzip.compress(src.read_bytes(), compresslevel=6, mtime=0)
    atomic_write(out / f"rank{rank}.json.gz", lambda tmp: tmp.write_bytes(data), 0o600)
    src.unlink()


def default_out(tag: str) -> Path:
    """``aon-traces/<YYYYmmdd-HHMMSS>-<tag>`` (relative: under the current directory)."""
    return Path("aon-traces") / f"{time.strftime('%Y%m%d-%H%M%S')}-{tag}"


def run_trace(pid: int, steps: int | None = None, duration_s: float | None = None, out: str | Path | None = None,
              all_ranks: bool = False, timeout_s: float = 600.0) -> Path:  # fmt: skip
    """Trace ``pid`` (or its whole job on this node) and return the bundle or job folder.

    The samples of the daemon of this user and node over the traced window are added; with no daemon running
    the folder has an empty samples table and the manifest says why.

    Parameters
    ----------
    pid : int
        A process on this node that opted in (``aonkit.live.serve()`` or ``AONKIT_SERVE=1``), same user and
        runtime directory.
    steps : int, optional
        Trace the next ``steps`` optimizer steps (>= 1). Not sent when ``duration_s`` is given; with neither,
        the served process traces 3 steps.
    duration_s : float, optional
        Trace for this many seconds instead (> 0): from a step boundary to the first boundary after that
        time.
    out : str or pathlib.Path, optional
        The bundle folder, or with ``all_ranks`` the job folder; made absolute and, when missing, created
        (mode 0700) with any missing parents. Default ``aon-traces/<YYYYmmdd-HHMMSS>-pid<pid>`` (with ``all_ranks``:
        ``-job<job id>``) under the current directory.
    all_ranks : bool
        Trace every opted-in process on this node with the same job id as ``pid``, at once (default False).
    timeout_s : float
        Socket timeout in seconds for each process's request: connecting, and each wait for a reply,
        including the wait for the finished trace (default 600.0).

    Returns
    -------
    pathlib.Path
        ``out``, absolute. One process: a bundle folder (``aonkit.load(out)``). With ``all_ranks``: a job folder
        of ``rank<N>.json.gz``, :data:`JOB_SAMPLES` and :data:`JOB_MANIFEST` (:func:`aonkit.load_job`).

    Raises
    ------
    LiveError
        No process ``pid`` on this node, or it did not opt in; with ``all_ranks``, it has no job id or the
        job's processes do not each have their own rank; a process refused, closed the connection, timed out
        or could not be reached (the first error recorded is raised; the finished ranks' traces are deleted
        and an ``out`` created here is removed when empty). Also :class:`~aonkit.live.paths.NotOwnerError` (a
        ``LiveError``) when the runtime directory is not private to this user. A daemon ring that is not
        this user's only leaves the bundle without samples (a note says so).
    ValueError
        ``steps`` below 1 or not a whole number, or ``duration_s`` not above 0.
    """
    check_length(steps, duration_s)
    rdir = runtime_dir()
    entry = lookup(rdir, pid)
    members = job_members(rdir, entry) if all_ranks else [entry]
    tag = f"job{entry['job_id']}" if all_ranks else f"pid{pid}"
    out = Path(out if out is not None else default_out(tag)).absolute()
    made = not out.exists()
    if made:
        out.mkdir(mode=0o700, parents=True)
    msg = {"cmd": "trace", "steps": steps if duration_s is None else None, "duration_s": duration_s}
    names = {e["pid"]: f"rank {e.get('rank')} (pid {e['pid']})" for e in members}
    meeting = Meeting(len(members), int(SOCKET_LEAD_S * 1e9), names) if len(members) > 1 else None
    if meeting is not None:  # the ranks agree on their first step (board_steps), not each its next one
        msg["agree_ns"] = time.time_ns() + int(AGREE_S * 1e9)
    replies: dict[int, Any] = {}

    def one(e: dict[str, Any]) -> None:
        ask = {**msg, "trace_path": str(out / f".pid{e['pid']}.trace.json")}
        try:
            meet = None if meeting is None else (lambda marks: meeting.start_of(e["pid"], marks, timeout_s))
            replies[e["pid"]] = request(e, ask, timeout_s, meet)
        except LiveError as exc:
            replies[e["pid"]] = exc
            if meeting is not None:
                meeting.fail()

    threads = [threading.Thread(target=one, args=(e,)) for e in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = [r for r in replies.values() if isinstance(r, LiveError)]
    if errors := sorted(failed, key=lambda r: isinstance(r, NotAgreed)):  # the cause before the ranks it stopped
        for r in replies.values():
            if isinstance(r, dict):  # the ranks that did finish
                Path(r["trace"]).unlink(missing_ok=True)
        if made and not any(out.iterdir()):
            out.rmdir()
        raise errors[0]
    done = [replies[e["pid"]] for e in members]
    t0, t1 = min(r["t0_ns"] for r in done), max(r["t1_ns"] for r in done)
    samples, samplers, notes = daemon_samples(t0, t1)
    if not all_ranks:
        r = done[0]
        return write_bundle(out, Path(r["trace"]), samples, _manifest(r, t0, t1, samplers, notes))
    for r in done:
        store_rank_trace(Path(r["trace"]), out, r["rank"])
    atomic_write(out / JOB_SAMPLES, lambda tmp: samples.to_parquet(tmp, index=False), 0o600)
    manifest = _manifest(done[0], t0, t1, samplers, (meeting.notes if meeting else []) + notes)
    lags = meeting.lags if meeting is not None else {}
    node = {"host": socket.gethostname(), "boot_id": boot_id()}  # this node's: every rank of --all-ranks runs here
    manifest["ranks"] = [{**{k: r[k] for k in ("rank", "pid", "t0_ns", "t1_ns", "steps")}, **node,
                          "boundary_lag_ms": lag_ms(lags.get(r["pid"]))} for r in done]  # fmt: skip
    atomic_write(out / JOB_MANIFEST, lambda tmp: tmp.write_text(json.dumps(manifest, indent=1)), 0o600)
    return out


def _manifest(r: dict[str, Any], t0: int, t1: int, samplers: list, notes: list[str]) -> dict[str, Any]:
    import platform

    from .. import __version__

    return {"status": "ok", "t0_ns": t0, "t1_ns": t1, "traced": True, "clock": "time.time_ns",
            "source": "aonkit trace", "pid": r["pid"], "rank": r.get("rank"), "steps": r["steps"],
            "armed_ns": r["armed_ns"], "versions": {"aonkit": __version__, "python": platform.python_version()},
            "samplers": samplers, "messages": notes}  # fmt: skip


def load_traced_job(folder: str | os.PathLike[str]) -> Any:
    """An ``aonkit trace --all-ranks`` or ``--job`` folder as a :class:`~aonkit.TraceSet`: :func:`aonkit.load_job`.

    Kept for the code that called it before ``load_job`` did the same: the ranks keyed by rank, each rank's trace
    with the samples of its traced window on ``trace.samples`` (its own ``rank<N>.samples.parquet``, else the
    folder's :data:`JOB_SAMPLES`), and the manifest's lags and notes on ``step_lags`` and ``trace_notes``
    (:func:`aonkit.sources.traced_job.attach_traced_job`).
    """
    from ..sources import load_job

    return load_job(folder)


def trace_command(args: argparse.Namespace) -> int:
    """``aonkit trace PID [--steps N | --duration S] [--out DIR] [--all-ranks]``, or ``aonkit trace --job ID``."""
    steps = args.steps if args.steps is not None else (None if args.duration else 3)
    if steps is not None and steps < 1 or args.duration is not None and args.duration <= 0:
        raise LiveError("--steps must be >= 1 and --duration > 0")
    if (args.pid is None) == (args.job is None):
        raise LiveError("name a process (aonkit trace PID) or a job (aonkit trace --job ID --board DIR), not both")
    if args.job is not None and not args.board:
        raise LiveError("--job needs the job's board: --board DIR, or AONKIT_JOB_BOARD (a directory all its nodes "
                        "share, the one its processes were served with)")  # fmt: skip
    t = time.monotonic()
    if args.job is not None:
        from .board import run_job_trace

        out = run_job_trace(args.job, args.board, steps, args.duration, args.out, args.ranks, args.lead, args.timeout,
                            say=lambda line: print(f"aonkit trace: {line}", file=sys.stderr, flush=True))
    else:
        out = run_trace(args.pid, steps, args.duration, args.out, args.all_ranks, args.timeout)
    job = args.all_ranks or args.job is not None
    kind = "job folder (aonkit.load_job)" if job else "bundle (aonkit.load)"
    print(f"aonkit trace: {kind}: {out} ({time.monotonic() - t:.1f} s)")
    manifest = json.loads((out / (JOB_MANIFEST if job else MANIFEST)).read_text(encoding="utf-8"))
    for note in manifest.get("messages", []):
        print(f"aonkit trace: note: {note}", file=sys.stderr)
    if line := latest_line(manifest.get("ranks") or [], manifest.get("messages", [])):
        print(f"aonkit trace: {line}")
    return 0


def latest_line(ranks: list[dict[str, Any]], messages: list[str]) -> str:
    """Which rank passed a step's boundary last, and by how much, from the ranks' ``boundary_lag_ms``.

    "" when :func:`~aonkit.analysis.step_lags.latest_rank` names none: fewer than two lags known, all within 1 ms,
    or a message says the ranks may not have traced the same steps (then no rank is "the latest").
    """
    from ..analysis.step_lags import latest_rank
    from ..sources.traced_job import step_lag_table

    late = latest_rank(step_lag_table(ranks), messages)
    return "" if late is None else late.sentence()
