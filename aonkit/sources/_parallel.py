"""Speculative parallel scanning of one trace on several threads.

The buffer is cut at places that look like event boundaries (``}`` ``,`` ``{``).
The first piece is scanned from the top by :func:`scan_trace`, which pauses
when the next event starts exactly at the first cut; every other piece is
scanned by :func:`scan_chunk` from its cut to the next one, all at once (the
kernels release the GIL). A piece counts only if the scan before it stopped
exactly at its cut, which proves the cut is a real event boundary; otherwise
the whole buffer is scanned again on one thread, so the result is always the
one the sequential scan gives.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from .._kernels import trace_scan as ks

MIN_PARALLEL_BYTES = 16 * 1024 * 1024
"""Buffers smaller than this are scanned on one thread."""
_SEARCH = 4 * 1024 * 1024


class Scan(NamedTuple):
    """What the scanner found (see :func:`aonkit._kernels.trace_scan.scan_trace`)."""

    err: int
    pos: int
    n_ev: int
    i64: np.ndarray
    i32: np.ndarray
    sym: np.ndarray
    nsym: int
    top: np.ndarray
    ntop: int
    n_bad: int
    layout: int


def default_threads(nbytes: int) -> int:
    """Threads worth using for a buffer of ``nbytes``."""
    if nbytes < MIN_PARALLEL_BYTES:
        return 1
    return max(1, min(os.cpu_count() or 1, 8, nbytes // (MIN_PARALLEL_BYTES // 2)))


_SAMPLE = 1 << 16


def estimate_events(buf: np.ndarray, lo: int, hi: int) -> int:
    """Event slots to allocate for ``buf[lo:hi]``.

    ``"ph"`` keys are counted exactly in small ranges and estimated from 16
    spread 64 KiB samples (+15%) in large ones: within 5% on the shared
    traces, whose event density varies along the file. A sequential scan grows
    its columns if this falls short; a parallel piece that overflows its
    window makes the whole scan run again on one thread.
    """
    size = hi - lo
    if size <= 16 * _SAMPLE:
        return int(ks.count_event_keys(buf, lo, hi)) + 16
    starts = [lo + (size - _SAMPLE) * k // 15 for k in range(16)]
    found = sum(int(ks.count_event_keys(buf, s, s + _SAMPLE)) for s in starts)
    return int(found / (16 * _SAMPLE) * size * 1.15) + 1024


def _columns(width: int) -> tuple[np.ndarray, np.ndarray]:
    width = max(width, 16)
    return np.empty((ks.N64, width), np.int64), np.empty((ks.N32, width), np.int32)


def sequential(buf: np.ndarray) -> Scan:
    """Scan the whole buffer on this thread."""
    n = buf.shape[0]
    i64, i32 = _columns(estimate_events(buf, 0, n))
    return Scan(*ks.scan_trace(buf, i64, i32, i64.shape[1], n))


def _cuts(buf: np.ndarray, threads: int) -> list[int]:
    n = buf.shape[0]
    cuts: list[int] = []
    for k in range(1, threads):
        c = int(ks.find_event_boundary(buf, n * k // threads, _SEARCH))
        if c > (cuts[-1] if cuts else 0):
            cuts.append(c)
    return cuts


def scan(buf: np.ndarray, threads: int | None = None) -> Scan:
    """Scan ``buf`` on up to ``threads`` threads; identical to :func:`sequential`.

    Every piece writes its events straight into its own window of one shared
    pair of column matrices (sized from sampled estimates); the windows are
    closed up afterwards, so no piece's columns are copied into a new array.
    """
    threads = default_threads(buf.shape[0]) if threads is None else threads
    cuts = _cuts(buf, threads) if threads > 1 else []
    if not cuts:
        return sequential(buf)
    bounds = [0, *cuts, buf.shape[0]]
    sizes = [estimate_events(buf, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    i64, i32 = _columns(offsets[-1])
    with ThreadPoolExecutor(len(cuts)) as pool:
        futures = [
            pool.submit(ks.scan_chunk, buf, bounds[k], bounds[k + 1], i64, i32, offsets[k], offsets[k + 1])
            for k in range(1, len(bounds) - 1)
        ]
        first = Scan(*ks.scan_trace(buf, i64, i32, offsets[1], cuts[0]))
        chunks = [f.result() for f in futures]
    if first.err in (ks.MISMATCH, ks.OVERFLOW):
        return sequential(buf)  # the first cut was not an event boundary, or the estimate fell short
    if first.err != ks.REACHED:
        return first  # the document ended (or failed) before the first cut: that is the answer
    return _combine(buf, first, chunks, offsets)


def _combine(buf: np.ndarray, first: Scan, chunks: list[tuple], offsets: list[int]) -> Scan:
    parts = [(0, first.sym, first.nsym, first.n_ev)]
    n_bad = first.n_bad
    err, pos, top, ntop = ks.REACHED, first.pos, first.top, first.ntop
    for k, (end, status, n_ev, sym, nsym, bad) in enumerate(chunks, start=1):
        if status in (ks.MISMATCH, ks.OVERFLOW):
            return sequential(buf)  # a cut was not an event boundary, or an estimate fell short
        parts.append((offsets[k], sym, nsym, n_ev))
        n_bad += bad
        if status == ks.REACHED:
            continue
        if status == 0:  # the events array closed here: finish the document
            err, pos, top, ntop = ks.scan_tail(buf, end, top, ntop, first.layout)
        else:  # a real error (or the end of a truncated file) inside this piece
            err, pos = status, end
        break
    total, sym = _merge(buf, first.i64, first.i32, parts)
    return Scan(err, pos, total, first.i64, first.i32, sym, sym.shape[0], top, ntop, n_bad, first.layout)


def _merge(buf: np.ndarray, i64: np.ndarray, i32: np.ndarray, parts: list[tuple]) -> tuple[int, np.ndarray]:
    """Re-key each piece's symbol ids into one table and close up the pieces' column windows in place."""
    index: dict[tuple[int, bytes], int] = {}
    rows: list[tuple[int, int, int]] = []
    dst = 0
    for k, (base, sym, nsym, n_ev) in enumerate(parts):
        mapping = np.empty(nsym, np.int32)
        for sid in range(nsym):
            s, e, kind = (int(x) for x in sym[sid])
            key = (kind, buf[s:e].tobytes())
            gid = index.get(key)
            if gid is None:
                gid = index[key] = len(rows)
                rows.append((s, e, kind))
            mapping[sid] = gid
        if k > 0:
            for r in range(ks.S_FLAGS):
                ks.remap(i32[r, base : base + n_ev], mapping)
        if base != dst:
            i64[:, dst : dst + n_ev] = i64[:, base : base + n_ev]
            i32[:, dst : dst + n_ev] = i32[:, base : base + n_ev]
        dst += n_ev
    return dst, np.array(rows, dtype=np.int64).reshape(-1, 3)
