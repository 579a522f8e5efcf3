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
