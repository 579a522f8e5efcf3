"""Statistical trace diff: a planted 20% slowdown is found, noise is not."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import aonkit
from aonkit.analysis.diff import diff_summary, mann_whitney_p, trace_diff

from .conftest import require_shared


def _trace(path: Path, rng: np.random.Generator, slow: float) -> aonkit.Trace:
    ev, ts = [], 0.0
    for _step in range(30):
        for name, mean in (("gemm_a", 200.0), ("softmax_b", 50.0), ("norm_c", 30.0)):
            d = rng.normal(mean * (slow if name == "softmax_b" else 1.0), mean * 0.05)
            ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": round(ts, 3),
                       "dur": round(d, 3), "args": {"stream": 7, "device": 0, "correlation": len(ev)}})  # fmt: skip
            ts += d + 1
    path.write_text(json.dumps({"traceEvents": ev}))
    return aonkit.load(path)


def test_planted_slowdown_is_significant_and_noise_is_not(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    base = _trace(tmp_path / "a.json", rng, 1.0)
    new = _trace(tmp_path / "b.json", rng, 1.2)
    d = trace_diff(base, new).set_index("name")
    assert d.loc["softmax_b", "significant"] and 15 < d.loc["softmax_b", "delta_mean_pct"] < 25
    assert d.loc["softmax_b", "ci_low_ns"] > 0
    assert not d.loc["gemm_a", "significant"] and not d.loc["norm_c", "significant"]
    assert "slower: softmax_b" in diff_summary(d.reset_index())


def test_mann_whitney_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(1)
    for n1, n2 in ((5, 7), (40, 35), (200, 180)):
        a = np.round(rng.normal(10, 2, n1))
        b = np.round(rng.normal(11, 2, n2))
        want = stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").pvalue
        assert abs(mann_whitney_p(a, b) - want) < 1e-9


def test_real_trace_compare_pair() -> None:
    shared = require_shared()
    base = aonkit.load(shared / "hta/trace_compare/base/base.json.gz")
    new = aonkit.load(shared / "hta/trace_compare/test/test.json.gz")
    d = trace_diff(base, new)
    assert d["count_base"].sum() == len(base.gpu_events) and d["count_new"].sum() == len(new.gpu_events)
    ops = trace_diff(base, new, by="op")
    assert ops["count_base"].sum() == len(base.cpu_ops)


def test_diff_picture_colours_the_planted_change_and_draws_its_interval(tmp_path: Path) -> None:
    from aonkit.views.diff import DIFF_COLORS, diff_figure, diff_frame

    # GIVEN a diff where only softmax_b got 20% slower
    rng = np.random.default_rng(3)
    d = trace_diff(_trace(tmp_path / "a.json", rng, 1.0), _trace(tmp_path / "b.json", rng, 1.2))
    # WHEN drawn
    lay = diff_figure(d, top=2)
    rows = lay.select_one({"name": "diff_rows"}).data
    f = diff_frame(d).set_index("name")
    # THEN only the top rows are drawn, in the diff's order, and only the planted change is coloured
    assert list(rows["name"]) == list(d["name"][:2]) and len(lay.children) == 2
    assert f.loc["softmax_b", "color"] == DIFF_COLORS["slower"]
    assert {f.loc["gemm_a", "color"], f.loc["norm_c", "color"]} == {DIFF_COLORS["unsure"]}
    # and its interval is the bootstrap interval as a share of the base mean, around the point
    soft = d.set_index("name").loc["softmax_b"]
    assert f.loc["softmax_b", "lo"] == pytest.approx(100 * soft["ci_low_ns"] / soft["mean_base_ns"])
    assert f.loc["softmax_b", "lo"] < f.loc["softmax_b", "pct"] < f.loc["softmax_b", "hi"]
    assert f.loc["softmax_b", "base_ms"] == pytest.approx(soft["total_base_ns"] / 1e6)


def test_diff_picture_of_a_name_in_one_trace_only_and_of_no_rows() -> None:
    import pandas as pd

    from aonkit.views.diff import diff_figure, diff_frame, short_name

    d = pd.DataFrame({"name": ["new_kernel"], "count_base": [0], "count_new": [3], "total_base_ns": [0],
                      "total_new_ns": [300], "delta_total_ns": [300], "mean_base_ns": [np.nan], "mean_new_ns": [100.0],
                      "delta_mean_ns": [np.nan], "delta_mean_pct": [np.nan], "ci_low_ns": [np.nan],
                      "ci_high_ns": [np.nan], "p_value": [1.0], "significant": [False]})  # fmt: skip
    f = diff_frame(d)
    assert f["pct_text"][0] == "only in one trace" and f[["pct", "lo", "hi"]].to_numpy().tolist() == [[0, 0, 0]]
    assert diff_figure(d.iloc[:0]).children[1].x_range.start < 0 < diff_figure(d.iloc[:0]).children[1].x_range.end
    name = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<LerpFunctor<float>, float>"
    short = short_name(name, 48)
    assert len(short) == 48 and short.startswith("void at::native::") and short.endswith("float>, float>")


def test_cli_diff_prints_the_changes_and_writes_the_picture(tmp_path: Path) -> None:
    import subprocess
    import sys

    rng = np.random.default_rng(3)
    for name, slow in (("a.json", 1.0), ("b.json", 1.2)):
        _trace(tmp_path / name, rng, slow)
    argv = ["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o", str(tmp_path / "d.html")]
    out = subprocess.run([sys.executable, "-m", "aonkit.cli", *argv], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "a.json -> b.json: 3 kernel names, 1 significant"
    soft = next(x for x in lines if x.endswith("softmax_b"))
    assert "*" in soft and "+" in soft and "% per call" in soft
    page = (tmp_path / "d.html").read_text()
    assert "diff_rows" in page and "cdn.bokeh.org" not in page and "<script src=" not in page
