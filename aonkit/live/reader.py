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
from .follow import Chain, join
from .paths import RING, STATUS, DaemonNotRunning, NotOwnerError, check_private, runtime_dir
from .ring import RUNNING, Ring, stalled
from .status import read_json

_EMPTY = (np.zeros(0, np.int64), np.zeros((0, 0)))


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
    root, host : pathlib.Path, str
        Where its Parquet files are: ``<root>/host=<host>/...``.
    """

    def __init__(self, ring: Ring, root: Path, host: str) -> None:
        self.root, self.host = root, host
        self._chain = Chain(ring, root, host)

    @property
    def ring(self) -> Ring:
        """The ring of the daemon this reader reads now (it follows a new one: :meth:`read`)."""
        return self._chain.current.ring  # type: ignore[return-value]

    @property
    def interval_s(self) -> float:
        """The sampling interval of the daemon whose ring it reads (a daemon restarted with another: its)."""
        return self.ring.interval_ns / 1e9

    @property
    def pid(self) -> int:
        """The pid of the daemon whose ring it reads."""
        return self.ring.pid

    @property
    def channels(self) -> list[tuple[int, str]]:
        """(device, metric) of each column of the current ring (device -1: host)."""
        return self._chain.current.layout.channels  # type: ignore[union-attr]

    @property
    def metrics(self) -> tuple[str, ...]:
        """Distinct metric names of the current ring, in channel order."""
        return self._chain.current.layout.metrics  # type: ignore[union-attr]

    # -- the Sampler protocol ------------------------------------------------------------------------
    def start(self) -> None:
        """Nothing to start: the daemon samples."""

    def stop(self) -> None:
        """Nothing to stop: the daemon keeps sampling."""

    def read(self, cursor: int = 0) -> tuple[pd.DataFrame, int]:
        """Samples taken after ``cursor`` (long form, oldest first) and the next cursor.

        Cursors count the daemon's samples (across its rings and runs: :mod:`.follow`), so several views of one
        reader each keep their own. Samples the ring lapped before a read are left out; the cursor still moves
        past them (a view sees the jump).

        When this ring has nothing new and its daemon has stopped writing it, the reader follows the daemon to the
        ring now at the same path (a restarted daemon, or one that made its removed runtime directory again), once
        that ring holds a sample (checked at most once a second, and at once when the daemon marked this ring
        replaced); :attr:`interval_s` is then the new daemon's. A view still in an older ring gets its tail; a ring
        the reader never saw (two in a row) comes from the Parquet files. Where the new ring's channels differ (GPUs
        that appeared after the daemon started, or a daemon restarted with other GPUs), :attr:`channels` and
        :attr:`metrics` change with it, and the rows from then on are the new channels' (``LiveMonitor`` lays its
        charts out again).
        """
        frames, cursor, fresh = self._chain.read(cursor)
        if not fresh and not self.alive and self._chain.follow():
            more, cursor, _ = self._chain.read(cursor)
            frames += more
        frame = join(frames)
        return (frame if frame is not None else self._chain.current.layout.frame(*_EMPTY)), cursor  # type: ignore[union-attr]

    def read_rows(self, cursor: int = 0) -> tuple[np.ndarray, np.ndarray, list[tuple[int, str]], int] | None:
        """As :meth:`read`, in the ring's own form, while every sample after ``cursor`` is in the current ring.

        Returns ``ts_ns`` (n,), values (n, channels), :attr:`channels` and the next cursor; None where older rings
        or files hold some, or a ring may be left to follow (then use :meth:`read`). No long-form frame is made:
        ``LiveMonitor`` takes the rows as they are.
        """
        got = self._chain.read_rows(cursor)
        if got is None or not len(got[0]) and not self.alive:
            return None  # older rings or files, or maybe a ring to follow: read() does both
        ts, values, cursor = got
        return ts, values, self.channels, cursor

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
        ring = self._chain.current.layout.frame(ts[keep], values[keep])  # type: ignore[union-attr]
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
        """Unmap the rings."""
        self._chain.close()

    def __repr__(self) -> str:
        devs = sorted({d for d, _ in self.channels if d >= 0})
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
