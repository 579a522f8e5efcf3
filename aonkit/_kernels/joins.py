"""Correlation joins between CPU-side rows and GPU rows of one rank."""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .keys import compact


@njit
def launch_pairs(stream, corr, is_api):
    """Inner join, by correlation, of CPU rows and GPU rows whose correlation some ``is_api`` row has.

    CPU rows are ``stream == -1``, GPU rows the others. Pairs come in CPU row
    order, then GPU row order (pandas' inner merge order). Returns (cpu rows,
    gpu rows).
    """
    n = stream.shape[0]
    slot, lo, size = compact(corr, np.ones(n, np.bool_))
    wanted = np.zeros(size, np.bool_)
    for i in range(n):
        if is_api[i] and stream[i] == -1:
            wanted[slot[i] - lo] = True
    # GPU rows of wanted correlations, grouped by correlation (CSR), in row order
    start = np.zeros(size + 1, np.int64)
    for i in range(n):
        if stream[i] != -1 and wanted[slot[i] - lo]:
            start[slot[i] - lo + 1] += 1
    for j in range(size):
        start[j + 1] += start[j]
    fill = start[:-1].copy()
    grows = np.empty(start[size], np.int64)
    for i in range(n):
        if stream[i] != -1 and wanted[slot[i] - lo]:
            j = slot[i] - lo
            grows[fill[j]] = i
            fill[j] += 1
    total = 0
    for i in range(n):
        if stream[i] == -1 and wanted[slot[i] - lo]:
            total += start[slot[i] - lo + 1] - start[slot[i] - lo]
    cpu = np.empty(total, np.int64)
    gpu = np.empty(total, np.int64)
    k = 0
    for i in range(n):
        if stream[i] == -1 and wanted[slot[i] - lo]:
            j = slot[i] - lo
            for m in range(start[j], start[j + 1]):
                cpu[k] = i
                gpu[k] = grows[m]
                k += 1
    return cpu, gpu


@njit
def launch_table(rank, stream, ts, dur, corr, is_api):
    """HTA's launch statistics of one rank as rows of (rank, correlation, cpu dur, gpu dur, launch delay).

    The delay is GPU start - end of the CPU row, floored at 0. Returns an
    int64 array of shape (5, pairs): one row per column, so that a DataFrame
    can wrap its transpose without a copy.
    """
    cpu, gpu = launch_pairs(stream, corr, is_api)
    out = np.empty((5, cpu.shape[0]), np.int64)
    for k in range(cpu.shape[0]):
        c = cpu[k]
        g = gpu[k]
        out[0, k] = rank
        out[1, k] = corr[c]
        out[2, k] = dur[c]
        out[3, k] = dur[g]
        out[4, k] = max(ts[g] - (ts[c] + dur[c]), 0)
    return out
