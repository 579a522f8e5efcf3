"""What ``aonkit daemon status`` shows, and the small file helpers the daemon and its clients share."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from .paths import LOCK, PROCS, RING, STATUS, check_private, open_private

STALLED, GPU_BLOCKED = "SAMPLING STALLED", "GPU READS BLOCKED"
WRITING_FAILS, WRITING_LATE = "WRITING FAILS", "WRITING LATE"
PRUNE_FAILS, PROMETHEUS_FAILS = "disk cap and retention not applied", "health page not written"
"""The headings of :func:`problems`' lines; systemd's status line (:func:`.sd_notify.status_line`) uses them too."""


def write_text(path: Path, text: str, mode: int = 0o600) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file beside it, renamed in.

    The file gets ``mode`` whatever the umask, is never opened through a link, and is removed when the write fails.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically, owner-only."""
    write_text(path, json.dumps(data))


def read_json(path: Path, what: str) -> dict[str, Any] | None:
    """``path``'s JSON (after the owner checks), or None when it does not exist."""
    if not path.exists():
        return None
    check_private(path, what)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def running_pid(rdir: Path) -> int | None:
    """The pid of the daemon holding the lock in ``rdir``, or None when none holds it."""
    try:
        fd = os.open(rdir / LOCK, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except BlockingIOError:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        return int(text) if text.isdigit() else -1
    finally:
        os.close(fd)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def _ago(ns: int | None) -> str:
    if not ns:
        return "never"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ns / 1e9))
    return f"{stamp} ({(time.time_ns() - ns) / 1e9:.1f} s ago)"


def samplers_line(st: dict[str, Any]) -> str:
    """"host (...); GPU 0, 1 through NVML: ..." or "host only (why)"."""
    host = f"host ({', '.join(st['host_metrics'])})"
    if not st["gpus"]:
        again = (f"; looked again {st.get('gpu_looks', 0)} times, looks at least every {st['gpu_retry_s']:g} s"
                 if st.get("gpu_retry_s") else "")
        return f"{host} only: {st['gpu_note']}{again}"
    every = (f"; GPM every {st['gpm_interval_s']:g} s, slow metrics every {st['slow_interval_s']:g} s"
             if "gpm_interval_s" in st else "")
    found = f"; found {_ago(st['gpus_found_ns'])}, after the start" if st.get("gpus_found_ns") else ""
    if st.get("gpu_changes"):
        found += f"; changed {st['gpu_changes']} times, last {_ago(st['gpu_changed_ns'])}"
    mig = "".join(f"; GPU {i} in MIG mode: {len(devs)} MIG devices on {len({d[0] for d in devs})} GPU instances"
                  for i, devs in st.get("gpu_mig", {}).items())  # fmt: skip
    return (f"{host}; GPU {', '.join(map(str, st['gpus']))} through NVML: {st['gpu_metrics']} metrics, "
            f"{st['gpu_unsupported']} left out{mig}{every}{found}")  # fmt: skip


def ring_state(rdir: Path) -> dict[str, int] | str:
    """The running daemon's ring counters (``count``, ``flushed``, ``heartbeat_ns``, ``interval_ns``), or why not."""
    from .ring import Ring

    check_private(rdir / RING, "daemon's ring")
    try:
        ring = Ring.open(rdir / RING)
    except ValueError as exc:  # a daemon of another aonkit version
        return f"{exc}; restart the daemon (`aonkit daemon stop; aonkit daemon start`)"
    try:
        return {"count": ring.count, "flushed": ring.flushed, "heartbeat_ns": ring.heartbeat_ns,
                "interval_ns": ring.interval_ns}  # fmt: skip
    finally:
        ring.close()


def problems(st: dict[str, Any], ring: dict[str, int] | str, now_ns: int) -> list[str]:
    """What is wrong with a running daemon, one line each (none when healthy).

    Sampling stalled, writes failing or late, the disk cap not applied.
    """
    from .ring import stalled

    out = []
    if isinstance(ring, dict) and ring["count"] and stalled(ring["heartbeat_ns"], ring["interval_ns"], now_ns):
        out.append(f"{STALLED}: no sample for {(now_ns - ring['heartbeat_ns']) / 1e9:.1f} s (one every "
                   f"{st['interval_s']:g} s expected): the process is stopped (SIGSTOP, a debugger) or blocked, "
                   "e.g. in an NVML call to a failing GPU")  # fmt: skip
    if st.get("gpu_blocked_since_ns"):
        out.append(f"{GPU_BLOCKED} since {_ago(st['gpu_blocked_since_ns'])}: an NVML call has not returned (a "
                   "GPU fallen off the bus?); the host is sampled on, the GPU channels are NaN meanwhile")
    if st.get("flush_error"):
        keeps = st["capacity"] * st["interval_s"]
        out.append(f"{WRITING_FAILS} since {_ago(st.get('flush_error_since_ns'))}, {st.get('flush_failures', 1)} "
                   f"tries: {st['flush_error']}; the samples wait in the ring, which keeps the last {keeps:g} s "
                   "(older ones are lost while this lasts)")
    else:
        late = (now_ns - (st.get("last_flush_ns") or st["started_ns"])) / 1e9
        if late > max(3 * st["flush_s"], st["flush_s"] + 2):
            out.append(f"{WRITING_LATE}: no write for {late:.0f} s (one every {st['flush_s']:g} s expected): the "
                       "flusher is blocked (a hung network file system?) or the process is stopped")  # fmt: skip
    if st.get("prune_error"):
        out.append(f"{PRUNE_FAILS}: {st['prune_error']}")
    if st.get("prometheus_error"):
        out.append(f"{PROMETHEUS_FAILS}: {st['prometheus_error']}")
    return out


def status_json(rdir: Path, pid: int | None) -> dict[str, Any]:
    """What ``aonkit daemon status --json`` prints.

    ``health`` ("ok", "degraded", "starting" or "not running"), ``problems`` (as :func:`problems`), ``pid``,
    ``ring`` (its counters, or why not) and ``status`` (the daemon's ``daemon.json``).
    """
    st = read_json(rdir / STATUS, "daemon status file")
    out: dict[str, Any] = {"pid": pid, "problems": [], "ring": None, "status": st}
    if pid is None:
        return {**out, "health": "not running"}
    if st is None or st.get("pid") != pid:
        return {**out, "health": "starting"}
    return {**out, **judged(st, ring_state(rdir), time.time_ns())}


def judged(st: dict[str, Any], ring: dict[str, int] | str, now_ns: int) -> dict[str, Any]:
    """A running daemon's ``health`` ("ok" or "degraded"), its ``problems`` and the ``ring`` they were judged on."""
    found = problems(st, ring, now_ns)
    return {"health": "degraded" if found else "ok", "problems": found, "ring": ring}


def disk_files(st: dict[str, Any]) -> tuple[Path, list[tuple[int, int, Path, int]]]:
    """The daemon's host folder (from its status) and the Parquet files in it (``store.list_files``)."""
    from .files import host_dir, list_files  # (not .store: no pyarrow for a status)

    hdir = host_dir(Path(st["root"]), st["host"])
    return hdir, list_files(hdir) if hdir.is_dir() else []


def status_text(rdir: Path, pid: int | None) -> str:
    """The status report: running or not, samplers, ring, disk, last flush and opted-in processes."""
    from .registry import registered

    st = read_json(rdir / STATUS, "daemon status file")
    if pid is None:
        lines = ["aonkit daemon: not running"]
        if st:
            lines.append(f"  last run: pid {st['pid']}, {st['state']}; last flush {_ago(st.get('last_flush_ns'))}"
                         + (f"; {st['unsaved']} samples NOT WRITTEN at its stop: {st.get('flush_error')}"
                            if st.get("unsaved") else ""))  # fmt: skip
    elif st is None or st.get("pid") != pid:
        return f"aonkit daemon: starting (pid {pid})"
    else:
        up = int((time.time_ns() - st["started_ns"]) / 1e9)
        unit = st.get("systemd")
        lines = [f"aonkit daemon: running (pid {pid}), up {up // 3600}:{up // 60 % 60:02d}:{up % 60:02d}"
                 + (f", systemd's {unit['scope']} unit {unit['unit']}" if unit else ""),
                 f"  samplers: {samplers_line(st)}"]
        ring, now = ring_state(rdir), time.time_ns()
        if isinstance(ring, str):
            lines.append(f"  ring: {ring}")
        else:
            count, used = ring["count"], min(ring["count"], st["capacity"])
            lines.append(f"  ring: {rdir / RING}: {st['channels']} channels every {st['interval_s']:g} s; "
                         f"{used}/{st['capacity']} samples held ({100 * used / st['capacity']:.0f}% full), "
                         f"{count - ring['flushed']} not yet on disk, {count} taken, the last "
                         f"{(now - ring['heartbeat_ns']) / 1e9:.1f} s ago")  # fmt: skip
        lines.append(f"  last flush: {_ago(st.get('last_flush_ns'))}, {st.get('last_flush_samples', 0)} samples; "
                     f"{st['lost']} samples lost")
        lines += [f"  {line}" for line in problems(st, ring, now)]
        if st.get("runtime_recreated"):
            lines.append(f"  runtime directory: removed and made again {st['runtime_recreated']} time(s) (a logout "
                         "removes $XDG_RUNTIME_DIR: set AONKIT_RUNTIME_DIR, or `loginctl enable-linger`)")  # fmt: skip
        if st.get("cpu_percent") is not None:
            since = 100 * st["cpu_s"] / max(1e-9, (st["status_ns"] - st["started_ns"]) / 1e9)
            rss = (f"; RSS {_size(st['rss_bytes'])} (peak {_size(st['rss_peak_bytes'])})"
                   if st.get("rss_bytes") is not None else "")  # fmt: skip
            lines.append(f"  cost: {st['cpu_percent']:.2f}% of a core over the last {st['cpu_window_s']:.0f} s "
                         f"({since:.2f}% since the start, start-up included){rss}")
    if st:
        hdir, files = disk_files(st)
        cap = f"cap {_size(st['cap_bytes'])}" if st.get("cap_bytes") else "no cap"
        keep = f"retention {st['retention_hours']:g} h" if st.get("retention_hours") else "no retention limit"
        lines.append(f"  disk: {hdir}: {len(files)} files, {_size(sum(f[3] for f in files))} ({cap}, {keep})")
    procs = registered(rdir / PROCS)
    lines.append(f"  opted-in processes: {len(procs)}" + "".join(
        f"\n    pid {p['pid']}: job {p.get('job_id')}, rank {p.get('rank')}, {' '.join(p.get('argv', []))[:60]}"
        + (f" (board {p['board']})" if p.get("board") else "") for p in procs))  # fmt: skip
    return "\n".join(lines)
