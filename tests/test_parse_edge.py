"""Hand-made edge cases of the JSON trace parser, each checked against the stdlib reference."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import aonkit
from aonkit.sources.chrome_trace import parse_buffer

from .naive import reference_events

INT_COLS = ["ts_ns", "dur_ns", "correlation", "external_id", "stream", "device", "id"]


def _write(tmp_path: Path, text: str | bytes, name: str = "t.json") -> Path:
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def _check_against_reference(path: Path) -> aonkit.Trace:
    trace = aonkit.load(path)
    ref, top = reference_events(path)
    assert len(trace.events) == len(ref)
    for col in INT_COLS:
        np.testing.assert_array_equal(trace.events[col].to_numpy(), ref[col].to_numpy(dtype=np.int64), err_msg=col)
    for col in ("ph", "cat", "name", "pid", "tid", "bp"):
        got = [
            None if v is None or (isinstance(v, float) and np.isnan(v)) else v for v in trace.events[col].astype(object)
        ]
        exp = [None if v is None or (isinstance(v, float) and np.isnan(v)) else v for v in ref[col].astype(object)]
        assert got == exp, col
    assert trace.metadata == top
    return trace


EDGE_DOCS = {
    "bare_array": '[{"ph":"X","name":"a","ts":1,"dur":2,"pid":1,"tid":1}]',
    "base_time": '{"baseTimeNanoseconds": 1700000000000000000, "traceEvents":[{"ph":"X","ts":12.345,"dur":0.001}]}',
    "base_after_events": '{"traceEvents":[{"ph":"X","ts":1.5}], "baseTimeNanoseconds": 1000}',
    "sub_ns_rounding": '{"traceEvents":[{"ts":0.0005},{"ts":0.0015},{"ts":-0.0025},{"ts":1.23456789},{"dur":2.5e-4}]}',
    "exponents": '{"traceEvents":[{"ts":1e3,"dur":2.5E+1},{"ts":-1.5e-3},{"ts":0e99999}]}',
    "string_tids": '{"traceEvents":[{"ph":"X","pid":"Spans","tid":"stream 7","ts":1},{"pid":0,"tid":7}]}',
    "old_external_id": '{"traceEvents":[{"args":{"external id":5}},{"args":{"external id":5,"External id":6}}]}',
    "uint64_and_floats": (
        '{"traceEvents":[{"args":{"correlation":10159970886766084423,"stream":"0x0","device":1.0,'
        '"Comms Id":10159970886766084423}},{"id":-9223372036854775808}]}'
    ),
    "int64_limits": '{"traceEvents":[{"args":{"correlation":9223372036854775807},"ts":9223372036854775.807}]}',
    "escapes": '{"traceEvents":[{"name":"a\\"b\\u00e9\\n","cat":"\\u006bernel"},{"name":"a\\"b\\u00e9\\n"}]}',
    "null_and_odd_types": '{"traceEvents":[{"name":null,"cat":null,"ts":"12","dur":null,"args":[1,2]},{"args":null}]}',
    "non_objects": '{"traceEvents":[1, {"ph":"i","s":"g","ts":5}, null, "x", [1]]}',
    "nested_args": (
        '{"traceEvents":[{"args":{"Input Dims":[[1,2],[3,[4,{"a":[]}]]],"correlation":3,"x":{"y":{"z":1}}}}]}'
    ),
    "duplicate_keys": '{"traceEvents":[{"ts":1,"ts":2,"name":"a","name":"b","args":{"stream":1,"stream":"s"}}]}',
    "constants": '{"traceEvents":[{"ts":NaN,"dur":Infinity,"args":{"x":-Infinity,"correlation":4}}]}',
    "whitespace": ' \r\n\t{ "traceEvents" : [ { "ph" : "X" , "ts" : 3 } , { } ] } \n',
    "bom": "\ufeff" + '{"traceEvents":[{"ts":1}]}',
    "unicode_names": '{"traceEvents":[{"name":"ядро ✓","tid":"поток"}]}',
}


@pytest.mark.parametrize("name", sorted(EDGE_DOCS))
def test_edge_documents_match_reference(tmp_path: Path, name: str) -> None:
    _check_against_reference(_write(tmp_path, EDGE_DOCS[name]))


def test_values_are_what_the_format_says(tmp_path: Path) -> None:
    t = aonkit.load(_write(tmp_path, EDGE_DOCS["base_time"]))
    assert t.events["ts_ns"].tolist() == [1700000000000012345]
    assert t.events["dur_ns"].tolist() == [1]
    t = aonkit.load(_write(tmp_path, EDGE_DOCS["sub_ns_rounding"]))
    assert t.events["ts_ns"].tolist()[:4] == [0, 2, -2, 1235]  # half to even
    assert any("rounded half to even" in w for w in t.warnings)
    t = aonkit.load(_write(tmp_path, EDGE_DOCS["uint64_and_floats"]))
    assert t.events["correlation"].tolist() == [-1, -1]
    assert t.event_args(0)["Comms Id"] == 10159970886766084423
    assert any("exceed int64" in w for w in t.warnings)
    t = aonkit.load(_write(tmp_path, EDGE_DOCS["string_tids"]))
    assert t.events["tid"].tolist() == ["stream 7", 7] and t.events["pid"].tolist() == ["Spans", 0]
    t = aonkit.load(_write(tmp_path, EDGE_DOCS["non_objects"]))
    assert len(t) == 1 and any("not JSON objects" in w for w in t.warnings)


def test_gzip_and_bare_array_layout(tmp_path: Path) -> None:
    doc = EDGE_DOCS["bare_array"].encode()
    p = _write(tmp_path, gzip.compress(doc[:20]) + gzip.compress(doc[20:]), "t.json.gz")  # two gzip members
    t = _check_against_reference(p)
    assert t.meta.layout == "array" and len(t) == 1


INVALID = {
    "comment": '{\n  // c\n  "traceEvents": []}',
    "trailing_comma": '{"traceEvents":[{"ts":1},]}',
    "single_quotes": "{'traceEvents':[]}",
    "bad_escape": '{"traceEvents":[{"name":"a\\x"}]}',
    "control_char": '{"traceEvents":[{"name":"a\tb"}]}',
    "leading_zero": '{"traceEvents":[{"ts":01}]}',
    "extra_data": '{"traceEvents":[]} x',
    "missing_colon": '{"traceEvents" []}',
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_json_names_file_and_place(tmp_path: Path, name: str) -> None:
    text = INVALID[name]
    p = _write(tmp_path, text)
    with pytest.raises(json.JSONDecodeError) as ref:
        json.loads(text)
    line, col = ref.value.lineno, ref.value.colno
    with pytest.raises(aonkit.TraceFormatError) as info:
        aonkit.load(p)
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.line, err.column) == (line, col)
    assert err.offset == ref.value.pos
    assert str(p) in str(err) and f"line {line}, column {col}" in str(err)


@pytest.mark.parametrize("text", ["", "   ", "42", '"x"', '{"a": 1}', "null"])
def test_not_a_trace(tmp_path: Path, text: str) -> None:
    with pytest.raises(aonkit.TraceFormatError):
        aonkit.load(_write(tmp_path, text))


def test_truncated_raises_by_default_and_salvages_on_request(tmp_path: Path) -> None:
    events = [{"ph": "X", "name": f"op{i}", "ts": i, "dur": 1, "args": {"External id": i}} for i in range(10)]
    full = json.dumps({"traceEvents": events, "baseTimeNanoseconds": 5})
    cut = full[: full.index('"op7"') + 2]  # inside event 7
    p = _write(tmp_path, cut)
    with pytest.raises(aonkit.TraceFormatError, match="truncated") as info:
        aonkit.load(p)
    assert info.value.offset == len(cut) and info.value.event_index == 7
    t = aonkit.load(p, salvage=True)
    assert len(t) == 7 and t.events["external_id"].tolist() == list(range(7))
    assert any("truncated" in w and "7 complete events" in w for w in t.warnings)
    # every prefix of the file salvages exactly the events that are complete in it
    starts = [full.index(f'"op{i}"') for i in range(10)]
    for k in range(len('{"traceEvents": '), len(full), 7):
        closed = sum(1 for i in range(10) if full.index("}}", starts[i]) + 2 <= k)
        if closed == 0:  # nothing complete to salvage: refused, not an empty trace
            with pytest.raises(aonkit.TraceFormatError, match="no trace events"):
                aonkit.load(_write(tmp_path, full[:k]), salvage=True)
            continue
        assert len(aonkit.load(_write(tmp_path, full[:k]), salvage=True)) == closed


@pytest.mark.parametrize("inflate", ["default", "stdlib zlib"])
def test_truncated_gzip_is_salvaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inflate: str) -> None:
    if inflate == "stdlib zlib":
        import zlib

        from aonkit.sources import _io

        monkeypatch.setattr(_io, "ZLIB", zlib)
    events = [{"ph": "X", "name": "k", "ts": i, "dur": 1} for i in range(5000)]
    data = gzip.compress(json.dumps({"traceEvents": events}).encode())
    p = _write(tmp_path, data[: len(data) // 2], "cut.json.gz")
    with pytest.raises(aonkit.TraceFormatError):
        aonkit.load(p)
    t = aonkit.load(p, salvage=True)
    assert 0 < len(t) < 5000
    assert t.events["ts_ns"].tolist() == [i * 1000 for i in range(len(t))]
    assert any("gzip stream ends early" in w for w in t.warnings)


def test_gzip_bomb_is_capped(tmp_path: Path) -> None:
    body = b'{"traceEvents":[' + b" " * (50 * 1024 * 1024) + b"]}"
    p = _write(tmp_path, gzip.compress(body), "bomb.json.gz")
    assert p.stat().st_size < 200_000
    with pytest.raises(aonkit.TraceTooLargeError, match="cap"):
        aonkit.load(p, max_decompressed_bytes=10 * 1024 * 1024)
    with pytest.raises(aonkit.TraceFormatError, match="no trace events"):  # under the default cap: no events
        aonkit.load(p)


def test_parse_buffer_accepts_memory(tmp_path: Path) -> None:
    buf = np.frombuffer(EDGE_DOCS["whitespace"].encode(), np.uint8)
    t = parse_buffer(buf)
    assert len(t) == 2 and t.events["ts_ns"].tolist()[0] == 3000


def test_decompression_cap_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aonkit import _config

    p = _write(tmp_path, gzip.compress(b'{"traceEvents":[' + b" " * 100_000 + b"]}"), "t.json.gz")
    monkeypatch.setenv("AONKIT_MAX_DECOMPRESSED_BYTES", "50000")
    _config.reset()
    try:
        with pytest.raises(aonkit.TraceTooLargeError, match="50000"):
            aonkit.load(p)
    finally:
        monkeypatch.delenv("AONKIT_MAX_DECOMPRESSED_BYTES")
        _config.reset()
    with pytest.raises(aonkit.TraceFormatError, match="no trace events"):
        aonkit.load(p)


def test_ids_equal_across_json_types_share_a_category_with_a_warning(tmp_path: Path) -> None:
    # GIVEN pids and tids written as 1, 1.0 and true (equal in Python, so one category each can hold only one)
    p = _write(tmp_path, '{"traceEvents": [{"ph": "X", "pid": 1, "tid": true}, {"ph": "X", "pid": 1.0, "tid": 1},'
                         ' {"ph": "X", "pid": "1", "tid": 2}]}')
    # WHEN it loads (this raised pandas' "categories must be unique" before)
    trace = aonkit.load(p)
    # THEN equal values share the first one's category, the string stays apart, and the merge is said
    assert list(trace.events["pid"].astype(object)) == [1, 1, "1"]
    assert list(trace.events["tid"].astype(object)) == [True, True, 2]
    said = [w for w in trace.warnings if "compare equal" in w]
    assert len(said) == 2 and "1.0 as 1" in said[0] and "1 as True" in said[1]
    assert trace.event_json(1)["pid"] == 1.0  # the file's value is kept


def test_nan_id_is_missing_with_a_warning(tmp_path: Path) -> None:
    p = _write(tmp_path, '{"traceEvents": [{"ph": "X", "pid": NaN, "tid": 3}, {"ph": "X", "pid": 2, "tid": 3}]}')
    trace = aonkit.load(p)  # this raised pandas' "categories cannot be null" before
    assert trace.events["pid"].isna().tolist() == [True, False]
    assert any("pid values NaN are treated as missing" in w for w in trace.warnings)
