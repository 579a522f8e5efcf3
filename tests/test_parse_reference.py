"""The Numba parser against the stdlib-json reference on every real shared trace."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.sources.chrome_trace import read_chrome_trace

from .conftest import SHARED_TRACES, shared_trace_files
from .naive import read_text, reference_events

FILES = shared_trace_files()


def _is_valid_json(path: Path) -> bool:
    try:
        json.loads(read_text(path))
    except ValueError:
        return False
    return True


def _object_values(col: pd.Series) -> list:
    return [None if (v is None or (isinstance(v, float) and np.isnan(v))) else v for v in col.astype(object)]


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(SHARED_TRACES)) for p in FILES])
def test_parser_matches_stdlib_reference(path: Path) -> None:
    # GIVEN a real trace
    if not _is_valid_json(path):
        # WHEN it is not valid JSON THEN aonkit refuses it with a located error
        with pytest.raises(aonkit.TraceFormatError) as info:
            read_chrome_trace(path)
        assert info.value.offset is not None and info.value.line is not None
        assert str(path) in str(info.value)
        return
    doc = json.loads(read_text(path))
    if isinstance(doc, dict) and not isinstance(doc.get("traceEvents"), list):
        with pytest.raises(aonkit.TraceFormatError, match="traceEvents"):
            read_chrome_trace(path)
        return
    events = doc if isinstance(doc, list) else doc["traceEvents"]
    if not any(isinstance(e, dict) for e in events):
        # WHEN it holds no event objects THEN it is refused, not read as an empty trace
        with pytest.raises(aonkit.TraceFormatError, match="no trace events"):
            read_chrome_trace(path)
        return
    # WHEN both parsers read it
    trace = read_chrome_trace(path)
    ref, top = reference_events(path)
    got = trace.events
    # THEN the same events come out in the same order with the same values
    assert len(got) == len(ref)
    for col in ("ts_ns", "dur_ns", "correlation", "external_id", "stream", "device", "id"):
        np.testing.assert_array_equal(got[col].to_numpy(), ref[col].to_numpy(dtype=np.int64), err_msg=col)
    for col in ("ph", "cat", "name", "pid", "tid", "bp"):
        assert _object_values(got[col]) == _object_values(ref[col]), col
    assert trace.metadata == top
    # AND every arg stays reachable losslessly
    events = doc if isinstance(doc, list) else doc["traceEvents"]
    events = [e for e in events if isinstance(e, dict)]
    for i in np.linspace(0, len(events) - 1, num=min(len(events), 25)).astype(int):
        assert trace.event_json(int(i)) == events[i]
        assert trace.event_args(int(i)) == (events[i].get("args") if isinstance(events[i].get("args"), dict) else {})
