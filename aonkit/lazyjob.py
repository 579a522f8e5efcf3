"""A job loaded lazily: each rank indexed by its Parquet cache, read on first use, its work done in worker processes.

:func:`open_job` (``aonkit.load(job_dir, lazy=True)``) reads each rank's
trace once, in worker processes, writes its Parquet cache (see
:mod:`aonkit.cache`) and keeps only a small record of it: its rank, world,
run ids and first timestamp, enough to check that the files are one job. A
rank with a fresh cache is not parsed at all: its sidecar is the record.

The :class:`LazyTraceSet` it returns is a :class:`~aonkit.TraceSet`:
``job[r]`` reads rank ``r`` from its cache and keeps the last ``keep``
ranks read, so a loop over the ranks holds a few of them at a time; and
``job.map(fn)`` runs ``fn`` on every rank in worker processes (or on a Dask
cluster) and brings back only its results. The cross-rank analyses
(:func:`~aonkit.analysis.collectives.collectives`, ``stragglers``,
``clock_offsets``, :func:`~aonkit.analysis.job_stats.job_kernel_stats`) take
each rank's small table that way, so their peak memory is a few ranks', not
the job's.

Where caches go: ``cache_dir`` when given, else beside each trace when its
folder is writable, else (a folder without write bits, even for root) in
``$AONKIT_CACHE_DIR``, ``$XDG_CACHE_HOME/aonkit/traces`` or
``~/.cache/aonkit/traces``, one owner-only sub-folder per trace folder.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ._filecheck import user_cache_dir, writable_folder
from .cache import cache_path_for, read_sidecar, same_source, source_file
from .errors import TraceFormatError
from .jobcheck import Member
from .schema import TS_MISSING, first_ts
from .trace import Trace, TraceMeta
from .traceset import rank_from_name


@dataclasses.dataclass(frozen=True)
class RankFile:
    """One rank of a lazily loaded job: the file to read it from and its job record.

    Attributes
    ----------
    path : str
        The file :meth:`LazyTraceSet.__getitem__` reads: the rank's cache, or
        its source when no cache could be written.
    source : str
        The trace file the rank came from.
    member : aonkit.jobcheck.Member
        What the job rules check (rank, world, run ids, start).
    n_events : int
        Events in the trace.
    notes : tuple of str
        Warnings about this rank from opening the job (added to the trace's own).
    cache : str or None
        Set for a rank not read yet (``open_job(scan="head")``): where its cache
        goes when it is first read; ``n_events`` is -1 until then.
    """

    path: str
    source: str
    member: Member
    n_events: int
    notes: tuple[str, ...] = ()
    cache: str | None = None


def default_cache_dir(trace_dir: str | Path) -> Path:
    """Where caches of the traces in read-only folder ``trace_dir`` go (see the module doc)."""
    return user_cache_dir(trace_dir)


def cache_for(source: str | Path, cache_dir: str | Path | None = None) -> Path:
    """The cache file of trace ``source``: in ``cache_dir``, else beside it when writable, else the default dir."""
    source = Path(source)
    if cache_dir is not None:
        return cache_path_for(source, cache_dir)
    if writable_folder(source.parent):
        return cache_path_for(source)
    return cache_path_for(source, default_cache_dir(source.parent))


def record_of_cache(cache: str | Path, source: str | Path | None = None) -> RankFile | None:
    """The rank record of a cache from its sidecar alone, or None when it is unusable or not fresh for ``source``."""
    try:
        side = read_sidecar(cache)
    except TraceFormatError:
        return None
    src = source_file(side, cache)
    if source is not None and (src is None or src.resolve() != Path(source).resolve() or not same_source(src, side)):
        return None
    start = side.get("start_ns")
    if not isinstance(start, int):
        start = _start_from_columns(cache)
    mtime = int((side.get("source") or {}).get("mtime_ns", 0))
    member = Member.of_meta(TraceMeta(**side["meta"]), side["metadata"], start, mtime)
    return RankFile(str(cache), str(src if src is not None else cache), member, int(side["n_events"]))


def _start_from_columns(cache: str | Path) -> int:
    """First timestamp of a cache written before sidecars recorded it (read from its ``ts_ns`` column)."""
    import pyarrow.parquet as pq

    try:
        ts = pq.read_table(str(cache), columns=["ts_ns"]).column("ts_ns").to_numpy()
    except Exception:  # noqa: BLE001 - a damaged cache: the rank's load will name the problem
        return TS_MISSING
    return first_ts(ts)


HEAD_BYTES = 1 << 16
"""How much of a file :func:`head_record` reads (decompressed, for ``.gz``)."""


def head_record(source: str, cache: str | None) -> RankFile | None:
    """A rank record from the start of a Kineto JSON file alone, or None when the start does not say enough.

    The rank and world come from a top-level ``distributedInfo`` written before
    ``traceEvents`` (as Kineto writes it), else from the file name (``rank-3``).
    Run ids and the first timestamp stay unknown until the rank is read.
    """
    import gzip

    from .sources.registry import reader_for

    path = Path(source)
    try:
        if reader_for(path).name != "chrome":  # only JSON traces say their rank up front
            return None
        with open(path, "rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
        with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
            head = f.read(HEAD_BYTES).decode("utf-8", errors="replace")
        mtime = int(path.stat().st_mtime_ns)
    except (OSError, EOFError, gzip.BadGzipFile, TraceFormatError):
        return None
    info = _distributed_info(head)
    if info is None:
        return None
    rank = info.get("rank") if isinstance(info.get("rank"), int) else rank_from_name(path.name)
    world = info.get("world_size") if isinstance(info.get("world_size"), int) else None
    member = Member(path.name, rank, world, info, {}, TS_MISSING, mtime)
    return RankFile(source, source, member, -1, (), cache)


def _distributed_info(head: str) -> dict | None:
    """The top-level ``distributedInfo`` in a trace's first bytes ({} for a bare event array); None: not there."""
    import json

    body = head.lstrip()
    if body.startswith("["):  # a bare event array: nothing but the file name to go by
        return {}
    if not body.startswith("{"):
        return None
    key, events = head.find('"distributedInfo"'), head.find('"traceEvents"')
    if key < 0 or (0 <= events < key):
        return None  # events first (it may come after them) or not within the head: read the whole file
    start = head.find(":", key + len('"distributedInfo"')) + 1
    while start < len(head) and head[start].isspace():
        start += 1
    try:
        value, _ = json.JSONDecoder().raw_decode(head, start)
    except (ValueError, IndexError):
        return None
    return value if isinstance(value, dict) else None


def parse_rank(source: str, cache: str | None, salvage: bool = False) -> tuple[Trace, RankFile]:
    """Read trace ``source``, write its cache to ``cache`` (when given); the trace and its full record.

    When the cache cannot be written, the record points at the source (read
    again on use) and says why in its notes.
    """
    trace = read_rank(source, salvage)
    notes: tuple[str, ...] = ()
    path = source
    if cache is not None:
        try:
            Path(cache).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            path = str(trace.save(cache, source_text=True))  # the text stays in the source
        except OSError as exc:
            notes = (f"could not write the cache of {Path(source).name} ({exc.strerror or exc}); "
                     "the rank is parsed again on each use",)  # fmt: skip
    return trace, RankFile(path, source, Member.of_trace(trace), len(trace.events), notes)


def index_file(source: str, cache: str | None, salvage: bool = False,
               summaries: Sequence[Callable[[Trace], Any]] = ()) -> tuple[RankFile, list[Any]]:  # fmt: skip
    """:func:`parse_rank` in a worker: the record and ``summaries`` of the trace, not the trace.

    ``summaries`` are functions of the trace run while it is in memory (their
    results are small: a rank's table for a cross-rank analysis), so the job's
    first analyses need not read the rank again. Each result comes as
    ``(True, value)``, or ``(False, None)`` when the function raised (the map
    that needs it then runs it again and raises there).
    """
    trace, record = parse_rank(source, cache, salvage)
    return record, [_try(fn, trace) for fn in summaries]


def _try(fn: Callable[[Trace], Any], trace: Trace) -> tuple[bool, Any]:
    """(True, fn(trace)), or (False, None) when it raises: a summary is a head start, its failure is the map's."""
    try:
        return True, fn(trace)
    except Exception:  # noqa: BLE001 - the same call in LazyTraceSet.map raises it where the user asked
        return False, None


def fn_key(fn: Callable[..., Any]) -> Any:
    """A hashable identity of ``fn`` (a function, or a ``functools.partial`` of one by value); None when it has none."""
    from functools import partial

    key: Any = fn
    if isinstance(fn, partial):
        key = (fn_key(fn.func), fn.args, tuple(sorted(fn.keywords.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def run_each(func: Callable, items: Sequence[Any], pool: Any, client: Any, **kw: Any) -> list[Any]:
    """``[func(item, **kw)]`` on a Dask ``client``, in ``pool`` (a process pool), or here when both are None."""
    if client is not None:
        return client.gather(client.map(func, list(items), pure=False, **kw))
    if pool is None or len(items) <= 1:
        return [func(it, **kw) for it in items]
    from functools import partial

    from ._shipping import call_packed, folder, unpack

    chunk = max(1, len(items) // (16 * (os.cpu_count() or 1)))  # several chunks per worker: an even end
    with folder() as where:  # large arrays of the results come back as shared-memory files (aonkit._shipping)
        if where is None:
            return list(pool.map(partial(func, **kw), items, chunksize=chunk))
        return [unpack(r) for r in pool.map(partial(call_packed, func, where, **kw), items, chunksize=chunk)]


def new_pool(n_items: int, processes: int | None) -> Any:
    """A process pool of ``processes`` (default: one per core) workers, at most ``n_items``; None for one worker."""
    n = min(n_items, processes or os.cpu_count() or 1)
    if n <= 1:
        return None
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # forked on Linux (Python 3.14 defaults to forkserver): workers start at once, with the kernels loaded
    ctx = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
    return ProcessPoolExecutor(max_workers=n, mp_context=ctx)


def fresh_copy(value: Any) -> Any:
    """A remembered result as the caller's own (tables copied; they are small)."""
    return value.copy() if hasattr(value, "copy") and hasattr(value, "attrs") else value


DEFAULT_SUMMARIES: tuple[str, ...] = ("aonkit.analysis.collectives:comm_kernels",
                                      "aonkit.analysis.job_stats:rank_kernel_stats()")  # fmt: skip
"""What :func:`open_job` computes per rank while parsing, by name (the analyses sit a layer above this module):
``comm_kernels`` (collectives, stragglers, clock offsets) and ``kernel_stats`` by name (``job_kernel_stats``);
a few ms each on a rank already in memory. ``name()`` is a factory called once."""


def default_summaries() -> list[Callable[[Trace], Any]]:
    """The functions :data:`DEFAULT_SUMMARIES` names, imported now."""
    import importlib

    out = []
    for spec in DEFAULT_SUMMARIES:
        module, name = spec.split(":")
        fn = getattr(importlib.import_module(module), name.removesuffix("()"))
        out.append(fn() if name.endswith("()") else fn)
    return out


def read_rank(path: str, salvage: bool = False) -> Trace:
    """One rank's trace from its cache or source, on one thread (a worker's share of a job)."""
    from .sources import load

    trace = load(path, salvage=salvage, threads=1)
    assert isinstance(trace, Trace)
    return trace


def apply_to_rank(item: tuple[str, tuple[str, ...], str | None], fn: Callable[[Trace], Any],
           salvage: bool) -> tuple[Any, RankFile | None]:  # fmt: skip
    """Worker: read one rank and return ``fn`` of it (only the result travels back).

    A rank not read yet (``item[2]``: its cache path) is parsed, cached, and
    its full record comes back with the result.
    """
    path, notes, cache = item
    record = None
    if cache is not None:  # parsed now; the trace in hand is used, not read back from its new cache
        trace, record = parse_rank(path, cache, salvage)
    else:
        trace = read_rank(path, salvage)
    trace.warnings.extend(notes)
    return fn(trace), record


def how_to_send(fn: Callable[..., Any]) -> str:
    """Where :meth:`LazyTraceSet.map` can run ``fn``.

    ``"pool"``: the kept workers can import it; ``"fork"``: it lives in
    ``__main__`` (a notebook cell), which workers forked earlier lack, so
    workers are forked for this call; ``"here"``: it cannot be pickled (a
    lambda, a closure), so it runs in this process.
    """
    import pickle

    try:
        pickle.dumps(fn)
    except Exception:  # noqa: BLE001 - any pickling failure: run it here
        return "here"
    base = fn
    while hasattr(base, "func"):  # functools.partial
        base = base.func
    if getattr(base, "__module__", None) != "__main__":
        return "pool"
    return "fork" if sys.platform.startswith("linux") else "here"  # only forked workers have __main__'s functions
