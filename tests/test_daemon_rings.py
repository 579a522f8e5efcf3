"""A real daemon's new rings under its readers: one count of samples across rings and runs, and no sample missed by
any view of a reader that did not look while the daemon made two new rings (rings by hand: ``test_reader_follow``).
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator

import pandas as pd
import pytest

import aonkit.live
from aonkit.live.ring import Ring
from tests.live_helpers import Live, live_world
from tests.test_daemon import disk_table


@pytest.fixture
def live() -> Iterator[Live]:
    yield from live_world()


def test_two_new_rings_in_a_row_miss_no_sample_in_any_view(live, monkeypatch) -> None:
    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    live.start_daemon("--flush", "60")  # nothing on disk but what the daemon writes before it replaces a ring
    reader = aonkit.live.attach()
    live.wait(lambda: len(reader.read(0)[0]) > 0)
    frame, monitor = reader.read(0)  # one view has read the first ring so far; another (`loop`) nothing yet
    views = {"monitor": [frame], "loop": []}
    for n in (1, 2):  # a logout, twice, while the reader does not look: the daemon makes two new rings
        shutil.rmtree(live.run_dir)
        live.wait(lambda n=n: live.run_dir.is_dir() and live.status().get("runtime_recreated") == n)
    cursors = {"monitor": monitor, "loop": 0}

    def catch_up(name: str) -> bool:
        frame, cursors[name] = reader.read(cursors[name])
        views[name].append(frame)
        return reader.alive and reader.ring.base > 0  # on the third ring: it never mapped the second

    live.wait(lambda: catch_up("monitor"))
    assert live.cli("daemon", "stop").returncode == 0
    for name in views:  # the last ring's tail for the first view; everything for the other
        for _ in range(2):
            frame, cursors[name] = reader.read(cursors[name])
            views[name].append(frame)
    st = live.status()
    assert st["lost"] == 0 and st["runtime_recreated"] == 2
    on_disk = set(disk_table(live.data)["ts_ns"].tolist())
    assert len(on_disk) == st["samples"] == st["sample_index"]
    for name, frames in views.items():
        seen = pd.concat(frames)
        assert set(seen["ts_ns"].tolist()) == on_disk, name  # the middle ring's samples too, from its file
        assert not seen.duplicated(["ts_ns", "device", "metric"]).any(), name
        assert cursors[name] == st["sample_index"], name
    reader.close()


def test_a_restarted_daemon_numbers_its_samples_on_from_the_one_before(live, monkeypatch) -> None:
    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    live.start_daemon()
    live.wait(lambda: live.status().get("samples", 0) > 5)
    assert live.cli("daemon", "stop").returncode == 0
    stopped = live.status()["sample_index"]
    assert stopped == live.status()["samples"]
    pid = live.start_daemon()
    reader = aonkit.live.attach()
    assert reader.ring.base == stopped  # from the status file the first one left at its stop
    live.wait(lambda: reader.ring.count > 5)
    reader.close()
    os.kill(pid, signal.SIGKILL)  # its status file is up to a flush behind; the ring it leaves is exact
    live.wait_stopped()
    left = Ring.open(live.run_dir / "ring")
    exact = left.base + left.count
    left.close()
    live.start_daemon()
    reader = aonkit.live.attach()
    assert reader.ring.base == exact and exact > stopped
    reader.close()
