"""Per-rank work in parallel: local processes by default, a Dask cluster when given a client.

Each worker loads one trace file and returns only the (small) result of a
function applied to it, so a job of many ranks never holds all its traces in
one process. Functions must be importable (module-level) so they pickle.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import JobError
from ..traceset import rank_from_name


def _load_apply(path: str, fn: Callable[[Any], Any], salvage: bool) -> tuple[int | None, int | None, Any]:
    from ..sources import load

    trace = load(path, salvage=salvage, threads=1)
    rank = trace.meta.rank if trace.meta.rank is not None else rank_from_name(trace.meta.path)
    return rank, trace.meta.world_size, fn(trace)


def trace_files(path: str | Path) -> list[str]:
    """The trace files of a job directory, one per trace, as :func:`aonkit.load` picks them (fresh caches first)."""
    from ..sources.discover import directory_files, pick

    return [str(p) for p, _ in pick(directory_files(Path(path))[0])]


def _ranks(files: list[str], results: list[tuple[int | None, int | None, Any]], on_conflict: str) -> list[int]:
    """The rank of each result, by the rules of :meth:`aonkit.TraceSet.from_traces` (no 'newest' here)."""
    ranks = [r for r, _, _ in results]
    if on_conflict == "file-order":
        return list(range(len(results)))
    names = [Path(f).name for f in files]
    if len(files) > 1 and any(r is None for r in ranks):
        bare = [n for n, r in zip(names, ranks) if r is None]
        raise JobError(f"not one job: {', '.join(bare[:4])} name(s) no rank. Pass on_conflict='file-order' to key "
                       "the files as ranks by file order.")
    if len(set(ranks)) != len(ranks):
        dup = next(r for r in ranks if ranks.count(r) > 1)
        raise JobError(f"not one job: rank {dup} is claimed by "
                       f"{' and '.join(n for n, r in zip(names, ranks) if r == dup)}. "
                       "Pass on_conflict='file-order' to key the files as ranks by file order.")
    sizes = {w for _, w, _ in results if w is not None}
    if len(sizes) > 1:
        raise JobError(f"not one job: different world sizes {sorted(sizes)}.")
    return [r if r is not None else 0 for r in ranks]


def map_ranks(
    fn: Callable[[Any], Any],
    paths: Sequence[str | Path] | str | Path,
    *,
    client: Any = None,
    processes: int | None = None,
    salvage: bool = False,
    on_conflict: str = "error",
) -> dict[int, Any]:
    """``{rank: fn(trace)}`` for every trace file, computed in parallel.

    Parameters
    ----------
    fn : callable
        A module-level function of a :class:`~aonkit.Trace`.
    paths : path or sequence of paths
        Trace files, or a job directory.
    client : dask.distributed.Client, optional
        Run on this Dask cluster (one task per file) instead of local processes.
    processes : int, optional
        Local worker processes (default: one per core).
    on_conflict : {"error", "file-order"}
        Files that name no rank or claim one rank twice raise
        :class:`~aonkit.JobError` (default), or are keyed by file order.
    """
    files = trace_files(paths) if isinstance(paths, (str, Path)) and Path(paths).is_dir() else [str(p) for p in paths]
    if client is not None:
        futures = client.map(_load_apply, files, fn=fn, salvage=salvage, pure=False)
        results = client.gather(futures)
    elif len(files) == 1 or (processes or os.cpu_count() or 1) == 1:
        results = [_load_apply(f, fn, salvage) for f in files]
    else:
        with ProcessPoolExecutor(max_workers=processes or min(len(files), os.cpu_count() or 1)) as pool:
            results = list(pool.map(_load_apply, files, [fn] * len(files), [salvage] * len(files)))
    ranks = _ranks(files, results, on_conflict)
    return dict(sorted(zip(ranks, (res for _, _, res in results))))


def job_collectives(paths: Sequence[str | Path] | str | Path, *, client: Any = None,
                    processes: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:  # fmt: skip
    """Collectives, per-rank participation and stragglers of a job, with per-rank work in parallel.

    A job folder ``aonkit trace`` wrote gives its ranks' clocks (one per node): the ranks of one node share it
    (:func:`~aonkit.analysis.collectives.clock_offsets`).
    """
    from ..sources.traced_job import is_traced_job, job_clocks, read_job_manifest
    from .collectives import collectives_from_tables, comm_kernels, stragglers_from

    per = map_ranks(comm_kernels, paths, client=client, processes=processes)
    clocks = None
    if isinstance(paths, (str, Path)) and Path(paths).is_dir() and is_traced_job(paths):
        clocks = job_clocks(read_job_manifest(paths)[0])
    coll, part = collectives_from_tables(per, hosts=clocks)
    return coll, part, stragglers_from(coll, part)
