"""``LazyTraceSet`` and :func:`open_job`: a job whose ranks are read on first use (see :mod:`aonkit.lazyjob`)."""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .cache import CACHE_SUFFIX
from .errors import JobError, warn_user
from .jobcheck import assign_ranks, say_assignment
from .lazyjob import (
    RankFile,
    apply_to_rank,
    cache_for,
    default_summaries,
    fn_key,
    fresh_copy,
    head_record,
    how_to_send,
    index_file,
    new_pool,
    parse_rank,
    read_rank,
    record_of_cache,
    run_each,
)
from .trace import Trace
from .traceset import TraceSet


class LazyTraceSet(TraceSet):
    """A :class:`~aonkit.TraceSet` whose ranks are read from their caches on first use.

    Made by :func:`open_job` (``aonkit.load(job_dir, lazy=True)``). Indexing
    reads a rank and keeps the ``keep`` most recently read; :meth:`map` runs a
    function on every rank in worker processes, or on ``client`` (Dask). The
    worker processes stay up for the next :meth:`map` until :meth:`close` (or
    the end of a ``with`` block, or the set being dropped).

    Parameters
    ----------
    files : mapping of int to RankFile
        Rank -> where to read it.
    keep : int
        Ranks held in memory after reading (least recently used dropped first).
    processes : int, optional
        Worker processes for :meth:`map` (default: one per core; 1 works here).
    client : dask.distributed.Client, optional
        Run :meth:`map` on this Dask cluster instead.
    salvage : bool
        Read truncated files as :func:`aonkit.load` does with ``salvage=True``.
    notes : sequence of str
        Warnings about the job as a whole (files skipped, caches ignored).
    pool : concurrent.futures.ProcessPoolExecutor, optional
        Worker processes to use for :meth:`map` (the set shuts them down).
    """

    def __init__(self, files: Mapping[int, RankFile], *, keep: int = 2, processes: int | None = None,
                 client: Any = None, salvage: bool = False, notes: Sequence[str] = (),
                 pool: Any = None) -> None:  # fmt: skip
        if keep < 1:
            raise ValueError(f"keep must be at least 1, not {keep}")
        self._files = dict(sorted(files.items()))
        self._held: OrderedDict[int, Trace] = OrderedDict()
        self.keep, self.processes, self.client, self.salvage = keep, processes, client, salvage
        self._notes = list(notes)
        self.samples_from: Path | None = None
        """A traced job's folder (:mod:`aonkit.sources.traced_job`): each rank read here gets its samples from it."""
        self._samples_read: dict = {}  # its samples files read, each once (attach_rank_samples' tables)
        self._memo: dict[Any, dict[int, Any]] = {}
        self._pool: Any = None
        self._finalizer: Any = None
        if pool is not None:
            self._adopt(pool)

    def _adopt(self, pool: Any) -> None:
        self._pool = pool
        self._finalizer = weakref.finalize(self, pool.shutdown, wait=False, cancel_futures=True)

    @property
    def has_workers(self) -> bool:
        """Whether the set's worker processes are running (forked at its first parse or :meth:`map`)."""
        return self._pool is not None

    def close(self) -> None:
        """Stop the worker processes (a later :meth:`map` starts new ones) and drop the ranks held.

        The workers are joined (a few ms for an idle pool): a pool left to stop on its own thread
        (``shutdown(wait=False)``, what a set dropped without :meth:`close` gets) can race the interpreter's
        exit in ``concurrent.futures`` and print ``OSError: [Errno 9] Bad file descriptor``.
        """
        if self._finalizer is not None:
            self._finalizer.detach()
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool = self._finalizer = None
        self._held.clear()

    def __enter__(self) -> LazyTraceSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getitem__(self, rank: int) -> Trace:
        if rank in self._held:
            self._held.move_to_end(rank)
            return self._held[rank]
        f = self._files[rank]
        if f.cache is not None:  # not read yet (scan="head"): parse it now, once, and cache it
            trace, record = parse_rank(f.source, f.cache, self.salvage)
            f = self._settle(rank, record)
        else:
            trace = read_rank(f.path, self.salvage)
        trace.warnings.extend(f.notes)
        if self.samples_from is not None:  # a folder aonkit trace wrote: the rank's node's samples
            from .sources.traced_job import attach_rank_samples

            attach_rank_samples({rank: trace}, self.samples_from, self._samples_read)
        self._held[rank] = trace
        while len(self._held) > self.keep:
            self._held.popitem(last=False)
        return trace

    def _settle(self, rank: int, record: RankFile) -> RankFile:
        """Take a first read's full record for ``rank`` (keeping the notes from opening)."""
        old = self._files[rank]
        self._files[rank] = RankFile(record.path, record.source, record.member, record.n_events,
                                     old.notes + record.notes)  # fmt: skip
        return self._files[rank]

    def _by_rank(self) -> Mapping[int, RankFile]:
        return self._files

    @property
    def files(self) -> dict[int, RankFile]:
        """Rank -> :class:`~aonkit.lazyjob.RankFile` (where each rank is read from)."""
        return dict(self._files)

    @property
    def held(self) -> list[int]:
        """Ranks in memory now, least recently used first."""
        return list(self._held)

    @property
    def n_events(self) -> int:
        """Events in the ranks read so far or cached (from their records; nothing is read)."""
        return sum(f.n_events for f in self._files.values() if f.n_events >= 0)

    @property
    def unread(self) -> list[int]:
        """Ranks not read yet (``scan="head"``): each is parsed and cached on first use."""
        return [r for r, f in self._files.items() if f.cache is not None]

    @property
    def warnings(self) -> list[str]:
        """The job's notes and each rank's notes from opening (the ranks' own warnings: ``job[r].warnings``)."""
        return self._notes + [f"rank {r}: {w}" for r, f in self._files.items() for w in f.notes]

    def map(self, fn: Callable[[Trace], Any], *, processes: int | None = None, client: Any = None) -> dict[int, Any]:
        """``{rank: fn(trace)}``, each rank read and ``fn`` run in a worker; only the results come back.

        Parameters
        ----------
        fn : callable
            A function of one :class:`~aonkit.Trace`. One defined in a module runs in the kept
            workers; one defined in a notebook cell (``__main__``) in workers forked for the call;
            a lambda or closure, which cannot be pickled, in this process.
        processes, client : optional
            Override the set's own (see the class parameters).

        Returns
        -------
        dict of int to object
            ``fn``'s result per rank, in rank order. Results are remembered per
            function (a ``functools.partial`` counts by its arguments), so a
            second call, or one whose results :func:`open_job` computed while
            it parsed the ranks, reads nothing; tables come back as copies.
        """
        key = fn_key(fn)
        known = self._memo.get(key, {}) if key is not None else {}
        todo = [r for r in self._files if r not in known]
        got = {}
        for r, (value, record) in zip(todo, self._run(fn, todo, processes, client) if todo else []):
            got[r] = value
            if record is not None:
                self._settle(r, record)
        if key is not None:
            self._memo.setdefault(key, {}).update(got)
        return {r: fresh_copy(known[r]) if r in known else got[r] for r in self._files}

    def remembered(self, fn: Callable[[Trace], Any]) -> list[int]:
        """The ranks whose ``fn`` result is remembered: a :meth:`map` of ``fn`` reads none of their files."""
        key = fn_key(fn)
        return sorted(self._memo.get(key, {})) if key is not None else []

    def remember(self, fn: Callable[[Trace], Any], results: Mapping[int, Any]) -> None:
        """Take ``results`` as ``fn``'s, per rank (e.g. computed while parsing); :meth:`map` reuses them."""
        if (key := fn_key(fn)) is not None:
            self._memo.setdefault(key, {}).update({r: v for r, v in results.items() if r in self._files})

    def _run(self, fn: Callable[[Trace], Any], ranks: list[int], processes: int | None, client: Any) -> list[Any]:
        client = client if client is not None else self.client
        items = [(self._files[r].path, self._files[r].notes, self._files[r].cache) for r in ranks]
        how = how_to_send(fn) if client is None else "pool"
        if client is not None or how == "here":
            pool = None  # Dask pickles by value; a lambda or closure runs here
        elif how == "fork" or (processes is not None and processes != self.processes):
            pool = new_pool(len(items), processes or self.processes)  # one-off workers forked now
        else:
            if self._pool is None and (p := new_pool(len(items), self.processes)) is not None:
                self._adopt(p)
            pool = self._pool
        try:
            return run_each(apply_to_rank, items, pool, client, fn=fn, salvage=self.salvage)
        finally:
            if pool is not None and pool is not self._pool:
                pool.shutdown()

    def eager(self) -> TraceSet:
        """Every rank read into memory, as a plain :class:`~aonkit.TraceSet` (a traced job's lags, clocks... kept)."""
        job = TraceSet({r: self[r] for r in self._files})
        job.step_lags, job.trace_notes = self.step_lags, self.trace_notes
        job.hosts, job.clocks = self.hosts, self.clocks
        return job

    def __repr__(self) -> str:
        rs = self.ranks
        unread = f" ({len(self.unread)} rank(s) not read yet)" if self.unread else ""
        return (f"<aonkit.LazyTraceSet {len(self)} rank(s) {rs[:8]}{'...' if len(rs) > 8 else ''}: "
                f"{self.n_events:,} events{unread}, {len(self._held)} in memory>")


def open_job(paths: str | Path | Sequence[str | Path], *, processes: int | None = None, client: Any = None,
             cache_dir: str | Path | None = None, keep: int = 2, salvage: bool = False,
             on_conflict: str = "error", summaries: Sequence[Callable[[Trace], Any]] | None = None,
             write_caches: bool = True, scan: str = "parse") -> LazyTraceSet:  # fmt: skip
    """A job as a :class:`LazyTraceSet`: every rank cached and checked, none held.

    Parameters
    ----------
    paths : path or sequence of paths
        A job's directory (its fresh caches stand in for their sources, as
        :func:`aonkit.load` picks them) or its trace files.
    processes : int, optional
        Worker processes that parse the ranks without a fresh cache (default:
        one per core), and the set's default for :meth:`LazyTraceSet.map`.
    client : dask.distributed.Client, optional
        Parse, and later map, on this Dask cluster instead (the workers must
        see the same files, e.g. a shared file system).
    cache_dir : path, optional
        Where to write caches (default: see :mod:`aonkit.lazyjob`).
    keep : int
        Ranks held in memory after ``job[r]``.
    salvage : bool
        Keep the complete events of truncated files (see :func:`aonkit.load`).
    on_conflict : {"error", "newest", "file-order"}
        As :meth:`aonkit.TraceSet.from_traces`.
    summaries : sequence of callables, optional
        Functions run on each rank parsed here while it is in memory; their
        results are remembered for :meth:`LazyTraceSet.map` (default:
        :func:`default_summaries`, so collectives, stragglers and job kernel
        stats need no second read of a newly parsed rank). ``[]`` for none.
    write_caches : bool
        Write a cache for each rank parsed (default). ``False`` writes nothing
        (fresh caches are still used): a rank is then parsed again whenever it
        is read, which suits a job looked at once through the summaries.
    scan : {"parse", "head"}
        ``"parse"`` (default): read every rank without a fresh cache now, in
        parallel, so the job is fully checked and the summaries are ready.
        ``"head"``: read only the start of each such file for its rank and world
        (a top-level ``distributedInfo`` before the events, else the file name);
        each rank is parsed and cached when first used, so opening a job of
        thousands of ranks to look at a few is instant. Run ids and start times
        are then checked only among the ranks already read; a file whose start
        does not say parses now.

    Returns
    -------
    LazyTraceSet
        For a folder ``aonkit trace`` wrote, with its ranks' step lags, notes and hosts
        (:func:`aonkit.sources.traced_job.attach_traced_job`); a rank read with ``job[r]`` gets its samples, one
        read in :meth:`LazyTraceSet.map`'s workers does not.

    Raises
    ------
    TraceFormatError
        A file is unreadable or malformed (the message names it).
    JobError
        The files are not one job.
    """
    from .sources.discover import directory_files, pick
    from .sources.traced_job import attach_traced_job, is_traced_job

    if scan not in ("parse", "head"):
        raise ValueError(f"scan must be 'parse' or 'head', not {scan!r}")
    notes: list[str] = []
    where = None
    if isinstance(paths, (str, Path)):
        where = Path(paths)
        if not where.is_dir():
            raise NotADirectoryError(f"open_job takes a job's directory or a list of files, not {where}")
        files, notes = directory_files(where)
    else:
        files = [Path(p) for p in paths]
        for f in files:
            if not f.is_file():
                raise FileNotFoundError(f"no such trace file: {f}")
    picks = pick(files)
    records: list[RankFile | None] = []
    todo: list[tuple[int, str, str | None]] = []
    for k, (f, extra) in enumerate(picks):
        notes += extra
        if f.name.lower().endswith(CACHE_SUFFIX):  # a fresh cache pick() chose, or a cache on its own
            cache, rec = None, record_of_cache(f)
        else:
            cache = cache_for(f, cache_dir)
            rec = record_of_cache(cache, f) if cache.exists() else None
        if rec is None and scan == "head" and cache is not None:
            rec = head_record(str(f), str(cache) if write_caches else None)
            if rec is not None and rec.cache is None:  # no cache wanted: the rank is parsed on each read
                rec = RankFile(rec.path, rec.source, rec.member, -1, rec.notes, None)
        records.append(rec)
        if rec is None:
            todo.append((k, str(f), None if cache is None or not write_caches else str(cache)))
    pool = new_pool(len(todo), processes) if client is None and len(todo) > 1 else None
    fns = default_summaries() if summaries is None else list(summaries)
    try:
        done = run_each(_index_item, [(src, cache) for _, src, cache in todo], pool, client, salvage=salvage,
                     summaries=fns)  # fmt: skip
    except BaseException:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        raise
    for (k, _, _), (rec, _) in zip(todo, done):
        records[k] = rec
    ready = [r for r in records if r is not None]
    assert len(ready) == len(records)  # every file has its record now: from its cache, or parsed above
    try:
        chosen, extra_notes = assign_ranks([r.member for r in ready], on_conflict)
    except JobError as exc:
        if pool is not None:
            pool.shutdown()
        label = str(where) if where is not None else f"{len(files)} files"
        raise JobError(f"{label}: {exc}") from None
    by_index: dict[int, list[str]] = {}
    for k, text in extra_notes:
        by_index.setdefault(k, []).append(text)
    say_assignment(extra_notes, on_conflict, len(ready))
    for text in notes:
        warn_user(text)
    out = {r: _with_notes(ready[k], by_index.get(k, [])) for r, k in chosen.items()}
    job = LazyTraceSet(out, keep=keep, processes=processes, client=client, salvage=salvage, notes=notes, pool=pool)
    rank_of = {k: r for r, k in chosen.items()}  # a file dropped by on_conflict='newest' has no rank
    for j, fn in enumerate(fns):
        job.remember(fn, {rank_of[k]: res[j][1] for (k, _, _), (_, res) in zip(todo, done)
                          if k in rank_of and res[j][0]})  # fmt: skip
    if where is not None and is_traced_job(where):  # a folder aonkit trace wrote: its lags and hosts now, and each
        attach_traced_job(job, where, samples=False)  # rank's samples when it is read here (not in map's workers)
        job.samples_from = where
    return job


def _index_item(item: tuple[str, str | None], salvage: bool = False,
                summaries: Sequence[Callable[[Trace], Any]] = ()) -> tuple[RankFile, list[Any]]:  # fmt: skip
    return index_file(item[0], item[1], salvage, summaries)


def _with_notes(rec: RankFile, more: list[str]) -> RankFile:
    if not more:
        return rec
    return RankFile(rec.path, rec.source, rec.member, rec.n_events, rec.notes + tuple(more))
