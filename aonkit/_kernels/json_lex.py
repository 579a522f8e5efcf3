"""Validating JSON lexing primitives over a ``uint8`` buffer.

Every function takes the buffer, a position and the end ``n`` and returns a new
position plus an error code (``OK`` = 0). On error the position is where the
problem was found; ``E_EOF`` means the input ended first (a truncated file).
Nothing here reads past ``n``: each index is checked before the byte is read,
because Numba does no bounds checking. Bytes are read with :func:`.raw.byte_at`,
which leaves out the negative-index wrap-around of ``buf[i]`` (the scanner ran
2.2x faster without it).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit_inline, njit_leaf
from .raw import byte_at

OK = 0
E_SYNTAX = 1
E_EOF = 2
E_DEPTH = 3
E_STRING = 4
E_NUMBER = 5
E_NOT_TRACE = 6
E_TRAILING = 7

MAX_DEPTH = 10_000

_TRUE = np.frombuffer(b"true", np.uint8).copy()
_FALSE = np.frombuffer(b"false", np.uint8).copy()
_NULL = np.frombuffer(b"null", np.uint8).copy()
_NAN = np.frombuffer(b"NaN", np.uint8).copy()
_INF = np.frombuffer(b"Infinity", np.uint8).copy()

INT64_MAX = np.int64(9223372036854775807)


@njit_inline
def skip_ws(buf, i, n):
    """Index of the first non-whitespace byte at or after ``i`` (``n`` if none)."""
    while i < n:
        c = byte_at(buf, i)
        if c == 32 or c == 10 or c == 13 or c == 9:
            i += 1
        else:
            break
    return i


@njit_inline
def _is_hex(c):
    return (48 <= c <= 57) or (65 <= c <= 70) or (97 <= c <= 102)


@njit_leaf
def scan_string(buf, i, n):
    """Scan the string whose opening quote is at ``i``; return (end, err)."""
    i += 1
    while i < n:
        c = byte_at(buf, i)
        if c == 34:
            return i + 1, OK
        if c == 92:
            if i + 1 >= n:
                return n, E_EOF
            d = byte_at(buf, i + 1)
            if d == 117:
                for k in range(i + 2, i + 6):
                    if k >= n:
                        return n, E_EOF
                    if not _is_hex(byte_at(buf, k)):
                        return k, E_STRING
                i += 6
            elif d == 34 or d == 92 or d == 47 or d == 98 or d == 102 or d == 110 or d == 114 or d == 116:
                i += 2
            else:
                return i, E_STRING
        elif c < 32:
            return i, E_STRING
        else:
            i += 1
    return n, E_EOF


@njit_leaf
def scan_number(buf, i, n):
    """Scan a JSON number at ``i``; return (end, err, is_integer_token)."""
    j = i
    if byte_at(buf, j) == 45:
        j += 1
    if j >= n:
        return n, E_EOF, False
    c = byte_at(buf, j)
    if c == 48:
        j += 1
    elif 49 <= c <= 57:
        while j < n and 48 <= byte_at(buf, j) <= 57:
            j += 1
    else:
        return j, E_NUMBER, False
    is_int = True
    if j < n and byte_at(buf, j) == 46:
        is_int = False
        j += 1
        if j >= n:
            return n, E_EOF, False
        if not (48 <= byte_at(buf, j) <= 57):
            return j, E_NUMBER, False
        while j < n and 48 <= byte_at(buf, j) <= 57:
            j += 1
    if j < n and (byte_at(buf, j) == 101 or byte_at(buf, j) == 69):
        is_int = False
        j += 1
        if j < n and (byte_at(buf, j) == 43 or byte_at(buf, j) == 45):
            j += 1
        if j >= n:
            return n, E_EOF, False
        if not (48 <= byte_at(buf, j) <= 57):
            return j, E_NUMBER, False
        while j < n and 48 <= byte_at(buf, j) <= 57:
            j += 1
    return j, OK, is_int


@njit_leaf
def match_literal(buf, i, n, lit):
    """Match the bytes of ``lit`` at ``i``; return (end, err)."""
    for k in range(lit.shape[0]):
        if i + k >= n:
            return n, E_EOF
        if byte_at(buf, i + k) != lit[k]:
            return i + k, E_SYNTAX
    return i + lit.shape[0], OK


@njit_leaf
def _scan_scalar(buf, i, n):
    """Scan a non-container value starting at ``i``; return (end, err)."""
    c = byte_at(buf, i)
    if c == 34:
        return scan_string(buf, i, n)
    if c == 45 and i + 1 < n and byte_at(buf, i + 1) == 73:
        return match_literal(buf, i + 1, n, _INF)
    if c == 45 or (48 <= c <= 57):
        j, err, _ = scan_number(buf, i, n)
        return j, err
    if c == 116:
        return match_literal(buf, i, n, _TRUE)
    if c == 102:
        return match_literal(buf, i, n, _FALSE)
    if c == 110:
        return match_literal(buf, i, n, _NULL)
    if c == 78:
        return match_literal(buf, i, n, _NAN)
    if c == 73:
        return match_literal(buf, i, n, _INF)
    return i, E_SYNTAX


@njit_leaf
def _expect_key(buf, i, n):
    """At ``i`` expect ``"key" :``; return (position after the colon, err)."""
    if i >= n:
        return n, E_EOF
    if byte_at(buf, i) != 34:
        return i, E_SYNTAX
    i, err = scan_string(buf, i, n)
    if err != OK:
        return i, err
    i = skip_ws(buf, i, n)
    if i >= n:
        return n, E_EOF
    if byte_at(buf, i) != 58:
        return i, E_SYNTAX
    return i + 1, OK


@njit_leaf
def skip_value(buf, i, n, stack):
    """Validate and skip one JSON value starting at or after ``i``.

    ``stack`` is a scratch ``uint8`` array whose length bounds the nesting
    depth. Returns (end, err).
    """
    depth = 0
    while True:
        # expecting a value
        i = skip_ws(buf, i, n)
        if i >= n:
            return n, E_EOF
        c = byte_at(buf, i)
        if c == 123 or c == 91:
            if depth >= stack.shape[0]:
                return i, E_DEPTH
            stack[depth] = c
            depth += 1
            i = skip_ws(buf, i + 1, n)
            if i >= n:
                return n, E_EOF
            if (c == 123 and byte_at(buf, i) == 125) or (c == 91 and byte_at(buf, i) == 93):
                i += 1
                depth -= 1
            elif c == 123:
                i, err = _expect_key(buf, i, n)
                if err != OK:
                    return i, err
                continue
            else:
                continue
        else:
            i, err = _scan_scalar(buf, i, n)
            if err != OK:
                return i, err
        # after a complete value: close containers or move to the next item
        while True:
            if depth == 0:
                return i, OK
            i = skip_ws(buf, i, n)
            if i >= n:
                return n, E_EOF
            c = byte_at(buf, i)
            top = stack[depth - 1]
            if c == 44:
                i += 1
                if top == 123:
                    i, err = _expect_key(buf, skip_ws(buf, i, n), n)
                    if err != OK:
                        return i, err
                break
            if (c == 125 and top == 123) or (c == 93 and top == 91):
                i += 1
                depth -= 1
                continue
            return i, E_SYNTAX


@njit_leaf
def skip_any(buf, i, n, stack):
    """Skip one value at ``i`` (not whitespace): scalars inline, containers via :func:`skip_value`."""
    c = byte_at(buf, i)
    if c == 123 or c == 91:
        return skip_value(buf, i, n, stack)
    return _scan_scalar(buf, i, n)


@njit_leaf
def _digit_at(buf, int_s, nint, frac_s, idx):
    if idx < nint:
        return np.int64(byte_at(buf, int_s + idx) - 48)
    return np.int64(byte_at(buf, frac_s + idx - nint) - 48)


@njit_leaf
def parse_scaled(buf, s, e, scale):
    """Exact value of the JSON number token ``buf[s:e]`` times ``10**scale``.

    Rounds half to even when digits remain below the unit. Returns
    (value, status): status 0 exact, 1 rounded, 2 overflow of int64.
    """
    neg = byte_at(buf, s) == 45
    p = s + 1 if neg else s
    int_s = p
    while p < e and 48 <= byte_at(buf, p) <= 57:
        p += 1
    nint = p - int_s
    frac_s = p
    frac_e = p
    if p < e and byte_at(buf, p) == 46:
        p += 1
        frac_s = p
        while p < e and 48 <= byte_at(buf, p) <= 57:
            p += 1
        frac_e = p
    exp = 0
    if p < e and (byte_at(buf, p) == 101 or byte_at(buf, p) == 69):
        p += 1
        eneg = False
        if p < e and (byte_at(buf, p) == 43 or byte_at(buf, p) == 45):
            eneg = byte_at(buf, p) == 45
            p += 1
        while p < e:
            if exp < 1_000_000:
                exp = exp * 10 + (byte_at(buf, p) - 48)
            p += 1
        if eneg:
            exp = -exp
    total = nint + (frac_e - frac_s)
    kept = nint + exp + scale
    value = np.int64(0)
    status = 0
    stop = kept if kept < total else total
    for idx in range(stop):
        d = _digit_at(buf, int_s, nint, frac_s, idx)
        if value > (INT64_MAX - d) // 10:
            return np.int64(-1), 2
        value = value * 10 + d
    if kept > total:
        if value != 0:
            for _ in range(kept - total):
                if value > INT64_MAX // 10:
                    return np.int64(-1), 2
                value = value * 10
    elif kept < total:
        rest_nonzero = False
        start = kept + 1 if kept >= 0 else 0
        for idx in range(start, total):
            if _digit_at(buf, int_s, nint, frac_s, idx) != 0:
                rest_nonzero = True
                break
        if kept >= 0:
            r = _digit_at(buf, int_s, nint, frac_s, kept)
            if r != 0 or rest_nonzero:
                status = 1
            if r > 5 or (r == 5 and (rest_nonzero or (value & 1) == 1)):
                if value == INT64_MAX:
                    return np.int64(-1), 2
                value += 1
        elif rest_nonzero:
            status = 1
    if neg:
        value = -value
    return value, status


@njit_leaf
def scan_scaled(buf, i, n, scale):
    """Scan a number token at ``i`` and return its value times ``10**scale``.

    One pass for the common shapes (up to 18 significant digits and at most
    ``scale`` decimals, no exponent); anything else goes through
    :func:`parse_scaled`. Returns (end, err, value, status, is_integer_token)
    with ``status`` as in :func:`parse_scaled`.
    """
    j = i
    neg = byte_at(buf, j) == 45
    if neg:
        j += 1
    value = np.int64(0)
    nd = 0
    while j < n:
        c = byte_at(buf, j)
        if c < 48 or c > 57:
            break
        value = value * 10 + (c - 48)
        nd += 1
        j += 1
    fast = 0 < nd <= 19 and not (nd > 1 and byte_at(buf, j - nd) == 48)
    is_int = True
    nf = 0
    if fast and j < n and byte_at(buf, j) == 46:
        is_int = False
        j += 1
        while j < n and 48 <= byte_at(buf, j) <= 57:
            if nf < scale:
                value = value * 10 + (byte_at(buf, j) - 48)
            nf += 1
            j += 1
        fast = 0 < nf <= scale
    # nd + scale <= 19 digits: the true magnitude is < 10**19 < 2**64, so an
    # int64 overflow can only wrap once, to a negative number, caught below.
    fast = fast and nd + scale <= 19
    if fast and j < n and (byte_at(buf, j) == 101 or byte_at(buf, j) == 69):
        fast = False
    if fast:
        for _ in range(scale - nf):
            value = value * 10
        if value >= 0:
            return j, OK, -value if neg else value, 0, is_int
    end, err, is_int = scan_number(buf, i, n)
    if err != OK:
        return end, err, np.int64(-1), 0, False
    v, st = parse_scaled(buf, i, end, scale)
    return end, OK, v, st, is_int
