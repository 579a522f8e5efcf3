"""A reader across the daemon's new rings: one count of samples, every view gets its tail, a missed ring from disk.

Rings and Parquet files are made here as the daemon makes them (``Ring.create`` renamed in over the old one, the
old one's samples written by ``store.write_segment`` before it is marked replaced); the reader is the real one.
The same with a real daemon process: ``test_daemon_failures.py``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from aonkit.live import follow, store
from aonkit.live.reader import LiveReader
from aonkit.live.ring import REPLACED, Ring

T0 = 1_780_000_000 * 10**9  # a fixed instant (the files are partitioned by its UTC hour)
HOST = [(-1, "cpu_util")]
GPUS = HOST + [(0, "gpu_util"), (1, "gpu_util")]


class Daemon:
    """What the daemon does to its ring and files, by hand: ``swap`` makes a new ring; ``tick`` writes a sample."""

    def __init__(self, tmp: Path) -> None:
        self.run, self.root = tmp / "run", tmp / "data"
        self.run.mkdir(mode=0o700)
        self.path, self.t, self.flushed = self.run / "ring", 0, 0
        self.ring = Ring.create(self.path, HOST, 64, 100_000_000)
        self.written: list[int] = []  # every sample's time, in order

    def tick(self, n: int = 1) -> None:
        for _ in range(n):
            self.t += 1
            ts = T0 + self.t * 100_000_000
            self.ring.write(ts, [float(self.t) + j for j in range(len(self.ring.channels))])
            self.written.append(ts)
            if self.ring.count - self.flushed >= 32:  # half the ring unwritten: a write (the daemon's flusher)
                self.flush()

    def flush(self) -> None:
        ts, values, self.flushed = self.ring.read(self.flushed)
        if len(ts):
            store.write_segment(self.root, "h", ts, values, self.ring.channels)

    def attached(self, ticks: int) -> tuple[LiveReader, int]:
        """``ticks`` samples, then a reader that has read them all, and its cursor."""
        self.tick(ticks)
        reader = LiveReader(Ring.open(self.path), self.root, "h")
        return reader, reader.read(0)[1]

    def swap(self, channels=GPUS, base: int | None = None, interval_ns: int = 100_000_000) -> None:
        self.flush()  # its samples, on disk first
        old, self.flushed = self.ring, 0
        base = old.base + old.count if base is None else base
        self.ring = Ring.create(self.path, channels, 64, interval_ns, base=base)
        old.state = REPLACED
        old.close()


def _times(frame: pd.DataFrame) -> list[int]:
    return sorted(set(frame["ts_ns"].tolist()))


@pytest.fixture
def daemon(tmp_path: Path) -> Daemon:
    return Daemon(tmp_path)


def test_a_missed_ring_comes_from_the_files_and_the_cursor_counts_the_daemons_samples(daemon: Daemon) -> None:
    daemon.tick(5)
    reader = LiveReader(Ring.open(daemon.path), daemon.root, "h")
    frame, cursor = reader.read(0)
    assert cursor == 5 and _times(frame) == daemon.written
    daemon.swap(GPUS)  # two new rings before the reader looks again: GPUs found, then the runtime directory lost
    daemon.tick(4)
    daemon.swap(GPUS)
    daemon.tick(3)
    frame, cursor = reader.read(cursor)
    assert _times(frame) == daemon.written[5:] and cursor == 12 == daemon.ring.base + daemon.ring.count
    assert reader.ring.base == 9 and reader.channels == GPUS
    middle = frame[frame["ts_ns"].isin(daemon.written[5:9])]  # the missed ring's rows, every channel of it
    assert len(middle) == 4 * 3 and set(middle["metric"]) == {"cpu_util", "gpu_util"}
    assert middle["value"].tolist() == [v + j for v in range(6, 10) for j in range(3)]  # channel order kept
    assert isinstance(frame["metric"].dtype, pd.CategoricalDtype)
    daemon.tick(2)
    frame, cursor = reader.read(cursor)
    assert _times(frame) == daemon.written[12:] and cursor == 14
    reader.close()


def test_every_view_of_one_reader_gets_the_old_rings_tail(daemon: Daemon) -> None:
    daemon.tick(6)
    reader = LiveReader(Ring.open(daemon.path), daemon.root, "h")
    monitor = reader.read(0)[1]  # one view reads everything
    loop = 2  # another (a user's loop) is behind, in the first ring
    daemon.swap(GPUS)
    daemon.tick(3)
    frame, monitor = reader.read(monitor)  # the first view follows the daemon
    assert _times(frame) == daemon.written[6:] and monitor == 9
    frame, loop = reader.read(loop)
    assert _times(frame) == daemon.written[2:] and loop == 9  # the old ring's tail, then the new ring
    assert frame["metric"].cat.categories.tolist() == ["cpu_util", "gpu_util"]
    reader.close()


def test_a_count_that_went_back_is_counted_on_from_the_files(daemon: Daemon) -> None:
    reader, cursor = daemon.attached(5)
    daemon.swap(GPUS)
    daemon.tick(4)
    daemon.swap(GPUS, base=0)  # a restart that found no count to go on from (its runtime directory was removed)
    daemon.tick(3)
    frame, cursor = reader.read(cursor)
    assert _times(frame) == daemon.written[5:] and cursor == 12  # 4 samples found on disk, then 3
    daemon.tick(1)
    frame, cursor = reader.read(cursor)
    assert _times(frame) == daemon.written[12:] and cursor == 13  # the cursor never goes back
    reader.close()


def test_a_missed_ring_longer_than_a_ring_gives_its_newest_ring_of_samples(daemon: Daemon) -> None:
    reader, cursor = daemon.attached(3)
    daemon.swap(HOST)
    daemon.tick(200)  # a ring of 64 slots lapped three times over while the reader did not look (all of it on disk)
    daemon.swap(HOST)
    daemon.tick(1)
    frame, cursor = reader.read(cursor)
    times = _times(frame)
    assert cursor == 204 and times[-1] == daemon.written[-1]  # the cursor exact; the newest samples there
    assert 60 <= len(times) <= 65 and times == daemon.written[-len(times) :]  # no more than a ring's worth


def test_a_restart_that_found_no_count_goes_on_from_the_readers_count(daemon: Daemon) -> None:
    reader, cursor = daemon.attached(5)
    daemon.swap(HOST, base=0)  # nothing between the two rings, and the new one counts from 0 again
    daemon.tick(2)
    frame, cursor = reader.read(cursor)
    assert _times(frame) == daemon.written[5:] and cursor == 7 and len(reader._chain.segments) == 2
    reader.close()


def test_a_daemon_restarted_with_another_interval_is_followed(daemon: Daemon) -> None:
    reader, cursor = daemon.attached(3)
    assert reader.interval_s == 0.1
    daemon.swap(HOST, interval_ns=20_000_000)  # `aonkit daemon start --interval 0.02` after a stop
    daemon.tick(2)
    frame, cursor = reader.read(cursor)
    assert _times(frame) == daemon.written[3:] and cursor == 5 and reader.interval_s == 0.02
    reader.close()


def test_a_view_behind_the_rings_let_go_jumps_and_the_reader_unmaps_them(daemon: Daemon, monkeypatch) -> None:
    monkeypatch.setattr(follow, "KEEP_OLD", 1)
    daemon.tick(4)
    reader = LiveReader(Ring.open(daemon.path), daemon.root, "h")
    first = reader.ring
    cursor = reader.read(0)[1]
    for _ in range(2):
        daemon.swap(GPUS)
        daemon.tick(2)
        cursor = reader.read(cursor)[1]
    assert cursor == 8 and first.mm.closed  # the first ring unmapped
    frame, behind = reader.read(1)
    assert _times(frame) == daemon.written[4:] and behind == 8  # the second ring kept; the first let go
    for _ in range(20):  # a reader that follows a daemon for months keeps the rings it follows, not all it followed
        daemon.swap(GPUS)
        daemon.tick(1)
        cursor = reader.read(cursor)[1]
    assert cursor == 28 and len(reader._chain.segments) == 2
    reader.close()


def test_no_file_is_read_when_no_ring_was_missed(daemon: Daemon, monkeypatch) -> None:
    reader, cursor = daemon.attached(3)
    daemon.swap(HOST)
    daemon.tick(2)

    def no_files(*args, **kwargs):
        raise AssertionError("read the files")

    monkeypatch.setattr(store, "read_window", no_files)
    frame, cursor = reader.read(cursor)
    assert _times(frame) == daemon.written[3:] and cursor == 5
    reader.close()


def test_a_new_ring_is_taken_once_it_holds_a_sample(daemon: Daemon) -> None:
    reader, cursor = daemon.attached(2)
    daemon.swap(GPUS)
    daemon.tick(1)
    daemon.swap(GPUS)  # the second new ring is empty yet: where the missed ring's rows end is not known
    frame, cursor = reader.read(cursor)
    assert not len(frame) and cursor == 2 and reader.ring.base == 0
    daemon.tick(1)
    frame, cursor = reader.read(cursor)
    assert _times(frame) == daemon.written[2:] and cursor == 4
    reader.close()


def test_span_gives_the_oldest_and_newest_times_still_in_the_ring(tmp_path: Path) -> None:
    ring = Ring.create(tmp_path / "r", HOST, 4, 1)
    assert ring.span() is None
    for k in range(1, 11):
        ring.write(k, [0.0])
        assert ring.span() == (max(1, k - 2), k)  # one slot short of the oldest: the writer may be lapping it
    ring.close()
