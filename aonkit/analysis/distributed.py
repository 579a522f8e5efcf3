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

from ..traceset import _rank_from_name


def _load_apply(path: str, fn: Callable[[Any], Any], salvage: bool) -> tuple[int | None, Any]:
    from ..sources import load

    trace = load(path, salvage=salvage, threads=1)
    rank = trace.meta.rank if trace.meta.rank is not None else _rank_from_name(trace.meta.path)
    return rank, fn(trace)


def trace_files(path: str | Path) -> list[str]:
    """The trace files of a job directory (as :func:`aonkit.load` would read them)."""
    from ..sources import _trace_files

    return [str(p) for p in _trace_files(Path(path))]


def map_ranks(
    fn: Callable[[Any], Any],
    paths: Sequence[str | Path] | str | Path,
    *,
    client: Any = None,
    processes: int | None = None,
    salvage: bool = False,
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
    ranks = [r for r, _ in results]
    if any(r is None for r in ranks) or len(set(ranks)) != len(ranks):
        ranks = list(range(len(results)))  # file order, as TraceSet does when ranks are missing or clash
    return dict(sorted(zip(ranks, (res for _, res in results))))


def job_collectives(paths: Sequence[str | Path] | str | Path, *, client: Any = None,
                    processes: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:  # fmt: skip
    """Collectives, per-rank participation and stragglers of a job, with per-rank work in parallel."""
    from .collectives import collectives_from_tables, comm_kernels, stragglers_from

    per = map_ranks(comm_kernels, paths, client=client, processes=processes)
    coll, part = collectives_from_tables(per)
    return coll, part, stragglers_from(coll, part)
