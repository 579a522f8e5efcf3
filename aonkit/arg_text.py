"""Arg look-ups that need no compilation: the Numba kernels' walk, done by the stdlib's C JSON scanner.

A new machine's first arg look-up (the roofline's ``Input Dims``, the memory
counters' ``Bytes``) compiled the Numba walk over the events' JSON text and
its number readers: about 14 s on 2 cores, for look-ups that usually touch a
few hundred events. While those kernels are neither compiled in this process
nor in Numba's on-disk cache, :class:`~aonkit.Trace` finds the value spans of
at most :data:`QUICK_ROWS` events here instead, with the same results:

* :func:`find_args` is :func:`aonkit._kernels.args.find_args` (and
  ``find_args_at`` when the ``args`` offsets are known): value spans
  ``(start, end)`` per event and key, -1 where absent; a row whose ``args``
  object is malformed is all -1; the last of a repeated key wins; keys are
  matched on their raw quoted text.
* :func:`span_ints` is :func:`aonkit._kernels.args.span_ints`: plain JSON
  integers that fit int64 (magnitude at most ``2**63 - 1``).

Each event's text is read as Latin-1, so positions stay byte offsets. Its
``args`` object is decoded whole by the scanner's ``scan_once`` and each
wanted key found by its text; with escapes or repeated keys it is walked
member by member
(``json.decoder.scanstring`` for keys, ``scan_once`` for values). Both accept and
reject exactly what the Numba lexer does (``tests/test_arg_text.py`` compares
them on mutated bytes). A value nested deeper than the interpreter's
recursion allows raises :class:`Declined`: the caller uses the kernel.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring

import numpy as np

QUICK_ROWS = 50_000
"""Most events one look-up reads here rather than compiling the kernels (3-20 us each)."""
QUICK_BUDGET_ROWS = 1_000_000
"""Events one process reads here in all; past them the kernels are compiled (about as long as 1M rows take here)."""
_walked = [0]
_WS = re.compile(r"[ \t\n\r]*")
_INT = re.compile(rb"-?(?:0|[1-9][0-9]*)")
_INT64_MAX = 2**63 - 1
_ARGS = '"args"'
_scan_once = json.JSONDecoder().scan_once


def spend(rows: int) -> bool:
    """Whether ``rows`` more events fit :data:`QUICK_BUDGET_ROWS`; counts them when they do."""
    if _walked[0] + rows > QUICK_BUDGET_ROWS:
        return False
    _walked[0] += rows
    return True


class Declined(Exception):
    """The text nests deeper than this interpreter's recursion limit: use the Numba kernel."""


class _Bad(Exception):
    pass


def _decoded(t: str, i: int) -> tuple[object, int]:
    """The JSON value at ``t[i]`` and its end; :class:`_Bad` where the lexer would report an error."""
    try:
        return _scan_once(t, i)
    except (json.JSONDecodeError, StopIteration):
        raise _Bad from None
    except (RecursionError, ValueError):  # nested too deep, or an integer past int()'s digit limit
        raise Declined from None


def _value(t: str, i: int) -> int:
    """End of the JSON value at ``t[i]`` (see :func:`_decoded`)."""
    return _decoded(t, i)[1]


def _key(t: str, i: int, n: int) -> tuple[int, int]:
    """At ``t[i]`` a ``"key" :`` (``t[i]`` a quote): (end of the quoted key, position of its value)."""
    try:
        _, j = scanstring(t, i + 1, True)
    except ValueError:
        raise _Bad from None
    k = _WS.match(t, j).end()
    if k >= n or t[k] != ":":
        raise _Bad
    v = _WS.match(t, k + 1).end()
    if v >= n:
        raise _Bad
    return j, v


def _next(t: str, i: int, n: int) -> tuple[int, bool]:
    """After a member's value: (position of the next key, False) or (after the ``}``, True)."""
    i = _WS.match(t, i).end()
    if i >= n:
        raise _Bad
    if t[i] == ",":
        i = _WS.match(t, i + 1).end()
        if i >= n:
            raise _Bad
        return i, False
    if t[i] == "}":
        return i + 1, True
    raise _Bad


def _members(t: str, wanted: dict[str, list[int]]) -> list[tuple[int, int, int]] | None:
    """Walk the object opening at ``t[0]``: ``(key, start, end)`` of the wanted keys' values, None if malformed.

    Member by member (the way for texts with escapes or repeated keys; :func:`_object_members` takes the others).
    """
    n, found = len(t), []
    i = _WS.match(t, 1).end()
    if i < n and t[i] == "}":
        return found
    try:
        while i < n:
            if t[i] != '"':
                return None
            ke, v = _key(t, i, n)
            e = _value(t, v)
            found.extend((c, v, e) for c in wanted.get(t[i:ke], ()))
            i, closed = _next(t, e, n)
            if closed:
                return found
    except _Bad:
        return None
    return None


def _object_members(t: str, wanted: dict[str, list[int]]) -> list[tuple[int, int, int]] | None:
    """:func:`_members`, in C where it can: the whole object decoded at once, each wanted key found by its text.

    Exact when ``t`` holds no backslash (then every quote delimits a string and a key's decoded name is its
    raw text) and each wanted key present occurs once in ``t``; otherwise :func:`_members` walks it.
    """
    if t[:1] != "{" or "\\" in t:
        return _members(t, wanted)
    try:
        obj = _decoded(t, 0)[0]
    except _Bad:
        return None
    found = []
    for quoted, cols in wanted.items():
        if quoted[1:-1] not in obj:  # type: ignore[operator] - a dict: t opens with "{"
            continue
        if t.count(quoted) != 1:
            return _members(t, wanted)
        k = _WS.match(t, t.find(quoted) + len(quoted)).end()  # the ':' (the object is well formed)
        v = _WS.match(t, k + 1).end()
        e = _scan_once(t, v)[1]
        found.extend((c, v, e) for c in cols)
    return found


def _args_offset(t: str) -> int:
    """Offset in ``t`` (an event object) of its last ``args`` member's object; -1 where none or malformed."""
    n, at = len(t), -1
    i = _WS.match(t, 1).end()
    try:
        while i < n and t[i] == '"':
            ke, v = _key(t, i, n)
            if t[i:ke] == _ARGS:
                at = v if t[v] == "{" else -1
            i, closed = _next(t, _value(t, v), n)
            if closed:
                break
    except _Bad:
        return -1
    return at


def find_args(buf: np.ndarray, ev_start: np.ndarray, ev_end: np.ndarray, args_at: np.ndarray | None,
              rows: np.ndarray, keys: list[bytes]) -> np.ndarray:  # fmt: skip
    """Value spans of the JSON-quoted ``keys`` in the ``args`` of events ``rows``: shape (rows, keys, 2), -1 absent.

    ``args_at`` (each event's ``args`` object offset, -1: none) when known, as for ``find_args_at``;
    otherwise each event's object is walked from ``ev_start`` to find it.
    """
    out = np.full((len(rows), len(keys), 2), -1, np.int64)
    wanted: dict[str, list[int]] = {}
    for k, key in enumerate(keys):
        wanted.setdefault(key.decode("latin-1"), []).append(k)
    data, needles, hits = buf.data, [k.encode("latin-1") for k in wanted], []
    ends = np.asarray(ev_end).tolist()
    starts = np.asarray(ev_start).tolist() if args_at is None else None
    ats = np.asarray(args_at).tolist() if args_at is not None else None
    for r, ev in enumerate(np.asarray(rows, np.int64).tolist()):
        end = ends[ev]
        if ats is None:
            start = starts[ev]
            text = bytes(data[start:end]) if end > start else b""
            if not any(k in text for k in needles):
                continue  # no wanted key anywhere in the event: all -1 whatever its shape
            a = _args_offset(text.decode("latin-1")) if text else -1
            a = a + start if a >= 0 else -1
        else:
            a = ats[ev]
        if a < 0:
            continue
        text = bytes(data[a:end]) if end > a else b"{"
        if not any(k in text for k in needles):
            continue
        found = _object_members(text.decode("latin-1"), wanted)
        for c, v, e in found or ():  # a malformed object (None) leaves its row -1
            hits.append((r, c, v + a, e + a))
    if hits:
        r_, c_, v_, e_ = (np.array(x, np.int64) for x in zip(*hits))
        out[r_, c_, 0], out[r_, c_, 1] = v_, e_
    return out


def span_ints(buf: np.ndarray, spans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer value of each span (``ok`` False where absent or not a plain JSON integer within int64)."""
    vals = np.zeros(len(spans), np.int64)
    ok = np.zeros(len(spans), np.bool_)
    data = buf.data
    for r, (s, e) in enumerate(np.asarray(spans).tolist()):
        if s < 0 or e <= s:
            continue
        tok = bytes(data[s:e])
        if _INT.fullmatch(tok):
            v = int(tok)
            if -_INT64_MAX <= v <= _INT64_MAX:
                vals[r], ok[r] = v, True
    return vals, ok
