r"""First-run reading of trace JSON with the stdlib's C scanner, while the Numba parser is not compiled.

Compiled, the Numba parser (:mod:`aonkit._kernels.trace_scan`) reads about
500 MB/s on one core, but compiling it takes about 20 s on a 2-core machine:
longer than reading most traces. :func:`quick_scan` reads a document with
``json``'s C scanner, one event at a time (25-40 MB/s), into the same columns,
byte offsets and flags as the scanner, so the table built from it is the one
the parser gives (``tests/test_quick_json.py`` compares them on every shared
trace and on the fuzz corpus).

It reads only documents on which the two provably agree, and returns ``None``
for any other, which the caller then gives to the Numba parser (which also
reports the errors of invalid documents, with their place):

* bytes that are not all ASCII, or any ``\u`` escape (the scanner matches keys
  and interns values by their raw bytes; without escapes that can make letters,
  raw and decoded text agree, and byte offsets are character offsets);
* anything the stdlib refuses or the scanner would (invalid JSON, trailing
  data, nesting beyond Python's recursion limit, an empty or missing
  ``traceEvents``);
* an object with a repeated key (the scanner interns and flags every
  occurrence, a ``dict`` keeps the last);
* a ``ph``/``cat``/``name``/``bp`` value that is not a string or null, or a
  ``pid``/``tid`` that is not a string, an integer or null (their categories
  keep the raw token text);
* an event with more than one ``"args": {`` key inside it (the offset of its
  own ``args`` object would need the nesting).
"""

from __future__ import annotations

import json
import re
from json.scanner import make_scanner
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from .._kernels.trace_event import N64, R_ARGS, R_CORR, R_DEVICE, R_EV_END, R_EV_START, R_EXT, R_ID, R_STREAM
from .quick_values import ABSENT, Float, no_args, times, typed_args

_ARGS_OBJECT = re.compile(rb'"args"[ \t\n\r]*:[ \t\n\r]*\{')
_KEY_BEFORE = np.zeros(256, bool)  # bytes that can precede a key's opening quote
_KEY_BEFORE[[ord(c) for c in "{, \t\n\r"]] = True
_SKIP_WS = re.compile(r"[ \t\n\r]*")


class QuickScan(NamedTuple):
    """What :func:`quick_scan` read: the scanner's int64 rows, flags and decoded category columns."""

    i64: np.ndarray  # (N64, n_events), rows R_*
    flags: np.ndarray  # int32, F_* bits per event
    categories: list[tuple[np.ndarray, list[Any]]]  # per symbol kind K_*: (int32 codes, values)
    top_level: dict[str, Any]  # as the scanner's top-level spans decode
    n_bad: int  # traceEvents entries that are not objects
    layout: int  # 0 object with traceEvents, 1 bare array


class _Refused(Exception):
    """The document is outside what this reader provably reads like the scanner."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise _Refused
    return d


_EVENT_DECODER = json.JSONDecoder(parse_float=Float, object_pairs_hook=_unique_keys)
_SCAN_EVENT = make_scanner(_EVENT_DECODER)
_SCAN_VALUE = make_scanner(json.JSONDecoder())


def quick_scan(buf: np.ndarray) -> QuickScan | None:
    """Read trace JSON (a ``uint8`` array) like the Numba scanner, or ``None`` when it cannot promise to.

    Parameters
    ----------
    buf : numpy.ndarray
        The whole (decompressed) document.

    Returns
    -------
    QuickScan or None
        ``None`` for the documents listed in the module's notes.
    """
    data = buf.tobytes() if not isinstance(buf, bytes) else buf
    if not data.isascii() or b"\\u" in data:
        return None
    text = data.decode("ascii")
    try:
        return _document(text, data)
    except (_Refused, ValueError, RecursionError, StopIteration, IndexError):
        return None


def _skip(text: str, i: int) -> int:
    return _SKIP_WS.match(text, i).end()


def _document(text: str, data: bytes) -> QuickScan:
    n = len(text)
    i = _skip(text, 0)
    if i >= n:
        raise _Refused
    if text[i] == "[":
        events = _Events()
        i = events.read(text, i)
        if _skip(text, i) != n:
            raise _Refused
        return events.result(data, {}, 1)
    if text[i] != "{":
        raise _Refused
    top: dict[str, Any] = {}
    events = None
    i = _skip(text, i + 1)
    if text[i] == "}":
        raise _Refused  # no traceEvents: the scanner's error
    while True:
        if text[i] != '"':
            raise _Refused
        key, i = json.decoder.scanstring(text, i + 1)
        i = _skip(text, i)
        if text[i] != ":":
            raise _Refused
        i = _skip(text, i + 1)
        if key == "traceEvents" and text[i] == "[":
            if events is not None:
                raise _Refused  # a second events array: the scanner reads both into one set of columns
            events = _Events()
            top[key] = None
            i = events.read(text, i)
        else:
            top[key], i = _SCAN_VALUE(text, i)
        i = _skip(text, i)
        if text[i] == "}":
            break
        if text[i] != ",":
            raise _Refused
        i = _skip(text, i + 1)
    if events is None or _skip(text, i + 1) != n:
        raise _Refused
    return events.result(data, top, 0)


class _Events:
    """Columns of the events array, filled one event at a time."""

    def __init__(self) -> None:
        self.start: list[int] = []
        self.end: list[int] = []
        self.kinds: list[list[Any]] = [[], [], [], [], [], []]  # ph, cat, name, pid, tid, bp
        self.times: list[Any] = []  # (ts, dur) values as read
        self.ids: list[tuple[int, int, int, int, int, int]] = []  # corr, ext, stream, device, id, flags
        self.has_args: list[bool] = []
        self.n_bad = 0

    def read(self, text: str, i: int) -> int:
        """Read the array whose ``[`` is at ``i``; return the position after its ``]``."""
        i = _skip(text, i + 1)
        if text[i] == "]":
            raise _Refused  # empty: the scanner's error
        ph, cat, name, pid, tid, bp = self.kinds
        start, end, times, ids, has_args = self.start, self.end, self.times, self.ids, self.has_args
        while True:
            obj, j = _SCAN_EVENT(text, i)
            if type(obj) is dict:
                start.append(i)
                end.append(j)
                get = obj.get
                ph.append(get("ph"))
                cat.append(get("cat"))
                name.append(get("name"))
                pid.append(get("pid"))
                tid.append(get("tid"))
                bp.append(get("bp"))
                times.append((get("ts", ABSENT), get("dur", ABSENT)))
                args = get("args")
                if type(args) is dict:
                    has_args.append(True)
                    ids.append(typed_args(args, get("id")))
                else:
                    has_args.append(False)
                    ids.append(no_args(get("id")))
            else:
                self.n_bad += 1
            c = text[j]
            if c == ",":
                i = j + 1
                if text[i] != "{":
                    i = _skip(text, i)
            elif c == "]":
                return j + 1
            else:
                j = _skip(text, j)
                if text[j] == "]":
                    return j + 1
                if text[j] != ",":
                    raise _Refused
                i = _skip(text, j + 1)

    def result(self, data: bytes, top: dict[str, Any], layout: int) -> QuickScan:
        n = len(self.start)
        if n == 0:
            raise _Refused
        i64 = np.empty((N64, n), np.int64)
        i64[R_EV_START] = self.start
        i64[R_EV_END] = self.end
        ids = np.array(self.ids, np.int64).reshape(n, 6)
        for k, row in enumerate((R_CORR, R_EXT, R_STREAM, R_DEVICE, R_ID)):
            i64[row] = ids[:, k]
        flags = ids[:, 5].astype(np.int32)
        times(self.times, i64, flags)
        i64[R_ARGS] = _args_offsets(data, i64[R_EV_START], i64[R_EV_END], np.array(self.has_args, bool))
        cats = [_category(values, text=k in (0, 1, 2, 5)) for k, values in enumerate(self.kinds)]
        return QuickScan(i64, flags, cats, top, self.n_bad, layout)


def _args_offsets(data: bytes, start: np.ndarray, end: np.ndarray, has_args: np.ndarray) -> np.ndarray:
    """Offset of each event's ``args`` object (-1 without one), from one regex pass over the bytes.

    A match is a real key when its opening quote follows ``{``, ``,`` or whitespace,
    which a quote inside a string never does (there it follows a backslash).
    """
    spans = np.array([m.span() for m in _ARGS_OBJECT.finditer(data)], np.int64).reshape(-1, 2)
    at, ends = spans[:, 0], spans[:, 1] - 1
    real = at > 0
    real[real] = _KEY_BEFORE[np.frombuffer(data, np.uint8)[at[real] - 1]]
    found = ends[real]
    lo = np.searchsorted(found, start)
    hi = np.searchsorted(found, end)
    if np.any(has_args & (hi - lo != 1)):
        raise _Refused  # nested or repeated "args" objects: which one is the event's needs the nesting
    out = np.full(start.shape[0], -1, np.int64)
    out[has_args] = found[lo[has_args]]
    return out


def _category(values: list[Any], text: bool) -> tuple[np.ndarray, list[Any]]:
    """Codes in order of first appearance (-1 for null or absent) and the distinct values."""
    allowed = {str, type(None)} if text else {str, int, type(None)}
    if not set(map(type, values)) <= allowed:  # bool, float, NaN, containers: the raw token text decides
        raise _Refused
    codes, uniques = pd.factorize(np.array(values, dtype=object), use_na_sentinel=True)
    return codes.astype(np.int32), uniques.tolist()
