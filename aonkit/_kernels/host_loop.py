"""The host sampler's loop, compiled: it samples ``/proc`` at its interval without ever taking the GIL.

A Python sampling thread wakes the interpreter every tick (about 0.12% of a core at 10 Hz on the dev VM before
it reads anything) and, beside a thread running Python, waits for the GIL after each read. :func:`host_loop`
runs the whole loop in compiled code on the sampler's thread: ``clock_gettime``, two ``pread`` calls, the
parse, the ring write, then ``ppoll`` on the stop pipe until the next tick (libc, called by symbol name, so the
kernel caches like the others). Figures in ``bench/RESULTS.md`` (Session 25).

The ring is written lock-free under a per-slot sequence number, as the daemon's shared ring is
(:mod:`aonkit.live.ring`): sample ``k`` sets ``seq[k % capacity]`` to ``2k + 1``, writes the time and the
values, sets it to ``2k + 2``, then ``ctl[COUNT]`` to ``k + 1``, with a memory fence between the steps (stores
are not ordered on arm64 otherwise). :func:`ring_read` copies between fences and keeps only slots whose number
was ``2k + 2`` before and after.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.core.types import ExternalFunction
from numba.extending import intrinsic

from ._jit import njit, njit_leaf

COUNT, FAILED, LAST_BUSY, LAST_TOTAL, MEM_TOTAL_KB = 0, 1, 2, 3, 4
"""Slots of the ``ctl`` array: samples written, samples whose reads failed, the previous CPU jiffies (busy,
total; ``-1``: none yet, so the next CPU % is NaN) and the last MemTotal seen."""
CTL_SIZE = 5
READ_BYTES = 512
"""Bytes read from the start of each file: ``/proc/stat``'s first line and ``/proc/meminfo``'s first lines."""

_pread = ExternalFunction("pread", types.intp(types.intc, types.voidptr, types.uintp, types.intp))
_ppoll = ExternalFunction("ppoll", types.intc(types.voidptr, types.uintp, types.voidptr, types.intp))
_clock_gettime = ExternalFunction("clock_gettime", types.intc(types.intc, types.voidptr))
_REALTIME, _MONOTONIC = 0, 1  # clockid_t on Linux, every architecture


@intrinsic
def _fence(typingctx):
    """A sequentially consistent memory fence (orders this thread's loads and stores on every CPU)."""

    def codegen(context, builder, sig, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


@njit_leaf
def _number(buf, i, n):
    """(value, position after it) of the decimal number at or after ``buf[i]`` (spaces skipped); -1: none."""
    while i < n and (buf[i] == 32 or buf[i] == 9):
        i += 1
    v = np.int64(-1)
    while i < n and 48 <= buf[i] <= 57:
        if v >= 100_000_000_000_000_000:  # no counter of /proc is this large (and the next digit would overflow)
            return np.int64(-1), i
        v = (0 if v < 0 else v * 10) + np.int64(buf[i] - 48)
        i += 1
    return v, i


@njit_leaf
def parse_stat(buf, n, out):
    """``out[0:2]`` = (busy, total) jiffies of all CPUs from ``/proc/stat``'s first line; False when malformed.

    psutil's formulas: busy = user + nice + system + irq + softirq + steal (guest is inside user), total = busy +
    idle + iowait. The line must start ``cpu `` and hold at least these eight numbers.
    """
    if n < 4 or buf[0] != 99 or buf[1] != 112 or buf[2] != 117 or buf[3] != 32:  # "cpu "
        return False
    busy = idle = np.int64(0)
    i = 4
    for k in range(8):  # user nice system idle iowait irq softirq steal
        v, i = _number(buf, i, n)
        if v < 0 or i >= n:  # a number cut by the read's end is not trusted either
            return False
        if k == 3 or k == 4:
            idle += v
        else:
            busy += v
    out[0], out[1] = busy, busy + idle
    return True


@njit_leaf
def meminfo_kb(buf, n, key):
    """The number (kB) after the line starting with ``key`` (``b"MemAvailable:"``) in ``/proc/meminfo``; -1: none."""
    m = len(key)
    i = 0
    while i + m <= n:
        same = True
        for j in range(m):
            if buf[i + j] != key[j]:
                same = False
                break
        if same:
            v, e = _number(buf, i + m, n)
            return v if e < n and buf[e] == 32 else np.int64(-1)  # "NNN kB": a number cut by the read's end is not
        while i < n and buf[i] != 10:
            i += 1
        i += 1
    return np.int64(-1)


@njit_leaf
def host_values(stat, n_stat, mem, n_mem, mem_total_key, mem_avail_key, ctl, jiffies, out):
    """``out`` = (CPU %, memory %, used bytes) from the two files' bytes; False (``out`` NaN) when malformed.

    CPU % is over the jiffies since the previous call (``ctl[LAST_BUSY]``, ``ctl[LAST_TOTAL]``), NaN on the
    first; 0 when no jiffy passed.
    """
    out[0], out[1], out[2] = np.nan, np.nan, np.nan
    total_kb = meminfo_kb(mem, n_mem, mem_total_key)
    avail_kb = meminfo_kb(mem, n_mem, mem_avail_key)
    if not parse_stat(stat, n_stat, jiffies) or total_kb <= 0 or avail_kb < 0:
        return False
    busy, total = jiffies[0], jiffies[1]
    if ctl[LAST_TOTAL] >= 0:
        d = total - ctl[LAST_TOTAL]
        out[0] = 100.0 * (busy - ctl[LAST_BUSY]) / d if d > 0 else 0.0
    ctl[LAST_BUSY], ctl[LAST_TOTAL], ctl[MEM_TOTAL_KB] = busy, total, total_kb
    used = (total_kb - avail_kb) * 1024.0
    out[1], out[2] = 100.0 * used / (total_kb * 1024.0), used
    return True


@njit_leaf
def _now_ns(clock, tsp):
    _clock_gettime(clock, tsp.ctypes)
    return tsp[0] * 1_000_000_000 + tsp[1]


@njit
def host_loop(fd_stat, fd_mem, pollfd, interval_ns, close_min_ns, mem_total_key, mem_avail_key, ts, seq, values,
              ctl, cost):  # fmt: skip
    """Sample until ``pollfd``'s descriptor (the stop pipe) is readable; returns the samples written.

    ``pollfd`` is a ``struct pollfd`` as two int32 (fd; events | revents << 16, POLLIN). The first sample is
    taken at once; each tick stamps the sample with ``CLOCK_REALTIME`` (``time.time_ns()``, the trace's clock)
    before its first read, writes it to the ring (module docstring) and adds its wall time to ``cost`` (n,
    total, max, last ns). When the stop pipe wakes the wait, a closing sample is taken if the last one started
    at least ``close_min_ns`` ago. A read that fails or a file that does not parse gives a NaN sample and
    counts in ``ctl[FAILED]``. Ticks missed while the process was stopped are skipped, not caught up.
    """
    tsp, rel = np.zeros(2, np.int64), np.zeros(2, np.int64)
    stat, mem = np.zeros(READ_BYTES, np.uint8), np.zeros(READ_BYTES, np.uint8)
    jiffies, out = np.zeros(2, np.int64), np.zeros(3, np.float64)
    capacity = ts.shape[0]
    next_t = _now_ns(_MONOTONIC, tsp)
    closing = False
    while True:
        stamp = _now_ns(_REALTIME, tsp)
        t0 = _now_ns(_MONOTONIC, tsp)
        n_stat = _pread(fd_stat, stat.ctypes, READ_BYTES, 0)
        n_mem = _pread(fd_mem, mem.ctypes, READ_BYTES, 0)
        if n_stat < 0 or n_mem < 0 or not host_values(stat, n_stat, mem, n_mem, mem_total_key, mem_avail_key,
                                                       ctl, jiffies, out):  # fmt: skip
            out[:] = np.nan
            ctl[FAILED] += 1
        k = ctl[COUNT]
        slot = k % capacity
        seq[slot] = 2 * k + 1
        _fence()
        ts[slot] = stamp
        values[slot, :] = out
        _fence()
        seq[slot] = 2 * k + 2
        _fence()
        ctl[COUNT] = k + 1
        t1 = _now_ns(_MONOTONIC, tsp)
        c = t1 - t0
        cost[0], cost[1], cost[2], cost[3] = cost[0] + 1, cost[1] + c, max(cost[2], c), c
        if closing:
            return ctl[COUNT]
        next_t += interval_ns
        if next_t < t1 - interval_ns:  # fell behind (the process was stopped): skip the missed ticks
            next_t = t1
        while True:
            left = next_t - _now_ns(_MONOTONIC, tsp)
            if left <= 0:
                break
            rel[0], rel[1] = left // 1_000_000_000, left % 1_000_000_000
            r = _ppoll(pollfd.ctypes, 1, rel.ctypes, 0)
            if r > 0:  # stopped
                if _now_ns(_MONOTONIC, tsp) - t0 < close_min_ns:
                    return ctl[COUNT]
                closing = True
                break
            if r == 0:
                break
            # r < 0: a signal interrupted the wait (EINTR); wait out the rest of the interval


@njit
def ring_read(ts, seq, values, ctl, cursor, tries):
    """(first, end, ts, values): the samples ``first..end`` after ``cursor``, copied without a lock.

    ``first`` > ``cursor`` when the writer lapped the older ones (they are lost). A torn copy is retried up to
    ``tries`` times, after which the samples from the first torn one on are left for the next read (``end`` is
    then that sample).
    """
    capacity = ts.shape[0]
    m = values.shape[1]
    for attempt in range(tries):
        end = ctl[COUNT]
        _fence()
        begin = max(cursor, end - capacity, 0)
        n = end - begin
        out_ts, out_values = np.empty(n, np.int64), np.empty((n, m), np.float64)
        before = np.empty(n, np.int64)
        for i in range(n):
            before[i] = seq[(begin + i) % capacity]
        _fence()
        for i in range(n):
            slot = (begin + i) % capacity
            out_ts[i] = ts[slot]
            out_values[i, :] = values[slot, :]
        _fence()
        first = 0  # samples lapped before or during the copy are lost; any other mismatch is a torn copy
        torn = -1
        for i in range(n):
            k = begin + i
            if before[i] != 2 * k + 2 or seq[(begin + i) % capacity] != 2 * k + 2:
                if before[i] > 2 * k + 2 or seq[(begin + i) % capacity] > 2 * k + 2:
                    first = i + 1
                elif torn < 0:
                    torn = i
        if torn < 0 or attempt == tries - 1:
            stop = n if torn < 0 else torn
            first = min(first, stop)
            return begin + first, begin + stop, out_ts[first:stop].copy(), out_values[first:stop].copy()
    return cursor, cursor, np.empty(0, np.int64), np.empty((0, m), np.float64)
