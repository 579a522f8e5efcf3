"""Single-pass scanner from Chrome/Kineto trace JSON bytes to event columns.

The scanner validates the whole document and writes, for each object of the
``traceEvents`` array (or of a bare top-level array), one column of two
matrices (:mod:`.trace_event` parses one event; its ``R_*``, ``S_*``, ``K_*``
and ``F_*`` constants are re-exported here). Top-level keys other than the
events are recorded as byte spans (``top`` rows: key start, key end, value
start, value end). Ranges of the events array can be scanned on their own
for parallel parsing (:func:`scan_chunk`, :func:`scan_tail`).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit, njit_leaf
from .json_fast import WS, key_at, next_item, next_member
from .json_lex import E_EOF, E_NOT_TRACE, E_TRAILING, MAX_DEPTH, OK, skip_value, skip_ws
from .symbols import new_table, reserve
from .trace_event import (  # noqa: F401 - the column layout, re-exported for the readers
    F_OVERFLOW,
    F_TIME_NOT_NUMBER,
    F_TIME_OVERFLOW,
    F_TIME_ROUNDED,
    K_BP,
    K_CAT,
    K_NAME,
    K_PH,
    K_PID,
    K_TID,
    N32,
    N64,
    R_ARGS,
    R_CORR,
    R_DEVICE,
    R_DUR,
    R_EV_END,
    R_EV_START,
    R_EXT,
    R_ID,
    R_STREAM,
    R_TS,
    S_BP,
    S_CAT,
    S_FLAGS,
    S_NAME,
    S_PH,
    S_PID,
    S_TID,
    TS_MISSING,
    parse_event,
)

_TRACE_EVENTS = np.frombuffer(b'"traceEvents"', np.uint8).copy()


@njit
def _grow(i64, i32, n_ev):
    cap = i64.shape[1] * 2
    a = np.empty((N64, cap), np.int64)
    b = np.empty((N32, cap), np.int32)
    # element loops: a slice assignment compiles Numba's shape-mismatch error path (3 s)
    for r in range(N64):
        for c in range(n_ev):
            a[r, c] = i64[r, c]
    for r in range(N32):
        for c in range(n_ev):
            b[r, c] = i32[r, c]
    return a, b


# internal statuses of a range scan (never surfaced as errors)
REACHED = 100  # the next event starts exactly at ``stop``
MISMATCH = 101  # the scan passed ``stop`` without an event starting there
OVERFLOW = 102  # more events than the window ``[base, limit)`` of the output columns holds


# Calls between kernels pass constants as ``np.int64(0)``/``np.bool_(...)``, not
# bare literals: Numba compiles a callee once per distinct literal argument
# (``Literal[int](0)``), and the big scan loops were compiled up to four times.


NEED_ROOM = 103  # between the two halves of the events loop: columns or symbol table full


@njit_leaf
def _events_run(buf, i, n, stop, stack, i64, i32, base, limit, ht, sym, symh, nsym, last, n_ev, n_bad):
    """The events loop proper, compiled without NRT (no reference counting of its arrays per event).

    Returns (end, status, n_events, nsym, n_not_objects); ``NEED_ROOM`` at an
    event's ``{`` when the columns or the symbol table must grow first.
    """
    while True:
        if i >= stop:
            return i, REACHED if i == stop else MISMATCH, n_ev, nsym, n_bad
        if buf[i] == 123:
            if base + n_ev >= limit or nsym + 6 > sym.shape[0] or (nsym + 6) * 2 > ht.shape[0]:
                return i, NEED_ROOM, n_ev, nsym, n_bad
            i, err, nsym = parse_event(buf, i, n, stack, i64, i32, base + n_ev, ht, sym, symh, nsym, last)
            if err != OK:
                return i, err, n_ev, nsym, n_bad
            n_ev += 1
        else:
            i, err = skip_value(buf, i, n, stack)
            if err != OK:
                return i, err, n_ev, nsym, n_bad
            n_bad += 1
        i, closed, err = next_item(buf, i, n, 93)
        if err != OK or closed:
            return i, err, n_ev, nsym, n_bad


@njit
def _events_loop(buf, i, n, stop, stack, i64, i32, base, limit, ht, sym, symh, nsym, last):
    """Scan array items from ``i`` (the first item) to the closing ``]``, or to ``stop``.

    Event k goes to column ``base + k``. Columns grow when the window is the
    whole matrix (``limit == i64.shape[1]``); otherwise running out of the
    window ends the scan with ``OVERFLOW``.

    Returns (end, status, n_events, i64, i32, ht, sym, symh, nsym, n_not_objects);
    ``end`` is after the ``]`` when status is OK. ``n_events`` counts only
    complete events, also on error.
    """
    n_ev = np.int64(0)
    n_bad = np.int64(0)
    while True:
        i, status, n_ev, nsym, n_bad = _events_run(
            buf, i, n, stop, stack, i64, i32, base, limit, ht, sym, symh, nsym, last, n_ev, n_bad
        )
        if status != NEED_ROOM:
            return i, status, n_ev, i64, i32, ht, sym, symh, nsym, n_bad
        if base + n_ev >= limit:
            if limit != i64.shape[1] or base != 0:
                return i, OVERFLOW, n_ev, i64, i32, ht, sym, symh, nsym, n_bad
            i64, i32 = _grow(i64, i32, n_ev)
            limit = i64.shape[1]
        if nsym + 6 > sym.shape[0] or (nsym + 6) * 2 > ht.shape[0]:
            ht, sym, symh = reserve(ht, sym, symh, nsym, np.int64(6))


@njit
def _scan_events(buf, i, n, stop, stack, i64, i32, base, limit, ht, sym, symh, nsym, last):
    """Scan the events array whose ``[`` is at ``i`` (see :func:`_events_loop`)."""
    i = skip_ws(buf, i + 1, n)
    if i >= n:
        return n, E_EOF, 0, i64, i32, ht, sym, symh, nsym, 0
    if buf[i] == 93:
        return i + 1, OK, 0, i64, i32, ht, sym, symh, nsym, 0
    return _events_loop(buf, i, n, stop, stack, i64, i32, base, limit, ht, sym, symh, nsym, last)


@njit
def scan_chunk(buf, start, stop, i64, i32, base, limit):
    """Scan events from ``start`` (an event's ``{``) up to ``stop`` into columns ``[base, limit)``.

    Used for parallel parsing, with a fresh symbol table: the chunk is valid
    only if the scan of the previous chunk reaches ``start`` exactly. Returns
    (end, status, n_events, sym, n_sym, n_not_objects).
    """
    n = buf.shape[0]
    stack = np.empty(MAX_DEPTH, np.uint8)
    ht, sym, symh, last = new_table()
    i, err, n_ev, i64, i32, ht, sym, symh, nsym, n_bad = _events_loop(
        buf, start, n, stop, stack, i64, i32, base, limit, ht, sym, symh, np.int64(0), last
    )
    return i, err, n_ev, sym, nsym, n_bad


@njit
def find_event_boundary(buf, start, limit):
    """First ``{`` after ``start`` that follows ``}`` and ``,`` (whitespace between); -1 if none within ``limit``."""
    n = buf.shape[0]
    end = min(n, start + limit)
    for i in range(start, end):
        if buf[i] == 125:
            j = i + 1
            while j < n and WS[buf[j]] == 1:
                j += 1
            if j < n and buf[j] == 44:
                j += 1
                while j < n and WS[buf[j]] == 1:
                    j += 1
                if j < n and buf[j] == 123:
                    return j
    return -1


@njit
def count_event_keys(buf, start, stop):
    """Number of ``"ph"`` tokens in ``buf[start:stop]``: a cheap estimate of the event count."""
    c = 0
    n = min(stop, buf.shape[0] - 3)
    for i in range(start, n):
        if buf[i] == 34 and buf[i + 1] == 112 and buf[i + 2] == 104 and buf[i + 3] == 34:
            c += 1
    return c


@njit
def _top_members(buf, i, n, stop, stack, i64, i32, limit, ht, sym, symh, nsym, last, top, ntop, resume):
    """Members of the top-level object from ``i``; ``resume``: ``i`` is just after the events array.

    Returns (status, pos, n_events, i64, i32, ht, sym, symh, nsym, top, ntop, n_bad, layout).
    """
    n_ev = np.int64(0)
    n_bad = 0
    layout = 0 if resume else 2
    while True:
        if not resume:
            ks = i
            i, _, kl, err = key_at(buf, i, n)
            if err != OK:
                return err, i, n_ev, i64, i32, ht, sym, symh, nsym, top, ntop, n_bad, layout
            if ntop >= top.shape[0]:
                top2 = np.empty((top.shape[0] * 2, 4), np.int64)
                for r in range(ntop):
                    for c in range(4):
                        top2[r, c] = top[r, c]
                top = top2
            top[ntop, 0] = ks
            top[ntop, 1] = ks + kl + 2
            top[ntop, 2] = i
            top[ntop, 3] = -1
            ntop += 1
            is_events = kl + 2 == _TRACE_EVENTS.shape[0]
            if is_events:
                for k in range(kl + 2):
                    if buf[ks + k] != _TRACE_EVENTS[k]:
                        is_events = False
                        break
            if is_events and buf[i] == 91:
                layout = 0
                i, err, n_ev, i64, i32, ht, sym, symh, nsym, n_bad = _scan_events(
                    buf, i, n, stop, stack, i64, i32, np.int64(0), limit, ht, sym, symh, nsym, last
                )
            else:
                i, err = skip_value(buf, i, n, stack)
            if err != OK:
                return err, i, n_ev, i64, i32, ht, sym, symh, nsym, top, ntop, n_bad, layout
            top[ntop - 1, 3] = i
        resume = False
        i, closed, err = next_member(buf, i, n)
        if err != OK:
            return err, i, n_ev, i64, i32, ht, sym, symh, nsym, top, ntop, n_bad, layout
        if closed:
            i = skip_ws(buf, i, n)
            if i < n:
                return E_TRAILING, i, n_ev, i64, i32, ht, sym, symh, nsym, top, ntop, n_bad, layout
            return OK, i, n_ev, i64, i32, ht, sym, symh, nsym, top, ntop, n_bad, layout


@njit
def scan_trace(buf, i64, i32, limit, stop):
    """Scan a whole trace document (or, for parallel parsing, up to ``stop``).

    Parameters
    ----------
    buf : uint8 array
        The decompressed file.
    i64, i32 : arrays
        Output columns (``N64`` and ``N32`` rows). Events fill columns
        ``0 .. limit``; when ``limit`` is the matrices' width they grow by
        doubling, else running out ends the scan with ``OVERFLOW``.
    limit : int
        Columns available.
    stop : int
        Pause when the next event of the events array starts exactly here
        (status ``REACHED``); ``len(buf)`` for a whole scan.

    Returns
    -------
    tuple
        ``(status, pos, n_events, i64, i32, sym, n_sym, top, n_top,
        n_not_objects, layout)`` where ``layout`` is 0 for an object with
        ``traceEvents``, 1 for a bare array, 2 for an object without them.
    """
    n = buf.shape[0]
    stack = np.empty(MAX_DEPTH, np.uint8)
    ht, sym, symh, last = new_table()
    top = np.empty((16, 4), np.int64)
    i = 0
    if n >= 3 and buf[0] == 0xEF and buf[1] == 0xBB and buf[2] == 0xBF:
        i = 3
    i = skip_ws(buf, i, n)
    if i >= n:
        return E_EOF, n, 0, i64, i32, sym, 0, top, 0, 0, 2
    if buf[i] == 91:
        i, err, n_ev, i64, i32, ht, sym, symh, nsym, n_bad = _scan_events(
            buf, i, n, stop, stack, i64, i32, np.int64(0), limit, ht, sym, symh, np.int64(0), last
        )
        if err == OK:
            i = skip_ws(buf, i, n)
            if i < n:
                err = E_TRAILING
        return err, i, n_ev, i64, i32, sym, nsym, top, 0, n_bad, 1
    if buf[i] != 123:
        return E_NOT_TRACE, i, 0, i64, i32, sym, 0, top, 0, 0, 2
    i = skip_ws(buf, i + 1, n)
    if i >= n:
        return E_EOF, n, 0, i64, i32, sym, 0, top, 0, 0, 2
    if buf[i] == 125:
        i = skip_ws(buf, i + 1, n)
        return (E_TRAILING if i < n else OK), i, 0, i64, i32, sym, 0, top, 0, 0, 2
    err, i, n_ev, i64, i32, ht, sym, symh, nsym, top, ntop, n_bad, layout = _top_members(
        buf, i, n, stop, stack, i64, i32, limit, ht, sym, symh, np.int64(0), last, top, np.int64(0), np.bool_(False)
    )
    return err, i, n_ev, i64, i32, sym, nsym, top, ntop, n_bad, layout


@njit
def scan_tail(buf, i, top, ntop, layout):
    """Finish a document after its events array ended at ``i`` (parallel parsing).

    Returns (status, pos, top, n_top).
    """
    n = buf.shape[0]
    if layout == 1:
        i = skip_ws(buf, i, n)
        return (E_TRAILING if i < n else OK), i, top, ntop
    top[ntop - 1, 3] = i
    stack = np.empty(MAX_DEPTH, np.uint8)
    i64 = np.empty((N64, 1), np.int64)
    i32 = np.empty((N32, 1), np.int32)
    ht, sym, symh, last = new_table()
    err, i, _, _, _, _, _, _, _, top, ntop, _, _ = _top_members(
        buf, i, n, n, stack, i64, i32, np.int64(1), ht, sym, symh, np.int64(0), last, top, ntop, np.bool_(True)
    )
    return err, i, top, ntop


@njit
def remap(codes, mapping):
    """In place: ``codes[i] = mapping[codes[i]]``, with -1 kept as -1."""
    for i in range(codes.shape[0]):
        c = codes[i]
        if c >= 0:
            codes[i] = mapping[c]


@njit
def add_base(ts, base):
    """In place: add ``base`` to every timestamp that is not ``TS_MISSING``."""
    for i in range(ts.shape[0]):
        if ts[i] != TS_MISSING:
            ts[i] += base
