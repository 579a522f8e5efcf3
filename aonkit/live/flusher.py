"""The daemon's flusher: the ring's samples to Parquet, the disk cap and retention, and what a failing write does.

A mixin of :class:`aonkit.live.daemon.Daemon` (its attributes: ``ring``, ``flushed``, ``stats``, ``root``,
``host``, ``hdir``, ``channels``, ``cap_bytes``, ``retention_hours``, ``flush_s``, the events ``_stop`` and
``_flush_now``, and ``_write_status``). :meth:`Flusher._flush_loop` runs on its own thread; :meth:`Flusher._flush`
may also be called by the main thread (the final write, a new runtime directory), one at a time.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

from . import store
from .paths import CHECK_S

RELIST_S = 3600.0
"""How often the flusher lists the host's files again (files deleted or added by others are seen then)."""
RETRY_S = 5.0
"""After a failed write the flusher tries again this long later (or after ``flush_s``, if shorter), not at every
tick of a ring more than half unflushed: a full disk must not turn the flusher into a busy loop."""


class Flusher:
    """Writes the daemon's ring to Parquet (see the module)."""

    _files: list[tuple[int, int, str, int]] | None
    _listed_at: float
    _flush_lock: threading.Lock
    stats: dict[str, Any]

    def _flush_loop(self) -> None:
        due = time.monotonic() + self.flush_s
        while not self._stop.is_set():
            if self.stats["flush_error"] is None:  # between writes, the runtime directory is checked every CHECK_S
                asked = self._flush_now.wait(max(0.0, min(CHECK_S, due - time.monotonic())))
                if not asked and time.monotonic() < due and not self._stop.is_set():
                    self._check_runtime()
                    continue
            else:  # failing: try again on its own clock, not at each tick of a ring more than half unflushed
                self._stop.wait(min(self.flush_s, RETRY_S))
            if self._stop.is_set():
                return
            self._flush_now.clear()
            try:
                self._flush()
            except Exception as exc:  # noqa: BLE001 - the status could not be written: say so, go on
                print(f"aonkit daemon: cannot write its status: {type(exc).__name__}: {exc}", file=sys.stderr)
            due = time.monotonic() + self.flush_s
            self._check_runtime()

    def _check_runtime(self) -> None:
        with self._flush_lock:  # (the sampling thread replaces the lock and ring under it)
            if not self._runtime_intact():  # removed (a logout, a /tmp cleaner): the sampling thread makes it
                self._lost_runtime.set()

    def _flush(self) -> None:
        with self._flush_lock:
            self._write_pending()

    def _write_pending(self) -> None:
        """Write the ring's unwritten samples to Parquet, then apply the disk cap and retention; update the status.

        A failed write leaves them in the ring for the next try (its files are named by their first sample, so
        a retry replaces what a half-done one wrote); a failed prune is said in the status and tried again at the
        next write.
        """
        cpu0 = time.thread_time()
        s = self.stats
        try:
            end = self.ring.count
            ts, values, _ = self.ring.read(self.flushed, end)
            files = store.write_segment(self.root, self.host, ts, values, self.channels) if len(ts) else []
        except Exception as exc:  # noqa: BLE001 - disk full, removed root...: keep the samples, try again later
            self._files = None  # list the directory again next time
            s["flush_error"] = f"{type(exc).__name__}: {exc}"
            s["flush_error_since_ns"] = s["flush_error_since_ns"] or time.time_ns()
            s["flush_failures"] += 1
            self._write_status("running")
            return
        s["lost"] += (end - self.flushed) - len(ts)
        s["flushes"] += 1
        s["last_flush_ns"], s["last_flush_samples"], s["last_flush_files"] = time.time_ns(), len(ts), len(files)
        s["flush_error"] = s["flush_error_since_ns"] = None
        self.flushed = self.ring.flushed = end
        try:
            store.release_memory()
            gone = store.prune(self.hdir, self.cap_bytes,
                               None if self.retention_hours is None else self.retention_hours * 3600,
                               files=self._known_files(files))  # fmt: skip
            s["deleted"] += len(gone)
            s["prune_error"] = None
        except Exception as exc:  # noqa: BLE001 - the samples are on disk; the cap is applied at the next write
            self._files = None
            s["prune_error"] = f"{type(exc).__name__}: {exc}"
        s["last_flush_cpu_ms"] = round((time.thread_time() - cpu0) * 1e3, 2)  # the flusher thread's own CPU
        self._write_status("running")

    def _known_files(self, written: list[tuple[Path, int]]) -> list[tuple[int, int, str, int]]:
        """The host's files for :func:`store.prune`, oldest first.

        Listed at the first flush and every :data:`RELIST_S`; between, the list kept so far plus the files just
        ``written`` (a listing costs a ``stat`` per file: 10,080 files for a week of one-minute flushes). Paths are
        kept as ``str``: 296 bytes a file against 552 as ``Path`` (2.9 MB for that week, held until retention).
        """
        if self._files is None or time.monotonic() - self._listed_at > RELIST_S:
            listed = store.list_files(self.hdir)
            self._files, self._listed_at = [(t, pid, str(p), n) for t, pid, p, n in listed], time.monotonic()
        else:
            for path, size in written:
                if m := store.PART.match(path.name):
                    self._files.append((int(m[1]), int(m[2]), str(path), size))
        return self._files

