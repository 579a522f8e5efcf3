"""A reader's rings: the one its daemon writes now and the ones before, in one count of samples.

The daemon starts a new ring when it starts again, finds GPUs late or makes its removed runtime directory again
(:mod:`.ring`). A reader follows it (:meth:`Chain.follow`) and numbers samples as the daemon does, by the ring's
``base`` (samples before its first), so a cursor means the same sample in every view of one reader:

- a view still reading an older ring gets its tail: the reader keeps the last :data:`KEEP_OLD` rings it followed
  mapped (a ring it let go: its samples are skipped, as those of a lapped ring, and the cursor jumps);
- a ring the reader never mapped (two new rings before it looked) shows as a jump between one ring's end and the
  next one's ``base``: its samples come from the daemon's Parquet files, which it wrote before replacing it
  (rows with times between the two rings' samples; at most a ring's capacity of time before the next ring's
  first sample, so that a reader left unread for a day does not load a day of samples: older ones are skipped,
  as a lapped ring's are);
- where the count went back (the runtime directory was lost with the status file that carries it on), the files
  between the two rings are read at once and the reader counts on past them.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from . import store
from .paths import check_private
from .ring import REPLACED, Ring

KEEP_OLD = 2
"""Rings a reader keeps mapped after it followed the daemon past them (each costs its size in shared memory)."""


class Layout:
    """A ring's channels as long-form columns: ``device`` and ``metric`` codes per value column."""

    def __init__(self, channels: list[tuple[int, str]]) -> None:
        self.channels = channels
        self.metrics = tuple(dict.fromkeys(m for _, m in channels))
        self.devices = np.array([d for d, _ in channels], np.int64)
        self.codes = np.array([self.metrics.index(m) for _, m in channels], np.int64)
        self.dtype = pd.CategoricalDtype(list(self.metrics))  # made once: a read costs a third of what it did

    def frame(self, ts: np.ndarray, values: np.ndarray) -> pd.DataFrame:
        """Long form (``ts_ns, device, metric, value``) of ring rows ``ts`` (n,) and ``values`` (n, channels)."""
        n, m = len(ts), len(self.channels)
        return pd.DataFrame({
            "ts_ns": np.repeat(ts, m), "device": np.tile(self.devices, n),
            "metric": pd.Categorical.from_codes(np.tile(self.codes, n), dtype=self.dtype, validate=False),
            "value": values.reshape(-1),
        }, copy=False)  # (fresh arrays, none a view of the ring)  # fmt: skip


class Segment:
    """Samples ``start`` up to ``end`` (None: the ring being written) of a reader's count.

    From ``ring``, or, where it is None, from the files' rows with ``t0 < ts_ns < t1`` (``t1`` 0: let go).
    """

    __slots__ = ("start", "end", "ring", "layout", "t0", "t1", "rows")

    def __init__(self, start: int, ring: Ring | None, end: int | None = None, t0: int = 0, t1: int = 0) -> None:
        self.start, self.end, self.ring, self.t0, self.t1 = start, end, ring, t0, t1
        self.layout = Layout(ring.channels) if ring is not None else None
        self.rows: pd.DataFrame | None = None  # the files' rows, once read

    def stop(self) -> int:
        """The end of its samples (of a ring being written: so far)."""
        return self.end if self.end is not None else self.start + self.ring.count  # type: ignore[union-attr]


class Chain:
    """The rings one reader has followed, oldest first (see the module); the last is the daemon's current ring."""

    def __init__(self, ring: Ring, root: Path, host: str) -> None:
        self.root, self.host = root, host
        self.segments = [Segment(ring.base, ring)]
        self._followed_at = 0.0

    @property
    def current(self) -> Segment:
        """The segment of the ring the daemon writes (or last wrote)."""
        return self.segments[-1]

    def read(self, cursor: int) -> tuple[list[pd.DataFrame], int, int]:
        """Frames of the samples from ``cursor`` on, the next cursor, and how many of them the current ring gave."""
        frames, fresh = [], 0
        for seg in self.segments:
            if cursor >= seg.stop():
                continue
            if seg.ring is not None:
                upto = None if seg.end is None else seg.end - seg.start
                ts, values, end = seg.ring.read(max(0, cursor - seg.start), upto)
                frames.append(seg.layout.frame(ts, values))  # type: ignore[union-attr]
                cursor = seg.start + end
                fresh = len(ts) if seg.end is None else fresh
            else:
                if seg.t1:
                    frames.append(self._files(seg))
                cursor = seg.stop()
        return frames, cursor, fresh

    def read_rows(self, cursor: int) -> tuple[np.ndarray, np.ndarray, int] | None:
        """The current ring's rows from ``cursor`` on (ts, values, next cursor); None when older segments hold some."""
        seg = self.current
        if seg.ring is None or cursor < seg.start:
            return None
        ts, values, end = seg.ring.read(cursor - seg.start)
        return ts, values, seg.start + end

    def _files(self, seg: Segment) -> pd.DataFrame:
        if seg.rows is None:
            rows, _ = store.read_window(self.root, self.host, seg.t0 + 1, seg.t1 - 1)
            seg.rows = rows.sort_values("ts_ns", kind="stable", ignore_index=True)  # (each sample's rows in order)
        return seg.rows

    def follow(self) -> bool:
        """Map the ring now at the current one's path when it is another ring (of any interval and channels).

        Checked at most once a second, and at once when the daemon marked its ring replaced; a new ring is taken
        once it holds a sample (so that a missed ring's rows end where its samples begin).
        """
        cur = self.current
        old = cur.ring
        now = time.monotonic()
        if old is None or (now - self._followed_at < 1.0 and old.state != REPLACED):
            return False
        self._followed_at = now
        try:
            check_private(old.path, "daemon's ring")
            new = Ring.open(old.path)
        except (OSError, ValueError):  # none there (yet), or of another version
            return False
        same = (new.pid, new.started_ns) == (old.pid, old.started_ns)  # (stamped when made)
        span = None if same else new.span()
        if span is None:
            new.close()
            return False
        cur.end = end = cur.start + old.count
        missed = new.base - (old.base + old.count)
        if missed:  # a ring between, or a count that went back: the files' rows between the two rings
            last = old.span()
            t0 = last[1] if last else old.started_ns
            t0 = max(t0, span[0] - new.capacity * new.interval_ns)  # at most a ring's worth: the rest as if lapped
            gap = Segment(end, None, end, t0, span[0])
            size = missed if missed > 0 else int(self._files(gap)["ts_ns"].nunique())
            if size:  # (a restart that found no count, with nothing written between: no gap)
                gap.end = end = end + size
                self.segments.append(gap)
        self.segments.append(Segment(end, new))
        kept = [s for s in self.segments[:-1] if s.ring is not None or s.t1]
        for seg in kept[: max(0, len(kept) - KEEP_OLD)]:  # let the oldest go
            if seg.ring is not None:
                seg.ring.close()
            seg.ring, seg.t1, seg.rows = None, 0, None
        while self.segments[0].ring is None and not self.segments[0].t1:  # (a cursor before the first jumps)
            del self.segments[0]
        return True

    def close(self) -> None:
        """Unmap every ring."""
        for seg in self.segments:
            if seg.ring is not None:
                seg.ring.close()


def join(frames: list[pd.DataFrame]) -> pd.DataFrame | None:
    """One long-form frame of ``frames`` (their ``metric`` categories joined); None when there are none."""
    frames = [f for f in frames if len(f)] or frames[-1:]
    if len(frames) <= 1:
        return frames[0] if frames else None
    cats = list(dict.fromkeys(c for f in frames for c in _categories(f)))
    out = pd.concat([f.assign(metric=pd.Categorical(f["metric"].astype(str), categories=cats)) for f in frames],
                    ignore_index=True)  # fmt: skip
    return out


def _categories(frame: pd.DataFrame) -> list[str]:
    col = frame["metric"]
    return list(col.cat.categories) if isinstance(col.dtype, pd.CategoricalDtype) else list(pd.unique(col))
