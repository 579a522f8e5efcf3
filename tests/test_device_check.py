"""The prepared GPU-machine scripts still run here (no GPU): a session lent one must not find them broken."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_the_device_check_runs_its_steps_and_writes_its_report(tmp_path: Path) -> None:
    r = _run("tools/device_check.py", "--out", str(tmp_path), "--budget-s", "200", "--only", "env,daemon,models")
    assert r.returncode == 0, r.stdout + r.stderr
    report = (tmp_path / "report.md").read_text()
    steps = {s.split("\n", 1)[0]: s for s in report.split("\n## ")[1:]}
    assert list(steps) == ["env", "daemon", "models"]  # --only keeps the order of importance
    for text in steps.values():
        assert "\nexit 0, " in text, text
    assert "aonkit 0.1.0 | bokeh" in steps["env"]
    assert "### Daemon at 10 Hz" in steps["daemon"]
    assert "(a), (b) skipped: no CUDA device" in steps["models"] or "### (a)" in steps["models"]


def test_a_step_that_does_not_fit_the_budget_is_reported_not_run(tmp_path: Path) -> None:
    r = _run("tools/device_check.py", "--out", str(tmp_path), "--budget-s", "5", "--only", "env")
    assert r.returncode == 0, r.stderr
    assert "not run: " in (tmp_path / "report.md").read_text()


def test_the_cuda_sample_maker_runs_on_the_cpu(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    r = _run("tools/make_cuda_samples.py", "--device", "cpu", "--tiny", "--out", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    manifest = json.loads((tmp_path / "MANIFEST.json").read_text())
    assert set(manifest["files"]) == {"gpt_b4.pt.trace.json.gz", "gpt_b8.pt.trace.json.gz",
                                      "gpt_generate.pt.trace.json.gz", "profile/aonkit-bundle.json",
                                      "profile/samples.parquet", "profile/trace.json.gz"}  # fmt: skip
    import aonkit

    bundle = aonkit.load(tmp_path / "profile")  # the magic's bundle reads back with its samples
    assert bundle.samples is not None and len(bundle.cpu_ops) > 0
    assert json.loads((tmp_path / "profile" / "aonkit-bundle.json").read_text())["status"] == "ok"
    # the generation's passes: each request's prefill, then a decode per further token
    passes = aonkit.analysis.forward_passes(aonkit.load(tmp_path / "gpt_generate.pt.trace.json.gz"))
    want = [("prefill" if k == 0 else "decode", b) for b, _, n in manifest["generate"]["requests"] for k in range(n)]
    assert list(zip(passes["kind"].astype(str), passes["batch"])) == want and passes["annotated"].all()
