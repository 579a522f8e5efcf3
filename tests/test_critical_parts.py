"""A critical path's parts decided per distinct name, and its composition without the path's table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.analysis.critical_path import Rule, composition, what_if
from aonkit.analysis.depgraph import KIND_GAP, KIND_GPU, KIND_HUB
from aonkit.analysis.kernels import kernel_class

from .conftest import SAMPLE_TRACES, require_shared

JOB = [SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz", SAMPLE_TRACES / "gpu_synthetic_rank1.json.gz"]


def _part_of_each_node(kind: np.ndarray, names: np.ndarray, cats: np.ndarray) -> list[str]:
    """The definition, node by node (the slow obvious way)."""
    out = []
    for k, n, c in zip(kind, names, cats):
        if k == KIND_GPU:
            out.append(f"gpu {kernel_class(str(c), str(n))}")
        elif k == KIND_GAP:
            out.append("host gap")
        elif k == KIND_HUB:
            out.append("collective wait")
        else:
            out.append("launch" if "Launch" in str(n) else "cpu")
    return out


@pytest.fixture(scope="module")
def cases() -> list[tuple[str, object, dict]]:
    """A trace (read once), whole, a step, with rules; and a two-rank job, read again for each of its cases."""
    one = aonkit.load(str(JOB[0]))
    job = lambda: aonkit.load_job([str(p) for p in JOB])  # noqa: E731 - a fresh job: its events not yet combined
    return [("trace", lambda: one, {}),
            ("trace, faster kernels", lambda: one, {"rules": [Rule(0.5, gpu_class="computation")]}),
            ("trace, step 3", lambda: one, {"step": 3}), ("job", job, {}),
            ("job, step 3 launched", job, {"step": 3, "scope": "launched", "rules": [Rule(0.3, kind="gap")]})]


@pytest.mark.parametrize("case", range(5))
def test_parts_and_composition_are_the_node_by_node_ones(case: int, cases: list) -> None:
    # GIVEN a trace or a two-rank job (events read from their ranks, not combined), whole, a step, with rules
    label, make, kw = cases[case]
    # WHEN it is re-timed
    result = what_if(make(), **kw)
    path = result.critical_path
    # THEN each node's part is the node-by-node definition (kernel class per node, launch calls by name)
    trace_ = result._context[0]
    rows = path["row"].to_numpy()
    kind = np.array([{"cpu": 0, "gap": KIND_GAP, "gpu": KIND_GPU, "hub": KIND_HUB}[k] for k in path["kind"]])
    from aonkit.analysis.critical_path import _names_and_cats

    names, cats = _names_and_cats(trace_, np.maximum(rows, 0))
    assert path["part"].tolist() == _part_of_each_node(kind, names, cats), label
    assert len(set(path["part"])) >= 3, label
    # AND the composition made without the table is the table's, to the nanosecond
    pd.testing.assert_frame_equal(result.composition(), composition(path))


def test_a_long_path_on_a_real_trace_composes_as_its_table() -> None:
    shared = require_shared()
    trace = aonkit.load(str(shared / "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"))
    fast = what_if(trace, [Rule(0.5, gpu_class="computation")])
    slow = what_if(trace, [Rule(0.5, gpu_class="computation")])
    comp = fast.composition()  # before the table is built
    pd.testing.assert_frame_equal(comp, composition(slow.critical_path))
    assert comp["time_ns"].iloc[:-1].sum() == slow.critical_path["dur_ns"].sum()


def test_an_empty_path_has_no_parts_and_only_waits(cases: list) -> None:
    from aonkit.analysis.critical_parts import parts, path_composition

    trace_, g, _ = what_if(cases[0][1]())._context
    none = np.empty(0, np.int64)
    assert parts(trace_, g, none).tolist() == []
    comp = path_composition(trace_, g, none, none, none)
    assert comp["part"].tolist() == ["waits"] and comp["time_ns"].tolist() == [0]
