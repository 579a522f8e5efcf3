"""Job-directory fault cases: mixed caches, duplicates, foreign, unreadable and looping entries."""

from __future__ import annotations

import os
import random
import shutil
import warnings
from pathlib import Path

import aonkit
from aonkit.cache import cache_path_for, sidecar_path

# what a directory may hold besides the ranks, and what loading it must then do
FOREIGN = {
    "notes.txt": "ignored",  # not a trace suffix
    "junk.json": "format",  # not JSON
    "empty.json": "format",  # no events
    "other.json": "job",  # a trace naming no rank
    "sub.json": "skipped",  # a directory
    "dead.json": "skipped",  # a dangling link
    "loop.json": "skipped",  # a link to itself
    "fifo.json": "skipped",  # a named pipe: opening it would block
}
if hasattr(os, "geteuid") and os.geteuid() != 0:  # root reads a file whatever its mode
    FOREIGN["locked.json"] = "format"  # unreadable: an error naming it


def _add_foreign(name: str, d: Path) -> None:
    from .faults import make_source

    p = d / name
    if name == "notes.txt":
        p.write_text("hello")
    elif name == "junk.json":
        p.write_bytes(b'{"traceEvents": [{"ph": "X", ')
    elif name == "empty.json":
        p.write_text("[]")
    elif name == "other.json":
        make_source(p, rank=None)
    elif name == "sub.json":
        p.mkdir()
    elif name == "dead.json":
        p.symlink_to(d / "nowhere.json")
    elif name == "loop.json":
        p.symlink_to(p)
    elif name == "fifo.json":
        os.mkfifo(p)
    elif name == "locked.json":
        make_source(p, rank=0)
        p.chmod(0)


def _add_cache(rnd: random.Random, src: Path, world: int) -> str:
    """Give ``src`` a cache in some state; return it."""
    from .faults import make_source

    state = rnd.choice(["none", "fresh", "fresh", "stale", "corrupt", "no_sidecar"])
    if state == "none":
        return state
    cache = aonkit.load(src).save(cache_path_for(src))
    if state == "stale":
        st = src.stat()
        make_source(src, rank=aonkit.load(src).meta.rank, world=world, seed=rnd.randrange(10**6),
                    n=rnd.randint(1, 20))
        os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    elif state == "corrupt":
        b = bytearray(cache.read_bytes())
        b[rnd.randrange(len(b))] ^= 0xFF
        cache.write_bytes(bytes(b))
    elif state == "no_sidecar":
        sidecar_path(cache).unlink()
    return state


def jobdir_case(seed: int, work: Path) -> str:
    """A job directory with random faults; the load must match what the faults call for."""
    from .faults import make_source

    rnd = random.Random(seed)
    d = work / "job"
    d.mkdir()
    k = rnd.randint(1, 3)
    sources = [make_source(d / f"rank{r}.json{rnd.choice(['', '.gz'])}", rank=r, world=k, seed=seed * 7 + r)
               for r in range(k)]
    states = [_add_cache(rnd, s, k) for s in sources]
    faults: list[str] = []
    if rnd.random() < 0.25:
        r = rnd.randrange(k)
        shutil.copy(sources[r], d / f"copy-of-rank{r}.json{'.gz' if sources[r].name.endswith('.gz') else ''}")
        faults.append("duplicate")
    for name in rnd.sample(sorted(FOREIGN), rnd.randint(0, 2)):
        _add_foreign(name, d)
        faults.append(name)
    kinds = {FOREIGN.get(f, "job") for f in faults}
    refs = {r: aonkit.load(s) for r, s in enumerate(sources)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            job = aonkit.load(d)
        except aonkit.TraceFormatError as exc:
            assert "format" in kinds, f"unexpected format error: {exc}"
            assert any(f in str(exc) for f in faults if FOREIGN.get(f) == "format"), str(exc)
            return "error"
        except aonkit.JobError as exc:
            assert "job" in kinds and "format" not in kinds, f"unexpected job error: {exc}"
            assert "other.json" in str(exc) or "copy-of-rank" in str(exc), str(exc)
            return "refused"
    assert not kinds & {"format", "job"}, f"{faults} should not load as one job"
    assert isinstance(job, aonkit.TraceSet) and job.ranks == list(range(k))
    for r in range(k):
        assert job[r].equals(refs[r]), f"rank {r} ({states[r]} cache) differs from its source"
    said = " ".join(str(w.message) for w in caught)
    for r, st in enumerate(states):
        if st in ("stale", "corrupt", "no_sidecar"):
            assert cache_path_for(sources[r]).name in said, f"{st} cache of rank {r} used without a warning"
    for f in faults:
        if FOREIGN.get(f) == "skipped":
            assert f"skipped {f}" in said, f"{f} skipped without a warning"
    return "skipped-entries" if "skipped" in kinds else "ok"
