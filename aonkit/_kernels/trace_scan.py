"""Single-pass scanner from Chrome/Kineto trace JSON bytes to event columns.

The scanner validates the whole document and writes, for each object of the
``traceEvents`` array (or of a bare top-level array), one column of two
matrices: ``i64`` (rows ``R_*``: byte span, times, typed ids) and ``i32`` (rows
``S_*``: symbol ids, flags). ``ph``, ``cat``, ``name``, ``pid``, ``tid`` and
``bp`` values are interned by their raw JSON token bytes (:mod:`.symbols`); the
Python wrapper decodes each distinct token once. Top-level keys other than the
events are recorded as byte spans (``top`` rows: key start, key end, value
start, value end).

The common shapes (plain strings, whitespace, short numbers) are lexed inline
here with lookup tables; escapes, containers and unusual numbers go through
the validating helpers of :mod:`.json_lex`.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit, njit_inline, njit_leaf
from .json_lex import (
    E_EOF,
    E_NOT_TRACE,
    E_SYNTAX,
    E_TRAILING,
    MAX_DEPTH,
    OK,
    scan_scaled,
    scan_string,
    skip_any,
    skip_value,
    skip_ws,
)
from .symbols import _word, intern, new_table, reserve

# rows of the int64 matrix
R_EV_START, R_EV_END, R_TS, R_DUR, R_CORR, R_EXT, R_STREAM, R_DEVICE, R_ID = range(9)
N64 = 9
# rows of the int32 matrix (symbol ids in kind order, then flags)
S_PH, S_CAT, S_NAME, S_PID, S_TID, S_BP, S_FLAGS = range(7)
N32 = 7
K_PH, K_CAT, K_NAME, K_PID, K_TID, K_BP = range(6)

# per-event flag bits
F_TIME_ROUNDED = 1  # ts/dur had digits below 1 ns
F_TIME_NOT_NUMBER = 2  # ts/dur present but not a number
F_OVERFLOW = 4  # a typed integer did not fit int64
F_TIME_OVERFLOW = 8  # ts/dur did not fit int64 ns

TS_MISSING = np.int64(-9223372036854775808)

_WS = np.zeros(256, np.uint8)
_WS[[9, 10, 13, 32]] = 1
_STR_STOP = np.zeros(256, np.uint8)  # bytes that end the fast path inside a string
_STR_STOP[:32] = 1
_STR_STOP[[34, 92]] = 1
_NUM_START = np.zeros(256, np.uint8)
_NUM_START[48:58] = 1
_NUM_START[45] = 1

# event keys -> codes 0..5 (symbol kinds), 6 ts, 7 dur, 8 id, 9 args
_A_EXT = np.frombuffer(b"xternal id", np.uint8).copy()
_A_CORR = np.frombuffer(b"correlation", np.uint8).copy()
_TRACE_EVENTS = np.frombuffer(b'"traceEvents"', np.uint8).copy()


@njit_inline
def _key_id(buf, s, ln):
    """Classify an event key (inner bytes ``buf[s:s+ln]``); -1 for others."""
    if ln == 2:
        a, b = buf[s], buf[s + 1]
        if a == 112 and b == 104:
            return 0  # ph
        if a == 116 and b == 115:
            return 6  # ts
        if a == 105 and b == 100:
            return 8  # id
        if a == 98 and b == 112:
            return 5  # bp
    elif ln == 3:
        a, b, c = buf[s], buf[s + 1], buf[s + 2]
        if a == 99 and b == 97 and c == 116:
            return 1  # cat
        if b == 105 and c == 100:
            if a == 112:
                return 3  # pid
            if a == 116:
                return 4  # tid
        if a == 100 and b == 117 and c == 114:
            return 7  # dur
    elif ln == 4:
        if buf[s] == 110 and buf[s + 1] == 97 and buf[s + 2] == 109 and buf[s + 3] == 101:
            return 2  # name
        if buf[s] == 97 and buf[s + 1] == 114 and buf[s + 2] == 103 and buf[s + 3] == 115:
            return 9  # args
    return -1


@njit_inline
def _arg_key_id(buf, s, ln):
    """0 correlation, 1 "External id", 2 "external id", 3 stream, 4 device, -1 other."""
    if ln == 11:
        if buf[s + 1] == 120:
            ok = True
            for k in range(10):
                if buf[s + 1 + k] != _A_EXT[k]:
                    ok = False
                    break
            if ok:
                if buf[s] == 69:
                    return 1
                if buf[s] == 101:
                    return 2
        elif buf[s] == 99:
            for k in range(11):
                if buf[s + k] != _A_CORR[k]:
                    return -1
            return 0
    elif ln == 6:
        if (
            buf[s] == 115 and buf[s + 1] == 116 and buf[s + 2] == 114
            and buf[s + 3] == 101 and buf[s + 4] == 97 and buf[s + 5] == 109
        ):  # fmt: skip
            return 3
        if (
            buf[s] == 100 and buf[s + 1] == 101 and buf[s + 2] == 118
            and buf[s + 3] == 105 and buf[s + 4] == 99 and buf[s + 5] == 101
        ):  # fmt: skip
            return 4
    return -1


_ONES = np.uint64(0x0101010101010101)
_HIGH = np.uint64(0x8080808080808080)
_QUOTES = np.uint64(0x2222222222222222)
_BSLASHES = np.uint64(0x5C5C5C5C5C5C5C5C)
_SPACES = np.uint64(0x2020202020202020)


@njit_inline
def _string_end(buf, i, n):
    """End (after the closing quote) of the string opening at ``i``: (end, err).

    Skips 8 bytes at a time while a word holds no quote, backslash or control
    byte (the classic has-zero-byte / has-less-than bit tricks, exact as tests).
    """
    j = i + 1
    while j + 8 <= n:
        w = _word(buf, j)
        q = w ^ _QUOTES
        b = w ^ _BSLASHES
        hit = ((q - _ONES) & ~q) | ((b - _ONES) & ~b) | ((w - _SPACES) & ~w)
        if hit & _HIGH:
            break
        j += 8
    while j < n and _STR_STOP[buf[j]] == 0:
        j += 1
    if j < n and buf[j] == 34:
        return j + 1, OK
    return scan_string(buf, i, n)


@njit_inline
def _key(buf, i, n):
    """Scan ``"key" :`` at ``i`` and the whitespace after it. Returns (value pos, key start, key len, err)."""
    if buf[i] != 34:
        return i, 0, 0, E_SYNTAX
    j, err = _string_end(buf, i, n)
    if err != OK:
        return j, 0, 0, err
    ks = i + 1
    kl = j - 1 - ks
    while j < n and _WS[buf[j]] == 1:
        j += 1
    if j >= n:
        return n, 0, 0, E_EOF
    if buf[j] != 58:
        return j, 0, 0, E_SYNTAX
    j += 1
    while j < n and _WS[buf[j]] == 1:
        j += 1
    if j >= n:
        return n, 0, 0, E_EOF
    return j, ks, kl, OK


@njit_inline
def _value_end(buf, i, n, stack):
    """End of the value at ``i`` (strings and plain integers on the fast path): (end, err)."""
    c = buf[i]
    if c == 34:
        return _string_end(buf, i, n)
    if 49 <= c <= 57:  # an integer without leading zero, sign, fraction or exponent
        j = i + 1
        while j < n and 48 <= buf[j] <= 57:
            j += 1
        if j < n and buf[j] != 46 and buf[j] != 101 and buf[j] != 69:
            return j, OK
    return skip_any(buf, i, n, stack)


@njit_inline
def _next_item(buf, i, n, close):
    """After an item's value: skip whitespace and ``,`` or the ``close`` byte. Returns (pos, closed, err)."""
    while i < n and _WS[buf[i]] == 1:
        i += 1
    if i >= n:
        return n, False, E_EOF
    c = buf[i]
    if c == 44:
        i += 1
        while i < n and _WS[buf[i]] == 1:
            i += 1
        if i >= n:
            return n, False, E_EOF
        return i, False, OK
    if c == close:
        return i + 1, True, OK
    return i, False, E_SYNTAX


@njit_inline
def _next_member(buf, i, n):
    """After an object member's value (see :func:`_next_item`)."""
    return _next_item(buf, i, n, 125)


@njit_leaf
def _parse_args(buf, i, n, stack, i64, i32, row):
    """Parse the args object at ``i`` (a ``{``), filling the typed arg rows."""
    ext_upper = np.int64(-1)
    ext_lower = np.int64(-1)
    has_upper = False
    i += 1
    while i < n and _WS[buf[i]] == 1:
        i += 1
    if i >= n:
        return n, E_EOF
    if buf[i] == 125:
        return i + 1, OK
    while True:
        i, ks, kl, err = _key(buf, i, n)
        if err != OK:
            return i, err
        akey = _arg_key_id(buf, ks, kl)
        if akey < 0:
            i, err = _value_end(buf, i, n, stack)
            if err != OK:
                return i, err
        else:
            v = np.int64(-1)
            if _NUM_START[buf[i]] == 1 and not (buf[i] == 45 and i + 1 < n and buf[i + 1] == 73):
                i, err, v, st, is_int = scan_scaled(buf, i, n, 0)
                if err != OK:
                    return i, err
                if not is_int:
                    v = np.int64(-1)
                elif st == 2:
                    v = np.int64(-1)
                    i32[S_FLAGS, row] |= F_OVERFLOW
            else:
                i, err = _value_end(buf, i, n, stack)
                if err != OK:
                    return i, err
            if akey == 0:
                i64[R_CORR, row] = v
            elif akey == 1:
                ext_upper = v
                has_upper = True
            elif akey == 2:
                ext_lower = v
            elif akey == 3:
                i64[R_STREAM, row] = v
            else:
                i64[R_DEVICE, row] = v
        i, closed, err = _next_member(buf, i, n)
        if err != OK:
            return i, err
        if closed:
            i64[R_EXT, row] = ext_upper if has_upper else ext_lower
            return i, OK


@njit_leaf
def _time_value(buf, i, n, stack, i64, i32, row, r):
    """Parse ts/dur at ``i`` into ``i64[r, row]`` as exact ns."""
    missing = TS_MISSING if r == R_TS else np.int64(-1)
    if _NUM_START[buf[i]] == 1 and not (buf[i] == 45 and i + 1 < n and buf[i + 1] == 73):
        j, err, v, st, _ = scan_scaled(buf, i, n, 3)
        if err != OK:
            return j, err
        if st == 2:
            i64[r, row] = missing
            i32[S_FLAGS, row] |= F_TIME_OVERFLOW
        else:
            i64[r, row] = v
            if st == 1:
                i32[S_FLAGS, row] |= F_TIME_ROUNDED
        return j, OK
    j, err = skip_any(buf, i, n, stack)
    i64[r, row] = missing
    i32[S_FLAGS, row] |= F_TIME_NOT_NUMBER
    return j, err


@njit_leaf
def _parse_event(buf, i, n, stack, i64, i32, row, ht, sym, symh, nsym, last):
    """Parse the event object at ``i`` into column ``row``. Returns (end, err, nsym)."""
    i64[R_EV_START, row] = i
    for r in range(R_TS, N64):
        i64[r, row] = -1
    i64[R_TS, row] = TS_MISSING
    for r in range(N32):
        i32[r, row] = -1
    i32[S_FLAGS, row] = 0
    i += 1
    while i < n and _WS[buf[i]] == 1:
        i += 1
    if i >= n:
        return n, E_EOF, nsym
    if buf[i] == 125:
        i64[R_EV_END, row] = i + 1
        return i + 1, OK, nsym
    while True:
        i, ks, kl, err = _key(buf, i, n)
        if err != OK:
            return i, err, nsym
        key = _key_id(buf, ks, kl)
        if 0 <= key <= 5:
            vs = i
            i, err = _value_end(buf, i, n, stack)
            if err != OK:
                return i, err, nsym
            if buf[vs] == 110:  # null
                i32[key, row] = -1
            else:
                sid, nsym = intern(buf, vs, i, key, ht, sym, symh, nsym, last)
                i32[key, row] = sid
        elif key == 6 or key == 7:
            i, err = _time_value(buf, i, n, stack, i64, i32, row, R_TS if key == 6 else R_DUR)
            if err != OK:
                return i, err, nsym
        elif key == 9 and buf[i] == 123:
            for r in range(R_CORR, R_ID):
                i64[r, row] = -1
            i, err = _parse_args(buf, i, n, stack, i64, i32, row)
            if err != OK:
                return i, err, nsym
        elif key == 8 and _NUM_START[buf[i]] == 1 and not (buf[i] == 45 and i + 1 < n and buf[i + 1] == 73):
            i, err, v, st, is_int = scan_scaled(buf, i, n, 0)
            if err != OK:
                return i, err, nsym
            i64[R_ID, row] = v if is_int and st != 2 else -1
            if is_int and st == 2:
                i32[S_FLAGS, row] |= F_OVERFLOW
        else:
            if key == 9:
                for r in range(R_CORR, R_ID):
                    i64[r, row] = -1
            elif key == 8:
                i64[R_ID, row] = -1
            i, err = _value_end(buf, i, n, stack)
            if err != OK:
                return i, err, nsym
        i, closed, err = _next_member(buf, i, n)
        if err != OK:
            return i, err, nsym
        if closed:
            i64[R_EV_END, row] = i
            return i, OK, nsym


@njit
def _grow(i64, i32, n_ev):
    cap = i64.shape[1] * 2
    a = np.empty((N64, cap), np.int64)
    a[:, :n_ev] = i64[:, :n_ev]
    b = np.empty((N32, cap), np.int32)
    b[:, :n_ev] = i32[:, :n_ev]
    return a, b


# internal statuses of a range scan (never surfaced as errors)
REACHED = 100  # the next event starts exactly at ``stop``
MISMATCH = 101  # the scan passed ``stop`` without an event starting there
OVERFLOW = 102  # more events than the window ``[base, limit)`` of the output columns holds


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
    n_ev = 0
    n_bad = 0
    while True:
        if i >= stop:
            return i, REACHED if i == stop else MISMATCH, n_ev, i64, i32, ht, sym, symh, nsym, n_bad
        if buf[i] == 123:
            if base + n_ev >= limit:
                if limit != i64.shape[1] or base != 0:
                    return i, OVERFLOW, n_ev, i64, i32, ht, sym, symh, nsym, n_bad
                i64, i32 = _grow(i64, i32, n_ev)
                limit = i64.shape[1]
            if nsym + 6 > sym.shape[0] or (nsym + 6) * 2 > ht.shape[0]:
                ht, sym, symh = reserve(ht, sym, symh, nsym, 6)
            i, err, nsym = _parse_event(buf, i, n, stack, i64, i32, base + n_ev, ht, sym, symh, nsym, last)
            if err != OK:
                return i, err, n_ev, i64, i32, ht, sym, symh, nsym, n_bad
            n_ev += 1
        else:
            i, err = skip_value(buf, i, n, stack)
            if err != OK:
                return i, err, n_ev, i64, i32, ht, sym, symh, nsym, n_bad
            n_bad += 1
        i, closed, err = _next_item(buf, i, n, 93)
        if err != OK or closed:
            return i, err, n_ev, i64, i32, ht, sym, symh, nsym, n_bad


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
        buf, start, n, stop, stack, i64, i32, base, limit, ht, sym, symh, 0, last
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
            while j < n and _WS[buf[j]] == 1:
                j += 1
            if j < n and buf[j] == 44:
                j += 1
                while j < n and _WS[buf[j]] == 1:
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
    n_ev = 0
    n_bad = 0
    layout = 0 if resume else 2
    while True:
        if not resume:
            ks = i
            i, _, kl, err = _key(buf, i, n)
            if err != OK:
                return err, i, n_ev, i64, i32, ht, sym, symh, nsym, top, ntop, n_bad, layout
            if ntop >= top.shape[0]:
                top2 = np.empty((top.shape[0] * 2, 4), np.int64)
                top2[:ntop] = top[:ntop]
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
                    buf, i, n, stop, stack, i64, i32, 0, limit, ht, sym, symh, nsym, last
                )
            else:
                i, err = skip_value(buf, i, n, stack)
            if err != OK:
                return err, i, n_ev, i64, i32, ht, sym, symh, nsym, top, ntop, n_bad, layout
            top[ntop - 1, 3] = i
        resume = False
        i, closed, err = _next_member(buf, i, n)
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
            buf, i, n, stop, stack, i64, i32, 0, limit, ht, sym, symh, 0, last
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
        buf, i, n, stop, stack, i64, i32, limit, ht, sym, symh, 0, last, top, 0, False
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
        buf, i, n, n, stack, i64, i32, 1, ht, sym, symh, 0, last, top, ntop, True
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
