"""``aonkit step-times``: its passes and fit are forward_passes' and fit_step_time's, its errors one line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import aonkit
from aonkit.analysis import forward_passes
from aonkit.cli import main
from aonkit.model import fit_step_time

from .conftest import SAMPLE_TRACES, require_shared

GEN = SAMPLE_TRACES / "cpu_generate.pt.trace.json.gz"


def test_the_sample_generation(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    csv = tmp_path / "passes.csv"
    assert main(["step-times", str(GEN), "--skip", "1", "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    passes = forward_passes(aonkit.load(GEN))
    fit = fit_step_time(passes.iloc[1:])
    assert out.startswith("40 forward passes: 5 prefill, 35 decode, 0 unknown\n") and fit.text() in out
    assert "step time fitted to 39 traced passes (dur_ns)" in out
    table = pd.read_csv(csv)
    assert table["pass_id"].tolist() == list(range(1, 40))
    assert table["fitted_s"].to_numpy() == pytest.approx(fit.residuals["fitted_s"].to_numpy(), rel=1e-12)
    assert main(["step-times", str(GEN), "--time", "interval"]) == 0  # the last pass has no interval: 39 fitted
    assert "fitted to 39 traced passes (interval_ns)" in capsys.readouterr().out


def test_what_cannot_be_fitted_is_one_line(capsys: pytest.CaptureFixture) -> None:
    assert main(["step-times", str(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("aonkit: error: " + str(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz") + ": no forward pass found "
                   "(no aten::embedding with recorded shapes: record the trace with record_shapes=True)")  # fmt: skip
    qwen = require_shared("traces/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    assert main(["step-times", str(qwen)]) == 2  # one forward, no decode
    captured = capsys.readouterr()
    assert "1 forward passes: 1 prefill" in captured.out and "no decode pass" in captured.err
    assert captured.err.count("\n") == 1
