"""One trace event object: its keys classified, its typed values written to event columns.

:func:`parse_event` fills column ``row`` of two matrices: ``i64`` (rows
``R_*``: byte span, times, typed ids) and ``i32`` (rows ``S_*``: symbol ids,
flags). ``ph``, ``cat``, ``name``, ``pid``, ``tid`` and ``bp`` values are
interned by their raw JSON token bytes (:mod:`.symbols`); ``ts``/``dur`` are
read as exact ns; ``correlation``, ``External id``, ``stream`` and
``device`` come from ``args``. :mod:`.trace_scan` walks the document around
the events.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit_inline, njit_leaf
from .json_fast import WS, key_at, next_member, value_end
from .json_lex import E_EOF, OK, scan_scaled, skip_any
from .raw import byte_at
from .symbols import intern

# rows of the int64 matrix (R_ARGS: offset of the event's args object, -1 when it has none)
R_EV_START, R_EV_END, R_TS, R_DUR, R_CORR, R_EXT, R_STREAM, R_DEVICE, R_ID, R_ARGS = range(10)
N64 = 10
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

_NUM_START = np.zeros(256, np.uint8)
_NUM_START[48:58] = 1
_NUM_START[45] = 1

# event keys -> codes 0..5 (symbol kinds), 6 ts, 7 dur, 8 id, 9 args
_A_EXT = np.frombuffer(b"xternal id", np.uint8).copy()
_A_CORR = np.frombuffer(b"correlation", np.uint8).copy()


@njit_inline
def _number_at(buf, i, n):
    """Whether a JSON number starts at ``i`` (``-Infinity`` is not one)."""
    return _NUM_START[byte_at(buf, i)] == 1 and not (byte_at(buf, i) == 45 and i + 1 < n and byte_at(buf, i + 1) == 73)


@njit_inline
def _key_id(buf, s, ln):
    """Classify an event key (inner bytes ``buf[s:s+ln]``); -1 for others."""
    if ln == 2:
        a, b = byte_at(buf, s), byte_at(buf, s + 1)
        if a == 112 and b == 104:
            return 0  # ph
        if a == 116 and b == 115:
            return 6  # ts
        if a == 105 and b == 100:
            return 8  # id
        if a == 98 and b == 112:
            return 5  # bp
    elif ln == 3:
        a, b, c = byte_at(buf, s), byte_at(buf, s + 1), byte_at(buf, s + 2)
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
        a, b, c, d = byte_at(buf, s), byte_at(buf, s + 1), byte_at(buf, s + 2), byte_at(buf, s + 3)
        if a == 110 and b == 97 and c == 109 and d == 101:
            return 2  # name
        if a == 97 and b == 114 and c == 103 and d == 115:
            return 9  # args
    return -1


@njit_inline
def _arg_key_id(buf, s, ln):
    """0 correlation, 1 "External id", 2 "external id", 3 stream, 4 device, -1 other."""
    if ln == 11:
        if byte_at(buf, s + 1) == 120:
            ok = True
            for k in range(10):
                if byte_at(buf, s + 1 + k) != _A_EXT[k]:
                    ok = False
                    break
            if ok:
                if byte_at(buf, s) == 69:
                    return 1
                if byte_at(buf, s) == 101:
                    return 2
        elif byte_at(buf, s) == 99:
            for k in range(11):
                if byte_at(buf, s + k) != _A_CORR[k]:
                    return -1
            return 0
    elif ln == 6:
        if (
            byte_at(buf, s) == 115 and byte_at(buf, s + 1) == 116 and byte_at(buf, s + 2) == 114
            and byte_at(buf, s + 3) == 101 and byte_at(buf, s + 4) == 97 and byte_at(buf, s + 5) == 109
        ):  # fmt: skip
            return 3
        if (
            byte_at(buf, s) == 100 and byte_at(buf, s + 1) == 101 and byte_at(buf, s + 2) == 118
            and byte_at(buf, s + 3) == 105 and byte_at(buf, s + 4) == 99 and byte_at(buf, s + 5) == 101
        ):  # fmt: skip
            return 4
    return -1


@njit_leaf
def _parse_args(buf, i, n, stack, i64, i32, row):
    """Parse the args object at ``i`` (a ``{``), filling the typed arg rows."""
    ext_upper = np.int64(-1)
    ext_lower = np.int64(-1)
    has_upper = False
    i += 1
    while i < n and WS[byte_at(buf, i)] == 1:
        i += 1
    if i >= n:
        return n, E_EOF
    if byte_at(buf, i) == 125:
        return i + 1, OK
    while True:
        i, ks, kl, err = key_at(buf, i, n)
        if err != OK:
            return i, err
        akey = _arg_key_id(buf, ks, kl)
        if akey < 0:
            i, err = value_end(buf, i, n, stack)
            if err != OK:
                return i, err
        else:
            v = np.int64(-1)
            if _number_at(buf, i, n):
                i, err, v, st, is_int = scan_scaled(buf, i, n, 0)
                if err != OK:
                    return i, err
                if not is_int:
                    v = np.int64(-1)
                elif st == 2:
                    v = np.int64(-1)
                    i32[S_FLAGS, row] |= F_OVERFLOW
            else:
                i, err = value_end(buf, i, n, stack)
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
        i, closed, err = next_member(buf, i, n)
        if err != OK:
            return i, err
        if closed:
            i64[R_EXT, row] = ext_upper if has_upper else ext_lower
            return i, OK


@njit_inline
def _time_value(buf, i, n, stack, i64, i32, row, r):
    """Parse ts/dur at ``i`` into ``i64[r, row]`` as exact ns."""
    missing = TS_MISSING if r == R_TS else np.int64(-1)
    if _number_at(buf, i, n):
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
def parse_event(buf, i, n, stack, i64, i32, row, ht, sym, symh, nsym, last):
    """Parse the event object at ``i`` into column ``row``. Returns (end, err, nsym)."""
    i64[R_EV_START, row] = i
    for r in range(R_TS, N64):
        i64[r, row] = -1
    i64[R_TS, row] = TS_MISSING
    for r in range(N32):
        i32[r, row] = -1
    i32[S_FLAGS, row] = 0
    i += 1
    while i < n and WS[byte_at(buf, i)] == 1:
        i += 1
    if i >= n:
        return n, E_EOF, nsym
    if byte_at(buf, i) == 125:
        i64[R_EV_END, row] = i + 1
        return i + 1, OK, nsym
    while True:
        i, ks, kl, err = key_at(buf, i, n)
        if err != OK:
            return i, err, nsym
        key = _key_id(buf, ks, kl)
        if 0 <= key <= 5:
            vs = i
            i, err = value_end(buf, i, n, stack)
            if err != OK:
                return i, err, nsym
            if byte_at(buf, vs) == 110:  # null
                i32[key, row] = -1
            else:
                sid, nsym = intern(buf, vs, i, key, ht, sym, symh, nsym, last)
                i32[key, row] = sid
        elif key == 6 or key == 7:
            i, err = _time_value(buf, i, n, stack, i64, i32, row, R_TS if key == 6 else R_DUR)
            if err != OK:
                return i, err, nsym
        elif key == 9 and byte_at(buf, i) == 123:
            for r in range(R_CORR, R_ID):
                i64[r, row] = -1
            i64[R_ARGS, row] = i  # later arg look-ups start here (the last args member counts)
            i, err = _parse_args(buf, i, n, stack, i64, i32, row)
            if err != OK:
                return i, err, nsym
        elif key == 8 and _number_at(buf, i, n):
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
                i64[R_ARGS, row] = -1
            elif key == 8:
                i64[R_ID, row] = -1
            i, err = value_end(buf, i, n, stack)
            if err != OK:
                return i, err, nsym
        i, closed, err = next_member(buf, i, n)
        if err != OK:
            return i, err, nsym
        if closed:
            i64[R_EV_END, row] = i
            return i, OK, nsym
