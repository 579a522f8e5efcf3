"""Inline fast paths of the JSON lexer for text in the common shapes.

Strings are skipped 8 bytes at a time while a word holds no quote, backslash
or control byte; keys, plain integers and item separators are lexed with
lookup tables. Anything unusual (escapes, containers, other numbers) falls
back to the validating helpers of :mod:`.json_lex`. Every helper here is
inlined into its caller (the trace scanner and the args look-up).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit_inline
from .json_lex import E_EOF, E_SYNTAX, OK, scan_string, skip_any
from .raw import byte_at, word_at

WS = np.zeros(256, np.uint8)  # JSON whitespace
WS[[9, 10, 13, 32]] = 1
_STR_STOP = np.zeros(256, np.uint8)  # bytes that end the fast path inside a string
_STR_STOP[:32] = 1
_STR_STOP[[34, 92]] = 1

_ONES = np.uint64(0x0101010101010101)
_HIGH = np.uint64(0x8080808080808080)
_QUOTES = np.uint64(0x2222222222222222)
_BSLASHES = np.uint64(0x5C5C5C5C5C5C5C5C)
_SPACES = np.uint64(0x2020202020202020)


@njit_inline
def string_end(buf, i, n):
    """End (after the closing quote) of the string opening at ``i``: (end, err).

    Skips 8 bytes at a time while a word holds no quote, backslash or control
    byte (the classic has-zero-byte / has-less-than bit tricks, exact as tests).
    """
    j = i + 1
    while j + 8 <= n:
        w = word_at(buf, j)
        q = w ^ _QUOTES
        b = w ^ _BSLASHES
        hit = ((q - _ONES) & ~q) | ((b - _ONES) & ~b) | ((w - _SPACES) & ~w)
        if hit & _HIGH:
            break
        j += 8
    while j < n and _STR_STOP[byte_at(buf, j)] == 0:
        j += 1
    if j < n and byte_at(buf, j) == 34:
        return j + 1, OK
    return scan_string(buf, i, n)


@njit_inline
def key_at(buf, i, n):
    """Scan ``"key" :`` at ``i`` and the whitespace after it. Returns (value pos, key start, key len, err)."""
    if byte_at(buf, i) != 34:
        return i, 0, 0, E_SYNTAX
    j, err = string_end(buf, i, n)
    if err != OK:
        return j, 0, 0, err
    ks = i + 1
    kl = j - 1 - ks
    while j < n and WS[byte_at(buf, j)] == 1:
        j += 1
    if j >= n:
        return n, 0, 0, E_EOF
    if byte_at(buf, j) != 58:
        return j, 0, 0, E_SYNTAX
    j += 1
    while j < n and WS[byte_at(buf, j)] == 1:
        j += 1
    if j >= n:
        return n, 0, 0, E_EOF
    return j, ks, kl, OK


@njit_inline
def value_end(buf, i, n, stack):
    """End of the value at ``i`` (strings and plain integers on the fast path): (end, err)."""
    c = byte_at(buf, i)
    if c == 34:
        return string_end(buf, i, n)
    if 49 <= c <= 57:  # an integer without leading zero, sign, fraction or exponent
        j = i + 1
        while j < n and 48 <= byte_at(buf, j) <= 57:
            j += 1
        if j < n and byte_at(buf, j) != 46 and byte_at(buf, j) != 101 and byte_at(buf, j) != 69:
            return j, OK
    return skip_any(buf, i, n, stack)


@njit_inline
def next_item(buf, i, n, close):
    """After an item's value: skip whitespace and ``,`` or the ``close`` byte. Returns (pos, closed, err)."""
    while i < n and WS[byte_at(buf, i)] == 1:
        i += 1
    if i >= n:
        return n, False, E_EOF
    c = byte_at(buf, i)
    if c == 44:
        i += 1
        while i < n and WS[byte_at(buf, i)] == 1:
            i += 1
        if i >= n:
            return n, False, E_EOF
        return i, False, OK
    if c == close:
        return i + 1, True, OK
    return i, False, E_SYNTAX


@njit_inline
def next_member(buf, i, n):
    """After an object member's value (see :func:`next_item`)."""
    return next_item(buf, i, n, 125)
