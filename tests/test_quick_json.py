"""The first-run quick reader gives the Numba parser's trace, or steps aside.

``quick_json.quick_scan`` reads with the stdlib's C scanner while the parser is
not compiled. Wherever it accepts a document, the trace built from it must be
the parser's to the byte: columns, categories (values and their types), event
and args offsets, metadata (with its key order) and warnings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aonkit
from aonkit._kernels import json_lex
from aonkit.sources import first_run, quick_json, quick_values
from aonkit.sources.chrome_trace import parse_buffer

from .compile_events import LISTEN
from .conftest import ROOT, SAMPLE_TRACES, SHARED_TRACES, shared_trace_files
from .naive import read_text
from .test_fuzz import mutated

FILES = shared_trace_files()


def _numba(data: bytes, monkeypatch: pytest.MonkeyPatch) -> aonkit.Trace | Exception:
    monkeypatch.setenv("AONKIT_QUICK_PARSE", "0")
    try:
        return parse_buffer(np.frombuffer(data, np.uint8).copy(), path="t.json")
    except aonkit.TraceFormatError as err:
        return err


def _quick(data: bytes, monkeypatch: pytest.MonkeyPatch) -> aonkit.Trace | None:
    buf = np.frombuffer(data, np.uint8).copy()
    if quick_json.quick_scan(buf) is None:
        return None
    monkeypatch.setenv("AONKIT_QUICK_PARSE", "1")
    return parse_buffer(buf, path="t.json")


def assert_same_trace(a: aonkit.Trace, b: aonkit.Trace) -> None:
    pd.testing.assert_frame_equal(a.events, b.events, check_exact=True)
    for col in a.events.select_dtypes("category"):
        ca, cb = a.events[col].cat.categories, b.events[col].cat.categories
        assert [(type(v), v) for v in ca] == [(type(v), v) for v in cb], col
    for attr in ("_start", "_end", "_args_at"):
        assert np.array_equal(getattr(a._raw, attr), getattr(b._raw, attr)), attr
    assert a.meta == b.meta
    assert list(a.metadata.items()) == list(b.metadata.items())
    assert a.warnings == b.warnings


def _compare(data: bytes, monkeypatch: pytest.MonkeyPatch) -> str:
    """'refused', 'same' (and the traces agree), or the parser's error that quick also refused."""
    quick = _quick(data, monkeypatch)
    ref = _numba(data, monkeypatch)
    if isinstance(ref, Exception):
        assert quick is None, f"quick reader accepted what the parser refuses: {ref}"
        return "error"
    if quick is None:
        return "refused"
    assert_same_trace(ref, quick)
    return "same"


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(SHARED_TRACES)) for p in FILES])
def test_every_shared_trace_reads_the_same_or_is_refused(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a real trace
    data = read_text(path)
    # WHEN both readers read it
    outcome = _compare(data, monkeypatch)
    # THEN a trace the parser reads without \u escapes is read quickly too, and alike
    if outcome != "error" and b"\\u" not in data:
        assert outcome == "same"


@pytest.mark.parametrize("seed", range(3))
def test_samples_and_synthetic_trace_read_the_same(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = sorted((ROOT / "sample_traces").glob("*.json*"))
    data = read_text(paths[seed % len(paths)]) if seed < 2 else first_run._sample_document(300).tobytes()
    assert _compare(data, monkeypatch) == "same"


def _doc(events: list[str], top: str = "") -> bytes:
    return ('{"traceEvents": [' + ", ".join(events) + "]" + top + "}").encode()


ACCEPTED = {
    "times as the scanner reads them": _doc([
        '{"ph": "X", "name": "a", "ts": 1.0005, "dur": -0.0}',  # rounds half to even, -0
        '{"ph": "X", "name": "b", "ts": 12345678901234567.5, "dur": 1e-3}',  # exponent
        '{"ph": "X", "name": "c", "ts": 9223372036854775807, "dur": 2.5e19}',  # overflow to missing
        '{"ph": "X", "name": "d", "ts": null, "dur": "7"}',  # not numbers
        '{"ph": "X", "name": "e", "ts": NaN, "dur": -Infinity}',
        '{"ph": "X", "name": "f", "ts": 0.0015, "dur": 123456.0000001}',
        '{"ph": "X", "name": "g"}',  # absent: missing, unflagged
    ]),
    "typed args and ids": _doc([
        '{"ph": "f", "id": 18446744073709551616, "args": {"correlation": 3.0, "External id": "7", '
        '"external id": 99999999999999999999, "stream": -9223372036854775808, "device": 2}}',
        '{"ph": "s", "id": 1.5, "args": {"external id": 4, "correlation": 5}}',
        '{"ph": "s", "id": "0x1f", "args": 17}',
        '{"ph": "i", "args": {"args": 1, "correlation": -0}}',
    ]),
    "categories: ints, strings, nulls, escapes": _doc([
        '{"ph": "X", "pid": 1, "tid": "1", "name": "a\\"b\\\\c", "cat": null, "bp": "e"}',
        '{"ph": "X", "pid": "1", "tid": 1, "name": "a/b", "cat": "k"}',
        '{"ph": "X", "pid": -0, "tid": 1, "name": "a\\/b", "cat": "k", "args": {"name": "\\"args\\": {"}}',
    ], top=', "baseTimeNanoseconds": 1000, "dup": 1, "deviceProperties": [{"id": 0}], "dup": [2]'),
    "bare array with non-objects": b' [1, {"ph": "X", "ts": 5}, "x", {"ph": "i"} ] \n',
    "a key-looking string inside a string": _doc(['{"name": ", \\"args\\": {", "args": {"stream": 7}}']),
    "UTF-8 text: offsets stay byte offsets": _doc([
        '{"ph": "X", "name": "é", "cat": "数据加载", "pid": "rank 0 ✓", "ts": 1}',
        '{"ph": "X", "name": "ok", "args": {"Input Dims": "形状 [1]", "stream": 7}, "ts": 2}',
        '{"ph": "X", "name": "é", "args": {"correlation": 9}}',
    ], top=', "traceName": "训练.json", "distributedInfo": {"ключ": ["значение", 1]}'),
    "UTF-8 byte order mark": b"\xef\xbb\xbf" + _doc(['{"ph": "X"}']),
}

REFUSED = {
    "repeated event key": _doc(['{"ph": "X", "ph": "B"}']),
    "repeated args key": _doc(['{"ph": "X", "args": {"stream": 99999999999999999999, "stream": 1}}']),
    "float pid": _doc(['{"ph": "X", "pid": 1.0}']),
    "bool tid": _doc(['{"ph": "X", "tid": true}', '{"ph": "X", "tid": 1}']),
    "NaN pid": _doc(['{"ph": "X", "pid": NaN}']),
    "numeric name": _doc(['{"ph": "X", "name": 1.50}']),
    "object cat": _doc(['{"ph": "X", "cat": {"a": 1}}']),
    "nested args object": _doc(['{"ph": "X", "args": {"x": {"args": {}}}}']),
    "unicode escape": _doc(['{"ph": "X", "name": "\\u0041"}']),
    "name that is not UTF-8": _doc(['{"ph": "X", "name": "a"}']).replace(b'"a"', b'"a\xff"'),
    "metadata that is not UTF-8": _doc(['{"ph": "X"}'], top=', "traceName": "été"').replace("é".encode(), b"\xe9"),
    "two events arrays": _doc(['{"ph": "X"}'], top=', "traceEvents": [{"ph": "B"}]'),
}

INVALID = {
    "truncated": _doc(['{"ph": "X"}'])[:-3],
    "trailing data": _doc(['{"ph": "X"}']) + b" x",
    "empty events": _doc([]),
    "no events array": b'{"schemaVersion": 1}',
    "only non-objects": b"[1, 2]",
    "trailing comma": b'[{"ph": "X"},]',
    "not a trace": b'"x"',
}


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_edge_cases_read_the_same(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _compare(ACCEPTED[name], monkeypatch) == "same"


@pytest.mark.parametrize("name", list(REFUSED))
def test_what_the_readers_would_read_differently_is_refused(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _compare(REFUSED[name], monkeypatch) == "refused"


@pytest.mark.parametrize("name", list(INVALID))
def test_invalid_documents_are_left_to_the_parser_and_its_located_errors(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _compare(INVALID[name], monkeypatch) == "error"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=mutated())
def test_mutated_traces_read_the_same_or_are_refused(data: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    _compare(data, monkeypatch)


NUMBER = st.from_regex(r"\A-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,25})?([eE][-+]?[0-9]{1,3})?\Z")


@settings(max_examples=2000, deadline=None)
@given(text=NUMBER, scale=st.sampled_from([0, 3]))
def test_exact_scaling_matches_the_kernel(text: str, scale: int) -> None:
    """The quick reader's number rule against the parser's ``parse_scaled`` kernel."""
    b = np.frombuffer(text.encode(), np.uint8).copy()
    v, st_ = json_lex.parse_scaled(b, 0, len(b), scale)
    want = (int(v), int(st_)) if st_ != 2 else (-1, 2)
    assert quick_values.scaled(text, scale) == want


def test_budget_and_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AONKIT_QUICK_PARSE", "1")
    assert first_run.use_quick(10**12, 1)
    monkeypatch.setenv("AONKIT_QUICK_PARSE", "0")
    assert not first_run.use_quick(10, 1)
    monkeypatch.setenv("AONKIT_QUICK_PARSE", "auto")
    assert not first_run.use_quick(first_run.QUICK_BUDGET + 1, 1)  # past the budget: compile instead
    monkeypatch.setitem(first_run._state, "quick_bytes", first_run.QUICK_BUDGET)
    assert not first_run.use_quick(1, 1)


_FIRST_LOAD = r"""
import json, sys, time
from numba.core import event
n = [0]
class L(event.Listener):
    def on_start(self, ev): n[0] += 1
    def on_end(self, ev): pass
event.register("numba:compile", L())
import aonkit
t = time.perf_counter()
tr = aonkit.load(sys.argv[1])
from aonkit.sources import first_run
print(json.dumps({"compiles": n[0], "events": len(tr), "s": time.perf_counter() - t,
                  "background": first_run._state["pid"]}))
"""


_FIRST_VIEWS = LISTEN + """
import json, sys
import aonkit
from aonkit.analysis.op_tree import op_tree
from aonkit.analysis.overview import overview
from aonkit.analysis.roofline import roofline_table
from aonkit.timeline import timeline_pyramid
tr = aonkit.load(sys.argv[1])
overview(tr), roofline_table(tr), op_tree(tr), timeline_pyramid(tr, 1400)
print(json.dumps(names))
"""

# every catalogued analysis of one trace (as aonkit.warmup runs them; one that does not apply may raise)
_ANALYSES = LISTEN + """
import json, sys, warnings
import aonkit
from aonkit.analysis.catalog import ENTRIES
from aonkit.analysis import hta_compat
warnings.simplefilter("ignore")
tr = aonkit.load(sys.argv[1])
frames = hta_compat.hta_frames(tr)
for e in ENTRIES:
    if e.takes in ("trace", "frames"):
        try:
            e.run(frames if e.takes == "frames" else tr)
        except (aonkit.AonkitError, ValueError, KeyError):
            pass
print(json.dumps(names))
"""


def _first_load(path: Path, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", _FIRST_LOAD, str(path)], env=env, capture_output=True, text=True,
                         timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_first_load_compiles_nothing_and_the_next_process_uses_the_compiled_parser(tmp_path: Path) -> None:
    """Real processes on an empty Numba cache: the quick read, the background compile, then the parser."""
    trace = tmp_path / "t.json"
    trace.write_bytes(first_run._sample_document(2000).tobytes())
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "AONKIT_QUICK_PARSE": "auto",
           "AONKIT_BACKGROUND_COMPILE": "1", "PYTHONPATH": str(ROOT)}
    # WHEN a new user's first load runs on an empty cache
    first = _first_load(trace, env)
    # THEN it compiles nothing and reads every event
    assert first["compiles"] == 0 and first["events"] == 4000
    # AND the background process leaves the parser in the cache: the next process compiles nothing either
    assert first["background"]
    deadline = time.monotonic() + 900  # the whole warm-up at low priority: about 80 s on 2 free cores
    while time.monotonic() < deadline and _alive(first["background"]):
        time.sleep(0.5)
    env["AONKIT_QUICK_PARSE"] = "0"  # the parser itself, from the cache
    second = _first_load(trace, env)
    assert second["compiles"] == 0 and second["events"] == 4000
    # AND, before the parser, what a first dashboard or report needs (aonkit.warmup.first_views): another GPU
    # trace's overview, roofline, op tree and timeline data compile nothing in a new process
    out = subprocess.run([sys.executable, "-c", _FIRST_VIEWS, str(SAMPLE_TRACES / "gpu_synthetic_rank1.json.gz")],
                         env={**env, "AONKIT_QUICK_PARSE": "auto"}, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [], "compiled after the background process"
    # AND, after the parser, the rest of the warm-up: no catalogued analysis compiles anything
    out = subprocess.run([sys.executable, "-c", _ANALYSES, str(SAMPLE_TRACES / "gpu_synthetic_rank1.json.gz")],
                         env={**env, "AONKIT_QUICK_PARSE": "auto"}, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [], "an analysis compiled after the background process"


def test_no_interpreter_to_start_is_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an embedded or frozen Python has no interpreter to run the background compile: the load goes on without it
    monkeypatch.setenv("AONKIT_BACKGROUND_COMPILE", "1")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python-here"))
    assert first_run.start_background_compile() is None
