"""Look-up of ``args`` keys across many events' JSON text."""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .json_lex import MAX_DEPTH, OK, scan_scaled, scan_string, skip_value, skip_ws

_ARGS = np.frombuffer(b'"args"', np.uint8).copy()
_ARGS_OFF = np.array([0, _ARGS.shape[0]], np.int64)


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
    """Walk the object at ``i``, storing member value spans for the wanted keys.

    The span of the member whose quoted key is ``keys[key_off[k]:key_off[k + 1]]``
    goes to ``out[r, k]``; a key present twice gives its last value.
    """
    i = skip_ws(buf, i + 1, n)
    if i >= n or buf[i] == 125:
        return
    while i < n and buf[i] == 34:
        ks = i
        i, err = scan_string(buf, i, n)
        if err != OK:
            return
        ke = i
        i = skip_ws(buf, i, n)
        i = skip_ws(buf, i + 1, n)  # the ':'
        vs = i
        i, err = skip_value(buf, i, n, stack)
        if err != OK:
            return
        for k in range(key_off.shape[0] - 1):
            if _is(buf, ks, ke, keys[key_off[k] : key_off[k + 1]]):
                out[r, k, 0] = vs
                out[r, k, 1] = i
        i = skip_ws(buf, i, n)
        if i >= n or buf[i] != 44:
            return
        i = skip_ws(buf, i + 1, n)


@njit
def find_args(buf, ev_start, ev_end, rows, keys, key_off):
    """Value spans (start, end) of ``args`` keys for each event in ``rows``, in one pass: shape (rows, keys, 2).

    ``keys[key_off[k]:key_off[k + 1]]`` is the k-th JSON-quoted key
    (``b'"bytes"'``; escaped keys are not matched); -1 where absent.
    """
    stack = np.empty(MAX_DEPTH, np.uint8)
    out = np.full((rows.shape[0], key_off.shape[0] - 1, 2), -1, np.int64)
    top = np.empty((1, 1, 2), np.int64)  # the span of the event's "args" member
    for r in range(rows.shape[0]):
        ev = rows[r]
        top[0, 0, 0] = -1
        _members(buf, ev_start[ev], ev_end[ev], stack, _ARGS, _ARGS_OFF, top, 0)
        if top[0, 0, 0] >= 0 and buf[top[0, 0, 0]] == 123:
            _members(buf, top[0, 0, 0], top[0, 0, 1], stack, keys, key_off, out, r)
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
