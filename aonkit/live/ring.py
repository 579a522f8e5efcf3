"""The daemon's shared ring: an mmap'd file of samples, written lock-free under a per-slot seqlock.

Layout (little endian)::

    0     magic "AONRING1", version u32, header bytes u32
    16    channels u32, capacity u32, slot bytes u32, (pad)
    32    interval ns u64, daemon pid u64, started ns i64
    56    count u64          samples ever written (the readers' cursor space); set after each slot
    64    flushed u64        samples already in Parquet files (the daemon's flusher sets it)
    72    heartbeat ns i64   time.time_ns() of the last tick
    80    state u64          1 running, 2 stopped cleanly, 3 replaced (a new ring is at the same path)
    88    channels JSON bytes u32, (pad)
    96    base u64           the daemon's samples before this ring's first (its earlier rings and runs)
    128   the channels JSON: [[device, metric], ...]
    header bytes ...       capacity slots of (seq u64, check u64, ts_ns i64, value f64 x channels)

Sample ``k`` goes to slot ``k % capacity``. The writer sets the slot's ``seq`` to ``2k + 1`` (odd: being
written), writes the time and values, then ``check`` (the CRC-32 of the time and values bytes, started from
``k``), sets ``seq`` to ``2k + 2`` (even: done), then ``count`` to ``k + 1``. A reader copies the slots it wants
and keeps sample ``k`` only when ``seq`` read before and after the copy is ``2k + 2`` and the copy's ``check`` is
right; anything else is a torn read (retried) or a slot the writer has lapped (lost, and the cursor says so).

Why the check: the writer is Python, which has no memory fence. On x86-64 stores become visible in program order
and the sequence numbers alone suffice; on a weakly ordered CPU (arm64, POWER) another core may see the even
``seq`` before the values it covers, and a reader's loads may be reordered likewise. A copy whose bytes do not
match its ``check`` is such a read, and is retried like any torn one (a false match: one in 2**32).
Readers map the file read-only and take no lock, so a reader that dies or stalls never blocks the daemon.

A running daemon whose channels change (GPUs that appeared: :mod:`.gpu_probe`) writes its samples to Parquet, makes
a new ring (renamed in over this one) and then marks this one :data:`REPLACED`: a reader that has read all of it
maps the new one at once (:meth:`aonkit.live.reader.LiveReader.read`). Its ``base`` says how many samples the daemon
took before it, so a reader that finds the next ring's ``base`` beyond the end of the one it read knows that it
missed a ring (two swaps in a row), and how many samples it holds (they are in the Parquet files).
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

MAGIC = b"AONRING1"
VERSION = 3
_HEAD = struct.Struct("<8sII III4x QQq QQqQ I4x Q")
_COUNT, _FLUSHED, _BEAT, _STATE = 56, 64, 72, 80
_U64, _I64 = struct.Struct("<Q"), struct.Struct("<q")
_CHECKED = 16  # the slot's bytes from here on (time and values) are under its check
_K_MASK = 0xFFFFFFFF
RUNNING, STOPPED, REPLACED = 1, 2, 3


def stalled(heartbeat_ns: int, interval_ns: int, now_ns: int) -> bool:
    """Whether a writer whose last tick was at ``heartbeat_ns`` has missed several: 5 intervals, and 2 s at least."""
    return now_ns - heartbeat_ns >= max(5 * interval_ns, 2 * 10**9)


def _slot_dtype(n: int) -> np.dtype:
    import numpy as np  # (here: a look at the header, ``aonkit daemon status``, does without numpy)

    return np.dtype([("seq", "<u8"), ("check", "<u8"), ("ts", "<i8"), ("v", "<f8", (n,))])


class Ring:
    """A ring file mapped in this process: the daemon's (``create``, writable) or a reader's (``open``).

    Attributes
    ----------
    channels : list of (int, str)
        (device, metric) of each value column.
    capacity, interval_ns, pid, started_ns, base : int
        From the header (``base``: the daemon's samples before this ring's sample 0).
    """

    def __init__(self, mm: mmap.mmap, path: Path) -> None:
        self.mm, self.path = mm, path
        (magic, version, head, n, cap, slot, self.interval_ns, self.pid, self.started_ns,
         *_rest, jlen, self.base) = _HEAD.unpack_from(mm, 0)  # fmt: skip
        if magic != MAGIC:
            raise ValueError(f"{path} is not an aonkit ring")
        if version != VERSION:
            raise ValueError(f"{path} is an aonkit ring of version {version}; this aonkit reads version {VERSION}")
        self.channels = [(int(d), str(m)) for d, m in json.loads(bytes(mm[128 : 128 + jlen]))]
        self.capacity, self.header_bytes = cap, head
        self._slot_bytes = slot
        self._pack = struct.Struct(f"<q{n}d").pack
        self._slots: np.ndarray | None = None  # made on the first read

    @property
    def slots(self) -> np.ndarray:
        """The slots as a structured array over the mapping (``seq``, ``check``, ``ts``, ``v``)."""
        if self._slots is None:
            import numpy as np

            self._slots = np.ndarray(self.capacity, _slot_dtype(len(self.channels)), buffer=self.mm,
                                     offset=self.header_bytes)  # fmt: skip
        return self._slots

    @classmethod
    def create(cls, path: Path, channels: list[tuple[int, str]], capacity: int, interval_ns: int,
               base: int = 0) -> Ring:  # fmt: skip
        """A new ring file at ``path`` (0600), made beside it and renamed in: readers of an old one keep theirs.

        ``base``: the samples its daemon took before (in its earlier rings and runs): the run-wide index of sample 0.
        """
        text = json.dumps([[d, m] for d, m in channels]).encode()
        head = -(-(128 + len(text)) // 4096) * 4096
        size = head + (24 + 8 * len(channels)) * capacity  # a slot: seq, check, ts_ns, then the values
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.ftruncate(fd, size)
            mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        _HEAD.pack_into(mm, 0, MAGIC, VERSION, head, len(channels), capacity, 24 + 8 * len(channels),
                        interval_ns, os.getpid(), _now(), 0, 0, _now(), RUNNING, len(text), base)  # fmt: skip
        mm[128 : 128 + len(text)] = text
        os.replace(tmp, path)
        return cls(mm, path)

    @classmethod
    def open(cls, path: Path) -> Ring:
        """Map ``path`` read-only (owner checks are the caller's: :func:`aonkit.live.paths.check_private`)."""
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        return cls(mm, path)

    # -- header fields (8-byte aligned loads and stores, through struct: no numpy call on the writer's tick)
    @property
    def count(self) -> int:
        """Samples written so far."""
        return _U64.unpack_from(self.mm, _COUNT)[0]

    @property
    def flushed(self) -> int:
        """Samples already written to Parquet files."""
        return _U64.unpack_from(self.mm, _FLUSHED)[0]

    @flushed.setter
    def flushed(self, value: int) -> None:
        _U64.pack_into(self.mm, _FLUSHED, value)

    @property
    def heartbeat_ns(self) -> int:
        """Time of the writer's last tick."""
        return _I64.unpack_from(self.mm, _BEAT)[0]

    @property
    def state(self) -> int:
        """:data:`RUNNING`, :data:`STOPPED` or :data:`REPLACED`."""
        return _U64.unpack_from(self.mm, _STATE)[0]

    @state.setter
    def state(self, value: int) -> None:
        _U64.pack_into(self.mm, _STATE, value)

    def write(self, ts_ns: int, values: Sequence[float]) -> None:
        """Publish one sample (the only writer: the daemon's sampling thread).

        ``values``: one float per channel (the daemon's list; an array works too). Plain ``struct`` stores into
        the mapping: the daemon pays this every tick from a cold cache, where each numpy call costs tens of
        microseconds.
        """
        mm = self.mm
        k = _U64.unpack_from(mm, _COUNT)[0]
        off = self.header_bytes + (k % self.capacity) * self._slot_bytes
        body = self._pack(ts_ns, *values)
        _U64.pack_into(mm, off, 2 * k + 1)
        mm[off + _CHECKED : off + self._slot_bytes] = body
        _U64.pack_into(mm, off + 8, zlib.crc32(body, k & _K_MASK))
        _U64.pack_into(mm, off, 2 * k + 2)
        _U64.pack_into(mm, _COUNT, k + 1)
        _I64.pack_into(mm, _BEAT, ts_ns)

    def read(self, cursor: int = 0, end: int | None = None, tries: int = 4) -> tuple[np.ndarray, np.ndarray, int]:
        """Samples ``cursor`` up to ``end`` (default: all written) still in the ring: (ts, values, next cursor).

        ``ts`` is (n,), ``values`` (n, channels), oldest first; samples the writer lapped are left out (the
        cursor returned is still ``end``: the caller sees the jump in its own count).
        """
        import numpy as np

        end = self.count if end is None else end
        begin = max(cursor, end - self.capacity, 0)
        ks = np.arange(begin, end, dtype=np.int64)
        keep = np.zeros(len(ks), bool)
        ts = np.zeros(len(ks), np.int64)
        vals = np.zeros((len(ks), len(self.channels)))
        todo = np.arange(len(ks))
        for _ in range(tries):
            if not len(todo):
                break
            slots = ks[todo] % self.capacity
            want = (2 * ks[todo] + 2).astype(np.uint64)
            before = self.slots["seq"][slots]
            rec = self.slots[slots]  # a copy
            after = self.slots["seq"][slots]
            ok = _checked(rec, ks[todo], (before == want) & (after == want))
            ts[todo[ok]], vals[todo[ok]], keep[todo[ok]] = rec["ts"][ok], rec["v"][ok], True
            alive = ks[todo] >= self.count - self.capacity  # not yet lapped: worth another try
            todo = todo[~ok & alive]
        return ts[keep], vals[keep], end

    def span(self) -> tuple[int, int] | None:
        """Times of the oldest sample still in the ring and of the newest; None while it holds none."""
        end = self.count
        begin = max(0, end - self.capacity + 1)  # (one slot short of the oldest: the writer may be lapping it)
        first, last = self.read(begin, min(end, begin + 1))[0], self.read(max(0, end - 1), end)[0]
        if not len(first) or not len(last):
            return None
        return int(first[0]), int(last[-1])

    def close(self) -> None:
        """Unmap (views into the ring must be dropped first)."""
        self._slots = None
        try:
            self.mm.close()
        except BufferError:  # a numpy view still holds it: the mapping goes with the last one
            pass


def _checked(rec: np.ndarray, ks: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """``ok``, false where a copied slot's bytes do not match its ``check`` (seen out of order: retry it)."""
    import numpy as np

    raw = rec.view(np.uint8).reshape(len(rec), -1)
    check = rec["check"]
    for j in np.flatnonzero(ok).tolist():
        if zlib.crc32(raw[j, _CHECKED:], int(ks[j]) & _K_MASK) != check[j]:
            ok[j] = False
    return ok


def _now() -> int:
    import time

    return time.time_ns()
