"""``aonkit daemon start|run|stop|status``: the commands around :class:`aonkit.live.daemon.Daemon`."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .paths import EXIT_RUNNING, LOG, STATUS, AlreadyRunning, LiveError, open_private, private_dir, runtime_dir
from .status import read_json, running_pid, status_json, status_text


def daemon_command(args: argparse.Namespace) -> int:
    """Run ``aonkit daemon ACTION``; return the exit status (``status``: 0 running, 3 not running)."""
    if args.action == "unit":
        from .unit import unit_command

        return unit_command(args)
    return {"start": start, "run": run, "stop": stop, "status": status}[args.action](args)


ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""The daemon's environment: no BLAS or OpenMP thread pool. It does no linear algebra, and numpy's OpenBLAS
otherwise starts one thread per further CPU at import, each spinning 0.1-0.2 s of CPU before it sleeps
(``bench/RESULTS.md``, session 31)."""


def run(args: argparse.Namespace) -> int:
    """Sample in the foreground until SIGTERM or SIGINT.

    When numpy may already have started a BLAS thread pool in this process (the environment lacks
    :data:`ONE_THREAD`), the process replaces itself (``execve``: same pid, for systemd) with
    ``python -m aonkit.live.daemon run`` under it.
    """
    if any(os.environ.get(k) != v for k, v in ONE_THREAD.items()):
        argv = [sys.executable, "-m", "aonkit.live.daemon", "run", *forwarded_args(args)]
        os.execve(sys.executable, argv, {**os.environ, **ONE_THREAD})  # noqa: S606
    from .daemon import run_daemon

    try:
        return run_daemon(args)
    except AlreadyRunning as exc:  # its own status, so that a systemd unit does not restart on it
        print(f"aonkit: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_RUNNING


def forwarded_args(args: argparse.Namespace) -> list[str]:
    """The run options of ``args`` as a command line for ``python -m aonkit.live.daemon run`` (the root absolute)."""
    out = ["--interval", str(args.interval), "--flush", str(args.flush), "--capacity", str(args.capacity),
           "--cap-bytes", str(args.cap_bytes), "--retention-hours", str(args.retention_hours),
           "--gpm-interval", str(args.gpm_interval), "--slow-interval", str(args.slow_interval),
           "--gpu-retry", str(args.gpu_retry), "--gpu-check", str(args.gpu_check),
           "--mig-gpm-interval", str(args.mig_gpm_interval)]  # fmt: skip
    if args.root:
        out += ["--root", str(Path(args.root).absolute())]
    if getattr(args, "prometheus_file", None):
        out += ["--prometheus-file", str(Path(args.prometheus_file).absolute())]
    return out


def start(args: argparse.Namespace, timeout_s: float = 60.0) -> int:
    """Launch ``python -m aonkit.live.daemon run`` in a new session and wait until it samples."""
    rdir = private_dir(runtime_dir())
    if (pid := running_pid(rdir)) is not None:
        unit = under_systemd(rdir, pid)
        raise LiveError(f"already running (pid {pid}" + (f", systemd's {unit['scope']} unit {unit['unit']})"
                        if unit else "); stop it with `aonkit daemon stop`"))  # fmt: skip
    log = open_private(rdir / LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    env = {**os.environ, "AONKIT_RUNTIME_DIR": str(rdir.absolute())}
    if env.get("AONKIT_DATA_DIR"):
        env["AONKIT_DATA_DIR"] = str(Path(env["AONKIT_DATA_DIR"]).absolute())
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).absolute()) for p in env["PYTHONPATH"].split(os.pathsep))
    env.pop("AONKIT_SERVE", None)
    env.update(ONE_THREAD)
    log_start = os.lseek(log, 0, os.SEEK_END)
    proc = subprocess.Popen([sys.executable, "-m", "aonkit.live.daemon", "run", *forwarded_args(args)],  # noqa: S603
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/", env=env,
                            start_new_session=True)  # fmt: skip
    os.close(log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            tail = (rdir / LOG).read_bytes()[log_start:].decode(errors="replace").strip().splitlines()
            raise LiveError(f"the daemon exited at start (status {code}): {tail[-1] if tail else 'no message'} "
                            f"(log: {rdir / LOG})")  # fmt: skip
        st = read_json(rdir / STATUS, "daemon status file")
        if st and st.get("pid") == proc.pid and st.get("state") == "running":
            proc.returncode = 0  # it runs on its own now: no zombie warning for this handle
            from .status import samplers_line

            print(f"aonkit daemon: started (pid {proc.pid}), every {st['interval_s']:g} s\n"
                  f"  samplers: {samplers_line(st)}\n  files: {st['root']}/host={st['host']}/")
            return 0
        time.sleep(0.05)
    raise LiveError(f"the daemon (pid {proc.pid}) did not report within {timeout_s:g} s; see {rdir / LOG}")


def stop(args: argparse.Namespace) -> int:
    """SIGTERM the daemon and wait until it has written its last samples and released the lock."""
    rdir = runtime_dir()
    pid = running_pid(rdir) if rdir.is_dir() else None
    if pid is None:
        print("aonkit daemon: not running")
        return 0
    if (unit := under_systemd(rdir, pid)) and unit["scope"] == "system":
        raise LiveError(f"the daemon (pid {pid}) is systemd's system unit {unit['unit']}: root stops it "
                        f"(`systemctl stop {unit['unit']}`); stopped from here it would stay stopped until the "
                        "next boot")  # fmt: skip
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while running_pid(rdir) is not None:
        if time.monotonic() > deadline:
            raise LiveError(f"the daemon (pid {pid}) did not stop within {args.timeout:g} s")
        time.sleep(0.05)
    st = read_json(rdir / STATUS, "daemon status file") or {}
    if st.get("unsaved"):
        print(f"aonkit daemon: stopped (pid {pid}); {st.get('samples', '?')} samples taken, {st.get('lost', '?')} "
              f"lost, {st['unsaved']} NOT WRITTEN (the last write failed: {st.get('flush_error')}); the others "
              f"are on disk under {st.get('root', '?')}")  # fmt: skip
        return 1
    print(f"aonkit daemon: stopped (pid {pid}); {st.get('samples', '?')} samples taken, "
          f"{st.get('lost', '?')} lost, all others on disk under {st.get('root', '?')}")
    return 0


def under_systemd(rdir: Path, pid: int) -> dict[str, str] | None:
    """The systemd unit the running daemon ``pid`` says it is (its status file), or None."""
    st = read_json(rdir / STATUS, "daemon status file") or {}
    return st.get("systemd") if st.get("pid") == pid else None


def prometheus_status(rdir: Path, pid: int | None, out: str) -> int:
    """``status --prometheus OUT``: the health in Prometheus' text format to ``OUT`` (atomically) or stdout (``-``).

    Returns 0 once written, whatever the health (a dead daemon is ``aonkit_daemon_up 0``).
    """
    from .prometheus import exposition, write_textfile
    from .status import disk_files

    report = status_json(rdir, pid)
    if report["health"] in ("ok", "degraded"):
        report["disk_bytes"] = sum(f[3] for f in disk_files(report["status"])[1])
    text = exposition(report)
    if out == "-":
        print(text, end="")
    else:
        write_textfile(Path(out), text)
    return 0


def status(args: argparse.Namespace) -> int:
    """Print the status; 0 when running, 3 when not (as ``systemctl status``)."""
    rdir = runtime_dir()
    pid = running_pid(rdir) if rdir.is_dir() else None
    if getattr(args, "prometheus", None):
        return prometheus_status(rdir, pid, args.prometheus)
    if getattr(args, "json", False):
        print(json.dumps(status_json(rdir, pid)))
    else:
        print(status_text(rdir, pid))
    return 0 if pid is not None else 3
