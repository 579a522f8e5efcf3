"""Arguments of ``aonkit daemon`` and ``aonkit trace`` (no heavy imports: the parser is built on every command)."""

from __future__ import annotations

import argparse
import os

from .board import LEAD_S

DEFAULTS = {"interval": 0.1, "flush": 60.0, "capacity": 0, "cap_bytes": 10 * 1024**3, "retention_hours": 168.0,
            "gpm_interval": 1.0, "slow_interval": 10.0, "gpu_retry": 60.0, "gpu_check": 30.0,
            "mig_gpm_interval": 10.0}


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The daemon's settings (``start`` and ``run``)."""
    p.add_argument("--interval", type=float, default=DEFAULTS["interval"], help="sampling interval in s (0.1: 10 Hz)")
    p.add_argument("--gpm-interval", type=float, default=DEFAULTS["gpm_interval"],
                   help="seconds between GPM computations on Hopper and later (default 1: NVML spends ~1.5 ms of CPU "
                        "on each, so 10 Hz GPM is 1.5%% of a core per GPU; 0.1 for 10 Hz)")
    p.add_argument("--mig-gpm-interval", type=float, default=DEFAULTS["mig_gpm_interval"],
                   help="seconds between GPM computations of each MIG GPU instance, spread over the interval "
                        "(default 10: 56 instances at ~1.5 ms each cost ~0.8%% of a core; 0: none)")
    p.add_argument("--slow-interval", type=float, default=DEFAULTS["slow_interval"],
                   help="seconds between reads of the slow metrics: temperature, the energy counter (~4 ms of CPU a "
                        "read on an H200), the memory clock, process memory (default 10)")
    p.add_argument("--gpu-retry", type=float, default=DEFAULTS["gpu_retry"],
                   help="started without GPUs (no driver yet), look for them again after 5 s, then at doubling waits "
                        "up to this many seconds (default 60; 0: never)")
    p.add_argument("--gpu-check", type=float, default=DEFAULTS["gpu_check"],
                   help="while sampling GPUs, look this often whether they changed (one added or removed, MIG "
                        "reconfigured) and sample the new set from then on (default 30 s; 0: never)")
    p.add_argument("--prometheus-file", metavar="FILE",
                   help="also write the daemon's health in Prometheus' text format to FILE at every status (each "
                        "flush), atomically, for node_exporter's textfile collector (docs/daemon.md)")
    p.add_argument("--flush", type=float, default=DEFAULTS["flush"],
                   help="seconds between Parquet files (also written when half the ring is new; default 60)")
    p.add_argument("--root", help="root of the Parquet files (default $AONKIT_DATA_DIR, else "
                                  "$XDG_STATE_HOME/aonkit/samples, else ~/.local/state/aonkit/samples)")
    p.add_argument("--capacity", type=int, default=DEFAULTS["capacity"],
                   help="samples the shared ring keeps (default: 5 min, and at least 2 flushes)")
    p.add_argument("--cap-bytes", type=int, default=DEFAULTS["cap_bytes"],
                   help="disk cap of this host's files; the oldest are deleted beyond it (default 10 GiB; 0: no cap)")
    p.add_argument("--retention-hours", type=float, default=DEFAULTS["retention_hours"],
                   help="files older than this are deleted (default 168: a week; 0: no age limit)")


def add_daemon_arguments(p: argparse.ArgumentParser) -> None:
    """``aonkit daemon start|run|stop|status``."""
    sub = p.add_subparsers(dest="action", required=True)
    add_run_arguments(sub.add_parser("start", help="start the daemon in the background (one per node and user)"))
    add_run_arguments(sub.add_parser("run", help="run the daemon in the foreground (systemd, containers)"))
    stop = sub.add_parser("stop", help="stop it: the last samples are written to Parquet first")
    stop.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for it to stop (default 30)")
    unit = sub.add_parser("unit", help="print a systemd unit that runs the daemon (docs/daemon.md, 'Under systemd')")
    add_run_arguments(unit)
    unit.add_argument("--system", metavar="USER",
                      help="a system unit running the daemon as USER (default: a user unit, for systemctl --user)")
    st = sub.add_parser("status", help="pid, uptime, samplers, ring, files on disk, last flush, opted-in processes")
    st.add_argument("--prometheus", metavar="FILE",
                    help="the daemon's health in Prometheus' text format, written atomically to FILE (- for stdout) "
                         "for node_exporter's textfile collector; exit 0 once written, a stopped daemon included")
    st.add_argument("--json", action="store_true",
                    help='one JSON object for monitoring: "health" (ok, degraded, starting, not running), '
                         '"problems", "pid", "ring" and "status" (daemon.json); exit 0 running, 3 not')


def add_trace_arguments(p: argparse.ArgumentParser) -> None:
    """``aonkit trace PID``, or ``aonkit trace --job ID`` through the job's board."""
    p.add_argument("pid", type=int, nargs="?", help="a process that opted in (aonkit.live.serve() or AONKIT_SERVE=1)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--steps", type=int, help="trace the next N optimizer steps (default 3)")
    what.add_argument("--duration", type=float, help="trace for S seconds (from one step boundary to the next)")
    p.add_argument("--out", help="bundle folder; with --all-ranks the job folder (default aon-traces/<time>-...)")
    p.add_argument("--all-ranks", action="store_true",
                   help="trace every opted-in process of the same job id on this node: rank<N>.json.gz files")
    p.add_argument("--job", help="trace every rank of this job id, on every node, through its board (--board)")
    p.add_argument("--board", default=os.environ.get("AONKIT_JOB_BOARD") or None,
                   help="the job's board: a directory all its nodes share (default $AONKIT_JOB_BOARD)")
    p.add_argument("--ranks", type=int, help="with --job: ranks to wait for (default: the world size they report)")
    p.add_argument("--lead", type=float, default=LEAD_S,
                   help=f"with --job: seconds the ranks have to see each of the request and their agreed start step; "
                        f"the first traced step comes about twice this after the command (default {LEAD_S:g})")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="give up when the trace has not finished after this many seconds (default 600)")
