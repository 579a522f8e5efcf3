"""Every analysis on traces with odd but valid values: an answer or an aonkit error, never a crash or a wrap-around.

The traces come from :mod:`tests.hostile_gen` (seeded). Each catalogued
analysis, the HTML report, what-if and the summary run on each; anything
raised must be an :class:`aonkit.AonkitError`, and numpy's overflow warnings
are errors here (an int64 that wrapped around is a silent wrong number).
Found this way: timeline levels past int64 for spans of clock garbage, a pid
beyond int64 taken as a GPU device, spans and shares computed in int64, job
clock offsets beyond int64, and pids ``100`` and ``"100"`` colliding when
ranks are combined.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import aonkit
from aonkit.analysis.catalog import ENTRIES
from aonkit.analysis.findings import findings
from aonkit.analysis.hta_compat import hta_frames
from aonkit.analysis.summary import summarize

from .hostile_gen import hostile_trace


def _run_all(subject: Any, calls: dict[str, Callable[[Any], Any]]) -> list[str]:
    bad = []
    for name, fn in calls.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            warnings.simplefilter("error", RuntimeWarning)  # numpy's overflow: a wrapped int64
            try:
                fn(subject)
            except aonkit.AonkitError:
                pass
            except Exception as exc:  # noqa: BLE001 - what this test is for
                bad.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
    return bad


def _trace_calls() -> dict[str, Callable[[Any], Any]]:
    calls: dict[str, Callable[[Any], Any]] = {}
    for e in ENTRIES:
        if e.takes == "trace":
            calls[f"{e.function}{e.kwargs or ''}"] = e.run
        elif e.takes == "frames":
            calls[f"{e.function}{e.kwargs or ''}"] = lambda t, e=e: e.run(hta_frames(t))
    calls.update({"to_html": aonkit.to_html, "what_if": lambda t: aonkit.what_if(t, [{"kind": "gpu", "scale": 0.5}]),
                  "summarize": summarize, "findings": findings})  # fmt: skip
    return calls


@pytest.mark.parametrize("seed", range(0, 200, 5))
def test_every_analysis_of_an_odd_trace_answers_or_says_why(tmp_path: Path, seed: int) -> None:
    p = tmp_path / "t.json"
    p.write_text(json.dumps(hostile_trace(seed)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = aonkit.load(p)
    assert _run_all(trace, _trace_calls()) == []


@pytest.mark.parametrize("seed", range(0, 60, 5))
def test_every_job_analysis_of_odd_ranks_answers_or_says_why(tmp_path: Path, seed: int) -> None:
    world = 2 + seed % 3
    for r in range(world):
        doc = hostile_trace(seed * 10 + r)
        doc["distributedInfo"] = {"rank": r, "world_size": world}
        doc.pop("baseTimeNanoseconds", None)
        (tmp_path / f"rank{r}.json").write_text(json.dumps(doc))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        job = aonkit.load(tmp_path)
    calls = {f"{e.function}{e.kwargs or ''}": e.run for e in ENTRIES if e.takes == "job"}
    calls.update({"to_html": aonkit.to_html, "what_if": lambda j: aonkit.what_if(j, [{"kind": "gpu", "scale": 0.5}]),
                  "findings": findings})  # fmt: skip
    assert _run_all(job, calls) == []


def test_pids_that_read_alike_stay_apart_when_ranks_are_combined(tmp_path: Path) -> None:
    from aonkit.analysis.combine import combine_ranks

    for r in range(2):
        ev = [{"ph": "X", "name": "a", "pid": 100, "tid": 1, "ts": 1, "dur": 1},
              {"ph": "X", "name": "b", "pid": "100", "tid": 1, "ts": 2, "dur": 1}]  # fmt: skip
        (tmp_path / f"rank{r}.json").write_text(json.dumps({"traceEvents": ev,
                                                            "distributedInfo": {"rank": r, "world_size": 2}}))
    combined = combine_ranks(aonkit.load(tmp_path))
    assert combined.events["pid"].tolist() == ["100@rank0", "'100'@rank0", "100@rank1", "'100'@rank1"]
