"""Job folders of ``aonkit trace --all-ranks`` and ``aonkit trace --job``: the ranks' traces and what came with them.

A folder holds ``rank<N>.json.gz`` per rank, the live samples of the traced window (``job.samples.parquet`` for the
whole job on one node, or ``rank<N>.samples.parquet`` per rank from each rank's own node) and the manifest
``aonkit-trace.meta.json``: the window, the notes the command printed and, per rank, its host, steps and
``boundary_lag_ms`` (how long after the earliest rank it passed the step boundaries before the trace). Every rank's
trace is on its node's clock (``time.time_ns``): ranks of one node share a clock, so :attr:`aonkit.TraceSet.clocks`
tells :func:`~aonkit.analysis.collectives.clock_offsets` to align nodes, not ranks. A node is known by its boot id
(:func:`job_clocks`), else by its host name.

:func:`aonkit.load` (and :func:`aonkit.load_job`) of such a folder reads the traces as any job directory (the scan
skips ``*.samples.parquet`` and ``*.meta.json``), then :func:`attach_traced_job` puts the samples on each rank's
``trace.samples`` and the manifest's lags, notes, hosts and clocks on :attr:`aonkit.TraceSet.step_lags`,
:attr:`~aonkit.TraceSet.trace_notes`, :attr:`~aonkit.TraceSet.hosts` and :attr:`~aonkit.TraceSet.clocks`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from ..trace import Trace
from ..traceset import TraceSet

JOB_SAMPLES = "job.samples.parquet"
JOB_MANIFEST = "aonkit-trace.meta.json"
STEP_LAG_COLUMNS = {"rank": np.int64, "host": object, "boot_id": object, "boundary_lag_ms": np.float64}
MAX_RANK = 2**31
"""Ranks are below this (a larger number in a manifest is an error, not a wrapped int64)."""


def is_traced_job(folder: str | Path) -> bool:
    """True for a folder with a traced job's manifest (:data:`JOB_MANIFEST`)."""
    return (Path(folder) / JOB_MANIFEST).is_file()


def step_lag_table(ranks: Sequence[dict]) -> pd.DataFrame:
    """The ranks of a job manifest (its ``ranks`` list) as a table of their step-boundary lags.

    Parameters
    ----------
    ranks : sequence of dict
        One per rank: ``rank`` (int below :data:`MAX_RANK`; None when the process had none, kept as -1), ``host``
        and ``boot_id`` (str, optional: :func:`aonkit.live.paths.boot_id`) and ``boundary_lag_ms`` (a number, or None
        when not measured).

    Returns
    -------
    pandas.DataFrame
        ``rank``, ``host`` and ``boot_id`` ("" when not recorded) and ``boundary_lag_ms`` (NaN when not measured),
        sorted by rank.

    Raises
    ------
    ValueError
        When ``ranks`` is not a list, an entry is not a dict, a rank is not a whole number in range, or a lag is
        neither a finite number nor None.
    """
    if not isinstance(ranks, (list, tuple)):
        raise ValueError(f"ranks must be a list, got {type(ranks).__name__}")
    rows = []
    for r in ranks:
        if not isinstance(r, dict):
            raise ValueError(f"a rank's entry must be an object, got {type(r).__name__}")
        rank, lag, host, boot = r.get("rank", -1), r.get("boundary_lag_ms"), r.get("host"), r.get("boot_id")
        rank = -1 if rank is None else rank
        if isinstance(rank, bool) or not isinstance(rank, int) or not -1 <= rank < MAX_RANK:
            raise ValueError(f"a rank must be a whole number from 0 to {MAX_RANK - 1} (or null), got {rank!r}")
        if lag is not None and (isinstance(lag, bool) or not isinstance(lag, (int, float)) or not math.isfinite(lag)):
            raise ValueError(f"rank {rank}: boundary_lag_ms must be a finite number or null, got {lag!r}")
        rows.append((rank, host if isinstance(host, str) else "", boot if isinstance(boot, str) else "",
                     math.nan if lag is None else float(lag)))
    table = pd.DataFrame(rows, columns=list(STEP_LAG_COLUMNS)).astype(STEP_LAG_COLUMNS)
    return table.sort_values("rank", kind="stable", ignore_index=True)


def job_hosts(table: pd.DataFrame) -> dict[int, str]:
    """Rank -> host of a :func:`step_lag_table`, for the ranks whose host is recorded."""
    return {int(r): h for r, h in zip(table["rank"], table["host"]) if h}


def clock_key(host: str, boot_id: str) -> str:
    """The clock a rank's trace is on: ``boot:<boot id>``, else ``host:<host>`` (:func:`job_clocks`)."""
    return f"boot:{boot_id}" if boot_id else f"host:{host}"


def job_clocks(table: pd.DataFrame) -> dict[int, str]:
    """Rank -> the clock its trace is on, of a :func:`step_lag_table`: ``boot:<boot id>``, else ``host:<host>``.

    Ranks with one key share one clock. The boot id tells apart two nodes that share a hostname and keeps together
    the containers of one node (:func:`aonkit.live.paths.boot_id`); a manifest without it (written before aonkit
    recorded it, or on a system without ``/proc``) falls back to the host's name. Ranks with neither are left out
    (each is its own clock).
    """
    return {int(r): clock_key(h, b) for r, h, b in zip(table["rank"], table["host"], table["boot_id"]) if b or h}


def read_job_manifest(folder: str | Path) -> tuple[pd.DataFrame, list[str]]:
    """The manifest's per-rank lags (:func:`step_lag_table`) and its notes.

    Raises
    ------
    TraceFormatError
        When the manifest is unreadable or not what ``aonkit trace`` writes (the error names the file).
    """
    path = Path(folder) / JOB_MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(manifest, dict):
            raise ValueError(f"a JSON object was expected, got {type(manifest).__name__}")
        notes = manifest.get("messages") or []
        if not isinstance(notes, list):
            raise ValueError("messages must be a list")
        return step_lag_table(manifest.get("ranks") or []), [str(m) for m in notes]
    except (OSError, ValueError) as exc:  # JSON, or not the shape aonkit trace writes
        raise TraceFormatError(f"not a job manifest aonkit trace wrote: {exc}; to read the traces without it, "
                               "load the rank<N>.json.gz files as a list", path=str(path)) from None  # fmt: skip


def attach_traced_job(job: TraceSet, folder: str | Path, samples: bool = True) -> TraceSet:
    """Put a traced job folder's samples on its ranks' traces, its lags, notes, hosts and clocks on ``job``; return it.

    Parameters
    ----------
    job : TraceSet
        The folder's traces (``aonkit.load(folder)`` before this step).
    folder : str or path-like
        The job folder (:data:`JOB_MANIFEST` in it).
    samples : bool
        Attach the samples (:func:`~aonkit.sources.samples.attach_samples`): a rank's own
        ``rank<N>.samples.parquet``, else the folder's :data:`JOB_SAMPLES`. A lazily loaded job passes False: its
        ranks are read when asked for, and each then gets its own (:attr:`aonkit.lazyset.LazyTraceSet.samples_from`).

    Raises
    ------
    TraceFormatError
        When the manifest or a samples file is unreadable (the error names the file).
    """
    folder = Path(folder)
    job.step_lags, job.trace_notes = read_job_manifest(folder)
    job.hosts = {r: h for r, h in job_hosts(job.step_lags).items() if r in job}
    job.clocks = {r: c for r, c in job_clocks(job.step_lags).items() if r in job}
    if samples:
        attach_rank_samples(job, folder)
    return job


def attach_rank_samples(traces: Mapping[int, Trace], folder: str | Path, tables: dict | None = None) -> None:
    """Put a traced job folder's samples on each rank's trace: its own ``rank<N>.samples.parquet``, else the job's.

    ``traces`` maps ranks to traces (a job, or the files of the folder loaded each on its own and keyed by the rank
    their names say). ``tables``, a dict the caller keeps, holds the tables read (by path, with the file's
    modification time and size), so that a caller reading ranks one at a time (:class:`~aonkit.lazyset.LazyTraceSet`)
    reads each file once. Raises :class:`~aonkit.TraceFormatError` naming a samples file that cannot be read.
    """
    from .samples import attach_samples

    folder = Path(folder)
    shared = _kept_samples(folder / JOB_SAMPLES, tables)
    for rank, trace in traces.items():
        own = _kept_samples(folder / f"rank{rank}.samples.parquet", tables)
        table = own if own is not None else shared
        if table is not None and len(table):
            attach_samples(trace, table)


def _kept_samples(path: Path, tables: dict | None) -> pd.DataFrame | None:
    """:func:`_samples`, or the table ``tables`` keeps for the file as it is now (a rewritten file replaces it)."""
    if tables is None:
        return _samples(path)
    try:
        st = path.stat()
    except OSError:
        return None
    stamp = (st.st_mtime_ns, st.st_size)
    kept = tables.get(str(path))
    if kept is None or kept[0] != stamp:
        kept = tables[str(path)] = (stamp, _samples(path))
    return kept[1]


def _samples(path: Path) -> pd.DataFrame | None:
    import pyarrow as pa

    from .samples import samples_table

    if not path.exists():
        return None
    try:
        return samples_table(pd.read_parquet(path))  # the columns and their types checked
    except (OSError, ValueError, TypeError, pa.ArrowException) as exc:
        raise TraceFormatError(f"unreadable samples ({type(exc).__name__}: {exc})", path=str(path)) from None
