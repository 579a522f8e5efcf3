"""The reader registry: a new format is one reader and one register call; suffix, then content, then Chrome JSON."""

from __future__ import annotations

import ast
import gzip
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import aonkit
from aonkit import TraceFormatError
from aonkit.sources import CHROME_READER, registry
from aonkit.sources.registry import Reader, reader_for, register

from .conftest import ROOT, SAMPLE_TRACES, SHARED

PKG = ROOT / "aonkit"
FUSER = SHARED / "nsys" / "NVIDIA__Fuser/64ee035/report1.sqlite"
TOY_MAGIC = b"TOY1\n"
EVENTS = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.0, "dur": 2.5, "args": {"n": 3}}]


def _read_toy(path: Path, **options: object) -> aonkit.Trace:
    """The toy format: ``TOY1`` and a newline, then a Chrome-trace document."""
    from aonkit.sources.chrome_trace import parse_buffer

    data = np.frombuffer(Path(path).read_bytes(), np.uint8)
    calls.append((Path(path).name, options))
    trace = parse_buffer(data[len(TOY_MAGIC):], path=str(path), salvage=bool(options.get("salvage")))
    trace.meta.layout = "toy"
    return trace


calls: list[tuple[str, dict]] = []


@pytest.fixture
def toy() -> Iterator[Reader]:
    calls.clear()
    reader = register(Reader("toy", (".toy",), lambda head: head.startswith(TOY_MAGIC), _read_toy,
                             options=("salvage",)))
    try:
        yield reader
    finally:
        registry.unregister("toy")


def _write_toy(path: Path) -> Path:
    path.write_bytes(TOY_MAGIC + json.dumps({"traceEvents": EVENTS}).encode())
    return path


def test_a_registered_reader_reads_its_suffix_through_load(tmp_path: Path, toy: Reader) -> None:
    # GIVEN a toy format registered for a made-up suffix, WHEN aonkit.load reads such a file
    trace = aonkit.load(_write_toy(tmp_path / "run.toy"), salvage=True, threads=2)
    # THEN the toy reader read it, with only the options it declared
    assert reader_for(tmp_path / "run.toy") is toy
    assert calls == [("run.toy", {"salvage": True})]
    assert trace.meta.layout == "toy" and len(trace.kernels) == 1 and trace.event_args(0) == {"n": 3}


def test_a_registered_reader_is_found_by_content_and_in_directories(tmp_path: Path, toy: Reader) -> None:
    # GIVEN a toy file without its suffix, and a directory holding a toy file
    bare = _write_toy(tmp_path / "capture.bin")
    (tmp_path / "job").mkdir()
    _write_toy(tmp_path / "job" / "rank0.toy")
    # THEN the sniff claims the bare file, and a directory scan lists *.toy files
    assert reader_for(bare) is toy and aonkit.load(bare).meta.layout == "toy"
    assert ".toy" in registry.directory_suffixes()
    assert aonkit.load(tmp_path / "job", separate=True)["rank0.toy"].meta.layout == "toy"
    # and once unregistered, the bare file falls back to the Chrome reader, which rejects it naming the file
    registry.unregister("toy")
    assert reader_for(bare) is CHROME_READER
    with pytest.raises(TraceFormatError) as e:
        aonkit.load(bare)
    assert e.value.path == str(bare)


def test_the_longest_suffix_wins(tmp_path: Path) -> None:
    # GIVEN a reader for ".trace.json", a longer ending than the Chrome reader's ".json"
    special = register(Reader("special", (".trace.json",), None, CHROME_READER.read))
    try:
        assert reader_for(tmp_path / "a.TRACE.JSON") is special
        assert reader_for(tmp_path / "a.json") is CHROME_READER
    finally:
        registry.unregister("special")


def test_builtin_readers_by_suffix() -> None:
    names = {s: reader_for(Path("x" + s)).name for s in (".json", ".json.gz", ".sqlite", ".sqlite3", ".db",
                                                         ".nsys-rep", ".qdrep", ".JSON")}
    assert names == {".json": "chrome", ".json.gz": "chrome", ".sqlite": "nsys-sqlite", ".sqlite3": "nsys-sqlite",
                     ".db": "nsys-sqlite", ".nsys-rep": "nsys-rep", ".qdrep": "nsys-rep", ".JSON": "chrome"}
    assert ".db" not in registry.directory_suffixes()  # read when named, not picked up from a directory


def test_gzip_json_with_a_log_suffix_goes_to_chrome(tmp_path: Path) -> None:
    src = SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"
    log = tmp_path / "profile.log"
    shutil.copyfile(src, log)
    assert reader_for(log) is CHROME_READER
    assert aonkit.load(log).events.equals(aonkit.load(src).events)


@pytest.mark.parametrize("head", [b'{"traceEvents": []}', b"\n  [", b"\xef\xbb\xbf{", gzip.compress(b"{}")])
def test_chrome_sniff(head: bytes) -> None:
    assert CHROME_READER.sniff is not None and CHROME_READER.sniff(head)


def test_sqlite_without_a_suffix_goes_to_nsys_sqlite(tmp_path: Path) -> None:
    # any SQLite database is claimed by content: the nsys reader then says it is not an export
    plain = tmp_path / "somedb"
    with sqlite3.connect(plain) as con:
        con.execute("CREATE TABLE t (a INTEGER)")
    assert reader_for(plain).name == "nsys-sqlite"
    with pytest.raises(TraceFormatError, match="not an Nsight Systems export"):
        aonkit.load(plain)


def test_nsys_export_without_a_suffix_is_read(tmp_path: Path) -> None:
    if not FUSER.exists():
        pytest.skip(f"shared nsys export not found at {FUSER} (clone with ../shared beside the repo)")
    bare = tmp_path / "report1"
    shutil.copyfile(FUSER, bare)
    assert reader_for(bare).name == "nsys-sqlite"
    assert len(aonkit.load(bare).kernels) == 19


def test_no_reader_and_no_fallback_is_a_clear_error(tmp_path: Path) -> None:
    odd = tmp_path / "notes.txt"
    odd.write_text("hello")
    assert reader_for(odd) is CHROME_READER  # today's rule: anything unclaimed is tried as Chrome JSON
    registry.unregister(CHROME_READER.name)
    try:
        with pytest.raises(TraceFormatError, match="no reader for this file") as e:
            reader_for(odd)
        assert e.value.path == str(odd)
    finally:
        register(CHROME_READER, fallback=True)
    assert registry.fallback() is CHROME_READER


def test_bad_reader_declarations() -> None:
    with pytest.raises(ValueError, match="suffixes"):
        Reader("bad", ("json",), None, CHROME_READER.read)
    with pytest.raises(ValueError, match="unknown options"):
        Reader("bad", (".x",), None, CHROME_READER.read, options=("workers",))


def test_import_aonkit_registers_readers_without_importing_them() -> None:
    import subprocess
    import sys

    code = ("import json, sys, aonkit\nfrom aonkit.sources import registry\n"
            "print(json.dumps([[r.name for r in registry.readers()], "
            "[m in sys.modules for m in ('aonkit.sources.chrome_trace', 'aonkit.sources.nsys.sqlite', 'numba')]]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert json.loads(out) == [["nsys-rep", "nsys-sqlite", "chrome"], [False, False, False]]


def test_only_the_registry_dispatches_on_file_suffixes() -> None:
    # a reader is chosen by the registry; endswith(".xyz") literals elsewhere would be a second, hidden chain
    # (cache.py names the cache's own files; that is not choosing a reader)
    allowed = {PKG / "sources" / "registry.py", PKG / "cache.py"}
    found = []
    for path in PKG.rglob("*.py"):
        if path in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "endswith":
                consts = [c.value for a in node.args for c in ast.walk(a) if isinstance(c, ast.Constant)]
                if any(isinstance(c, str) and c.startswith(".") for c in consts):
                    found.append(f"{path.relative_to(PKG)}:{node.lineno}")
    assert not found, f"suffix checks outside the registry: {found}"
