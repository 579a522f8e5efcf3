"""A Parquet cache is the exact bytes its writer produced, for the source it names, or it is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.cache import VERSION, cache_path_for, samples_path, sidecar_path, text_path

from .conftest import SAMPLE_TRACES


@pytest.fixture
def cached(tmp_path: Path) -> tuple[Path, Path]:
    src = tmp_path / "gpu_synthetic_rank0.json.gz"
    src.write_bytes((SAMPLE_TRACES / src.name).read_bytes())
    return src, aonkit.load(src).save(cache_path_for(src))


def _flip(path: Path, start: int, n: int = 4096) -> None:
    b = bytearray(path.read_bytes())
    for i in range(start, min(start + n, len(b))):
        b[i] ^= 0xFF
    path.write_bytes(bytes(b))


def _without_source(src: Path) -> None:
    src.rename(src.with_name("moved-away.bin"))


def test_flipped_bytes_never_load_as_wrong_values(cached: tuple[Path, Path]) -> None:
    src, cache = cached
    _flip(cache, 100_000)  # the case: 4 KB flipped, 513 external_id values differed silently
    with pytest.warns(aonkit.AonkitWarning, match=r"cache gpu_synthetic_rank0\.aon\.parquet is unusable.*CRC-32"):
        t = aonkit.load(cache)
    assert t.equals(aonkit.load(src)) and any("read its source" in w for w in t.warnings)
    _without_source(src)
    with pytest.raises(aonkit.TraceFormatError, match="does not match its sidecar") as info:
        aonkit.load(cache)
    assert info.value.path == str(cache)


def test_damaged_event_text_is_refused_at_load(cached: tuple[Path, Path]) -> None:
    """The text file is checked when the cache is read, though decoded only later: the source stands in."""
    src, cache = cached
    text = text_path(cache)
    _flip(text, 20_000, 64)
    with pytest.warns(aonkit.AonkitWarning, match=r"cache gpu_synthetic_rank0\.aon\.parquet is unusable.*CRC-32"):
        assert aonkit.load(cache).equals(aonkit.load(src))
    _without_source(src)
    with pytest.raises(aonkit.TraceFormatError, match="event text does not match its sidecar") as info:
        aonkit.load(cache)
    assert info.value.path == str(text)
    text.unlink()
    with pytest.raises(aonkit.TraceFormatError, match="cannot read the cache's event text") as info:
        aonkit.load(cache)
    assert info.value.path == str(text)


def test_truncated_cache_is_a_trace_format_error(cached: tuple[Path, Path]) -> None:
    src, cache = cached
    data = cache.read_bytes()
    _without_source(src)
    for size in (0, 4, len(data) // 2, len(data) - 1):
        cache.write_bytes(data[:size])
        with pytest.raises(aonkit.TraceFormatError) as info:  # never a raw pyarrow.lib.ArrowInvalid
            aonkit.load(cache)
        assert info.value.path == str(cache)


def test_a_sidecar_of_another_cache_is_refused(cached: tuple[Path, Path], tmp_path: Path) -> None:
    src, cache = cached
    other = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank1.json.gz").save(tmp_path / "other.aon.parquet")
    sidecar_path(cache).write_bytes(sidecar_path(other).read_bytes())
    _without_source(src)
    with pytest.raises(aonkit.TraceFormatError, match="does not match its sidecar"):
        aonkit.load(cache)


@pytest.mark.parametrize("damage, match", [
    ("garbage", "unreadable cache sidecar"),
    ("not_ours", "not an aonkit trace cache sidecar"),
    ("old_version", "re-create the cache"),
    ("missing", "sidecar .* is missing"),
    ("renamed_kernel", "sidecar's own CRC-32 does not match"),
])  # fmt: skip
def test_damaged_sidecars_are_named(cached: tuple[Path, Path], damage: str, match: str) -> None:
    src, cache = cached
    side = sidecar_path(cache)
    doc = json.loads(side.read_text())
    if damage == "garbage":
        side.write_bytes(b"\xff\x00{")
    elif damage == "not_ours":
        side.write_text("[1, 2]")
    elif damage == "old_version":
        side.write_text(json.dumps({**doc, "version": VERSION - 1}))
    elif damage == "missing":
        side.unlink()
    else:  # a category (kernel name) edited: the Parquet bytes are intact, the names would be wrong
        doc["categories"]["name"][3] = doc["categories"]["name"][3] + "_x"
        side.write_text(json.dumps(doc))
    with pytest.warns(aonkit.AonkitWarning, match="read its source"):  # the source is there: it is read
        assert aonkit.load(cache).equals(aonkit.load(src))
    _without_source(src)
    with pytest.raises(aonkit.TraceFormatError, match=match):
        aonkit.load(cache)


def test_samples_are_checked_too(tmp_path: Path) -> None:
    t = aonkit.load(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz")
    t.samples = pd.DataFrame({"ts_ns": np.arange(5, dtype=np.int64), "device": 0, "metric": "sm", "value": 1.5})
    t.meta.path, t.source = None, None  # no source to fall back to
    cache = t.save(tmp_path / "s.parquet")
    assert aonkit.load(cache).samples.equals(t.samples)
    _flip(samples_path(cache), 50, 8)
    with pytest.raises(aonkit.TraceFormatError, match="samples table does not match"):
        aonkit.load(cache)


def test_event_text_comes_from_the_checked_bytes(cached: tuple[Path, Path], tmp_path: Path) -> None:
    src, cache = cached
    t = aonkit.load(cache)
    first = t.events.index[t.events["cat"] == "kernel"][0]
    # the cache is replaced (atomically, as aonkit writes) by another trace before the text is read
    aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank1.json.gz").save(cache)
    assert t.event_json(int(first))["name"] == t.events["name"].iloc[first]
    assert t.event_json(int(first)) == aonkit.load(src).event_json(int(first))


def test_cache_files_keep_the_source_permissions(cached: tuple[Path, Path], tmp_path: Path) -> None:
    src, cache = cached
    os.chmod(src, 0o640)
    aonkit.load(src).save(cache)
    assert all(p.stat().st_mode & 0o777 == 0o640 for p in (cache, sidecar_path(cache)))
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temporary file left behind
    t = aonkit.load(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz")
    t.meta.path, t.source = None, None
    mem = t.save(tmp_path / "m.parquet")  # no source file: owner-only, a trace can hold secrets
    assert mem.stat().st_mode & 0o777 == 0o600


def test_caches_are_not_synced_but_a_zeroed_file_is_refused(cached: tuple[Path, Path], monkeypatch) -> None:
    """A cache skips fsync (a crash may lose it, never pass a torn one off); atomic writes elsewhere still sync."""
    from aonkit._filecheck import atomic_write

    src, cache = cached
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    aonkit.load(src).save(cache)
    assert calls == []
    atomic_write(cache.with_name("other.txt"), lambda tmp: tmp.write_text("x"))
    assert len(calls) == 1
    monkeypatch.undo()
    text_path(cache).write_bytes(bytes(text_path(cache).stat().st_size))  # what a crash before writeback can leave
    with pytest.warns(aonkit.AonkitWarning, match=r"is unusable.*CRC-32"):
        assert aonkit.load(cache).equals(aonkit.load(src))  # read from the source instead
