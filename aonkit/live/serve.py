"""The opt-in side of on-demand traces: ``aonkit.live.serve()`` in a training process.

``serve()`` registers the process (:mod:`.registry`) and listens on its control socket on a thread. Nothing is
hooked until ``aonkit trace PID`` asks: then a global optimizer-step post hook
(``torch.optim.optimizer.register_optimizer_step_post_hook``) starts torch.profiler at the next step of the first
optimizer that steps, marks a ``ProfilerStep`` at each step, and stops after N steps (or at the first step after S
seconds). The hook is removed afterwards; the job never stops. The trace is exported on the control thread and
its path sent back; the client (``aonkit trace``) turns it into a bundle with the daemon's samples.
:func:`step` marks a boundary by hand, for loops without ``torch.optim``.

With a job board (a directory on a filesystem the job's nodes share: ``AONKIT_JOB_BOARD`` or ``serve(board=...)``),
the control thread also reads the job's request there once a second, so ``aonkit trace --job`` on any node traces
every rank (:mod:`.board`); the rank writes its trace and its node's samples into the request's folder itself.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .board import LOOK_S, read_request, write_report
from .board_steps import StepCount
from .paths import CHECK_S, PROCS, LiveError, boot_id, file_id, private_dir, runtime_dir
from .registry import JOB_ID_VARS, RANK_VARS, WORLD_VARS, from_env, int_or_none, proc_start
from .status import write_json


class TraceJob:
    """A trace asked of this process: how long, its profiler once started, and how it ended."""

    def __init__(self, steps: int | None, duration_s: float | None) -> None:
        self.steps, self.duration_s = steps, duration_s
        self.key: object = None
        self.prof: Any = None
        self.done_steps = 0
        self.t0_ns = self.t1_ns = 0
        self.agreed: StepCount | None = None  # a board's or --all-ranks: start at the boundary the ranks agreed on
        self.cancelled = False
        self.error: str | None = None
        self.done = threading.Event()

    @classmethod
    def asked(cls, req: dict[str, Any]) -> TraceJob:
        """The trace a request asks for: ``duration_s`` seconds, else ``steps`` steps (3 by default)."""
        duration = req.get("duration_s")
        return cls(None if duration else int(req.get("steps") or 3), float(duration) if duration else None)


class Server:
    """The control socket of this process and the trace it is running, if any."""

    def __init__(self, job_id: str | None, rank: int | None, board: str | os.PathLike[str] | None = None) -> None:
        self.pid = os.getpid()
        board = board if board is not None else os.environ.get("AONKIT_JOB_BOARD") or None
        self.board = Path(board).absolute() if board is not None else None
        self._seen: set[str] = set()  # the board's requests this process took
        procs = private_dir(private_dir(runtime_dir()) / PROCS)
        self.sock_path, self.entry_path = procs / f"{self.pid}.sock", procs / f"{self.pid}.json"
        if len(str(self.sock_path)) > 100:
            raise LiveError(f"the control socket path {self.sock_path} is too long for a Unix socket; "
                            "set AONKIT_RUNTIME_DIR to a shorter directory")
        self.listener = self._listen()
        self._closed = False
        self.job: TraceJob | None = None
        self.hook: Any = None
        self.lock = threading.Lock()
        self.entry = {"pid": self.pid, "job_id": job_id if job_id is not None else from_env(JOB_ID_VARS),
                      "rank": rank if rank is not None else int_or_none(from_env(RANK_VARS)),
                      "world_size": int_or_none(from_env(WORLD_VARS)), "host": socket.gethostname(),
                      "boot_id": boot_id(), "argv": sys.argv[:8], "proc_start": proc_start(self.pid),
                      "socket": str(self.sock_path), "board": str(self.board) if self.board is not None else None,
                      "registered_ns": time.time_ns()}  # fmt: skip
        write_json(self.entry_path, self.entry)
        self._ids = (file_id(self.sock_path), file_id(self.entry_path))
        if "torch" in sys.modules:
            self.add_hook()  # here, on the caller's thread: no other thread mutates torch's hook dict
        threading.Thread(target=self._accept, name="aonkit-serve", daemon=True).start()

    def add_hook(self) -> None:
        """Register the optimizer-step hook once (it returns at once while no trace runs; it is never removed)."""
        if self.hook is None:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            self.hook = register_optimizer_step_post_hook(lambda opt, args, kwargs: self.boundary(opt))

    def close(self) -> None:
        """Unregister (only in the process that registered: a forked child inherits this object)."""
        if os.getpid() != self.pid:
            return
        self._closed = True  # the control thread registers no more
        self.entry_path.unlink(missing_ok=True)
        self.sock_path.unlink(missing_ok=True)
        self.listener.close()

    def _listen(self) -> socket.socket:
        """A listening socket bound at ``sock_path`` (0600; a file left there by a dead process is replaced)."""
        self.sock_path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.sock_path))
        os.chmod(self.sock_path, 0o600)
        listener.listen(8)
        return listener

    def _register_again(self) -> None:
        """Bind and register again when the socket or entry was removed (the runtime directory of a logout)."""
        if self._closed or (file_id(self.sock_path), file_id(self.entry_path)) == self._ids:
            return
        try:
            private_dir(private_dir(self.sock_path.parent.parent) / PROCS)
            old, self.listener = self.listener, self._listen()
            old.close()
            write_json(self.entry_path, self.entry)
            self._ids = (file_id(self.sock_path), file_id(self.entry_path))
        except OSError:  # tried again at the next check
            pass

    # -- control thread ----------------------------------------------------------------------------
    def _accept(self) -> None:
        while True:
            try:
                if not select.select([self.listener], [], [], LOOK_S if self.board else CHECK_S)[0]:
                    self._register_again()
                    self._look_at_board()
                    continue
                conn, _ = self.listener.accept()
            except (OSError, ValueError):  # closed (ValueError: select on a closed socket)
                return
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            if struct.unpack("3i", creds)[1] != os.getuid():
                conn.close()  # only the same user may ask (the socket is 0600 in a 0700 directory anyway)
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                req = json.loads(conn.makefile("r").readline() or "{}")
                if req.get("cmd") == "ping":
                    return _send(conn, {"ok": True, **self.entry, "rank": self._rank()})
                if req.get("cmd") != "trace":
                    return _send(conn, {"ok": False, "error": f"unknown request {req.get('cmd')!r}"})
                self._trace(conn, req)
            except (OSError, ValueError):
                return  # the client went away or sent garbage

    def _trace(self, conn: socket.socket, req: dict[str, Any]) -> None:
        torch = sys.modules.get("torch")
        if torch is None:
            return _send(conn, {"ok": False, "error": f"process {self.pid} has not imported torch: nothing to trace"})
        job = TraceJob.asked(req)
        if isinstance(req.get("agree_ns"), int):  # --all-ranks: the start is agreed with the other ranks
            job.agreed = StepCount(req["agree_ns"])
        if not self.arm(job):
            return _send(conn, {"ok": False, "error": f"a trace is already running in process {self.pid}"})
        armed_ns = time.time_ns()
        _send(conn, {"ok": True, "state": "armed", "rank": self._rank()})
        if job.agreed is not None and not self._agree(conn, job.agreed):
            self.withdraw(job)
            return
        while not job.done.wait(0.2):
            if _hung_up(conn):
                self.withdraw(job)
                return
        if job.error is not None:
            return _send(conn, {"ok": False, "error": job.error})
        path = Path(req["trace_path"])
        job.prof.export_chrome_trace(str(path))
        _send(conn, {"ok": True, "state": "done", "trace": str(path), "t0_ns": job.t0_ns, "t1_ns": job.t1_ns,
                     "steps": job.done_steps, "armed_ns": armed_ns, "rank": self._rank(), "pid": self.pid})

    def _agree(self, conn: socket.socket, count: StepCount) -> bool:
        """Send this rank's step marks at the instant; take the start the client answers with. False: it left."""
        while not count.reached.wait(0.2):
            if _hung_up(conn):
                return False
        _send(conn, {"ok": True, "state": "marks", "marks": [list(m) for m in count.sent or []]})
        try:
            start = json.loads(conn.makefile("r").readline() or "{}").get("start")
        except (ValueError, AttributeError):
            return False
        if not isinstance(start, int) or isinstance(start, bool):
            return False
        count.start = start
        return True

    def arm(self, job: TraceJob) -> bool:
        """Make ``job`` this process's trace, from its next (or agreed) step boundary; False while another runs."""
        with self.lock:
            if self.job is not None:
                return False
            self.job = job
            self.add_hook()
        return True

    def withdraw(self, job: TraceJob) -> None:
        """Give ``job`` up: dropped now when not started, else stopped and discarded at the next boundary."""
        with self.lock:
            job.cancelled = True
            if job.prof is None and self.job is job:
                self.job = None

    def _rank(self) -> int | None:
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
        return self.entry["rank"]

    def _world(self) -> int | None:
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_world_size())
        return self.entry["world_size"]

    # -- the job board -----------------------------------------------------------------------------
    def _look_at_board(self) -> None:
        """Take the job's request on the board when there is a new one (a thread traces and reports)."""
        if self.board is None or self._closed or self.entry["job_id"] is None:
            return
        try:
            req = read_request(self.board, str(self.entry["job_id"]))
        except LiveError:  # a job id that names no directory
            return
        if req is None or req["id"] in self._seen or time.time_ns() >= req["expires_ns"]:
            return
        self._seen.add(req["id"])
        threading.Thread(target=self._board_trace, args=(req,), name="aonkit-board", daemon=True).start()

    def _board_trace(self, req: dict[str, Any]) -> None:
        """Trace as ``req`` asks and write ``rank<N>.json.gz``, the node's samples and the report into its folder."""
        from .board_rank import trace_for_board

        rank = self._rank()
        out = Path(req["out"])
        base = {"id": req["id"], "rank": rank if rank is not None else -self.pid, "pid": self.pid,
                "host": self.entry["host"], "boot_id": self.entry["boot_id"],
                "world_size": self._world()}  # fmt: skip
        try:
            report = trace_for_board(self, req, out, base)
        except Exception as exc:  # noqa: BLE001 - nothing of a trace may stop the job; the client hears why
            report = {"error": f"{type(exc).__name__}: {exc}"}
        try:
            write_report(out, base["rank"], {**base, **report})
        except OSError:
            pass  # the folder is gone: the client timed out and left

    # -- training thread ---------------------------------------------------------------------------
    def boundary(self, key: object = "manual") -> None:
        """A step boundary (the optimizer hook, or :func:`step`): start, advance or stop the running trace."""
        job = self.job
        if job is None:
            return
        if job.key is None:
            job.key = key
        elif key is not job.key:
            return
        if job.prof is None:
            go = True if job.agreed is None else job.agreed.at_boundary(time.time_ns())
            if go is None:
                return
            with self.lock:
                if not go:
                    job.error = (f"process {self.pid} had passed the step the ranks agreed to start at when it was "
                                 "told (through a board: raise --lead)")  # fmt: skip
                    if self.job is job:
                        self.job = None
                    job.done.set()
                    return
                if job.cancelled or self.job is not job:
                    return
                try:
                    job.prof = _profiler()
                    job.prof.start()
                except Exception as exc:  # noqa: BLE001 - a profiler failure must not stop the job
                    job.error = f"torch.profiler failed to start ({type(exc).__name__}: {exc})"
                    self.job = None
                    job.done.set()
                    return
            job.t0_ns = time.time_ns()
            return
        job.done_steps += 1
        over = (job.done_steps >= job.steps if job.steps is not None
                else time.time_ns() - job.t0_ns >= job.duration_s * 1e9)  # type: ignore[operator]
        if not (over or job.cancelled):
            job.prof.step()
            return
        job.prof.stop()
        job.t1_ns = time.time_ns()
        self._finish(job)

    def _finish(self, job: TraceJob) -> None:
        with self.lock:
            self.job = None
        job.done.set()


def _profiler() -> Any:
    import torch
    from torch.profiler import ProfilerAction, ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    # a schedule that always records: with one, torch.profiler marks each step() as a ProfilerStep#N
    return profile(activities=acts, schedule=lambda step: ProfilerAction.RECORD, record_shapes=True,
                   profile_memory=True, with_flops=True)


def _send(conn: socket.socket, msg: dict[str, Any]) -> None:
    conn.sendall((json.dumps(msg) + "\n").encode())


def _hung_up(conn: socket.socket) -> bool:
    readable, _, _ = select.select([conn], [], [], 0)
    return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""


_SERVER: Server | None = None


def serve(job_id: str | None = None, rank: int | None = None, board: str | os.PathLike[str] | None = None) -> Path:
    """Opt this process in to on-demand traces (``aonkit trace PID``); return its control socket. Idempotent.

    Parameters
    ----------
    job_id : str, optional
        Groups the processes ``aonkit trace --all-ranks`` traces together (default: ``$AONKIT_JOB_ID``,
        ``$TORCHELASTIC_RUN_ID``, ``$SLURM_JOB_ID``, ``$PBS_JOBID`` or ``$LSB_JOBID``).
    rank : int, optional
        The rank its trace file is named by (default: ``torch.distributed``'s rank when initialised at trace
        time, else ``$AONKIT_RANK``, ``$RANK``, ``$SLURM_PROCID``, ``$OMPI_COMM_WORLD_RANK`` or ``$PMI_RANK``).
    board : str or path-like, optional
        The job's board, a directory on a filesystem all its nodes share (default ``$AONKIT_JOB_BOARD``): then
        ``aonkit trace --job`` on any node reaches this process too (:mod:`aonkit.live.board`).
    """
    global _SERVER
    if _SERVER is None or _SERVER.pid != os.getpid():
        _SERVER = Server(job_id, rank, board)
        atexit.register(_SERVER.close)
    return _SERVER.sock_path


def step() -> None:
    """Mark a step boundary by hand (loops that do not call ``torch.optim`` optimizers); no-op when not served."""
    if _SERVER is not None and _SERVER.pid == os.getpid():
        _SERVER.boundary()


def serve_from_env() -> None:
    """``AONKIT_SERVE=1`` at ``import aonkit``: serve, unless this is a multiprocessing child (a data worker)."""
    import multiprocessing

    if multiprocessing.parent_process() is None:
        try:
            serve()
        except (OSError, LiveError) as exc:
            import warnings

            warnings.warn(f"AONKIT_SERVE: cannot serve on-demand traces ({exc})", stacklevel=3)
