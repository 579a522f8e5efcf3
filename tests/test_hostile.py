"""Hostile or odd input: a clear outcome, a warning when data is dropped or altered, never a silent change."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

import aonkit
from aonkit.sources._io import default_cap

from .conftest import ROOT


def _kernel(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": 1}}


@pytest.mark.parametrize("salvage", [False, True])
def test_a_non_utf8_name_is_replaced_with_a_warning(tmp_path: Path, salvage: bool) -> None:
    text = json.dumps({"traceEvents": [_kernel("gemm_XX", 0, 5), _kernel("relu", 10, 2)]}).encode()
    p = tmp_path / "t.json"
    p.write_bytes(text.replace(b"XX", b"\xff\xfe"))
    t = aonkit.load(p, salvage=salvage)
    assert t.events["name"].tolist() == ["gemm_\ufffd\ufffd", "relu"]
    assert any("not UTF-8" in w and f"byte {text.index(b'gemm') - 1}" in w for w in t.warnings)
    assert b'"gemm_\xff\xfe"' in t.event_bytes(0)  # the exact bytes stay reachable
    assert t.event_json(0)["name"] == "gemm_\ufffd\ufffd"


def test_a_negative_dur_is_no_duration_with_a_warning(tmp_path: Path) -> None:
    from aonkit.analysis.kernels import kernel_stats

    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [_kernel("a", 0, 5), _kernel("a", 10, -5), _kernel("b", 20, 1)]}))
    t = aonkit.load(p)
    assert t.events["dur_ns"].tolist() == [5000, -1, 1000]
    assert any("1 event(s) have a negative dur (first: event 1)" in w for w in t.warnings)
    assert t.event_json(1)["dur"] == -5  # the file's value
    stats = kernel_stats(t).set_index("name")
    assert int(stats.loc["a", "total_ns"]) == 5000


def test_default_decompression_cap_follows_the_machine() -> None:
    assert default_cap(10 * 2**20, available=8 * 2**30) == 2**30  # an eighth of the memory available
    assert default_cap(40 * 2**20, available=8 * 2**30) == 64 * 40 * 2**20  # 64x a big legitimate file
    assert default_cap(1 * 2**30, available=8 * 2**30) == 4 * 2**30  # never more than half the memory
    assert default_cap(0) > 0


def test_a_gzip_bomb_stops_at_the_default_cap_without_holding_more(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        f.write(b'{"traceEvents":[')
        chunk = b" " * (16 * 2**20)
        for _ in range(64):  # 1 GiB of whitespace in about 1 MB
            f.write(chunk)
        f.write(b"]}")
    code = f"""
import resource, aonkit, aonkit.sources._io as io
orig = io.default_cap
io.default_cap = lambda c, available=None: orig(c, available=256 * 2**20)  # a machine with 256 MiB free
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
try:
    aonkit.load({str(bomb)!r})
except aonkit.TraceTooLargeError as e:
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    print("capped", e.reason.split(";")[0], grew)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    word, *_, grew = out.stdout.split()
    assert word == "capped" and "the default cap, from the memory available" in out.stdout
    assert int(grew) < 3 * 64 * 2**20  # cap 64 MiB: never near the 1 GiB the stream would give


@pytest.mark.parametrize("doc, match", [
    (b"[1,2,3]", "none of its 3 traceEvents entries is an event object"),
    (b'{"traceEvents":[' + b" " * (8 * 2**20) + b"]}", "its traceEvents array is empty"),
    (b'{"traceEvents":[]}', "its traceEvents array is empty"),
    (b"[]", "its traceEvents array is empty"),
    (b'{"traceEvents":[{"ph":"X"', "the file is cut before its first complete event"),
])  # fmt: skip
def test_a_file_without_events_is_an_error(tmp_path: Path, doc: bytes, match: str) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(doc)
    for salvage in (False, True):
        if salvage is False and b"{" in doc and not doc.rstrip().endswith((b"]", b"}")):
            continue  # the cut file is a truncation error without salvage
        with pytest.raises(aonkit.TraceFormatError, match=f"no trace events: {match}") as info:
            aonkit.load(p, salvage=salvage)
        assert info.value.path == str(p)


def test_a_checkout_named_aonkit_does_not_shadow_the_package(tmp_path: Path) -> None:
    (tmp_path / "aonkit").symlink_to(ROOT, target_is_directory=True)  # cwd holds a checkout named aonkit/
    code = "import aonkit; print(aonkit.load.__module__, aonkit.__file__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "aonkit.sources.loading"
