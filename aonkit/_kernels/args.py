"""Look-up of ``args`` keys across many events' JSON text."""

from __future__ import annotations

import numpy as np

from ._jit import njit, njit_leaf
from .json_fast import key_at, next_member, value_end
from .json_lex import MAX_DEPTH, OK, scan_number, scan_scaled, skip_ws

# The lexing steps as calls, not inlined as in the trace scanner: arg look-ups are not
# the per-byte hot loop, and inlining them here cost 2 s of compilation (bench/coldstart.py).
_key_at = njit_leaf(key_at.py_func)
_value_end = njit_leaf(value_end.py_func)
_next_member = njit_leaf(next_member.py_func)

_ARGS = np.frombuffer(b'"args"', np.uint8).copy()
_POW10 = np.array([10.0**k for k in range(23)])  # exact in float64
_MAX_EXACT = 2**53


@njit
def _is(buf, s, e, lit):
    if e - s != lit.shape[0]:
        return False
    for k in range(lit.shape[0]):
        if buf[s + k] != lit[k]:
            return False
    return True


@njit
def _members(buf, i, n, stack, keys, key_off, out, r):
    """Walk the object at ``i``, storing member value spans for the wanted keys; returns (end, ok).

    The span of the member whose quoted key is ``keys[key_off[k]:key_off[k + 1]]``
    goes to ``out[r, k]``; a key present twice gives its last value. ``end``
    is just past the object's ``}``; ``ok`` is False for malformed text.
    Strings and plain integers are skipped on the trace scanner's fast path.
    """
    i = skip_ws(buf, i + 1, n)
    if i < n and buf[i] == 125:
        return i + 1, True
    while i < n:
        i, ks, kl, err = _key_at(buf, i, n)
        if err != OK:
            return i, False
        vs = i
        i, err = _value_end(buf, i, n, stack)
        if err != OK:
            return i, False
        for k in range(key_off.shape[0] - 1):
            if _is(buf, ks - 1, ks + kl + 1, keys[key_off[k] : key_off[k + 1]]):
                out[r, k, 0] = vs
                out[r, k, 1] = i
        i, closed, err = _next_member(buf, i, n)
        if err != OK:
            return i, False
        if closed:
            return i, True
    return i, False


@njit
def _args_offset(buf, i, n, stack):
    """Offset of the ``args`` object of the event object at ``i`` (its last ``args`` member), -1 where none.

    An ``args`` member that is not an object, or malformed text, gives -1.
    """
    at = -1
    i = skip_ws(buf, i + 1, n)
    while i < n and buf[i] == 34:
        i, ks, kl, err = _key_at(buf, i, n)
        if err != OK:
            return -1
        if _is(buf, ks - 1, ks + kl + 1, _ARGS):
            at = i if buf[i] == 123 else -1
        i, err = _value_end(buf, i, n, stack)
        if err != OK:
            return -1
        i, closed, err = _next_member(buf, i, n)
        if err != OK:
            return -1
        if closed:
            break
    return at


@njit
def find_args(buf, ev_start, ev_end, rows, keys, key_off):
    """Value spans (start, end) of ``args`` keys for each event in ``rows``, in one pass: shape (rows, keys, 2).

    ``keys[key_off[k]:key_off[k + 1]]`` is the k-th JSON-quoted key
    (``b'"bytes"'``; escaped keys are not matched); -1 where absent.
    """
    stack = np.empty(MAX_DEPTH, np.uint8)
    out = np.full((rows.shape[0], key_off.shape[0] - 1, 2), -1, np.int64)
    for r in range(rows.shape[0]):
        ev = rows[r]
        a = _args_offset(buf, ev_start[ev], ev_end[ev], stack)
        if a >= 0:
            _, ok = _members(buf, a, ev_end[ev], stack, keys, key_off, out, r)
            if not ok:
                out[r, :, :] = -1
    return out


@njit
def args_starts(buf, ev_start, ev_end):
    """Offset of each event's ``args`` object in ``buf`` (its last ``args`` member), -1 where it has none.

    What the trace scanner records while it loads (``R_ARGS``), found for
    texts that come without it (a cache's); :func:`find_args_at` starts there.
    """
    stack = np.empty(MAX_DEPTH, np.uint8)
    out = np.full(ev_start.shape[0], -1, np.int64)
    for e in range(ev_start.shape[0]):
        out[e] = _args_offset(buf, ev_start[e], ev_end[e], stack)
    return out


@njit
def find_args_at(buf, ev_end, args_at, rows, keys, key_off):
    """:func:`find_args` starting at each event's recorded ``args`` object (``args_at``; -1: none)."""
    stack = np.empty(MAX_DEPTH, np.uint8)
    out = np.full((rows.shape[0], key_off.shape[0] - 1, 2), -1, np.int64)
    for r in range(rows.shape[0]):
        ev = rows[r]
        a = args_at[ev]
        if a < 0:
            continue
        i, ok = _members(buf, a, ev_end[ev], stack, keys, key_off, out, r)
        if not ok:
            out[r, :, :] = -1
    return out


@njit
def span_ints(buf, spans):
    """Integer value of each JSON token span; ``ok`` False where absent or not a plain int64 integer."""
    n = spans.shape[0]
    vals = np.zeros(n, np.int64)
    ok = np.zeros(n, np.bool_)
    for r in range(n):
        s = spans[r, 0]
        e = spans[r, 1]
        if s < 0:
            continue
        c = buf[s]
        neg = c == 45
        d0 = s + 1 if neg else s
        if 0 < e - d0 <= 18 and (buf[d0] != 48 or e - d0 == 1):  # fast path: plain digits, no leading zero
            v = np.int64(0)
            plain = True
            for k in range(d0, e):
                dk = buf[k]
                if dk < 48 or dk > 57:
                    plain = False
                    break
                v = v * 10 + (dk - 48)
            if plain:
                vals[r] = -v if neg else v
                ok[r] = True
                continue
        if c == 45 or (48 <= c <= 57):
            j, err, v, st, is_int = scan_scaled(buf, s, e, 0)
            if err == OK and j == e and is_int and st == 0:
                vals[r] = v
                ok[r] = True
    return vals, ok


@njit
def span_floats(buf, spans):
    """float64 value of each JSON number token span, where one IEEE operation gives it exactly rounded.

    Clinger's fast path: a number whose significant digits form an integer
    up to 2**53 and whose decimal exponent is within +-22 is that integer
    times or divided by an exact power of ten, one correctly rounded
    operation (the value ``json.loads`` gives). ``ok`` is False where absent,
    not a JSON number, or outside the fast path (the caller decodes those).
    """
    n = spans.shape[0]
    vals = np.zeros(n, np.float64)
    ok = np.zeros(n, np.bool_)
    for r in range(n):
        s = spans[r, 0]
        e = spans[r, 1]
        if s < 0 or s >= e:
            continue
        j, err, is_int = scan_number(buf, s, e)  # the JSON grammar; below, only the digits are read
        if err != OK or j != e:
            continue
        neg = buf[s] == 45
        p = s + 1 if neg else s
        m = np.int64(0)
        big = False
        e10 = 0
        frac = 0
        while p < e and buf[p] != 101 and buf[p] != 69:  # significant digits, and how many follow the point
            if buf[p] == 46:
                frac = 1
            else:
                m = m * 10 + (buf[p] - 48)
                big |= m > _MAX_EXACT
                e10 -= frac
            p += 1
        if p < e:  # the exponent
            p += 1
            eneg = buf[p] == 45
            p += 1 if buf[p] == 43 or buf[p] == 45 else 0
            x = 0
            while p < e and x < 10_000:
                x = x * 10 + (buf[p] - 48)
                p += 1
            e10 += -x if eneg else x
        if p != e or big or e10 < -22 or e10 > 22:
            continue
        v = float(m) * _POW10[e10] if e10 >= 0 else float(m) / _POW10[-e10]
        vals[r] = -v if neg and (v != 0.0 or not is_int) else v  # json's -0 is the integer 0
        ok[r] = True
    return vals, ok
