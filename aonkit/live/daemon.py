"""The always-on sampler: host and every GPU at 10 Hz into the shared ring and rolling Parquet files.

Run it with ``aonkit daemon start`` (background) or ``aonkit daemon run`` (foreground, for systemd and
containers); ``python -m aonkit.live.daemon run`` is what ``start`` launches. One runs per node and user: it holds
an ``fcntl.flock`` on ``daemon.lock`` in the runtime directory for its whole life. The main thread samples and
writes the ring (:mod:`.ring`); a flusher thread reads the ring like any reader and writes Parquet
(:mod:`.store`) every ``flush_s`` seconds, or sooner when half the ring is unflushed. SIGTERM or SIGINT stops
sampling, writes the last partial segment, marks the ring stopped and releases the lock.

A write that fails (a full disk, a removed or replaced data directory, any error) never stops the daemon: the
samples stay in the ring, the error and since when are in the status (``flush_error``, ``flush_error_since_ns``,
``flush_failures``), and the write is tried again every :data:`~aonkit.live.flusher.RETRY_S` seconds; the first
that succeeds writes every sample still in the ring (those it lapped meanwhile are counted in ``lost``). Samples a
failing final write leaves unwritten at the stop are counted in ``unsaved``. A removed runtime directory is made
again (:mod:`.runtime_guard`).

Test hook: ``AONKIT_FAKE_NVML=module:factory`` (read here only) samples GPUs through ``factory()``, an object
with pynvml's API (e.g. the fake NVML of the tests), instead of ``pynvml``.
"""

from __future__ import annotations

import argparse
import faulthandler
import fcntl
import importlib
import math
import os
import select
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..sources.handoffs import HandoffGuard
from ..sources.samplers import HostSampler
from . import store
from .daemon_status import StatusWriter
from .flusher import Flusher
from .gpu_probe import GpuProbe
from .gpu_watch import GpuWatch
from .options import DEFAULTS, add_run_arguments
from .paths import (
    EXIT_RUNNING,
    LOCK,
    RING,
    AlreadyRunning,
    LiveError,
    data_root,
    file_id,
    hostname,
    open_private,
    private_dir,
    runtime_dir,
    systemd_unit,
)
from .ring import STOPPED
from .runtime_guard import RuntimeGuard
from .sd_notify import Notifier


def lock(rdir: Path, tries: int = 20) -> int:
    """Hold the per-user daemon lock (an fd to keep open); :class:`LiveError` "already running (pid N)" if held."""
    fd = open_private(rdir / LOCK, os.O_RDWR | os.O_CREAT)
    for i in range(tries):  # a status check holds it shared for an instant
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if i == tries - 1:
                pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise AlreadyRunning(f"already running (pid {pid}); stop it with `aonkit daemon stop`") from None
            time.sleep(0.01)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _nvml_override() -> Any:
    spec = os.environ.get("AONKIT_FAKE_NVML")
    if not spec:
        return None
    module, _, factory = spec.partition(":")
    return getattr(importlib.import_module(module), factory)()


class Daemon(Flusher, RuntimeGuard, GpuWatch, GpuProbe, StatusWriter):
    """One daemon run; :meth:`run` returns when it was told to stop, after the final flush.

    The constructor only checks and stores the settings; :meth:`run` takes the lock, opens the samplers, creates
    the ring and the data directories, and samples.

    Parameters
    ----------
    interval_s : float
        Sampling interval in seconds (default 0.1: 10 Hz). Must be > 0.
    flush_s : float
        Seconds between Parquet writes (default 60.0); a write also comes sooner when half the ring is
        unflushed. Must be > 0.
    root : str or pathlib.Path, optional
        Root of the Parquet files, made absolute. Default (also for an empty string):
        :func:`aonkit.live.paths.data_root`, i.e. ``$AONKIT_DATA_DIR``, else ``$XDG_STATE_HOME/aonkit/samples``,
        else ``~/.local/state/aonkit/samples``.
    capacity : int
        Samples (ticks of every channel) the shared ring holds. 0 (default) picks
        ``max(int(300 / interval_s), int(2 * flush_s / interval_s) + 10)``: five minutes, and at least two flush
        intervals.
    cap_bytes : int or None
        Disk cap, in bytes, of this host's files: after each write the oldest are deleted while over it (the
        newest file is always kept). Default 10 GiB; None or 0: no cap (as ``--cap-bytes 0``).
    retention_hours : float or None
        After each write, files that started more than this many hours ago are deleted (the newest file is
        always kept). Default 168.0 (a week); None or 0: no age limit (as ``--retention-hours 0``).
    gpm_interval_s : float
        Seconds between GPM computations on GPUs that have GPM (default 1.0; the values repeat between).
        NVML's ``nvmlGpmMetricsGet`` costs about 1.5 ms of CPU a call on an H200, so GPM at 10 Hz would be
        1.5% of a core per GPU, at 1 s 0.15%.
    mig_gpm_interval_s : float
        Seconds between GPM computations of each MIG GPU instance (default 10.0; 0: none), spread over the
        interval: each costs about as much as a whole GPU's, and a node can hold 56 instances.
    slow_interval_s : float
        Seconds between reads of the slow metrics (default 10.0): temperature, the memory clock, the watched
        processes' memory, the PCIe/NVLink counters where GPM measures them, and the energy counter (about 4 ms
        of CPU a read on an H200, whichever way it is read).
    gpu_retry_s : float
        Started without GPUs (no driver yet, no library, no GPU), the daemon looks for them again after 5 s, then
        at doubling waits up to this many seconds (default 60.0; 0: never), and samples them from the tick after
        they open, in a new ring (:mod:`.gpu_probe`).
    gpu_check_s : float
        While it samples GPUs, it looks this often (default 30.0; 0: never) whether the GPUs NVML sees changed (a GPU
        added or removed, MIG reconfigured: :func:`aonkit.sources.nvml_mig.gpu_layout`), and samples the new set
        from the tick after it opens, in a new ring.
    prometheus_file : str or pathlib.Path, optional
        Where to write the daemon's health in Prometheus' text format at every status (each flush, and its stop:
        ``aonkit_daemon_up 0``), for node_exporter's textfile collector (:mod:`.prometheus`). A write that fails is
        said once on stderr and in the status (``prometheus_error``); the daemon goes on.

    Raises
    ------
    ValueError
        If ``interval_s``, ``flush_s``, ``gpm_interval_s`` or ``slow_interval_s`` is not > 0.
    """

    def __init__(self, interval_s: float = DEFAULTS["interval"], flush_s: float = DEFAULTS["flush"],
                 root: str | Path | None = None, capacity: int = 0, cap_bytes: int | None = DEFAULTS["cap_bytes"],
                 retention_hours: float | None = DEFAULTS["retention_hours"],
                 gpm_interval_s: float = DEFAULTS["gpm_interval"],
                 slow_interval_s: float = DEFAULTS["slow_interval"],
                 gpu_retry_s: float = DEFAULTS["gpu_retry"], gpu_check_s: float = DEFAULTS["gpu_check"],
                 prometheus_file: str | Path | None = None,
                 mig_gpm_interval_s: float = DEFAULTS["mig_gpm_interval"]) -> None:  # fmt: skip
        if not min(interval_s, flush_s, gpm_interval_s, slow_interval_s) > 0:
            raise ValueError("interval, flush, GPM interval and slow interval must be > 0")
        self.interval_s, self.flush_s = interval_s, flush_s
        self.gpm_interval_s, self.slow_interval_s = gpm_interval_s, slow_interval_s
        self.gpu_retry_s, self.gpu_check_s = max(0.0, gpu_retry_s), max(0.0, gpu_check_s)
        self.mig_gpm_interval_s = max(0.0, mig_gpm_interval_s)
        self.prometheus_file = Path(prometheus_file).absolute() if prometheus_file else None
        self._status_lock = threading.Lock()  # status writes come from the flusher and the sampling thread
        self.root = Path(root).absolute() if root else data_root().absolute()
        self.capacity = capacity or max(int(300 / interval_s), int(2 * flush_s / interval_s) + 10)
        if (cap_bytes is not None and cap_bytes < 0) or (retention_hours is not None and retention_hours < 0):
            raise ValueError("cap_bytes and retention_hours must be >= 0 (0 or None: no limit)")
        self.cap_bytes, self.retention_hours = cap_bytes or None, retention_hours or None  # 0: no limit, as the CLI
        self.host = hostname()
        self.stats: dict[str, Any] = {"flushes": 0, "last_flush_ns": None, "last_flush_samples": 0, "lost": 0,
                                      "deleted": 0, "flush_error": None, "flush_error_since_ns": None,
                                      "flush_failures": 0, "unsaved": 0, "gpu_blocks": 0,
                                      "gpu_blocked_since_ns": None, "gpu_looks": 0,
                                      "gpus_found_ns": None, "gpu_changes": 0,
                                      "gpu_changed_ns": None}  # fmt: skip
        self._files: list[tuple[int, int, str, int]] | None = None  # this host's files, oldest first
        self._listed_at = 0.0
        self._stop = threading.Event()
        self._flush_now = threading.Event()
        self._flush_lock = threading.Lock()  # the flusher's writes and the main thread's
        self._lost_runtime = threading.Event()  # set by the flusher: the runtime directory is to be made again
        self._samples_before, self._ring_id = 0, None  # samples of the rings before this one
        self._tick_lock = threading.Lock()  # the sampling thread's host sample and ring write, and the watchdog's
        self._gpu_since, self._covered_to_ns = 0.0, 0  # (GpuWatch)
        self._wake = os.pipe()
        self._cost_mark = (time.monotonic(), time.process_time())
        self.notify = Notifier()  # systemd's Type=notify, when a unit started this process
        self.systemd: dict[str, str] | None = None  # the unit that started it (set at the start of a run)
        self._found, self._take_after, self._checking = None, 0.0, False  # (GpuProbe)
        self.reexec: str | None = None  # why this daemon is to start again in a new process image, when it is

    def run(self) -> int:
        """Sample until SIGTERM/SIGINT; return 0, or 1 when the final write failed (``unsaved`` samples)."""
        faulthandler.enable()  # a fatal signal (systemd's watchdog sends SIGABRT) prints every thread's stack
        self.rdir = private_dir(runtime_dir())
        self._lock_fd = lock(self.rdir)
        try:
            self._open()
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, self._on_signal)
            flusher = threading.Thread(target=self._flush_loop, name="aonkit-flusher", daemon=True)
            flusher.start()
            if self.gpu is not None:
                threading.Thread(target=self._watch_loop, name="aonkit-gpu-watch", daemon=True).start()
            self._start_probe()  # without GPUs: look again now and then; with them, whether they changed
            self._sample_loop()
            if self.reexec is None:  # (starting again: systemd sees the same main process go on)
                self.notify.stopping()
            self._flush_now.set()
            flusher.join()
            self._flush()  # the last partial segment
            pending = self.ring.count - self.flushed  # 0 unless that write failed
            self.stats["unsaved"] = min(pending, self.capacity)  # in the ring, not on disk
            self.stats["lost"] += pending - self.stats["unsaved"]  # lapped by the ring before any write
            self.ring.state = STOPPED
            if file_id(self.rdir / RING) == self._ring_id:  # not another daemon's
                (self.rdir / RING).unlink(missing_ok=True)
            self._write_status("stopped")
        finally:
            os.close(self._lock_fd)
        return 1 if self.stats["unsaved"] else 0

    def _open(self) -> None:
        self.host_sampler = HostSampler(self.interval_s, capacity=1)
        self._nvml = _nvml_override()
        self.gpu, self.gpu_note = self.open_gpu(self._nvml)
        self.channels = self.host_sampler.channels + (self.gpu.channels if self.gpu else [])
        self.n_host = len(self.host_sampler.channels)
        self.hdir = private_dir(store.host_dir(private_dir(self.root), self.host))
        store.remove_stale_temps(self.hdir)
        self._new_ring()
        self.started_ns, self.flushed = time.time_ns(), 0
        self.systemd = systemd_unit()
        self._write_status("running")

    def open_gpu(self, nvml: Any = None) -> tuple[Any, str]:
        """The daemon's GPU sampler at its intervals (``open_gpu_sampler``: None and why, without NVML)."""
        from ..sources.nvml import open_gpu_sampler

        return open_gpu_sampler(interval_s=self.interval_s, capacity=1, gpm_min_interval_s=self.gpm_interval_s,
                                slow_interval_s=self.slow_interval_s, mig_gpm=self.mig_gpm_interval_s > 0,
                                mig_gpm_interval_s=self.mig_gpm_interval_s,
                                **({"nvml": nvml} if nvml is not None else {}))  # fmt: skip

    def _on_signal(self, signum: int, frame: object) -> None:
        self._stop.set()
        os.write(self._wake[1], b"x")

    def _read_tick(self) -> list[float]:
        """One tick's readings (NaN where a sampler failed), as a list: no numpy call on the tick."""
        with self._tick_lock:  # (the watchdog samples the host too, while a GPU read is blocked)
            try:
                values = list(self.host_sampler.sample())
            except Exception:  # noqa: BLE001 - a bad tick is NaN, sampling goes on
                values = [math.nan] * self.n_host
        if self.gpu is not None:
            self._gpu_since = time.monotonic()
            try:
                values += self.gpu.sample_list()
            except Exception:  # noqa: BLE001
                values += [math.nan] * (len(self.channels) - self.n_host)
            self._gpu_since = 0.0
        return values

    def _sample_loop(self) -> None:
        next_t = time.monotonic()
        handoffs = HandoffGuard()  # the flusher thread must not hold each reading up by a switch interval
        while not self._stop.is_set():
            if self._lost_runtime.is_set():
                self._lost_runtime.clear()
                if not self._reopen_runtime():  # another daemon samples now
                    self._stop.set()
                    break
            if self._found is not None:  # GPUs that appeared since the start (the look's thread)
                self._take_gpus()
            stamp = time.time_ns()  # a tick is stamped with its first reading's time
            t0 = time.perf_counter_ns()
            values = handoffs.call(self._read_tick)
            handoffs.took(time.perf_counter_ns() - t0)
            with self._tick_lock:
                if stamp > self._covered_to_ns:  # else the watchdog sampled past this tick's stamp: dropped
                    self.ring.write(stamp, values)
                    self.notify.alive()
            if self.ring.count - self.flushed >= self.capacity // 2:
                self._flush_now.set()
            next_t += self.interval_s
            now = time.monotonic()
            if next_t < now - self.interval_s:  # fell behind (suspended): skip the missed ticks
                next_t = now
            select.select([self._wake[0]], [], [], max(0.0, next_t - now))


def main(argv: list[str] | None = None) -> int:
    """``python -m aonkit.live.daemon run [options]``."""
    ap = argparse.ArgumentParser(prog="python -m aonkit.live.daemon")
    sub = ap.add_subparsers(dest="action", required=True)
    add_run_arguments(sub.add_parser("run"))
    args = ap.parse_args(argv)
    try:
        return run_daemon(args)
    except LiveError as exc:
        print(f"aonkit daemon: {exc}", file=sys.stderr, flush=True)
        return EXIT_RUNNING if isinstance(exc, AlreadyRunning) else 1


def run_daemon(args: argparse.Namespace) -> int:
    """Run a :class:`Daemon` with the command line's settings.

    When it asks to start again (a driver of another version than its NVML library: :mod:`.gpu_probe`), this
    process is replaced by the same command (same pid).
    """
    daemon = daemon_from_args(args)
    rc = daemon.run()
    if daemon.reexec is None:
        return rc
    print(f"aonkit daemon: {daemon.reexec}; starting again (same pid) to load the driver's library", file=sys.stderr,
          flush=True)  # fmt: skip
    sys.stdout.flush()
    os.execv(sys.executable, sys.orig_argv)  # the interpreter's own command line: `-m ...` or a script, and its args
    return rc  # (not reached)


def daemon_from_args(args: argparse.Namespace) -> Daemon:
    """A :class:`Daemon` with the command line's settings."""
    return Daemon(args.interval, args.flush, args.root, args.capacity, args.cap_bytes, args.retention_hours,
                  args.gpm_interval, args.slow_interval, args.gpu_retry, args.gpu_check, args.prometheus_file,
                  args.mig_gpm_interval)


if __name__ == "__main__":
    sys.exit(main())
