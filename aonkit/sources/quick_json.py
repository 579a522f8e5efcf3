r"""First-run reading of trace JSON with the stdlib's C scanner, while the Numba parser is not compiled.

Compiled, the Numba parser (:mod:`aonkit._kernels.trace_scan`) reads about
500 MB/s on one core, but compiling it takes about 26-30 s on a 2-core machine:
longer than reading most traces. :func:`quick_scan` reads a document with
``json``'s C scanner, one event at a time (33-81 MB/s), into the same columns,
byte offsets and flags as the scanner, so the table built from it is the one
the parser gives (``tests/test_quick_json.py`` compares them on every shared
trace and on the fuzz corpus).

It reads only documents on which the two provably agree, and returns ``None``
for any other, which the caller then gives to the Numba parser (which also
reports the errors of invalid documents, with their place):

* any ``\u`` escape (the scanner matches keys and interns values by their raw
  bytes; without escapes that can make letters, raw and decoded text agree);
* a category value (``name``, ``cat``, ...) or a top-level value whose bytes are
  not UTF-8 (the parser decodes those with U+FFFD and a warning);
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

The text is decoded as Latin-1, one character per byte, so that character
offsets are byte offsets; the strings it keeps (category values, top-level
metadata) are then decoded from their bytes as UTF-8, as the parser does.
"""

from __future__ import annotations

import codecs
import json
import re
from array import array
from json.scanner import make_scanner
from typing import Any, NamedTuple

import numpy as np

from .._kernels import trace_event as te
from .quick_values import ABSENT, Float, no_args, time_pair, typed_args

# "args": { where the opening quote follows {, "," or whitespace, as a key's does (a quote inside a
# string follows a backslash); the literal comes first so that the search skips ahead on it
_ARGS_OBJECT = re.compile(r'"args"[ \t\n\r]*:[ \t\n\r]*\{')
_KEY_BEFORE = frozenset("{, \t\n\r")
_KINDS = ("ph", "cat", "name", "pid", "tid", "bp")  # the scanner's symbol kinds, K_* order
_TEXT = (str, type(None))
_ALLOWED = (_TEXT, _TEXT, _TEXT, (str, int, type(None)), (str, int, type(None)), _TEXT)
_SKIP_WS = re.compile(r"[ \t\n\r]*")


class QuickScan(NamedTuple):
    """What :func:`quick_scan` read: the scanner's int64 rows, flags and decoded category columns."""

    i64: np.ndarray  # (N64, n_events), rows R_* of trace_event
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
    text = codecs.decode(memoryview(buf), "latin-1")  # one character per byte; no copy of the bytes first
    if "\\u" in text:
        return None
    try:
        return _document(text)
    except (_Refused, ValueError, RecursionError, StopIteration, IndexError):  # UnicodeDecodeError is a ValueError
        return None


def _utf8(v: Any) -> Any:
    """A value read from the Latin-1 text with its strings (and keys) decoded from their bytes as UTF-8."""
    if type(v) is str:
        return v if v.isascii() else v.encode("latin-1").decode("utf-8")
    if type(v) is list:
        return [_utf8(x) for x in v]
    if type(v) is dict:
        return {_utf8(k): _utf8(x) for k, x in v.items()}
    return v


def _skip(text: str, i: int) -> int:
    return _SKIP_WS.match(text, i).end()


def _document(text: str) -> QuickScan:
    n = len(text)
    i = _skip(text, 3 if text.startswith("\xef\xbb\xbf") else 0)  # a UTF-8 byte order mark, skipped as the scanner does
    if i >= n:
        raise _Refused
    if text[i] == "[":
        events = _Events()
        i = events.read(text, i)
        if _skip(text, i) != n:
            raise _Refused
        return events.result(text, {}, 1)
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
        key = _utf8(key)
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
            value, i = _SCAN_VALUE(text, i)
            top[key] = _utf8(value)
        i = _skip(text, i)
        if text[i] == "}":
            break
        if text[i] != ",":
            raise _Refused
        i = _skip(text, i + 1)
    if events is None or _skip(text, i + 1) != n:
        raise _Refused
    return events.result(text, top, 0)


class _Events:
    """Columns of the events array, filled one event at a time (8 bytes a number, 4 a category code)."""

    def __init__(self) -> None:
        self.pos = array("q")  # start, end per event
        self.nums = array("q")  # correlation, external id, stream, device, id, flags; ts ns, dur ns, flags
        self.has_args = bytearray()
        self.codes = [array("i") for _ in _KINDS]
        self.index: list[dict[Any, int]] = [{None: -1} for _ in _KINDS]  # value -> code (null: -1)
        self.values: list[list[Any]] = [[] for _ in _KINDS]
        self.n_bad = 0

    def read(self, text: str, i: int) -> int:
        """Read the array whose ``[`` is at ``i``; return the position after its ``]``."""
        i = _skip(text, i + 1)
        if text[i] == "]":
            raise _Refused  # empty: the scanner's error
        pos, nums, has_args = self.pos, self.nums, self.has_args
        kinds = tuple(zip(_KINDS, self.index, self.codes, self.values, _ALLOWED))
        while True:
            obj, j = _SCAN_EVENT(text, i)
            if type(obj) is dict:
                pos.append(i)
                pos.append(j)
                get = obj.get
                for key, index, codes, values, allowed in kinds:
                    v = get(key)
                    if type(v) not in allowed:  # bool, float, NaN, containers: the raw token text decides
                        raise _Refused
                    c = index.get(v)
                    if c is None:
                        c = index[v] = len(values)
                        values.append(v)
                    codes.append(c)
                args = get("args")
                if type(args) is dict:
                    has_args.append(1)
                    nums.extend(typed_args(args, get("id")))
                else:
                    has_args.append(0)
                    nums.extend(no_args(get("id")))
                nums.extend(time_pair(get("ts", ABSENT), get("dur", ABSENT)))
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

    def result(self, text: str, top: dict[str, Any], layout: int) -> QuickScan:
        n = len(self.has_args)
        if n == 0:
            raise _Refused
        i64 = np.empty((te.N64, n), np.int64)
        pos = np.frombuffer(self.pos, np.int64).reshape(n, 2)
        i64[te.R_EV_START] = pos[:, 0]
        i64[te.R_EV_END] = pos[:, 1]
        nums = np.frombuffer(self.nums, np.int64).reshape(n, 9)
        for k, row in enumerate((te.R_CORR, te.R_EXT, te.R_STREAM, te.R_DEVICE, te.R_ID)):
            i64[row] = nums[:, k]
        i64[te.R_TS] = nums[:, 6]
        i64[te.R_DUR] = nums[:, 7]
        flags = (nums[:, 5] | nums[:, 8]).astype(np.int32)
        has_args = np.frombuffer(self.has_args, np.uint8).astype(bool)
        i64[te.R_ARGS] = _args_offsets(text, i64[te.R_EV_START], i64[te.R_EV_END], has_args)
        cats = [(np.frombuffer(codes, np.int32).copy(), [_utf8(v) for v in values])
                for codes, values in zip(self.codes, self.values)]
        return QuickScan(i64, flags, cats, top, self.n_bad, layout)


def _args_offsets(text: str, start: np.ndarray, end: np.ndarray, has_args: np.ndarray) -> np.ndarray:
    """Offset of each event's ``args`` object (-1 without one), from one regex pass over the text.

    A match is a real key when its opening quote follows ``{``, ``,`` or whitespace,
    which a quote inside a string never does (there it follows a backslash).
    """
    found = np.array([m.end() - 1 for m in _ARGS_OBJECT.finditer(text)
                      if m.start() > 0 and text[m.start() - 1] in _KEY_BEFORE], np.int64)
    lo = np.searchsorted(found, start)
    hi = np.searchsorted(found, end)
    if np.any(has_args & (hi - lo != 1)):
        raise _Refused  # nested or repeated "args" objects: which one is the event's needs the nesting
    out = np.full(start.shape[0], -1, np.int64)
    out[has_args] = found[lo[has_args]]
    return out
