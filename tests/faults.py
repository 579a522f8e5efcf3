"""Seeded corruption and fault cases, each with its oracle; shared by tests/test_faults.py and bench/fuzz.py.

``run_case(family, seed, work)`` builds the inputs of one case under ``work``,
damages them as the family says, loads them, and checks the outcome against
what must happen. It returns a label ("ok", "fallback", "error", "refused",
"skipped-entries") and raises AssertionError (or the unexpected exception)
on a violation: a crash, a silent change, a wrong value, an error that does
not name the file.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path

import aonkit
from aonkit.cache import cache_path_for, samples_path, sidecar_path, text_path

FAMILIES = ("cache_bytes", "cache_truncate", "sidecar", "sidecar_swap", "gzip", "jobdir")


def make_source(path: Path, rank: int | None = 0, world: int = 2, n: int = 12, seed: int = 0) -> Path:
    """A small valid Kineto trace (gzip when the name ends in .gz)."""
    rnd = random.Random(seed)
    ev = []
    for i in range(n):
        ts = 10.0 * i + rnd.randint(0, 3)
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts,
                   "dur": 2, "args": {"correlation": i + 1, "External id": i}})
        ev.append({"ph": "X", "cat": "kernel", "name": rnd.choice(["gemm", "relu", "nccl:all_reduce"]), "pid": 0,
                   "tid": 7, "ts": ts + 3, "dur": rnd.randint(1, 9), "args": {"correlation": i + 1, "stream": 7}})
    doc: dict = {"traceEvents": ev, "baseTimeNanoseconds": 1_700_000_000 * 10**9}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return path


def _load(target: Path | list[Path], **kw: object) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = aonkit.load(target, **kw)  # type: ignore[arg-type]
    return out, [str(w.message) for w in caught if issubclass(w.category, aonkit.AonkitWarning)]


def _names_file(exc: aonkit.TraceFormatError, *files: Path) -> bool:
    return any(exc.path == str(f) or f.name in str(exc) for f in files)


def _cache_case(seed: int, work: Path, damage: Callable[[random.Random, Path, Path], None]) -> str:
    rnd = random.Random(seed)
    src = make_source(work / "t.json", seed=seed)
    ref = aonkit.load(src)
    cache = ref.save(cache_path_for(src))
    damage(rnd, cache, sidecar_path(cache))
    keep_source = rnd.random() < 0.5
    if not keep_source:
        src.rename(work / "away.bin")
    try:
        got, warned = _load(cache)
    except aonkit.TraceFormatError as exc:
        assert not keep_source, f"the source was there but the damaged cache raised: {exc}"
        assert _names_file(exc, cache, sidecar_path(cache), samples_path(cache), text_path(cache)), str(exc)
        return "error"
    assert isinstance(got, aonkit.Trace) and got.equals(ref), "a damaged cache loaded with different values"
    if warned:
        assert any("unusable" in w for w in warned), warned
        return "fallback"
    return "ok"  # the damage left the bytes as they were (e.g. a JSON edit that rewrote the same text)


def _flip_bytes(rnd: random.Random, cache: Path, side: Path) -> None:
    target = rnd.choice([cache, cache, text_path(cache)]) if rnd.random() < 0.8 else side
    b = bytearray(target.read_bytes())
    for _ in range(rnd.randint(1, 6)):
        pos = rnd.randrange(len(b))
        for i in range(pos, min(len(b), pos + rnd.choice([1, 1, 4, 64, 4096]))):
            b[i] ^= rnd.randint(1, 255)
    target.write_bytes(bytes(b))


def _truncate(rnd: random.Random, cache: Path, side: Path) -> None:
    target = rnd.choice([cache, cache, text_path(cache)]) if rnd.random() < 0.7 else side
    b = target.read_bytes()
    how = rnd.random()
    if how < 0.7:
        target.write_bytes(b[: rnd.randrange(len(b))])
    elif how < 0.85:
        target.write_bytes(b + bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 100))))
    else:
        side.unlink()


def _sidecar_json(rnd: random.Random, cache: Path, side: Path) -> None:
    doc = json.loads(side.read_text())
    paths = [("data",), ("text",), ("n_events",), ("categories", "name"), ("categories", "ph"), ("meta", "rank"),
             ("meta", "base_time_ns"), ("source",), ("samples",), ("version",), ("format",), ("check",),
             ("warnings",), ("categories", "pid")]
    for _ in range(rnd.randint(1, 3)):
        *parents, key = rnd.choice(paths)
        node = doc
        for p in parents:
            node = node.get(p, {}) if isinstance(node, dict) else {}
        if not isinstance(node, dict):
            continue
        value = rnd.choice([None, -1, 0, 2**70, "x", [], {}, [1, "a"], 1.5, True, node.get(key)])
        if rnd.random() < 0.2:
            node.pop(key, None)
        else:
            node[key] = value
    side.write_text(json.dumps(doc))


def _sidecar_swap(seed: int, work: Path) -> str:
    rnd = random.Random(seed)
    a = make_source(work / "a.json", seed=seed)
    b = make_source(work / "b.json", seed=seed + 1, n=rnd.randint(1, 14))
    ca, cb = aonkit.load(a).save(cache_path_for(a)), aonkit.load(b).save(cache_path_for(b))
    shutil.copy(sidecar_path(cb), sidecar_path(ca))  # a sidecar from another file
    keep = rnd.random() < 0.5
    if not keep:
        a.rename(work / "away.bin")
    try:
        got, warned = _load(ca)
    except aonkit.TraceFormatError as exc:
        assert not keep and _names_file(exc, ca, sidecar_path(ca)), str(exc)
        return "error"
    assert keep and isinstance(got, aonkit.Trace) and got.equals(aonkit.load(a)) and warned
    return "fallback"


def _gzip_case(seed: int, work: Path) -> str:
    rnd = random.Random(seed)
    plain = make_source(work / "p.json", seed=seed, rank=None).read_bytes()
    cut = rnd.randrange(1, len(plain))
    data = bytearray(gzip.compress(plain[:cut], mtime=0) + gzip.compress(plain[cut:], mtime=0)
                     if rnd.random() < 0.3 else gzip.compress(plain, mtime=0))
    for _ in range(rnd.randint(1, 3)):
        op = rnd.random()
        if op < 0.35:
            pos = rnd.randrange(len(data))
            data[pos] ^= rnd.randint(1, 255)
        elif op < 0.6:
            del data[rnd.randrange(len(data)):]
        elif op < 0.75:
            data += bytes(rnd.choice([0, rnd.randrange(256)]) for _ in range(rnd.randint(1, 40)))
        elif op < 0.9:
            pos = rnd.randrange(len(data))
            data[pos:pos] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 8)))
        if not data:
            data = bytearray(b"\x1f\x8b")
    path = work / "g.json.gz"
    path.write_bytes(bytes(data))
    salvage = rnd.random() < 0.5
    try:
        expected_text = gzip.decompress(bytes(data))
    except (OSError, EOFError, ValueError, zlib.error):  # gzip.BadGzipFile, corrupt deflate, truncated
        expected_text = None
    try:
        got = aonkit.load(path, salvage=salvage)
    except aonkit.TraceFormatError as exc:
        assert exc.path == str(path), str(exc)
        if expected_text is not None:  # a good stream: the error must be the JSON's, as for the plain bytes
            plain_path = work / "same.json"
            plain_path.write_bytes(expected_text)
            try:
                aonkit.load(plain_path, salvage=salvage)
            except aonkit.TraceFormatError:
                return "error"
            raise AssertionError("a valid gzip stream failed while its text loads") from None
        return "error"
    assert isinstance(got, aonkit.Trace)
    if expected_text is None:
        assert got.warnings, "a damaged gzip stream loaded without a warning"
        return "fallback"
    plain_path = work / "same.json"
    plain_path.write_bytes(expected_text)
    same = aonkit.load(plain_path, salvage=salvage)
    assert got.events.equals(same.events), "gzip and plain text of the same bytes differ"
    return "ok"


from .faults_jobdir import jobdir_case  # noqa: E402 - after the helpers it uses


def run_case(family: str, seed: int, work: Path) -> str:
    """Run case ``seed`` of ``family`` in the empty directory ``work``; return its outcome label."""
    work.mkdir(parents=True, exist_ok=True)
    if family == "cache_bytes":
        return _cache_case(seed, work, _flip_bytes)
    if family == "cache_truncate":
        return _cache_case(seed, work, _truncate)
    if family == "sidecar":
        return _cache_case(seed, work, _sidecar_json)
    if family == "sidecar_swap":
        return _sidecar_swap(seed, work)
    if family == "gzip":
        return _gzip_case(seed, work)
    if family == "jobdir":
        return jobdir_case(seed, work)
    raise ValueError(family)


__all__ = ["FAMILIES", "make_source", "run_case"]
