"""Slow, obvious reference implementations that aonkit's kernels are checked against."""

from __future__ import annotations

import decimal
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

TS_MISSING = int(np.iinfo(np.int64).min)
_I64 = (-(2**63), 2**63 - 1)
_CTX = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_EVEN)


def read_text(path: str | Path) -> bytes:
    """Bytes of a trace file, gunzipped when it is gzip."""
    raw = Path(path).read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def _int_or_missing(value: Any) -> int:
    # -2**63 is reserved (TS_MISSING); the scanner treats it as overflow
    if isinstance(value, int) and not isinstance(value, bool) and _I64[0] < value <= _I64[1]:
        return value
    return -1


def _ns(value: Any) -> int | None:
    """Exact ns of a µs JSON number (int or Decimal), rounded half to even; None if unusable."""
    if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
        return None
    d = decimal.Decimal(value)
    if not d.is_finite():
        return None
    ns = int(_CTX.multiply(d, 1000).to_integral_value(rounding=decimal.ROUND_HALF_EVEN, context=_CTX))
    return ns if _I64[0] <= ns <= _I64[1] else None


def _text(value: Any) -> Any:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)


def reference_events(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Events table and top-level keys of a trace, built with the stdlib ``json`` module."""
    doc = json.loads(read_text(path), parse_float=decimal.Decimal)
    events = doc if isinstance(doc, list) else doc["traceEvents"]
    top = {} if isinstance(doc, list) else json.loads(read_text(path))
    top.pop("traceEvents", None)
    base = top.get("baseTimeNanoseconds")
    base = base if isinstance(base, int) else 0
    rows = []
    for ev in events:
        if not isinstance(ev, dict):
            continue
        args = ev.get("args")
        args = args if isinstance(args, dict) else {}
        ext = args["External id"] if "External id" in args else args.get("external id")
        ts = _ns(ev.get("ts"))
        dur = _ns(ev.get("dur"))
        rows.append(
            {
                "ph": _text(ev.get("ph")),
                "cat": _text(ev.get("cat")),
                "name": _text(ev.get("name")),
                "pid": ev.get("pid"),
                "tid": ev.get("tid"),
                "ts_ns": TS_MISSING if ts is None else ts + base,
                "dur_ns": -1 if dur is None else dur,
                "correlation": _int_or_missing(args.get("correlation")),
                "external_id": _int_or_missing(ext),
                "stream": _int_or_missing(args.get("stream")),
                "device": _int_or_missing(args.get("device")),
                "id": _int_or_missing(ev.get("id")),
                "bp": _text(ev.get("bp")),
            }
        )
    columns = ["ph", "cat", "name", "pid", "tid", "ts_ns", "dur_ns", "correlation",
               "external_id", "stream", "device", "id", "bp"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns), top
