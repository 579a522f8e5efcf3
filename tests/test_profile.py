"""``aonkit.profile``, the bundle and the ``%%aon_profile`` magic, on real torch CPU work and a real IPython kernel."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.sources.bundle import MANIFEST, SAMPLES_FILE, TRACE_FILE

from .kernel_run import run_cells, text_of

torch = pytest.importorskip("torch", reason="torch (CPU) is installed in CI by .ci/run")


def test_samples_and_trace_share_one_clock(tmp_path: Path) -> None:
    from torch.profiler import record_function

    marks = []
    with aonkit.profile(tmp_path / "b", interval_s=0.01, gpu=False) as p:
        for i in range(4):
            with record_function(f"mark{i}"):
                marks.append(time.time_ns())  # the sampler's clock, read inside the region
                torch.randn(128, 128) @ torch.randn(128, 128)
            time.sleep(0.03)
    t = p.trace
    ev = t.events
    for i, mark in enumerate(marks):
        row = ev[ev["name"] == f"mark{i}"].iloc[0]
        assert row["ts_ns"] <= mark <= row["ts_ns"] + row["dur_ns"]  # the instant lies inside the traced region
    s = t.samples
    assert set(s["metric"].astype(str)) == {"cpu_percent", "memory_percent", "memory_used_bytes"}
    first, last = int(s["ts_ns"].min()), int(s["ts_ns"].max())
    assert p.t0_ns - 0.05e9 <= first and last <= p.t1_ns + 0.05e9  # samples fall within the run, on the same clock
    assert len(s) >= 3 * 10  # 10 Hz or faster over ~0.15 s, three metrics


def test_a_short_run_has_samples_at_its_start_and_end(tmp_path: Path) -> None:
    """A run shorter than the interval still has a sample before its code runs and one after (from 10 ms)."""
    for k, (wait_s, want) in enumerate(((0.0, 1), (0.04, 2))):
        with aonkit.profile(tmp_path / f"b{k}", interval_s=5, gpu=False, trace=False) as p:
            first = p._samplers[0].count  # the profile waited for it
            time.sleep(wait_s)
        assert first == 1
        ts = np.unique(aonkit.load(p.path).samples["ts_ns"].to_numpy())
        assert len(ts) == want and p.t0_ns <= ts[0]
        assert want == 1 or ts[0] < p.t0_ns + 0.03e9 and p.t1_ns <= ts[-1]


def test_bundle_layout_manifest_and_integrity(tmp_path: Path) -> None:
    with aonkit.profile(tmp_path / "b", interval_s=0.02, gpu=False, trace=False) as p:
        time.sleep(0.1)
    assert sorted(x.name for x in p.path.iterdir()) == sorted([MANIFEST, SAMPLES_FILE, TRACE_FILE])
    man = json.loads((p.path / MANIFEST).read_text())
    assert man["status"] == "ok" and man["traced"] is False and man["clock"] == "time.time_ns"
    assert man["versions"]["aonkit"] == aonkit.__version__ and man["samplers"][0]["type"] == "HostSampler"
    t = aonkit.load(p.path)  # without tracing: the run's span as one event, with the samples
    assert t.events["name"].tolist() == ["aon_profile"] and int(t.events["dur_ns"].iloc[0]) == p.t1_ns - p.t0_ns
    assert int(t.events["ts_ns"].iloc[0]) == p.t0_ns and len(t.samples) > 0 and t.bundle["status"] == "ok"
    assert aonkit.load_job(p.path).ranks == [0] and list(aonkit.load_each(p.path)) == ["b"]
    data = bytearray((p.path / SAMPLES_FILE).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (p.path / SAMPLES_FILE).write_bytes(bytes(data))
    with pytest.raises(aonkit.TraceFormatError, match="does not match its manifest") as info:
        aonkit.load(p.path)
    assert info.value.path == str(p.path / SAMPLES_FILE)


def test_an_exception_propagates_after_the_bundle_is_written(tmp_path: Path) -> None:
    with pytest.raises(ZeroDivisionError), aonkit.profile(tmp_path / "b", gpu=False) as p:
        torch.ones(3).sum()
        1 / 0  # noqa: B018
    assert p.status == "raised ZeroDivisionError" and aonkit.load(p.path).bundle["status"] == p.status


def test_schedule_traces_only_the_active_steps(tmp_path: Path) -> None:
    with aonkit.profile(tmp_path / "b", gpu=False, wait=1, warmup=1, active=2) as p:
        for _ in range(6):
            torch.randn(32, 32) @ torch.randn(32, 32)
            aonkit.step()
    names = set(p.trace.events["name"].astype(str))
    steps = sorted(n for n in names if n.startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]


def test_magic_in_a_real_kernel(tmp_path: Path) -> None:
    from aonkit.sources.host_compiled import kernel

    out = tmp_path
    compiled = kernel(compile=True) is not None  # in Numba's cache, as after `aonkit warmup`
    cells = run_cells(
        "%load_ext aonkit",
        f"%%aon_profile --out {out}/a --interval 0.02 --no-gpu --return P\n"
        "import aonkit, torch\nfor i in range(3):\n    x = torch.randn(64, 64) @ torch.randn(64, 64)\n"
        "    aonkit.step()\n21 * 2",
        "print(type(P).__name__, P.status, P.value, P._samplers[0].loop)",
        f"%%aon_profile --out {out}/c --no-trace --no-gpu --quiet\nimport time\ntime.sleep(0.05)\n1 / 0",
        f"%aon_profile start --out {out}/d --no-trace --no-gpu --interval 0.02",
        "%aon_profile status",
        "import time; time.sleep(0.1)",
        "%aon_profile stop --quiet",
        "%aon_profile --bogus",
        allow_errors=True,
    )
    value = [o for o in cells[1] if o["output_type"] == "execute_result"]
    assert value and value[0]["data"]["text/plain"] == "42"  # the cell's value is kept
    shown = [o for o in cells[1] if o["output_type"] == "display_data" and "aon_profile: ok" in
             o["data"].get("text/plain", "")]
    assert len(shown) == 1 and "Profile" not in shown[0]["data"]["text/plain"]
    assert "application/vnd.jupyter.widget-view+json" in shown[0]["data"]  # the dashboard, with text as fallback
    # the dashboard imports Numba after the cell anyway: the magic loads it first, so the host sampler ran compiled
    assert text_of(cells[2]).strip() == f"Profile ok 42 {'compiled' if compiled else 'python'}"
    assert [o["ename"] for o in cells[3] if o["output_type"] == "error"] == ["ZeroDivisionError"]
    assert not [o for o in cells[3] if o["output_type"] == "display_data"]  # --quiet
    assert "running since" in text_of(cells[5]) and "HostSampler (" in text_of(cells[5])
    assert [o["ename"] for o in cells[8] if o["output_type"] == "error"] == ["ValueError"]
    a, c, d = (aonkit.load(out / n) for n in "acd")
    assert a.bundle["traced"] and (a.events["cat"] == "cpu_op").any() and len(a.samples) > 0
    assert c.bundle["status"] == "raised ZeroDivisionError"
    assert d.bundle["status"] == "ok" and (d.bundle["t1_ns"] - d.bundle["t0_ns"]) > 0.1e9
    first = d.samples.index[d.samples["metric"] == "cpu_percent"][0]
    assert np.isnan(d.samples.at[first, "value"]) and np.isfinite(d.samples["value"].drop(first)).all()


def test_cli_profiles_a_script_in_process_and_other_commands_as_children(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text("import sys, torch\nprint('args', sys.argv[1:])\nx = torch.randn(64, 64) @ torch.randn(64, 64)\n"
                      "sys.exit(3)\n")
    run = subprocess.run([sys.executable, "-m", "aonkit.cli", "profile", "--out", str(tmp_path / "s"), "--no-gpu",
                          "--", "python", str(script), "--lr", "1"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 3 and "args ['--lr', '1']" in run.stdout and "aon_profile: raised SystemExit" in run.stdout
    t = aonkit.load(tmp_path / "s")
    assert t.bundle["traced"] and (t.events["name"] == "aten::mm").any()  # traced in process
    run = subprocess.run([sys.executable, "-m", "aonkit.cli", "profile", "--out", str(tmp_path / "c"), "--no-gpu",
                          "--interval", "0.02", "--", "sleep", "0.2"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    t = aonkit.load(tmp_path / "c")
    assert not t.bundle["traced"] and t.events["name"].tolist() == ["aon_profile"] and len(t.samples) >= 3 * 5


def test_the_dashboard_shows_the_samples_under_the_timeline(tmp_path: Path) -> None:
    from aonkit.widgets import Dashboard

    with aonkit.profile(tmp_path / "b", interval_s=0.02, gpu=False) as p:
        for _ in range(3):
            torch.randn(64, 64) @ torch.randn(64, 64)
            time.sleep(0.03)
    d = Dashboard(p.trace, width_px=600)
    series = [s["label"] for g in d.timeline.groups for s in g["series"]]  # the counter charts under the lanes
    assert {"cpu_percent (host)", "memory_percent (host)"} <= set(series)
    assert len(d.timeline.counters) == len(series) and sum(len(x) for x, _ in d.timeline.counters) > 0
    assert p.summary_text().startswith("aon_profile: ok, ") and str(p.path) in p.summary_text()


def test_a_separate_recording_joins_its_trace(tmp_path: Path) -> None:
    from torch.profiler import profile

    from aonkit.sources.samplers import HostSampler

    with HostSampler(0.01) as sampler, profile() as prof:
        for _ in range(3):
            torch.randn(64, 64) @ torch.randn(64, 64)
            time.sleep(0.02)
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    t = aonkit.load(tmp_path / "t.json").with_samples(sampler)
    assert t.samples is not None and len(t.samples) >= 3 * 3
    span = t.events["ts_ns"].min(), (t.events["ts_ns"] + t.events["dur_ns"].clip(lower=0)).max()
    inside = t.samples["ts_ns"].between(span[0], span[1])
    assert inside.sum() >= 3 * 3  # same clock: samples taken while the trace ran fall on its span


def test_samples_outlive_the_ring(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run longer than a sampler's ring keeps every sample (drained as it goes); a stall is counted, not hidden."""
    from aonkit.profiling import _Drain
    from aonkit.sources.samplers import HostSampler

    with HostSampler(interval_s=0.01, capacity=20) as s:  # a 0.2 s ring
        drain = _Drain([s], messages := [])
        time.sleep(0.6)
    drain.stop()
    frame = drain.frames()[0]
    n = len(frame) // 3
    assert n > 40 and n == s.count and not messages  # more than twice the ring, none lost
    assert (np.diff(frame["ts_ns"].to_numpy()[::3]) > 0).all()
    with HostSampler(interval_s=0.005, capacity=2) as s:  # a 10 ms ring read every 50 ms: samples are lost
        drain = _Drain([s], messages := [])
        time.sleep(0.3)
    drain.stop()
    assert drain.lost[0] > 0 and messages and "overwritten" in messages[0]
    assert len(drain.frames()[0]) // 3 + drain.lost[0] == s.count


def test_a_ring_samplers_rows_are_kept_as_blocks_and_give_the_same_long_form() -> None:
    from aonkit.profiling import _Drain
    from aonkit.sources.samplers import HostSampler

    class LongFormOnly:  # a sampler that only reads long form (the Sampler protocol)
        def __init__(self, s: HostSampler) -> None:
            self.read, self.channels, self.capacity, self.interval_s = s.read, s.channels, s.capacity, s.interval_s

    with HostSampler(interval_s=0.01, capacity=20) as s:
        blocks, frames = _Drain([s], []), _Drain([LongFormOnly(s)], [])
        time.sleep(0.5)
    blocks.stop()
    frames.stop()
    assert all(isinstance(p, tuple) for p in blocks.parts[0]) and len(blocks.parts[0]) > 1
    got = blocks.frames()[0]
    pd.testing.assert_frame_equal(got, frames.frames()[0])
    kept = sum(t.nbytes + v.nbytes for t, v in blocks.parts[0])
    assert len(got) // 3 == s.count and kept < got.memory_usage(index=False).sum() / 2


def test_the_profile_watches_its_own_process_by_default(tmp_path: Path) -> None:
    import os

    assert aonkit.Profile(tmp_path / "x").pids == [os.getpid()]
    assert aonkit.Profile(tmp_path / "y", pids=[1, 2]).pids == [1, 2]


def test_interpreter_options_before_a_script_still_run_it_in_process() -> None:
    from aonkit._cli_profile import _python_target

    assert _python_target(["python", "-u", "-W", "error", "train.py", "--lr", "1"]) == (
        "path", "train.py", ["train.py", "--lr", "1"], ["-u", "-W", "error"])
    assert _python_target(["python3", "-X", "importtime", "-m", "pkg.mod", "a"]) == (
        "module", "pkg.mod", ["pkg.mod", "a"], ["-X", "importtime"])
    assert _python_target(["python", "train.py"]) == ("path", "train.py", ["train.py"], [])
    assert _python_target(["python", "-c", "print(1)"]) is None  # code on the command line: a child process
    assert _python_target(["bash", "run.sh"]) is None


def test_a_new_bundle_folder_is_owner_only(tmp_path: Path) -> None:
    with aonkit.profile(tmp_path / "runs" / "b", interval_s=0.02, gpu=False, trace=False):
        time.sleep(0.05)
    assert oct((tmp_path / "runs" / "b").stat().st_mode & 0o777) == "0o700"
    assert {oct(f.stat().st_mode & 0o777) for f in (tmp_path / "runs" / "b").iterdir()} == {"0o600"}
