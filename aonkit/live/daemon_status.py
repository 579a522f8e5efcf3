"""The daemon's status: ``daemon.json``, systemd's status line, the Prometheus page, and what the daemon costs.

A mixin of :class:`aonkit.live.daemon.Daemon` (its settings, ``rdir``, ``ring``, ``gpu``, ``gpu_note``, ``stats``,
``started_ns``, ``systemd``, ``notify``, ``prometheus_file``, ``_files``, ``_samples_before``, ``_status_lock``,
``_cost_mark`` and ``owns_runtime``). The flusher and the sampling thread write it, one at a time.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from .paths import RING, STATUS
from .prometheus import exposition, own_report, write_textfile
from .sd_notify import status_line
from .status import write_json


class StatusWriter:
    """Writes the daemon's status (see the module)."""

    stats: dict[str, Any]

    def _write_status(self, state: str) -> None:
        with self._status_lock:  # one at a time: both write through the same temporary file names
            if not self.owns_runtime():  # the directory is gone, or another daemon's now
                return
            st = self._status(state)
            if self.prometheus_file is not None:  # first: the status says whether this page was written
                self._write_prometheus(st)
                st["prometheus_error"] = self.stats["prometheus_error"]
            write_json(self.rdir / STATUS, st)
            self.notify.status(status_line(st))

    def _status(self, state: str) -> dict[str, Any]:
        gpu = self.gpu
        st = {
            "state": state, "pid": os.getpid(), "started_ns": self.started_ns, "status_ns": time.time_ns(),
            "host": self.host, "systemd": self.systemd,
            "interval_s": self.interval_s, "flush_s": self.flush_s, "root": str(self.root),
            "ring": str(self.rdir / RING), "capacity": self.capacity, "channels": len(self.channels),
            "cap_bytes": self.cap_bytes,
            "retention_hours": self.retention_hours, "gpm_interval_s": self.gpm_interval_s,
            "slow_interval_s": self.slow_interval_s, "gpu_retry_s": self.gpu_retry_s,
            "host_metrics": list(self.host_sampler.metrics),
            "gpus": list(gpu.devices) if gpu else [], "gpu_names": getattr(gpu, "device_names", {}),
            "gpu_metrics": len(gpu.metrics) if gpu else 0, "gpu_unsupported": gpu.n_unsupported if gpu else 0,
            "gpu_check_s": self.gpu_check_s, "mig_gpm_interval_s": self.mig_gpm_interval_s,
            "gpu_mig": {str(i): [list(d) for d in devs] for i, devs in getattr(gpu, "mig", {}).items()},
            "gpu_note": self.gpu_note, "samples": self._samples_before + self.ring.count,
            "sample_index": self.sample_index, **self.stats, **self._cost(),
        }  # fmt: skip
        return st

    def _write_prometheus(self, st: dict[str, Any]) -> None:
        """The health in Prometheus' text format (:func:`.prometheus.exposition`) to ``prometheus_file``."""
        files = self._files  # the flusher's list of this host's files (None before the first write)
        st = {**st, "prometheus_error": None}  # a page that is written is no failure to write it
        report = own_report(st, self.ring, sum(f[3] for f in files) if files is not None else None)
        try:
            write_textfile(self.prometheus_file, exposition(report))
        except OSError as exc:
            if self.stats.get("prometheus_error") is None:
                print(f"aonkit daemon: cannot write {self.prometheus_file}: {exc}", file=sys.stderr, flush=True)
            self.stats["prometheus_error"] = f"{type(exc).__name__}: {exc}"
        else:
            self.stats["prometheus_error"] = None

    def _cost(self) -> dict[str, Any]:
        """What the daemon costs: its CPU since the last status (all threads) and since it started, and its RSS."""
        now, cpu = time.monotonic(), time.process_time()
        (t0, c0), self._cost_mark = self._cost_mark, (now, cpu)
        rss = _rss_bytes()
        return {"cpu_s": round(cpu, 3), "cpu_window_s": round(now - t0, 3),
                "cpu_percent": round(100 * (cpu - c0) / (now - t0), 3) if now > t0 else None,
                "rss_bytes": rss[0], "rss_peak_bytes": rss[1]}  # fmt: skip


def _rss_bytes() -> tuple[int | None, int | None]:
    """(resident, peak resident) bytes of this process from ``/proc/self/status``; None where it is not there."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None, None
    kb = {k: int(v.split()[0]) * 1024 for k, v in (ln.split(":", 1) for ln in text.splitlines() if ":" in ln)
          if k in ("VmRSS", "VmHWM")}  # fmt: skip
    return kb.get("VmRSS"), kb.get("VmHWM")


