"""Single-pass scanner from Chrome/Kineto trace JSON bytes to event columns.

The scanner validates the whole document and, for each object of the
``traceEvents`` array (or of a bare top-level array), writes one column of
``cols`` (see the ``C_*`` row indices). Strings are not decoded here: ``ph``,
``cat``, ``name``, ``pid``, ``tid`` and ``bp`` values are interned by their raw
JSON token bytes into a symbol table (``sym`` rows: start, end, kind), which the
Python wrapper decodes once per distinct token. Top-level keys other than the
events are recorded as byte spans (``top`` rows: key start, key end, value
start, value end) for the wrapper to decode.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit, njit_inline
from .json_lex import (
    E_EOF,
    E_NOT_TRACE,
    E_SYNTAX,
    E_TRAILING,
    MAX_DEPTH,
    OK,
    parse_scaled,
    scan_number,
    scan_scaled,
    scan_string,
    skip_any,
    skip_ws,
)

# rows of the column matrix
C_EV_START, C_EV_END, C_ARGS_START, C_ARGS_END = 0, 1, 2, 3
C_PH, C_CAT, C_NAME, C_PID, C_TID, C_BP = 4, 5, 6, 7, 8, 9
C_TS, C_DUR, C_CORR, C_EXT, C_STREAM, C_DEVICE, C_ID, C_FLAGS = 10, 11, 12, 13, 14, 15, 16, 17
NCOL = 18

# symbol kinds (same order as C_PH..C_BP)
K_PH, K_CAT, K_NAME, K_PID, K_TID, K_BP = 0, 1, 2, 3, 4, 5

# per-event flag bits
F_TIME_ROUNDED = 1  # ts/dur had digits below 1 ns
F_TIME_NOT_NUMBER = 2  # ts/dur present but not a number
F_OVERFLOW = 4  # a typed integer did not fit int64
F_TIME_OVERFLOW = 8  # ts/dur did not fit int64 ns

TS_MISSING = np.int64(-9223372036854775808)

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@njit_inline
def _hash(buf, s, e, kind):
    h = _FNV_OFFSET ^ np.uint64(kind + 1)
    for k in range(s, e):
        h = (h ^ np.uint64(buf[k])) * _FNV_PRIME
    return h


@njit
def _intern(buf, s, e, kind, ht, sym, symh, nsym):
    """Id of the token ``buf[s:e]`` of ``kind``; adds it if new. Capacity is the caller's."""
    h = _hash(buf, s, e, kind)
    mask = ht.shape[0] - 1
    slot = np.int64(h & np.uint64(mask))
    ln = e - s
    while True:
        sid = ht[slot]
        if sid < 0:
            ht[slot] = nsym
            sym[nsym, 0] = s
            sym[nsym, 1] = e
            sym[nsym, 2] = kind
            symh[nsym] = h
            return nsym, nsym + 1
        if symh[sid] == h and sym[sid, 2] == kind and sym[sid, 1] - sym[sid, 0] == ln:
            o = sym[sid, 0]
            same = True
            for k in range(ln):
                if buf[o + k] != buf[s + k]:
                    same = False
                    break
            if same:
                return sid, nsym
        slot = (slot + 1) & mask


@njit
def _rebuild_table(sym, symh, nsym, size):
    ht = np.full(size, -1, np.int64)
    mask = size - 1
    for sid in range(nsym):
        slot = np.int64(symh[sid] & np.uint64(mask))
        while ht[slot] >= 0:
            slot = (slot + 1) & mask
        ht[slot] = sid
    return ht


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


_A_CORR = np.frombuffer(b"correlation", np.uint8).copy()
_A_EXT = np.frombuffer(b"xternal id", np.uint8).copy()
_A_STREAM = np.frombuffer(b"stream", np.uint8).copy()
_A_DEVICE = np.frombuffer(b"device", np.uint8).copy()


@njit_inline
def _eq(buf, s, lit):
    for k in range(lit.shape[0]):
        if buf[s + k] != lit[k]:
            return False
    return True


@njit_inline
def _arg_key_id(buf, s, ln):
    """0 correlation, 1 "External id", 2 "external id", 3 stream, 4 device, -1 other."""
    if ln == 11:
        if _eq(buf, s, _A_CORR):
            return 0
        if _eq(buf, s + 1, _A_EXT):
            if buf[s] == 69:
                return 1
            if buf[s] == 101:
                return 2
    elif ln == 6:
        if _eq(buf, s, _A_STREAM):
            return 3
        if _eq(buf, s, _A_DEVICE):
            return 4
    return -1


@njit_inline
def _is_number_start(buf, i, n):
    c = buf[i]
    if 48 <= c <= 57:
        return True
    return c == 45 and i + 1 < n and buf[i + 1] != 73


@njit
def _int_value(buf, i, n, stack):
    """Scan a value; if it is an int64 integer token return it. (end, err, value, overflow)."""
    if _is_number_start(buf, i, n):
        j, err, is_int = scan_number(buf, i, n)
        if err != OK:
            return j, err, np.int64(-1), False
        if not is_int:
            return j, OK, np.int64(-1), False
        v, st = parse_scaled(buf, i, j, 0)
        if st == 2:
            return j, OK, np.int64(-1), True
        return j, OK, v, False
    j, err = skip_any(buf, i, n, stack)
    return j, err, np.int64(-1), False


@njit
def _parse_args(buf, i, n, stack, cols, row):
    """Parse the args object at ``i`` (a ``{``), filling the typed arg columns."""
    cols[C_ARGS_START, row] = i
    ext_upper = np.int64(-1)
    ext_lower = np.int64(-1)
    has_upper = False
    i = skip_ws(buf, i + 1, n)
    if i >= n:
        return n, E_EOF
    if buf[i] == 125:
        cols[C_ARGS_END, row] = i + 1
        return i + 1, OK
    while True:
        if i >= n:
            return n, E_EOF
        if buf[i] != 34:
            return i, E_SYNTAX
        ks = i
        i, err = scan_string(buf, i, n)
        if err != OK:
            return i, err
        akey = _arg_key_id(buf, ks + 1, i - ks - 2)
        i = skip_ws(buf, i, n)
        if i >= n:
            return n, E_EOF
        if buf[i] != 58:
            return i, E_SYNTAX
        i = skip_ws(buf, i + 1, n)
        if i >= n:
            return n, E_EOF
        if akey < 0:
            i, err = skip_any(buf, i, n, stack)
            if err != OK:
                return i, err
        else:
            if _is_number_start(buf, i, n):
                j, err, v, st, is_int = scan_scaled(buf, i, n, 0)
                if err != OK:
                    return j, err
                if not is_int:
                    v = np.int64(-1)
                elif st == 2:
                    v = np.int64(-1)
                    cols[C_FLAGS, row] |= F_OVERFLOW
                i = j
            else:
                i, err = skip_any(buf, i, n, stack)
                if err != OK:
                    return i, err
                v = np.int64(-1)
            if akey == 0:
                cols[C_CORR, row] = v
            elif akey == 1:
                ext_upper = v
                has_upper = True
            elif akey == 2:
                ext_lower = v
            elif akey == 3:
                cols[C_STREAM, row] = v
            else:
                cols[C_DEVICE, row] = v
        i = skip_ws(buf, i, n)
        if i >= n:
            return n, E_EOF
        c = buf[i]
        if c == 44:
            i = skip_ws(buf, i + 1, n)
        elif c == 125:
            cols[C_EXT, row] = ext_upper if has_upper else ext_lower
            cols[C_ARGS_END, row] = i + 1
            return i + 1, OK
        else:
            return i, E_SYNTAX


@njit
def _time_value(buf, i, n, stack, cols, row, col):
    """Parse ts/dur at ``i`` into ``cols[col, row]`` as exact ns."""
    if _is_number_start(buf, i, n):
        j, err, v, st, _ = scan_scaled(buf, i, n, 3)
        if err != OK:
            return j, err
        if st == 2:
            cols[col, row] = TS_MISSING if col == C_TS else -1
            cols[C_FLAGS, row] |= F_TIME_OVERFLOW
        else:
            cols[col, row] = v
            if st == 1:
                cols[C_FLAGS, row] |= F_TIME_ROUNDED
        return j, OK
    j, err = skip_any(buf, i, n, stack)
    cols[col, row] = TS_MISSING if col == C_TS else -1
    cols[C_FLAGS, row] |= F_TIME_NOT_NUMBER
    return j, err


@njit
def _parse_event(buf, i, n, stack, cols, row, ht, sym, symh, nsym):
    """Parse the event object at ``i`` into column ``row``. Returns (end, err, nsym)."""
    cols[C_EV_START, row] = i
    for c in range(C_ARGS_START, NCOL):
        cols[c, row] = -1
    cols[C_TS, row] = TS_MISSING
    cols[C_FLAGS, row] = 0
    i = skip_ws(buf, i + 1, n)
    if i >= n:
        return n, E_EOF, nsym
    if buf[i] == 125:
        cols[C_EV_END, row] = i + 1
        return i + 1, OK, nsym
    while True:
        if i >= n:
            return n, E_EOF, nsym
        if buf[i] != 34:
            return i, E_SYNTAX, nsym
        ks = i
        i, err = scan_string(buf, i, n)
        if err != OK:
            return i, err, nsym
        key = _key_id(buf, ks + 1, i - ks - 2)
        i = skip_ws(buf, i, n)
        if i >= n:
            return n, E_EOF, nsym
        if buf[i] != 58:
            return i, E_SYNTAX, nsym
        i = skip_ws(buf, i + 1, n)
        if i >= n:
            return n, E_EOF, nsym
        if key <= 5 and key >= 0:
            vs = i
            i, err = skip_any(buf, i, n, stack)
            if err != OK:
                return i, err, nsym
            if buf[vs] == 110:  # null
                cols[C_PH + key, row] = -1
            else:
                sid, nsym = _intern(buf, vs, i, key, ht, sym, symh, nsym)
                cols[C_PH + key, row] = sid
        elif key == 6 or key == 7:
            i, err = _time_value(buf, i, n, stack, cols, row, C_TS if key == 6 else C_DUR)
            if err != OK:
                return i, err, nsym
        elif key == 8:
            i, err, v, ovf = _int_value(buf, i, n, stack)
            if err != OK:
                return i, err, nsym
            cols[C_ID, row] = v
            if ovf:
                cols[C_FLAGS, row] |= F_OVERFLOW
        elif key == 9 and buf[i] == 123:
            for c in (C_CORR, C_EXT, C_STREAM, C_DEVICE):
                cols[c, row] = -1
            i, err = _parse_args(buf, i, n, stack, cols, row)
            if err != OK:
                return i, err, nsym
        else:
            if key == 9:
                cols[C_ARGS_START, row] = -1
                cols[C_ARGS_END, row] = -1
                for c in (C_CORR, C_EXT, C_STREAM, C_DEVICE):
                    cols[c, row] = -1
            i, err = skip_any(buf, i, n, stack)
            if err != OK:
                return i, err, nsym
        i = skip_ws(buf, i, n)
        if i >= n:
            return n, E_EOF, nsym
        c = buf[i]
        if c == 44:
            i = skip_ws(buf, i + 1, n)
        elif c == 125:
            cols[C_EV_END, row] = i + 1
            return i + 1, OK, nsym
        else:
            return i, E_SYNTAX, nsym


@njit
def _grow_cols(cols, n_ev):
    new = np.empty((NCOL, cols.shape[1] * 2), np.int64)
    new[:, :n_ev] = cols[:, :n_ev]
    return new


@njit
def _scan_events(buf, i, n, stack, cols, ht, sym, symh, nsym):
    """Scan the events array whose ``[`` is at ``i``.

    Returns (end, err, n_events, cols, ht, sym, symh, nsym, n_not_objects).
    ``n_events`` counts only complete events, also on error.
    """
    n_ev = 0
    n_bad = 0
    i = skip_ws(buf, i + 1, n)
    if i >= n:
        return n, E_EOF, n_ev, cols, ht, sym, symh, nsym, n_bad
    if buf[i] == 93:
        return i + 1, OK, n_ev, cols, ht, sym, symh, nsym, n_bad
    while True:
        if buf[i] == 123:
            if n_ev >= cols.shape[1]:
                cols = _grow_cols(cols, n_ev)
            if nsym + 6 > sym.shape[0]:
                nsym_cap = sym.shape[0] * 2
                sym2 = np.empty((nsym_cap, 3), np.int64)
                sym2[:nsym] = sym[:nsym]
                symh2 = np.empty(nsym_cap, np.uint64)
                symh2[:nsym] = symh[:nsym]
                sym, symh = sym2, symh2
            if (nsym + 6) * 2 > ht.shape[0]:
                ht = _rebuild_table(sym, symh, nsym, ht.shape[0] * 4)
            i, err, nsym = _parse_event(buf, i, n, stack, cols, n_ev, ht, sym, symh, nsym)
            if err != OK:
                return i, err, n_ev, cols, ht, sym, symh, nsym, n_bad
            n_ev += 1
        else:
            i, err = skip_any(buf, i, n, stack)
            if err != OK:
                return i, err, n_ev, cols, ht, sym, symh, nsym, n_bad
            n_bad += 1
        i = skip_ws(buf, i, n)
        if i >= n:
            return n, E_EOF, n_ev, cols, ht, sym, symh, nsym, n_bad
        c = buf[i]
        if c == 44:
            i = skip_ws(buf, i + 1, n)
            if i >= n:
                return n, E_EOF, n_ev, cols, ht, sym, symh, nsym, n_bad
        elif c == 93:
            return i + 1, OK, n_ev, cols, ht, sym, symh, nsym, n_bad
        else:
            return i, E_SYNTAX, n_ev, cols, ht, sym, symh, nsym, n_bad


_TRACE_EVENTS = np.frombuffer(b'"traceEvents"', np.uint8).copy()


@njit
def scan_trace(buf, capacity):
    """Scan a whole trace document.

    Parameters
    ----------
    buf : uint8 array
        The decompressed file.
    capacity : int
        Initial number of event slots (grown by doubling).

    Returns
    -------
    tuple
        ``(err, err_pos, n_events, cols, sym, n_sym, top, n_top, n_not_objects,
        layout)`` where ``layout`` is 0 for an object with ``traceEvents``, 1
        for a bare array, 2 for an object without ``traceEvents``.
    """
    n = buf.shape[0]
    stack = np.empty(MAX_DEPTH, np.uint8)
    cols = np.empty((NCOL, max(capacity, 16)), np.int64)
    sym = np.empty((256, 3), np.int64)
    symh = np.empty(256, np.uint64)
    ht = np.full(1024, -1, np.int64)
    nsym = 0
    top = np.empty((16, 4), np.int64)
    ntop = 0
    n_ev = 0
    n_bad = 0
    layout = 2
    i = 0
    if n >= 3 and buf[0] == 0xEF and buf[1] == 0xBB and buf[2] == 0xBF:
        i = 3
    i = skip_ws(buf, i, n)
    if i >= n:
        return E_EOF, n, 0, cols, sym, 0, top, 0, 0, layout
    if buf[i] == 91:
        layout = 1
        i, err, n_ev, cols, ht, sym, symh, nsym, n_bad = _scan_events(buf, i, n, stack, cols, ht, sym, symh, nsym)
        if err != OK:
            return err, i, n_ev, cols, sym, nsym, top, 0, n_bad, layout
    elif buf[i] == 123:
        i = skip_ws(buf, i + 1, n)
        if i >= n:
            return E_EOF, n, 0, cols, sym, 0, top, 0, 0, layout
        if buf[i] == 125:
            i += 1
        else:
            while True:
                if buf[i] != 34:
                    return E_SYNTAX, i, n_ev, cols, sym, nsym, top, ntop, n_bad, layout
                ks = i
                i, err = scan_string(buf, i, n)
                if err != OK:
                    return err, i, n_ev, cols, sym, nsym, top, ntop, n_bad, layout
                ke = i
                i = skip_ws(buf, i, n)
                if i >= n:
                    return E_EOF, n, n_ev, cols, sym, nsym, top, ntop, n_bad, layout
                if buf[i] != 58:
                    return E_SYNTAX, i, n_ev, cols, sym, nsym, top, ntop, n_bad, layout
                i = skip_ws(buf, i + 1, n)
                if i >= n:
                    return E_EOF, n, n_ev, cols, sym, nsym, top, ntop, n_bad, layout
                vs = i
                is_events = ke - ks == _TRACE_EVENTS.shape[0]
                if is_events:
                    for k in range(ke - ks):
                        if buf[ks + k] != _TRACE_EVENTS[k]:
                            is_events = False
                            break
                if is_events and buf[i] == 91:
                    layout = 0
                    i, err, n_ev, cols, ht, sym, symh, nsym, n_bad = _scan_events(
                        buf, i, n, stack, cols, ht, sym, symh, nsym
                    )
                else:
                    i, err = skip_any(buf, i, n, stack)
                if err != OK:
                    return err, i, n_ev, cols, sym, nsym, top, ntop, n_bad, layout
                if ntop >= top.shape[0]:
                    top2 = np.empty((top.shape[0] * 2, 4), np.int64)
                    top2[:ntop] = top[:ntop]
                    top = top2
                top[ntop, 0] = ks
                top[ntop, 1] = ke
                top[ntop, 2] = vs
                top[ntop, 3] = i
                ntop += 1
                i = skip_ws(buf, i, n)
                if i >= n:
                    return E_EOF, n, n_ev, cols, sym, nsym, top, ntop, n_bad, layout
                if buf[i] == 44:
                    i = skip_ws(buf, i + 1, n)
                    if i >= n:
                        return E_EOF, n, n_ev, cols, sym, nsym, top, ntop, n_bad, layout
                elif buf[i] == 125:
                    i += 1
                    break
                else:
                    return E_SYNTAX, i, n_ev, cols, sym, nsym, top, ntop, n_bad, layout
    else:
        return E_NOT_TRACE, i, 0, cols, sym, 0, top, 0, 0, layout
    i = skip_ws(buf, i, n)
    if i < n:
        return E_TRAILING, i, n_ev, cols, sym, nsym, top, ntop, n_bad, layout
    return OK, i, n_ev, cols, sym, nsym, top, ntop, n_bad, layout
