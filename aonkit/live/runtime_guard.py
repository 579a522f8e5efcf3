"""The daemon's hold on its runtime directory: it notices the directory (or its ring) was removed, and makes it again.

A logout removes ``$XDG_RUNTIME_DIR`` (systemd-logind, unless the user lingers), and a ``/tmp`` cleaner may remove
an old ``/tmp/aonkit-UID``. The daemon's mapping and lock outlive their files, but readers could no longer attach,
and ``aonkit daemon start`` would find no lock and start a second daemon. So every
:data:`~aonkit.live.paths.CHECK_S` (5 s) and after each write the flusher checks that the lock and ring files in
the directory are still the daemon's own; when not, the sampling thread, at its next tick, writes the old ring's
samples to Parquet, takes the lock again in a new directory and makes a new ring there (readers attach again;
``stats["runtime_recreated"]`` counts it). Where another daemon has taken the directory meanwhile, this one stops
(after writing its samples) and leaves that daemon's files alone. Opted-in processes register again the same way
(:mod:`.serve`).

A mixin of :class:`aonkit.live.daemon.Daemon` (its ``rdir``, ``ring``, ``channels``, ``capacity``, ``interval_s``,
``flushed``, ``stats``, ``_flush_lock``, ``_write_pending`` and ``_write_status``).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

from .paths import LOCK, RING, STATUS, LiveError, file_id, private_dir
from .ring import REPLACED, Ring


class RuntimeGuard:
    """Keeps the daemon's runtime directory (see the module)."""

    rdir: Path
    ring: Ring
    stats: dict[str, Any]
    _flush_lock: threading.Lock
    _lock_fd: int
    _ring_id: tuple[int, int] | None
    _samples_before: int

    def owns_runtime(self) -> bool:
        """Whether the lock file in the runtime directory is still the one this daemon holds."""
        held = os.fstat(self._lock_fd)
        return file_id(self.rdir / LOCK) == (held.st_dev, held.st_ino)

    def _runtime_intact(self) -> bool:
        return self.owns_runtime() and file_id(self.rdir / RING) == self._ring_id

    def _new_ring(self) -> None:
        """The run's first ring, numbered on from the samples of the daemon that ran here before."""
        self.ring = Ring.create(self.rdir / RING, self.channels, self.capacity, int(self.interval_s * 1e9),
                                base=prior_index(self.rdir))  # fmt: skip
        self._ring_id = file_id(self.rdir / RING)

    @property
    def sample_index(self) -> int:
        """The run-wide index of the next sample: samples of this daemon's rings and of the daemons before it."""
        return self.ring.base + self.ring.count

    def _swap_ring(self, channels: list[tuple[int, str]]) -> bool:
        """Write the ring's samples to Parquet, then put a new ring with ``channels`` at its path.

        Called under ``_flush_lock``; the caller sets ``channels`` after. The old ring is marked replaced: readers
        follow at once. False (said on stderr) when no new ring could be made: the old one stays in use.
        """
        self._write_pending()
        old = self.ring
        try:
            self.ring = Ring.create(self.rdir / RING, channels, self.capacity, int(self.interval_s * 1e9),
                                    base=self.sample_index)  # fmt: skip
        except OSError as exc:
            print(f"aonkit daemon: cannot make a new ring: {exc}", file=sys.stderr, flush=True)
            return False
        self._ring_id = file_id(self.rdir / RING)
        old.state = REPLACED
        self.stats["lost"] += old.count - self.flushed  # 0 unless that write failed: the old ring is not kept
        self._samples_before += old.count
        self.flushed = 0
        old.close()
        return True

    def _reopen_runtime(self) -> bool:
        """Make the runtime directory, lock and ring again (the sampling thread); False: another daemon has it."""
        from .daemon import lock

        with self._flush_lock:  # the flusher, which checks the lock under it, sees the old state or the new one
            try:
                if not self.owns_runtime():
                    fd = lock(private_dir(self.rdir))
                    old_fd, self._lock_fd = self._lock_fd, fd
                    os.close(old_fd)
            except LiveError as exc:  # "already running (pid N)": that daemon samples from now on
                self.stats["stop_reason"] = f"another daemon took the runtime directory {self.rdir}: {exc}"
                print(f"aonkit daemon: stopping: {self.stats['stop_reason']}", file=sys.stderr, flush=True)
                return False
            except OSError as exc:  # tried again after the next flush
                print(f"aonkit daemon: cannot make the runtime directory again: {exc}", file=sys.stderr, flush=True)
                return True
            if not self._swap_ring(self.channels):  # the old ring stays in use; tried again after the next flush
                return True
        self.stats["runtime_recreated"] = self.stats.get("runtime_recreated", 0) + 1
        print(f"aonkit daemon: the runtime directory {self.rdir} was removed; made it again with a new ring",
              file=sys.stderr, flush=True)  # fmt: skip
        self._write_status("running")
        return True


def prior_index(rdir: Path) -> int:
    """Where the daemon that ran in ``rdir`` before left the run-wide sample index (0 when nothing says).

    Its status file has it (written at each flush and at its stop); the ring a killed daemon left behind has the
    exact count. Readers that followed it go on counting from there; when neither is left (the directory was
    removed), the index starts again at 0 and readers see that (:mod:`.reader`).
    """
    from .status import read_json

    index = 0
    try:
        index = int((read_json(rdir / STATUS, "daemon status file") or {}).get("sample_index", 0))
    except (LiveError, TypeError, ValueError):
        pass
    try:
        left = Ring.open(rdir / RING)
    except (OSError, ValueError):  # none, or of another version
        return index
    index = max(index, left.base + left.count)
    left.close()
    return index
