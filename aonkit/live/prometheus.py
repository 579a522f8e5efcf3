"""The daemon's health in Prometheus' text format, for node_exporter's textfile collector (no port opened).

Two writers of the same page: the daemon itself, at each status (each flush, and ``aonkit_daemon_up 0`` at its
stop), with ``--prometheus-file FILE``, at no cost worth measuring; and ``aonkit daemon status --prometheus FILE``,
from outside (a timer), which also reports a daemon that died (``aonkit_daemon_up 0``) but costs a Python start
each time (0.3 s of CPU on the dev VM). Both write ``FILE`` atomically (a temporary file in the same folder,
renamed in: the collector never reads half a file); ``docs/daemon.md``, "Health in Prometheus". Every series has
the label ``user``: one daemon runs per user, and the collector merges the files of all users of a node.

Only the daemon's own health and cost are exposed, not the samples (a GPU exporter such as dcgm-exporter does that)
and nothing of any trace.
"""

from __future__ import annotations

import math
import os
import pwd
import time
from pathlib import Path
from typing import Any

from .status import GPU_BLOCKED, PROMETHEUS_FAILS, PRUNE_FAILS, STALLED, WRITING_FAILS, WRITING_LATE, judged, write_text

PROBLEMS = {"sampling_stalled": STALLED, "gpu_reads_blocked": GPU_BLOCKED, "writing_fails": WRITING_FAILS,
            "writing_late": WRITING_LATE, "prune_fails": PRUNE_FAILS,
            "prometheus_fails": PROMETHEUS_FAILS}  # fmt: skip
"""``problem`` label -> the start of :func:`aonkit.live.status.problems`' line."""

# name, type, help, value from (report, status, ring); None: the series is left out
SERIES: list[tuple[str, str, str, Any]] = [
    ("start_time_seconds", "gauge", "When the daemon started (Unix time).", lambda r, s, g: s["started_ns"] / 1e9),
    ("samples_total", "counter", "Samples (ticks of every channel) taken since the start.",
     lambda r, s, g: s["samples"]),
    ("lost_samples_total", "counter", "Samples the ring lapped before they were written to Parquet.",
     lambda r, s, g: s["lost"]),
    ("unflushed_samples", "gauge", "Samples in the ring not yet written to Parquet.",
     lambda r, s, g: g["count"] - g["flushed"] if g else None),
    ("last_sample_timestamp_seconds", "gauge", "Time of the newest sample in the ring (Unix time).",
     lambda r, s, g: g["heartbeat_ns"] / 1e9 if g and g["count"] else None),
    ("flushes_total", "counter", "Parquet writes that succeeded.", lambda r, s, g: s["flushes"]),
    ("flush_failures_total", "counter", "Parquet writes that failed.", lambda r, s, g: s["flush_failures"]),
    ("last_flush_timestamp_seconds", "gauge", "Time of the last successful Parquet write (Unix time).",
     lambda r, s, g: s["last_flush_ns"] / 1e9 if s.get("last_flush_ns") else None),
    ("deleted_files_total", "counter", "Parquet files deleted by the disk cap and the retention.",
     lambda r, s, g: s["deleted"]),
    ("gpus", "gauge", "GPUs sampled through NVML.", lambda r, s, g: len(s["gpus"])),
    ("gpu_blocks_total", "counter", "Times an NVML call did not return for 2 s (the host sampled on meanwhile).",
     lambda r, s, g: s.get("gpu_blocks", 0)),
    ("gpu_changes_total", "counter", "Times the GPUs changed (one added or removed, MIG reconfigured) and a new "
     "sampler took over.", lambda r, s, g: s.get("gpu_changes", 0)),
    ("cpu_seconds_total", "counter", "CPU time of the daemon, all threads.", lambda r, s, g: s.get("cpu_s")),
    ("resident_memory_bytes", "gauge", "Resident memory of the daemon at its last status.",
     lambda r, s, g: s.get("rss_bytes")),
    ("disk_bytes", "gauge", "Bytes of this node's Parquet files under the daemon's root.",
     lambda r, s, g: r.get("disk_bytes")),
]


def _value(x: float) -> str:
    if isinstance(x, bool):
        return str(int(x))
    if isinstance(x, int):
        return str(x)
    return "NaN" if math.isnan(x) else repr(float(x))


def _label(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def exposition(report: dict[str, Any], user: str | None = None) -> str:
    """The text format of ``report`` (:func:`aonkit.live.status.status_json`, plus ``disk_bytes`` when known).

    ``aonkit_daemon_up`` (1 running or starting, 0 not), ``aonkit_daemon_healthy`` (1 when running with no
    problem), ``aonkit_daemon_problem{problem=...}`` (1 or 0 for each kind), then the daemon's counters while it
    runs. All with ``user`` (default: this process's user).
    """
    user = user if user is not None else pwd.getpwuid(os.getuid()).pw_name
    lab = f'user="{_label(user)}"'
    running = report["health"] != "not running"
    st = report.get("status") if running and report["health"] != "starting" else None
    ring = report.get("ring") if isinstance(report.get("ring"), dict) else None
    out: list[str] = []

    def one(name: str, kind: str, text: str, value: float, extra: str = "") -> None:
        out.extend([f"# HELP aonkit_daemon_{name} {text}", f"# TYPE aonkit_daemon_{name} {kind}"])
        out.append(f"aonkit_daemon_{name}{{{lab}{extra}}} {_value(value)}")

    one("up", "gauge", "1 while this user's aonkit daemon runs on the node, 0 when it does not.", running)
    one("healthy", "gauge", "1 while it runs with no problem (aonkit daemon status lists them).",
        report["health"] == "ok")  # fmt: skip
    out += ["# HELP aonkit_daemon_problem 1 while the daemon has this problem.", "# TYPE aonkit_daemon_problem gauge"]
    for key, head in PROBLEMS.items():
        has = any(p.startswith(head) for p in report.get("problems") or [])
        out.append(f'aonkit_daemon_problem{{{lab},problem="{key}"}} {int(has)}')
    if st is not None:
        unit = (st.get("systemd") or {}).get("unit", "")
        from .. import __version__

        one("info", "gauge", "The daemon's aonkit version and systemd unit (empty: started by hand).", 1,
            f',version="{_label(__version__)}",unit="{_label(unit)}"')  # fmt: skip
        for name, kind, text, get in SERIES:
            v = get(report, st, ring)
            if v is not None:
                one(name, kind, text, v)
    return "\n".join(out) + "\n"


def own_report(st: dict[str, Any], ring: Any, disk_bytes: int | None) -> dict[str, Any]:
    """What the daemon reports of itself, in the shape of :func:`aonkit.live.status.status_json`.

    From its status ``st`` and its :class:`~aonkit.live.ring.Ring`. A stopped daemon is "not running"; a stalled
    or blocked one writes nothing: node_exporter's ``node_textfile_mtime_seconds`` says how old the file is.
    """
    counters = {"count": ring.count, "flushed": ring.flushed, "heartbeat_ns": ring.heartbeat_ns,
                "interval_ns": ring.interval_ns}  # fmt: skip
    if st["state"] != "running":
        return {"health": "not running", "problems": [], "ring": counters, "status": st, "disk_bytes": disk_bytes}
    return {**judged(st, counters, time.time_ns()), "status": st, "disk_bytes": disk_bytes}


def write_textfile(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed in (:func:`.status.write_text`).

    Mode 0644: the collector may run as another user.
    """
    write_text(path, text, 0o644)
