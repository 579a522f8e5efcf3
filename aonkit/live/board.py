"""A job's board on a shared filesystem: one ``aonkit trace --job`` reaches every rank of a job, on every node.

Control sockets are node-local (Unix sockets; aonkit opens no port). The nodes of a job share a filesystem, and a
directory on it is the job's board (``AONKIT_JOB_BOARD``, or ``aonkit.live.serve(board=...)``)::

    <board>/<job id>/request.json      the current request (0600, in a 0700 directory: the user's own)
    <out>/rank<N>.json.gz              each rank's trace, written by the rank itself
    <out>/rank<N>.samples.parquet      the daemon samples of the rank's node over its window (none without one)
    <out>/.rank<N>.marks.json          the rank's last step boundaries at the instant (count, time_ns)
    <out>/.start.json                  the boundary count each rank starts at (written by ``aonkit trace --job``)
    <out>/.rank<N>.done.json           what the rank did, or why it could not (read by ``aonkit trace --job``)

A served process with a board looks at its job's request once a second (:data:`LOOK_S`). A request names an
instant (``start_ns``, :data:`LEAD_S` after it was posted unless asked otherwise): each rank arms when it sees it,
sends the times of its step boundaries up to its first one after the instant, and starts at the boundary that
:func:`run_job_trace` answers with, the same step on every rank (:mod:`.board_steps`; the first boundary after the
instant is not: the ranks pass it milliseconds apart). An NFS client may not see a new file for a few seconds
(``acregmin``, ``acdirmin``): keep the lead above that. Files whose owner is not the user,
or that others may write, are ignored (served side) or refused (posting side).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .board_steps import START, agree, lag_ms, read_marks, step_ns, write_starts
from .paths import LiveError, NotOwnerError, check_private, private_dir
from .status import read_json, write_json

LOOK_S = 1.0
"""How often a served process with a board reads its job's request."""
LEAD_S = 10.0
"""Default time from posting a request to the instant the ranks send their step marks, and from those to the start."""
REQUEST = "request.json"
Reports = dict[int, dict[str, Any]]
"""Files of the ranks (reports or step marks) by rank."""
RANK_FIELDS = ("rank", "pid", "host", "boot_id", "t0_ns", "t1_ns", "steps", "samples", "samplers")
"""What the job manifest keeps of each rank's report."""


def job_dir(board: Path, job_id: str) -> Path:
    """``<board>/<job id>`` (a job id that is not a plain name is refused)."""
    if not job_id or job_id in (".", "..") or "/" in job_id or "\0" in job_id:
        raise LiveError(f"job id {job_id!r} cannot name a directory of the board")
    return board / job_id


def post(board: Path, job_id: str, out: Path, steps: int | None, duration_s: float | None, lead_s: float = LEAD_S,
         timeout_s: float = 600.0) -> dict[str, Any]:  # fmt: skip
    """Write a request for a trace of every rank of ``job_id`` into ``out``; return it.

    The board and the job's directory are made owner-only when missing and must be the user's own and private
    (:class:`~aonkit.live.paths.NotOwnerError` otherwise). The request replaces any earlier one of the job.
    """
    now = time.time_ns()
    req = {"id": os.urandom(16).hex(), "job_id": job_id, "out": str(out), "steps": steps, "duration_s": duration_s,
           "posted_ns": now, "start_ns": now + int(lead_s * 1e9),
           "expires_ns": now + int((lead_s + timeout_s) * 1e9)}  # fmt: skip
    write_json(private_dir(job_dir(private_dir(board), job_id)) / REQUEST, req)
    return req


def read_request(board: Path, job_id: str) -> dict[str, Any] | None:
    """The job's current request; None when there is none or it cannot be trusted (not private, malformed)."""
    path = job_dir(board, job_id) / REQUEST
    try:
        check_private(path.parent, "job board directory")
        req = read_json(path, "trace request")
    except (OSError, NotOwnerError):
        return None
    need = {"id": str, "out": str, "start_ns": int, "expires_ns": int}
    if not isinstance(req, dict) or any(not isinstance(req.get(k), t) for k, t in need.items()):
        return None
    return req


def withdraw(board: Path, job_id: str, req_id: str) -> None:
    """Remove the job's request when it is still ``req_id`` (a later one stays)."""
    path = job_dir(board, job_id) / REQUEST
    current = read_request(board, job_id)
    if current is not None and current["id"] == req_id:
        path.unlink(missing_ok=True)


def report_path(out: Path, rank: int) -> Path:
    """Where rank ``rank`` says what it did."""
    return out / f".rank{rank}.done.json"


def write_report(out: Path, rank: int, report: dict[str, Any]) -> None:
    """Rank ``rank``'s report (0600, renamed in: a reader never sees half of it)."""
    write_json(report_path(out, rank), report)


def reports(out: Path, req_id: str, listed: list[Path] | None = None) -> dict[int, dict[str, Any]]:
    """The ranks' reports for request ``req_id`` found in ``out`` (among ``listed``, its ``.rank*`` files, if given)."""
    found = {}
    for path in out.glob(".rank*.json") if listed is None else listed:
        if not path.match(".rank*.done.json"):
            continue
        try:
            rep = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # (written by rename: a partial one is never seen; another user's: not readable)
        if isinstance(rep, dict) and rep.get("id") == req_id and isinstance(rep.get("rank"), int):
            found[rep["rank"]] = rep
    return found


def run_job_trace(job_id: str, board: str | os.PathLike[str], steps: int | None = None,
                  duration_s: float | None = None, out: str | os.PathLike[str] | None = None, ranks: int | None = None,
                  lead_s: float = LEAD_S, timeout_s: float = 600.0,
                  say: Callable[[str], None] | None = None) -> Path:  # fmt: skip
    """Trace every rank of ``job_id`` served with ``board``, on whichever node; return the job folder.

    Parameters
    ----------
    job_id : str
        The job id its processes were served with (``$SLURM_JOB_ID``, ``$TORCHELASTIC_RUN_ID``...).
    board : str or path-like
        The job's board (:mod:`.board`): a directory on a filesystem every node of the job shares.
    steps, duration_s
        As :func:`aonkit.live.trace.run_trace` (default: 3 steps).
    out : str or path-like, optional
        The job folder, which the ranks write into: it must be on the shared filesystem too. Default
        ``aon-traces/<YYYYmmdd-HHMMSS>-job<job id>`` under the current directory.
    ranks : int, optional
        How many ranks to wait for (default: the world size the ranks report; without one, the folder is
        finished once no rank has reported for 5 s).
    lead_s : float
        Seconds from now to the instant at which the ranks send their step marks, and again from the ranks'
        marks to the step they start at (default :data:`LEAD_S`): the ranks must see each file within it.
    timeout_s : float
        Seconds after that instant to wait for the ranks' reports (default 600).
    say : callable, optional
        Called with a line as the rounds go (``aonkit trace --job`` prints them on stderr).

    Returns
    -------
    pathlib.Path
        ``out``, absolute: ``rank<N>.json.gz`` and ``rank<N>.samples.parquet`` per rank and the manifest
        (:func:`aonkit.load_job` loads it).

    Raises
    ------
    LiveError
        Fewer ranks reported in time (which did is said), or a rank could not trace (its reason is said; the
        traces written are removed); :class:`~aonkit.live.paths.NotOwnerError` when the board is not private to
        this user.
    ValueError
        ``steps`` below 1, ``duration_s`` or ``lead_s`` not above 0.
    """
    from .trace import JOB_MANIFEST, check_length, default_out

    check_length(steps, duration_s)
    if not lead_s > 0:
        raise ValueError(f"lead_s must be > 0 seconds, not {lead_s!r}")
    out = Path(out if out is not None else default_out(f"job{job_id}")).absolute()
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    req = post(Path(board).absolute(), job_id, out, steps if duration_s is None else None, duration_s, lead_s,
               timeout_s)  # fmt: skip
    end = time.monotonic() + lead_s + timeout_s
    say = say or (lambda line: None)
    say(f"asked the ranks of job {job_id}; they send their step boundaries in {lead_s:g} s")
    try:
        agreed, lags = _agree_start(out, req, ranks, lead_s, end, lead_s + timeout_s, say)
        got = _wait(lambda: reports(out, req["id"]), req, ranks, end, lead_s + timeout_s)
    finally:
        withdraw(Path(board).absolute(), job_id, req["id"])
        for path in [*out.glob(".rank*.marks.json"), out / START]:
            path.unlink(missing_ok=True)
    for rank in got:
        report_path(out, rank).unlink(missing_ok=True)
    if errors := {r: rep["error"] for r, rep in sorted(got.items()) if rep.get("error")}:
        for rank in got:
            for name in (f"rank{rank}.json.gz", f"rank{rank}.samples.parquet"):
                (out / name).unlink(missing_ok=True)
        raise LiveError("; ".join(f"rank {r}: {e}" if r >= 0 else f"pid {-r}: {e}" for r, e in errors.items()))
    done = [got[r] for r in sorted(got)]
    notes = agreed + [f"rank {r['rank']} ({r['host']}): {n}" for r in done for n in r.get("notes") or []]
    manifest = {"status": "ok", "source": "aonkit trace --job", "job_id": job_id, "traced": True,
                "clock": "time.time_ns", "t0_ns": min(r["t0_ns"] for r in done), "t1_ns": max(r["t1_ns"] for r in done),
                "start_ns": req["start_ns"], "messages": notes,
                "ranks": [{**{k: r.get(k) for k in RANK_FIELDS}, "boundary_lag_ms": lag_ms(lags.get(r["rank"]))}
                          for r in done]}  # fmt: skip
    from .._filecheck import atomic_write

    atomic_write(out / JOB_MANIFEST, lambda tmp: tmp.write_text(json.dumps(manifest, indent=1)), 0o600)
    return out


def _agree_start(out: Path, req: dict[str, Any], ranks: int | None, lead_s: float, end: float, wait_s: float,
                 say: Callable[[str], None]) -> tuple[list[str], dict[int, float]]:  # fmt: skip
    """Wait for the ranks' step marks, then write the step each starts at (:mod:`.board_steps`); notes and lags.

    Ranks that are late are given up on one lead and two steps after the instant (the others trace, and the final
    wait says which did not come).
    """
    instant = time.monotonic() + (req["start_ns"] - time.time_ns()) / 1e9

    def read() -> Reports:  # one listing of OUT for both (on NFS each is a round trip to the server)
        listed = list(out.glob(".rank*.json"))
        return {**{r: x for r, x in reports(out, req["id"], listed).items() if x.get("error")},
                **read_marks(out, req["id"], listed)}  # fmt: skip

    def late(got: Reports) -> bool:
        step = step_ns({r: x for r, x in got.items() if "marks" in x}) or 0.0
        return time.monotonic() > instant + lead_s + 2 * step / 1e9

    got = _wait(read, req, ranks, end, wait_s, give_up=late)
    marks = {r: x for r, x in got.items() if "marks" in x}
    if not marks:
        return [], {}  # every rank that came failed: the final wait collects their reasons
    starts, notes, lags = agree(marks, time.time_ns(), int(lead_s * 1e9))
    write_starts(out, req["id"], starts)
    failed = f" ({len(got) - len(marks)} could not trace)" if len(got) > len(marks) else ""
    want = _want(got, ranks) or 0
    of = f" of {want}" if want > len(got) else ""  # (given up on the others)
    say(f"{len(marks)}{of} ranks sent theirs{failed}; they start tracing the same step in about {lead_s:g} s")
    return notes, lags



def _wait(read: Callable[[], Reports], req: dict[str, Any], ranks: int | None, end: float, wait_s: float,
          give_up: Callable[[Reports], bool] | None = None) -> Reports:
    """What ``read`` finds of the ranks once all are in (see :func:`run_job_trace`'s ``ranks``).

    ``end`` is the deadline (``time.monotonic``); ``give_up`` may end the wait early with what came, when some did.
    """
    last_new, seen = time.monotonic(), 0
    while True:
        got = read()
        if len(got) > seen:
            seen, last_new = len(got), time.monotonic()
        want = _want(got, ranks)
        if want is not None and len(got) >= want or want is None and got and time.monotonic() - last_new > 5:
            return got
        if got and give_up is not None and give_up(got):
            return got
        if time.monotonic() > end:
            have = ", ".join(map(str, sorted(got))) or "none"
            raise LiveError(f"{len(got)} of {want or 'the'} ranks of job {req['job_id']} reported within "
                            f"{wait_s:g} s (ranks: {have}); are the others served with this board "
                            "(AONKIT_JOB_BOARD) and the same job id, and is the folder on a filesystem they share?")
        time.sleep(0.2)


def _want(got: Reports, ranks: int | None) -> int | None:
    """How many ranks to wait for: ``ranks``, else the world size the ranks report (None: unknown)."""
    return ranks or max((r.get("world_size") or 0 for r in got.values()), default=0) or None
