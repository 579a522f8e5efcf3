"""Numbers as the Numba scanner types them, for :mod:`.quick_json`: exact ns times and int64 ids.

The rules of :func:`aonkit._kernels.json_lex.parse_scaled` and
:func:`aonkit._kernels.trace_event.parse_event`, on values the stdlib scanner
read (integers as ``int``, other numbers as their text, :class:`Float`).
"""

from __future__ import annotations

from typing import Any

from .._kernels.trace_event import F_OVERFLOW, F_TIME_NOT_NUMBER, F_TIME_OVERFLOW, F_TIME_ROUNDED
from .._kernels.trace_event import TS_MISSING as _TS_MISSING

INT64_MAX = 9223372036854775807
TS_MISSING = int(_TS_MISSING)
_MAX_US = INT64_MAX // 1000  # integer µs that fit int64 ns
ABSENT = object()  # a ts/dur key that is not there (missing, unflagged); null is "not a number"


class Float(str):
    """The text of a JSON number with a fraction or exponent (read exactly, never through ``float``)."""

    __slots__ = ()


def _typed(v: Any) -> tuple[int, int]:
    """An integer arg as the scanner types it: (value or -1, overflow flag)."""
    if type(v) is int:
        if -INT64_MAX <= v <= INT64_MAX:
            return v, 0
        return -1, F_OVERFLOW
    return -1, 0


def typed_args(args: dict[str, Any], ev_id: Any) -> tuple[int, int, int, int, int, int]:
    """(correlation, external id, stream, device, id, flags) of an event with an ``args`` object.

    ``"External id"`` wins over ``"external id"`` when both are there; either
    flags ``F_OVERFLOW`` when it does not fit int64, as the scanner does.
    """
    corr, f1 = _typed(args.get("correlation"))
    upper, f2 = _typed(args.get("External id"))
    lower, f6 = _typed(args.get("external id"))  # flagged when it overflows even where "External id" wins
    ext = upper if "External id" in args else lower
    stream, f3 = _typed(args.get("stream"))
    device, f4 = _typed(args.get("device"))
    idv, f5 = _typed(ev_id)
    return corr, ext, stream, device, idv, f1 | f2 | f3 | f4 | f5 | f6


def no_args(ev_id: Any) -> tuple[int, int, int, int, int, int]:
    """The same row for an event without an ``args`` object: only its ``id``."""
    idv, f = _typed(ev_id)
    return -1, -1, -1, -1, idv, f


def scaled(text: str, scale: int) -> tuple[int, int]:
    """Exact value of a JSON number's text times ``10**scale``: (value, 0 exact / 1 rounded / 2 overflow).

    The rule of :func:`aonkit._kernels.json_lex.parse_scaled`: digits below the unit
    round half to even, and magnitudes above int64's maximum overflow.
    """
    ip, dot, fp = text.partition(".")
    if dot and len(fp) <= scale and fp.isdigit():  # the common shape: exact, no exponent
        value = int(ip + fp + "0" * (scale - len(fp)))
        if -INT64_MAX <= value <= INT64_MAX:
            return value, 0
        return -1, 2
    neg = text[0] == "-"
    body = text[1:] if neg else text
    mant, _, exp = body.replace("E", "e").partition("e")
    ip, _, fp = mant.partition(".")
    digits = ip + fp
    total = len(digits)
    kept = len(ip) + (int(exp) if exp else 0) + scale
    value = int(digits[:kept]) if kept > 0 else 0
    status = 0
    if value > INT64_MAX:
        return -1, 2
    if kept > total:
        if value:
            value *= 10 ** min(kept - total, 20)
            if value > INT64_MAX:
                return -1, 2
    elif kept < total:
        rest_nonzero = digits[max(kept + 1, 0):].strip("0") != ""
        if kept >= 0:
            r = ord(digits[kept]) - 48
            if r or rest_nonzero:
                status = 1
            if r > 5 or (r == 5 and (rest_nonzero or value & 1)):
                if value == INT64_MAX:
                    return -1, 2
                value += 1
        elif rest_nonzero:
            status = 1
    return (-value if neg else value), status


def _time(v: Any, missing: int) -> tuple[int, int]:
    """A ts/dur value in ns, as the scanner reads it: (ns or ``missing``, flag bits)."""
    if type(v) is int:
        if -INT64_MAX <= v * 1000 <= INT64_MAX:
            return v * 1000, 0
        return missing, F_TIME_OVERFLOW
    if type(v) is Float:
        ns, st = scaled(v, 3)
        if st == 2:
            return missing, F_TIME_OVERFLOW
        return ns, (F_TIME_ROUNDED if st == 1 else 0)
    return missing, F_TIME_NOT_NUMBER


def time_pair(ts: Any, dur: Any) -> tuple[int, int, int]:
    """(ts ns, dur ns, ``F_TIME_*`` flags) from the values read (``ABSENT``: no key; missing, unflagged)."""
    if type(ts) is int and type(dur) is int and -_MAX_US <= ts <= _MAX_US and -_MAX_US <= dur <= _MAX_US:
        return ts * 1000, dur * 1000, 0
    a, fa = (TS_MISSING, 0) if ts is ABSENT else _time(ts, TS_MISSING)
    b, fb = (-1, 0) if dur is ABSENT else _time(dur, -1)
    return a, b, fa | fb
