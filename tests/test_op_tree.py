"""``op_tree``: CPU call paths merged across threads, GPU time added up the tree, and the icicle drawn from it."""

from __future__ import annotations

import numpy as np
import pandas as pd

import aonkit
from aonkit.analysis.correlation import gpu_links
from aonkit.analysis.op_tree import COLUMNS, op_tree
from aonkit.views.icicle import icicle_figure

from .conftest import SAMPLE_TRACES, load_events


def _op(name: str, tid: int, ts: float, dur: float, **args: object) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def test_paths_merge_across_threads_and_gpu_time_goes_up_the_tree(tmp_path) -> None:
    ev = [_op("A", 1, 0, 100), _op("B", 1, 10, 30), _op("B", 1, 50, 20), _op("C", 1, 75, 15),
          _op("A", 2, 0, 50), _op("B", 2, 5, 10),
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12, "dur": 2,
           "args": {"correlation": 7}},
          {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 30,
           "args": {"correlation": 7, "stream": 7, "device": 0}}]  # fmt: skip
    tree = op_tree(load_events(tmp_path, ev))
    assert list(tree.columns) == COLUMNS
    t = tree.set_index("name")
    assert t.loc["A", ["calls", "cpu_ns", "depth"]].tolist() == [2, 150_000, 0]
    assert t.loc["B", ["calls", "cpu_ns", "depth"]].tolist() == [3, 60_000, 1]  # one path, both threads
    assert t.loc["C", "cpu_ns"] == 15_000 and t.loc["A", "self_cpu_ns"] == 150_000 - 60_000 - 15_000
    assert t.loc["B", "gpu_ns"] == t.loc["A", "gpu_ns"] == 30_000 and t.loc["C", "gpu_ns"] == 0
    assert t.loc["cudaLaunchKernel", "depth"] == 2
    # icicle layout: B (longer) first inside A, then C; every child inside its parent
    assert (t.loc["A", "x0_ns"], t.loc["B", "x0_ns"], t.loc["C", "x0_ns"]) == (0, 0, 60_000)


def test_on_the_sample_the_roots_hold_all_attributed_gpu_time_and_boxes_nest() -> None:
    trace = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    tree = op_tree(trace)
    links = gpu_links(trace)
    dur = np.maximum(trace.events["dur_ns"].to_numpy(), 0)
    assert tree.loc[tree["parent_node"] < 0, "gpu_ns"].sum() == dur[links["gpu_row"][links["op_row"] >= 0]].sum()
    child = tree[tree["parent_node"] >= 0]
    par = tree.set_index("node").loc[child["parent_node"]]
    assert (child["x0_ns"].to_numpy() >= par["x0_ns"].to_numpy()).all()
    assert (child["x1_ns"].to_numpy() <= par["x1_ns"].to_numpy()).all()
    assert (tree["self_cpu_ns"] >= 0).all() and tree["node"].is_unique
    # siblings do not overlap
    for _, sib in tree.sort_values("x0_ns").groupby("parent_node"):
        assert (sib["x0_ns"].to_numpy()[1:] >= sib["x1_ns"].to_numpy()[:-1]).all()
    fig, src = icicle_figure(tree, width=900)
    assert len(src.data["left"]) == len(tree)
    assert all(len(lab) <= len(n) for lab, n in zip(src.data["label"], src.data["name"]))
    widest = int(np.argmax(np.asarray(src.data["right"]) - np.asarray(src.data["left"])))
    assert src.data["label"][widest].startswith("ProfilerStep#")  # a root step: wide enough for its name


def test_a_trace_without_cpu_events_gives_an_empty_tree(tmp_path) -> None:
    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 5, "args": {"stream": 7}}]
    tree = op_tree(load_events(tmp_path, ev))
    assert tree.empty and list(tree.columns) == COLUMNS and isinstance(tree, pd.DataFrame)
