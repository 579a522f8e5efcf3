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


@njit
def launch_candidates(codes, is_gpu, is_launch, corr):
    """GPU rows and launch-call rows, and their correlations, for a first-match join by correlation.

    A row is a GPU event when ``is_gpu[codes[i]]`` and a launch call when
    ``is_launch[codes[i]]`` with a correlation of 0 or more (flags per
    category code; code -1 reads the last flag). One pass to pick the rows.
    Returns (GPU rows, launch rows + 1, the launch rows' correlations, the GPU
    rows' correlations): a first-match join of the GPU rows' correlations on
    them gives 1 + the launch row, and 0 where none matches (no launch has a
    negative correlation), so 1 less is the launch row or -1.
    """
    n = codes.shape[0]
    last = is_gpu.shape[0] - 1
    take = np.empty(last + 2, np.uint8)  # per code + 1 (code -1 first): 1 GPU event, 2 launch call, 0 neither
    for c in range(-1, last):
        flag = np.uintp(last if c < 0 else c)  # code -1 reads the last flag
        take[np.uintp(c + 1)] = 1 if is_gpu[flag] else (2 if is_launch[flag] else 0)
    if n >= 2**31:
        raise ValueError("launch_candidates: at most 2**31 - 1 events")
    gpu_buf = np.empty(n + 1, np.int32)  # one branch-free pass (GPU and CPU rows interleave): every row is
    launch_buf = np.empty(n + 1, np.int32)  # written to both buffers, and the counts say which writes stay
    n_gpu = np.uintp(0)
    n_launch = np.uintp(0)
    for i in range(n):
        f = take[np.uintp(codes[i] + 1)]
        gpu_buf[n_gpu] = i
        launch_buf[n_launch] = i
        n_gpu += np.uintp(f & 1)
        n_launch += np.uintp((f >> 1) & (corr[i] >= 0))
    gpu = gpu_buf[:n_gpu].astype(np.int64)
    launch_rows = np.empty(n_launch, np.int64)
    keys = np.empty(n_launch, np.int64)
    for k in range(n_launch):
        r = launch_buf[k]
        launch_rows[k] = r + 1
        keys[k] = corr[np.uintp(r)]
    probe = np.empty(n_gpu, np.int64)
    for g in range(n_gpu):
        probe[g] = corr[np.uintp(gpu[g])]
    return gpu, launch_rows, keys, probe


@njit
def launch_columns(gpu, launch, codes, api_code, ts, dur, corr):
    """The GPU events launched by an API of interest, with their launch statistics.

    ``api_code[codes[launch]]`` (a code per name code; -1: not counted) picks
    the rows. Returns (gpu, launch, api code, correlation, CPU duration,
    GPU duration, launch delay = GPU start - end of the call).
    """
    n = gpu.shape[0]
    last = api_code.shape[0] - 1
    keep = np.zeros(n, np.bool_)
    m = 0
    for j in range(n):
        lr = launch[j]
        if lr >= 0:
            c = codes[np.uintp(lr)]
            if api_code[np.uintp(last if c < 0 else c)] >= 0:
                keep[j] = True
                m += 1
    g_out = np.empty(m, np.int64)
    l_out = np.empty(m, np.int64)
    a_out = np.empty(m, np.int64)
    c_out = np.empty(m, np.int64)
    cpu_dur = np.empty(m, np.int64)
    gpu_dur = np.empty(m, np.int64)
    delay = np.empty(m, np.int64)
    k = 0
    for j in range(n):
        if not keep[j]:
            continue
        g = np.uintp(gpu[j])
        lr = np.uintp(launch[j])
        c = codes[lr]
        g_out[k] = gpu[j]
        l_out[k] = launch[j]
        a_out[k] = api_code[np.uintp(last if c < 0 else c)]
        c_out[k] = corr[g]
        cpu_dur[k] = dur[lr]
        gpu_dur[k] = dur[g]
        delay[k] = ts[g] - (ts[lr] + dur[lr])
        k += 1
    return g_out, l_out, a_out, c_out, cpu_dur, gpu_dur, delay


@njit
def gpu_columns(rows, ts, dur, device, stream, name_codes, cat_codes):
    """The columns of the GPU events ``rows`` with ``dur >= 0``, gathered in one pass over ``rows``.

    Returns (rows, ts, dur, device, stream, name codes, category codes) of
    the kept events, codes as int64.
    """
    n = rows.shape[0]
    out_rows = np.empty(n, np.int64)
    o_ts = np.empty(n, np.int64)
    o_dur = np.empty(n, np.int64)
    o_dev = np.empty(n, np.int64)
    o_st = np.empty(n, np.int64)
    o_name = np.empty(n, np.int64)
    o_cat = np.empty(n, np.int64)
    k = np.uintp(0)
    for j in range(n):
        r = np.uintp(rows[j])
        d = dur[r]
        out_rows[k] = r
        o_ts[k] = ts[r]
        o_dur[k] = d
        o_dev[k] = device[r]
        o_st[k] = stream[r]
        o_name[k] = name_codes[r]
        o_cat[k] = cat_codes[r]
        k += np.uintp(d >= 0)
    return out_rows[:k], o_ts[:k], o_dur[:k], o_dev[:k], o_st[:k], o_name[:k], o_cat[:k]
