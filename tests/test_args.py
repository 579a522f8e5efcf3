"""Per-key argument look-up against the stdlib reference on real traces."""

from __future__ import annotations

import json

import numpy as np
import pytest

import aonkit

from .conftest import SAMPLE_TRACES, require_shared
from .naive import read_text


@pytest.mark.parametrize(
    ("rel", "key"),
    [
        ("hta/trace_filter/sampled_rank-0.json.gz", "bytes"),
        ("hta/trace_filter/sampled_rank-0.json.gz", "memory bandwidth (GB/s)"),
        ("tracelens/mi300/resnet_act_checkpoint.json.gz", "bytes"),  # str or int on ROCm
        ("hta/large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz", "Comms Id"),
        ("tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "Input Dims"),
    ],
)
def test_arg_values_match_reference(rel: str, key: str) -> None:
    path = require_shared() / rel
    trace = aonkit.load(path)
    doc = json.loads(read_text(path))
    events = [e for e in (doc["traceEvents"] if isinstance(doc, dict) else doc) if isinstance(e, dict)]
    want = [e["args"].get(key) if isinstance(e.get("args"), dict) else None for e in events]
    assert trace.arg_values(key) == want
    rows = np.flatnonzero([w is not None for w in want])[:50]
    assert trace.arg_values(key, rows) == [want[i] for i in rows]


def test_arg_numbers_from_cache(tmp_path) -> None:
    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    rows = np.flatnonzero((t.events["cat"] == "gpu_memcpy").to_numpy())
    direct = t.arg_numbers("bytes", rows)
    assert len(rows) and np.all(direct > 0)
    cached = aonkit.load(t.save(tmp_path / "c.parquet"))
    np.testing.assert_array_equal(cached.arg_numbers("bytes", rows), direct)
    assert np.isnan(t.arg_numbers("no such key", rows)).all()


def test_arg_ints_of_equals_one_key_at_a_time(tmp_path) -> None:
    events = [
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1,
         "args": {"Bytes": 512, "Addr": 7, "Device Id": 0, "nested": {"Bytes": 3}, "Total Allocated": 2**62}},
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2, "args": {"Bytes": -512, "Bytes ": 9}},
        {"ph": "i", "name": "x", "pid": 1, "tid": 1, "ts": 3, "args": {"Bytes": "12", "Addr": 1.5}},
        {"ph": "i", "name": "x", "pid": 1, "tid": 1, "ts": 4, "args": []},
        {"ph": "i", "name": "x", "pid": 1, "tid": 1, "ts": 5},
    ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    t = aonkit.load(path)
    keys = ("Bytes", "Addr", "Device Id", "Total Allocated", "missing", "Bytes")
    many = t.arg_ints_of(keys)
    assert many["Bytes"].tolist() == [512, -512, -1, -1, -1]
    assert many["Total Allocated"].tolist() == [2**62, -1, -1, -1, -1]
    for key in keys:
        np.testing.assert_array_equal(many[key], t.arg_ints(key))
    rows = np.array([2, 0])
    assert t.arg_ints_of(["Addr"], rows)["Addr"].tolist() == [-1, 7]
    assert t.arg_ints_of([]) == {}


def test_arg_ints_of_on_real_memory_events() -> None:
    t = aonkit.load(require_shared() / "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    rows = np.flatnonzero((t.events["name"] == "[memory]").to_numpy())
    assert len(rows)
    keys = ["Device Type", "Device Id", "Bytes", "Addr", "Total Allocated", "Total Reserved"]
    many = t.arg_ints_of(keys, rows)
    for key in keys:
        np.testing.assert_array_equal(many[key], t.arg_ints(key, rows))


def test_span_floats_equal_json_where_they_answer(rng: np.random.Generator) -> None:
    from aonkit._kernels.args import span_floats

    tokens = ["0", "-0", "-0.0", "0.5", "1e22", "1e23", "9007199254740993", "9007199254740992", "0.1e-22",
              "123.456e-5", "1E+5", "2.5E-3", "05", "1.", ".5", "-", "1e", "1e+", "--1", "1.5x", "\"1.5\"", "nan",
              "0.08888888888888889", "17.976931348623157e307", "4.9e-324", "1" * 40]  # fmt: skip
    for _ in range(3000):
        digits = "".join(rng.choice(list("0123456789"), int(rng.integers(1, 10))))
        frac = "".join(rng.choice(list("0123456789"), int(rng.integers(0, 11))))
        tok = ("-" if rng.random() < 0.3 else "") + (digits.lstrip("0") or "0") + (f".{frac}" if frac else "")
        if rng.random() < 0.4:
            tok += f"e{int(rng.integers(-30, 30))}"
        tokens.append(tok)
        tokens.append(repr(float(rng.standard_normal() * 10.0 ** rng.integers(-12, 12))))  # as Python writes floats
    text = " ".join(tokens).encode()
    starts = np.cumsum([0] + [len(t) + 1 for t in tokens[:-1]])
    spans = np.stack([starts, starts + [len(t) for t in tokens]], axis=1).astype(np.int64)
    vals, ok = span_floats(np.frombuffer(text, np.uint8), spans)
    answered = 0
    for tok, v, good in zip(tokens, vals.tolist(), ok.tolist()):
        try:
            want = json.loads(tok)
        except ValueError:
            want = None
        if good:  # every answer is the float json gives, to the bit (sign of zero included)
            assert isinstance(want, (int, float)) and not isinstance(want, bool), tok
            assert np.float64(want).tobytes() == np.float64(v).tobytes(), tok
            answered += 1
    assert answered > 3000  # the fast path covers most of them
    assert not ok[tokens.index("1e23")] and not ok[tokens.index("9007199254740993")] and not ok[tokens.index("05")]


def test_args_walk_takes_the_last_args_and_skips_malformed(tmp_path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        '{"traceEvents": [\n'
        '{"ph": "i", "name": "a", "pid": 1, "tid": 1, "ts": 1, "args": {"bytes": 1, "x": 2.5}},\n'
        '{"ph": "i", "name": "b", "pid": 1, "tid": 1, "ts": 2, "args": {"bytes": 1}, "args": {"x": 0.25}},\n'
        '{"ph": "i", "name": "c", "pid": 1, "tid": 1, "ts": 3, "args": {"bytes": 1}, "args": "none"},\n'
        '{"ph": "i", "name": "d", "pid": 1, "tid": 1, "ts": 4, "args": {"bytes": 7, "x": [1, {"y": 2}], "z": 1e400}}\n'
        "]}"
    )
    t = aonkit.load(path)
    assert t.arg_ints("bytes").tolist() == [1, -1, -1, 7]
    np.testing.assert_array_equal(t.arg_numbers("x"), [2.5, 0.25, np.nan, np.nan])
    assert t.arg_numbers("z")[3] == np.inf  # json's value for an overflowing float


def _args_objects(trace: aonkit.Trace) -> np.ndarray:
    """Each event's args offset relative to its text's start (-1: none)."""
    buf, start, _ = trace._raw.spans()
    at = trace._raw.args_offsets()
    return np.where(at >= 0, at - start, -1)


@pytest.mark.parametrize("name", ["gpu_synthetic_rank0.json.gz", "cpu_mlp.pt.trace.json.gz"])
def test_scanner_records_each_args_object_where_a_walk_finds_it(tmp_path, name: str) -> None:
    from aonkit._kernels.args import args_starts, find_args

    # GIVEN a trace loaded from JSON (offsets recorded by the scanner) and from its cache (found on first use)
    t = aonkit.load(SAMPLE_TRACES / name)
    recorded = t._raw._args_at
    assert recorded is not None
    cached = aonkit.load(t.save(tmp_path / "c.aon.parquet"))
    assert cached._raw._args_at is None
    # THEN both give the same args objects, each at a '{' right after an "args" key (a separate walk agrees)
    buf, start, end = t._raw.spans()
    np.testing.assert_array_equal(recorded, args_starts(buf, start, end))
    np.testing.assert_array_equal(_args_objects(t), _args_objects(cached))
    have = recorded >= 0
    assert have.mean() > 0.5 and (buf[recorded[have]] == ord("{")).all()
    # AND a look-up from there equals the walk of the whole event, for present and absent keys
    keys = ["External id", "correlation", "Input Dims", "Bytes", "no such key"]
    quoted = [np.frombuffer(json.dumps(k).encode(), np.uint8) for k in keys]
    off = np.concatenate([[0], np.cumsum([len(q) for q in quoted])]).astype(np.int64)
    rows = np.arange(len(start), dtype=np.int64)
    whole = find_args(buf, start, end, rows, np.concatenate(quoted), off)
    spans, _ = t._arg_spans_of(keys, None)
    np.testing.assert_array_equal(spans, whole)
    assert (whole[:, -1, 0] == -1).all() and (whole[:, 0, 0] >= 0).any()
