"""Correlation joins between CPU-side rows and GPU rows of one rank."""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .keys import compact


@njit
def launch_pairs(stream, corr, codes, is_api):
    """Inner join, by correlation, of CPU rows and GPU rows whose correlation some API call has.

    CPU rows are ``stream == -1``, GPU rows the others; a CPU row is an API
    call when ``is_api[codes[i]]`` (a flag per name code; code -1 reads the
    last flag). Pairs come in CPU row order, then GPU row order (pandas'
    inner merge order). Returns (cpu rows, gpu rows).
    """
    n = stream.shape[0]
    slot, lo, size = compact(corr)
    wanted = np.zeros(size, np.bool_)
    is_gpu = np.empty(n, np.bool_)
    for i in range(n):
        is_gpu[i] = stream[i] != -1
        if not is_gpu[i] and is_api[codes[i]]:
            wanted[np.uintp(slot[i] - lo)] = True
    # rows of wanted correlations: GPU ones grouped by correlation (CSR) in row order, CPU ones in row order
    start = np.zeros(size + 1, np.int64)
    n_cpu = 0
    for i in range(n):
        j = np.uintp(slot[i] - lo)
        if wanted[j]:
            if is_gpu[i]:
                start[j + 1] += 1
            else:
                n_cpu += 1
    for j in range(size):
        start[j + 1] += start[j]
    fill = start[:-1].copy()
    grows = np.empty(start[size], np.int64)
    crows = np.empty(n_cpu, np.int64)
    c = 0
    total = 0
    for i in range(n):
        j = np.uintp(slot[i] - lo)
        if wanted[j]:
            if is_gpu[i]:
                grows[np.uintp(fill[j])] = i
                fill[j] += 1
            else:
                crows[c] = i
                c += 1
                total += start[j + 1] - start[j]
    cpu = np.empty(total, np.int64)
    gpu = np.empty(total, np.int64)
    k = 0
    for r in range(n_cpu):
        i = crows[r]
        j = np.uintp(slot[np.uintp(i)] - lo)
        for q in range(start[j], start[j + 1]):
            cpu[np.uintp(k)] = i
            gpu[np.uintp(k)] = grows[np.uintp(q)]
            k += 1
    return cpu, gpu


@njit
def launch_table(rank, stream, ts, dur, corr, codes, is_api):
    """HTA's launch statistics of one rank as rows of (rank, correlation, cpu dur, gpu dur, launch delay).

    The delay is GPU start - end of the CPU row, floored at 0. Returns an
    int64 array of shape (5, pairs): one row per column, so that a DataFrame
    can wrap its transpose without a copy.
    """
    cpu, gpu = launch_pairs(stream, corr, codes, is_api)
    out = np.empty((5, cpu.shape[0]), np.int64)
    for k in range(cpu.shape[0]):
        c = np.uintp(cpu[k])
        g = np.uintp(gpu[k])
        out[0, k] = rank
        out[1, k] = corr[c]
        out[2, k] = dur[c]
        out[3, k] = dur[g]
        out[4, k] = max(ts[g] - (ts[c] + dur[c]), 0)
    return out
