"""The registry of opted-in processes keeps the entries of live processes only, and prunes the others' files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aonkit.live.paths import boot_id
from aonkit.live.registry import proc_start, registered


def _entry(procs: Path, **fields) -> Path:
    path = procs / f"{fields['pid']}.json"
    path.write_text(json.dumps(fields))
    path.chmod(0o600)
    path.with_suffix(".sock").touch()
    return path


@pytest.mark.skipif(not boot_id() or proc_start(os.getpid()) is None, reason="needs Linux's /proc")
def test_an_entry_of_another_boot_or_another_process_of_its_pid_is_pruned(tmp_path: Path) -> None:
    procs = tmp_path / "procs"
    procs.mkdir(mode=0o700)
    me, start = os.getpid(), proc_start(os.getpid())
    _entry(procs, pid=me, proc_start=start, boot_id=boot_id())
    assert [e["pid"] for e in registered(procs)] == [me]  # this boot, this process
    other = next(b for b in ("00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002")
                 if b != boot_id())  # fmt: skip
    old = _entry(procs, pid=me, proc_start=start, boot_id=other)  # same pid and start ticks, an earlier boot
    assert registered(procs) == [] and not old.exists() and not old.with_suffix(".sock").exists()
    _entry(procs, pid=me, proc_start=start + 1, boot_id=boot_id())  # a reused pid
    assert registered(procs) == []
    _entry(procs, pid=me, proc_start=start)  # an entry without a boot id (written before aonkit kept one)
    assert [e["pid"] for e in registered(procs)] == [me]
