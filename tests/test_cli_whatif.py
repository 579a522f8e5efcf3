"""``aonkit what-if``: the shell's answers are aonkit.what_if's, and its mistakes are one line each."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import aonkit
from aonkit._cli_whatif import parse_rules
from aonkit.analysis.whatif_hardware import hardware_rules, hardware_scales
from aonkit.analysis.whatif_rules import Rule
from aonkit.cli import main

from .conftest import SAMPLE_TRACES

RANKS = [SAMPLE_TRACES / f"gpu_synthetic_rank{r}.json.gz" for r in (0, 1)]


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("job")
    for p in RANKS:
        shutil.copy(p, d / p.name)
    return d


def test_a_job_with_parts_scaled_and_on_another_gpu(job_dir: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["what-if", str(job_dir), "--scale", "gpu=0.5", "--scale", "gaps=0.8", "--on", "H200 SXM",
                 "--path", "3"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    job = aonkit.load_job(job_dir)
    want = aonkit.what_if(job, [*hardware_rules(hardware_scales(job, "H200 SXM")),
                                Rule(0.5, kind="gpu", gpu_class="computation"), Rule(0.8, kind="gap")])  # fmt: skip
    assert f"speed-up {want.speedup:.3f}x" in out and "2 ranks, the whole trace" in out
    assert "rule x0.5 (kind=gpu, gpu_class=computation)" in out and "rule x0.8 (kind=gap)" in out
    assert "run on H200 SXM: 30 kernel names" in out
    after, before = want.periods_ns
    assert f"{before / after:.3f}x" in out  # the step period, before and after
    assert out.count("\n  ") >= 3 + 3 + 3  # rules, composition rows, the three longest pieces


def test_one_step_of_one_trace_with_a_json_rule(capsys: pytest.CaptureFixture) -> None:
    rule = '{"scale": 0.5, "name": "^aten::mm$", "kind": "cpu"}'
    assert main(["what-if", str(RANKS[0]), "--step", "3", "--scope", "launched", "--rule", rule, "--path", "0"]) == 0
    out = capsys.readouterr().out
    want = aonkit.what_if(aonkit.load(RANKS[0]), [Rule(0.5, name="^aten::mm$", kind="cpu")], step=3,
                          scope="launched")  # fmt: skip
    assert "ProfilerStep#3 (scope launched)" in out and f"speed-up {want.speedup:.3f}x" in out
    assert "longest pieces" not in out


@pytest.mark.parametrize(("args", "said"), [
    (["--scale", "tpu=0.5"], "--scale 'tpu=0.5': give PART=F with PART one of ['comm', 'copies'"),
    (["--scale", "gpu=fast"], "'fast' is not a number"),
    (["--rule", "{scale: 1}"], "not a rule (JSONDecodeError"),
    (["--rule", '{"scal": 1}'], "unexpected keyword argument 'scal'"),
    (["--rule", '{"scale": 1, "name": "(["}'], "a name pattern is not a regular expression"),
    (["--on", "TPU v9"], "--on 'TPU v9': no device spec matches"),
    (["--batch", "0"], "--batch 0: factor must be a finite number > 0"),
    (["--batch-sweep", "1,x"], "--batch-sweep '1,x': could not convert"),
    (["--batch-sweep", "1,-2"], "--batch-sweep '1,-2': factor must be a finite number > 0"),
])  # fmt: skip
def test_mistakes_are_one_line(args: list[str], said: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["what-if", str(RANKS[0]), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aonkit: error: ") and said in err and err.count("\n") == 1


def test_a_bigger_batch_and_a_sweep_of_batches(job_dir: Path, capsys: pytest.CaptureFixture) -> None:
    from aonkit.analysis.whatif_batch import batch_rules, batch_scales, batch_sweep

    assert main(["what-if", str(job_dir), "--batch", "2", "--step", "3", "--path", "0"]) == 0
    out = capsys.readouterr().out
    job = aonkit.load_job(job_dir)
    want = aonkit.what_if(job, batch_rules(batch_scales(job, 2.0)), step=3)
    assert "batch x2: " in out and f"speed-up {want.speedup:.3f}x" in out
    assert f"throughput (samples/s) x{2 * want.model_ns / want.step_time_ns:.3f}" in out
    assert main(["what-if", str(job_dir), "--batch-sweep", "1,2,4", "--step", "3"]) == 0
    out = capsys.readouterr().out
    sweep = batch_sweep(job, (1, 2, 4), step=3)
    lines = out.splitlines()
    assert lines[0] == "batch sweep: " + job_dir.name + ", ProfilerStep#3 (scope start)" and len(lines) == 5
    for line, row in zip(lines[2:], sweep.itertuples()):
        assert line.split()[0] == f"{row.factor:g}x" and f"{row.throughput_ratio:.3f}" in line
        assert line.endswith(f"{row.peak_bytes / 1e9:.1f} of 85.0 GB")  # the projected peak, under the H100's


def test_rules_from_json_take_a_list_of_names() -> None:
    (r,) = parse_rules([], ['{"scale": 0.7, "kind": "gpu", "names": ["a", "b"]}'])
    assert r == Rule(0.7, kind="gpu", names=("a", "b"))


def test_a_profile_bundle_is_one_trace_not_a_job(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with aonkit.profile(tmp_path / "run", trace=False, gpu=False, interval_s=0.05):
        sum(i * i for i in range(200_000))
    assert main(["what-if", str(tmp_path / "run"), "--scale", "gaps=0.5", "--path", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("what-if: run, the whole trace") and "ranks" not in out.split("\n")[0]
