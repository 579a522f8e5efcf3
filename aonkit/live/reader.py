"""Readers of the daemon: :func:`attach` from any process of the same user, NVML never opened.

The reader maps the daemon's ring read-only (:mod:`.ring`), so it is a
:class:`~aonkit.sources.samplers.Sampler` (``LiveMonitor(aonkit.live.attach())``), and reads the Parquet files
(:mod:`.store`) for history: :meth:`LiveReader.window` and :meth:`LiveReader.last` give one table of both.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..sources.samplers import samples_table
from . import store
from .paths import RING, STATUS, DaemonNotRunning, NotOwnerError, check_private, runtime_dir
from .ring import REPLACED, RUNNING, Ring, stalled
from .status import read_json


class LiveReader:
    """The daemon's samples: the ring (live, :meth:`read`) and the Parquet files (history, :meth:`window`).

    Made by :func:`attach`, which finds all three arguments from the daemon's runtime directory.

    Parameters
    ----------
    ring : Ring
        The daemon's ring, mapped in this process (:meth:`Ring.open <aonkit.live.ring.Ring.open>`: read-only).
        The reader takes it over: :meth:`close` unmaps it.
    root : pathlib.Path
        Root of the daemon's Parquet files.
    host : str
        The ``host=`` partition of this node's files under ``root``.

    Attributes
    ----------
    metrics : tuple of str
        Distinct metric names, in channel order.
    channels : list of (int, str)
        (device, metric) of each ring column (device -1: host).
    interval_s : float
        The daemon's sampling interval.
    pid : int
        The pid of the daemon whose ring it reads (it follows a restarted daemon: :meth:`read`).
    root, host : pathlib.Path, str
        Where its Parquet files are: ``<root>/host=<host>/...``.
    """

    def __init__(self, ring: Ring, root: Path, host: str) -> None:
        self.ring, self.root, self.host = ring, root, host
        self.interval_s = ring.interval_ns / 1e9
        self.pid = ring.pid
        self._base, self._followed_at = 0, 0.0  # the cursor of the rings before this one; the last follow check
        self._layout(ring.channels)

    def _layout(self, channels: list[tuple[int, str]]) -> None:
        self.channels = channels
        self.metrics = tuple(dict.fromkeys(m for _, m in channels))
        self._devices = np.array([d for d, _ in channels], np.int64)
        self._codes = np.array([self.metrics.index(m) for _, m in channels], np.int64)

    # -- the Sampler protocol ------------------------------------------------------------------------
    def start(self) -> None:
        """Nothing to start: the daemon samples."""

    def stop(self) -> None:
        """Nothing to stop: the daemon keeps sampling."""

    def read(self, cursor: int = 0) -> tuple[pd.DataFrame, int]:
        """Samples taken after ``cursor`` still in the ring (long form, oldest first) and the next cursor.

        When this ring has nothing new and its daemon has stopped writing it, the reader follows the daemon to the
        ring now at the same path (a restarted daemon, or one that made its removed runtime directory again), if
        it has the same interval; the cursor goes on counting (checked at most once a second, and at once when the
        daemon marked this ring replaced). Where the new ring's channels differ (GPUs that appeared after the
        daemon started, or a daemon restarted with other GPUs), :attr:`channels` and :attr:`metrics` change
        with it, and the rows from then on are the new channels' (``LiveMonitor`` lays its charts out again).
        """
        ts, values, end = self.ring.read(max(0, cursor - self._base))
        if not len(ts) and not self.alive and self._follow():
            ts, values, end = self.ring.read(0)
        return self._frame(ts, values), self._base + end

    def _follow(self) -> bool:
        """Map the ring now at this one's path when it is another ring (of any daemon run) at the same interval."""
        now = time.monotonic()
        if now - self._followed_at < 1.0 and self.ring.state != REPLACED:
            return False
        self._followed_at = now
        path = self.ring.path
        try:
            check_private(path, "daemon's ring")
            new = Ring.open(path)
        except (OSError, ValueError):  # none there (yet), or of another version
            return False
        same_ring = (new.pid, new.started_ns) == (self.ring.pid, self.ring.started_ns)  # (stamped when made)
        if same_ring or new.interval_ns != self.ring.interval_ns:
            new.close()
            return False
        old, self.ring, self.pid = self.ring, new, new.pid
        self._base += old.count
        if new.channels != self.channels:
            self._layout(new.channels)
        old.close()
        return True

    def _frame(self, ts: np.ndarray, values: np.ndarray) -> pd.DataFrame:
        n, m = len(ts), len(self.channels)
        return pd.DataFrame({
            "ts_ns": np.repeat(ts, m), "device": np.tile(self._devices, n),
            "metric": pd.Categorical.from_codes(np.tile(self._codes, n), categories=list(self.metrics)),
            "value": values.reshape(-1),
        })  # fmt: skip

    # -- history ---------------------------------------------------------------------------------------
    def window(self, start_ns: int, end_ns: int | None = None) -> pd.DataFrame:
        """Every sample with ``start_ns <= ts_ns <= end_ns`` (default: now): Parquet files, then the ring.

        Returns
        -------
        pandas.DataFrame
            ``ts_ns, device, metric, value`` in time order (:func:`~aonkit.sources.samplers.samples_table`).
        """
        end_ns = time.time_ns() if end_ns is None else end_ns
        flushed = self.ring.flushed  # before listing the files: a flush in between gives duplicates, not gaps
        disk, latest = store.read_window(self.root, self.host, start_ns, end_ns)
        ts, values, _ = self.ring.read(flushed)
        keep = (ts >= start_ns) & (ts <= end_ns)
        if self.pid in latest:  # flushed while we listed: on disk already
            keep &= ts > latest[self.pid]
        ring = self._frame(ts[keep], values[keep])
        parts = [p.astype({"metric": str}) for p in (disk, ring) if len(p)]
        if not parts:
            return samples_table(ring)
        return samples_table(pd.concat(parts, ignore_index=True))

    def last(self, minutes: float = 5.0) -> pd.DataFrame:
        """The last ``minutes`` of samples (:meth:`window` up to now)."""
        now = time.time_ns()
        return self.window(now - int(minutes * 60e9), now)

    @property
    def alive(self) -> bool:
        """True while the daemon runs (its ring is marked running and was written within a few intervals)."""
        return self.ring.state == RUNNING and not stalled(self.ring.heartbeat_ns, self.ring.interval_ns, time.time_ns())

    def close(self) -> None:
        """Unmap the ring."""
        self.ring.close()

    def __repr__(self) -> str:
        devs = sorted({d for d in self._devices.tolist() if d >= 0})
        return (f"LiveReader(daemon pid {self.pid}, {len(self.channels)} channels, GPUs {devs}, "
                f"every {self.interval_s:g} s, {'alive' if self.alive else 'stopped'})")


def attach() -> LiveReader:
    """Attach to this user's daemon on this node (``aonkit daemon start``).

    Raises
    ------
    DaemonNotRunning
        No daemon runs (no ring in the runtime directory).
    NotOwnerError
        The runtime directory or ring is another user's, or others may read or write it.
    """
    rdir = runtime_dir()
    if not rdir.exists():
        raise DaemonNotRunning(f"no aonkit daemon runs for this user on this node (no {rdir}); "
                               "start one with `aonkit daemon start`")  # fmt: skip
    check_private(rdir, "runtime directory")
    if not os.path.lexists(rdir / RING):
        raise DaemonNotRunning(f"no aonkit daemon runs for this user on this node (no ring in {rdir}); "
                               "start one with `aonkit daemon start`")  # fmt: skip
    check_private(rdir / RING, "daemon's ring")
    status = read_json(rdir / STATUS, "daemon status file") or {}
    try:
        ring = Ring.open(rdir / RING)
    except PermissionError:
        raise NotOwnerError(f"cannot open the daemon's ring {rdir / RING}: permission denied; aonkit attaches only "
                            "to the current user's own daemon") from None
    except ValueError as exc:
        raise DaemonNotRunning(f"{exc}; restart the daemon (`aonkit daemon stop; aonkit daemon start`)") from None
    from .paths import data_root, hostname

    return LiveReader(ring, Path(status.get("root") or data_root()), status.get("host") or hostname())
