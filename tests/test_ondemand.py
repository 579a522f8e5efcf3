"""On-demand traces (aonkit trace PID) of real torch CPU training loops that keep running, with the daemon's samples."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
import aonkit.live
from aonkit.live.paths import boot_id
from tests.live_helpers import Live, live_world, wait_line

pytest.importorskip("torch")


@pytest.fixture
def live() -> Iterator[Live]:
    yield from live_world()


TRAIN = r"""
import os, sys, time
import torch
import aonkit, aonkit.live
if os.environ.get("OPT_IN") == "call":
    aonkit.live.serve()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
step = 0
while not os.path.exists(sys.argv[1]) and step < 20000:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    step += 1
    print(f"step {step}", flush=True)
    time.sleep(0.02)
print("finished", step, flush=True)
"""


def spans(samples: pd.DataFrame, t0: int, t1: int) -> bool:
    """The samples cover [t0, t1]: those inside it, and exactly one sample time before it and one after it."""
    ts = np.unique(samples["ts_ns"].to_numpy())
    return len(ts) >= 2 and (ts < t0).sum() == 1 and (ts > t1).sum() == 1


def steps(proc) -> int:
    return max((int(x.split()[1]) for x in list(proc.lines) if x.startswith("step ")), default=0)


def profiler_steps(trace: aonkit.Trace) -> list[str]:
    names = trace.events["name"].astype(str)
    return sorted(names[names.str.startswith("ProfilerStep#")])


@pytest.fixture
def train(live, tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)

    def start(**env: str):
        proc = live.spawn([str(script), str(tmp_path / "stop")], **env)
        wait_line(proc, "step 5", timeout=120)
        return proc

    yield start
    (tmp_path / "stop").touch()


def test_opted_in_loop_is_traced_for_three_steps_and_keeps_training(live, train, tmp_path: Path) -> None:
    live.start_daemon("--interval", "0.02")  # 3 steps of >= 20 ms each span several samples
    proc = train(AONKIT_SERVE="1")  # opted in at `import aonkit`
    procs = live.run_dir / "procs"
    assert stat.S_IMODE(os.stat(procs).st_mode) == 0o700
    for suffix in (".json", ".sock"):
        assert stat.S_IMODE(os.stat(procs / f"{proc.pid}{suffix}").st_mode) == 0o600
    out = tmp_path / "bundle"
    r = live.cli("trace", str(proc.pid), "--steps", "3", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert str(out) in r.stdout
    after = steps(proc)
    trace = aonkit.load(out)
    assert profiler_steps(trace) == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    assert trace.bundle["steps"] == 3 and trace.bundle["pid"] == proc.pid
    s = trace.samples
    t0, t1 = trace.bundle["t0_ns"], trace.bundle["t1_ns"]
    assert set(s["device"]) == {-1, 0, 1} and spans(s, t0, t1)
    live.wait(lambda: steps(proc) > after + 10)  # it kept training past the trace
    assert proc.poll() is None

    out2 = tmp_path / "timed"  # a second trace of the same process, by time
    r = live.cli("trace", str(proc.pid), "--duration", "0.3", "--out", str(out2))
    assert r.returncode == 0, r.stderr
    timed = aonkit.load(out2)
    assert timed.bundle["t1_ns"] - timed.bundle["t0_ns"] >= 0.3e9
    assert len(profiler_steps(timed)) == timed.bundle["steps"] >= 1
    assert timed.samples["ts_ns"].nunique() >= 5
    (tmp_path / "stop").touch()
    assert proc.wait(60) == 0
    assert not (procs / f"{proc.pid}.json").exists() and not (procs / f"{proc.pid}.sock").exists()


def test_after_its_runtime_directory_is_removed_a_job_is_still_traced_with_the_daemons_samples(
        live, train, tmp_path: Path) -> None:  # fmt: skip
    import shutil

    live.start_daemon("--interval", "0.02", "--flush", "60")
    proc = train(AONKIT_SERVE="1")
    procs = live.run_dir / "procs"
    shutil.rmtree(live.run_dir)  # a logout's cleanup of $XDG_RUNTIME_DIR: the job and the daemon run on
    live.wait(lambda: live.status().get("runtime_recreated") == 1 and (procs / f"{proc.pid}.json").exists()
              and (procs / f"{proc.pid}.sock").exists(), timeout=30)  # fmt: skip
    out = tmp_path / "bundle"
    r = live.cli("trace", str(proc.pid), "--steps", "2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    trace = aonkit.load(out)
    assert profiler_steps(trace) == ["ProfilerStep#0", "ProfilerStep#1"] and trace.bundle["pid"] == proc.pid
    assert spans(trace.samples, trace.bundle["t0_ns"], trace.bundle["t1_ns"])
    (tmp_path / "stop").touch()
    assert proc.wait(60) == 0
    assert not (procs / f"{proc.pid}.json").exists() and not (procs / f"{proc.pid}.sock").exists()


def test_without_a_daemon_the_bundle_says_why_it_has_no_samples(live, train, tmp_path: Path) -> None:
    proc = train(AONKIT_SERVE="1")
    out = tmp_path / "bundle"
    r = live.cli("trace", str(proc.pid), "--steps", "1", "--out", str(out))
    assert r.returncode == 0, r.stderr
    trace = aonkit.load(out)
    assert profiler_steps(trace) == ["ProfilerStep#0"] and trace.samples is None  # an empty table is not attached
    assert len(pd.read_parquet(out / "samples.parquet")) == 0
    (note,) = trace.bundle["messages"]
    assert "the bundle has no samples" in note and f"aonkit trace: note: {note}" in r.stderr


def test_a_window_without_samples_is_explained() -> None:
    from aonkit.live.trace import window_notes

    assert window_notes(3, 0, 50_000_000, 0.1) == []
    (note,) = window_notes(0, 1_000_000_000, 1_063_000_000, 0.1)
    assert "traced window (63 ms; the daemon samples every 100 ms)" in note and "--interval" in note
    (kept,) = window_notes(0, 1_000_000_000, 1_063_000_000, 0.1, kept=6)
    assert "the bundle has the samples just before and after it" in kept and "just before" not in note


def test_a_traced_window_keeps_the_samples_just_before_and_after_it() -> None:
    from aonkit.live.trace import spanning

    # samples every 100 ms (2 channels each), a window from 120 to 180 ms: none inside
    ts = np.repeat(np.arange(0, 600, 100) * 1_000_000, 2)
    frame = pd.DataFrame({"ts_ns": ts, "device": np.tile([-1, 0], 6), "metric": "m", "value": 1.0})
    kept = spanning(frame, 120_000_000, 180_000_000)
    assert sorted(set(kept["ts_ns"])) == [100_000_000, 200_000_000] and len(kept) == 4
    # a window with samples inside: those, and one time on each side; a window past the end: the last time only
    assert sorted(set(spanning(frame, 150_000_000, 310_000_000)["ts_ns"])) == [t * 10**6 for t in (100, 200, 300, 400)]
    assert sorted(set(spanning(frame, 550_000_000, 560_000_000)["ts_ns"])) == [500_000_000]
    assert len(spanning(frame.iloc[:0], 0, 1)) == 0


def test_a_process_that_did_not_opt_in_is_refused(live) -> None:
    plain = live.spawn(["-c", "import time; print('up', flush=True); time.sleep(60)"])
    wait_line(plain, "up")
    r = live.cli("trace", str(plain.pid), "--steps", "1")
    assert r.returncode != 0 and f"process {plain.pid} has not opted in" in r.stderr
    assert "aonkit.live.serve()" in r.stderr and plain.poll() is None
    gone = live.spawn(["-c", "pass"])
    gone.wait()
    r = live.cli("trace", str(gone.pid))
    assert r.returncode != 0 and f"no process {gone.pid}" in r.stderr


def test_all_ranks_write_one_loadable_job_folder(live, train, tmp_path: Path) -> None:
    live.start_daemon("--interval", "0.02")  # 10 Hz left a 2-step window (~60 ms) without a sample on a fast CI host
    ranks = [train(OPT_IN="call", AONKIT_JOB_ID="job7", RANK=str(k), WORLD_SIZE="2") for k in (0, 1)]
    out = tmp_path / "job"
    r = live.cli("trace", str(ranks[1].pid), "--all-ranks", "--steps", "2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["aonkit-trace.meta.json", "job.samples.parquet",
                                                    "rank0.json.gz", "rank1.json.gz"]  # fmt: skip
    job = aonkit.load_job(out)
    assert sorted(job.ranks) == [0, 1]
    for rank in (0, 1):
        assert profiler_steps(job[rank]) == ["ProfilerStep#0", "ProfilerStep#1"]
    meta = json.loads((out / "aonkit-trace.meta.json").read_text())
    assert sorted((m["rank"], m["pid"]) for m in meta["ranks"]) == [(0, ranks[0].pid), (1, ranks[1].pid)]
    assert [m["boot_id"] for m in meta["ranks"]] == [boot_id()] * 2 and len(boot_id()) == 36  # this node's clock
    samples = pd.read_parquet(out / "job.samples.parquet")
    assert set(samples["device"]) == {-1, 0, 1} and spans(samples, meta["t0_ns"], meta["t1_ns"])
    # (two processes that do not step together: the start agreement may say their steps do not match; nothing else)
    assert [m for m in meta["messages"] if "the same steps" not in m] == []
    assert all(len(t.samples) == len(samples) for _, t in job.items())  # load_job attached the job's samples
    assert job.step_lags["rank"].tolist() == [0, 1] and list(job.trace_notes) == meta["messages"]
    assert job.clocks == {0: f"boot:{boot_id()}", 1: f"boot:{boot_id()}"}
    # one host: one clock (not the step starts' difference), and the job's view has the node's samples once
    from aonkit.analysis.combine import combine_ranks

    combined = combine_ranks(job)
    assert combined.metadata["clock_offsets_ns"] == {0: 0, 1: 0} and len(combined.samples) == len(samples)
    assert all(p.poll() is None for p in ranks)


IDLE = r"""
import time, torch, aonkit.live
aonkit.live.serve()
print("up", flush=True)
time.sleep(120)
"""


def test_a_process_that_never_steps_times_out_and_can_be_asked_again(live, tmp_path: Path) -> None:
    idle = live.spawn(["-c", IDLE])
    wait_line(idle, "up", timeout=120)
    for _ in range(2):  # the first request was withdrawn, so the second is not refused as "already running"
        r = live.cli("trace", str(idle.pid), "--steps", "1", "--timeout", "1", "--out", str(tmp_path / "never"))
        assert r.returncode != 0 and f"process {idle.pid} did not finish the trace within 1 s" in r.stderr
    assert not (tmp_path / "never").exists() and idle.poll() is None


def test_all_ranks_with_a_rank_that_never_steps_names_it_and_frees_the_others(live, train, tmp_path: Path) -> None:
    idle = live.spawn(["-c", IDLE], AONKIT_JOB_ID="job9", RANK="1")
    wait_line(idle, "up", timeout=120)
    busy = train(OPT_IN="call", AONKIT_JOB_ID="job9", RANK="0")
    out = tmp_path / "job"
    r = live.cli("trace", str(busy.pid), "--all-ranks", "--steps", "2", "--timeout", "2", "--out", str(out))
    assert r.returncode != 0 and f"process {idle.pid} did not finish the trace within 2 s" in r.stderr, r.stderr
    assert not out.exists()  # the busy rank's marks waited for the idle one's: nothing was traced
    r = live.cli("trace", str(busy.pid), "--steps", "2", "--out", str(tmp_path / "alone"))
    assert r.returncode == 0, r.stderr  # its armed trace was withdrawn when the command left
    assert busy.poll() is None and idle.poll() is None


def test_bad_steps_or_duration_are_refused_before_anything_is_asked(tmp_path: Path) -> None:
    from aonkit.live.trace import run_trace

    for kw in ({"steps": 0}, {"steps": 1.5}, {"steps": True}, {"duration_s": 0}, {"duration_s": -1.0}):
        with pytest.raises(ValueError, match="steps must be|duration_s must be"):
            run_trace(os.getpid(), out=tmp_path / "x", **kw)
    assert not (tmp_path / "x").exists()
