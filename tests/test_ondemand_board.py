"""``aonkit trace --job`` through a job's board: every rank of a real 4-rank torch.distributed (gloo, CPU) job on two
"nodes" (two runtime directories: their own registries, a daemon on one) traced at the same steps, and the job
goes on. The board's files by hand: what a served process ignores and what posting refuses.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from aonkit.live import board
from aonkit.live.paths import LiveError, NotOwnerError, boot_id
from tests.live_helpers import Live, live_world, wait_line

torch = pytest.importorskip("torch")

TRAIN = r"""
import os, sys, time
import torch
import torch.distributed as dist
import aonkit.live
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=rank, world_size=world)
aonkit.live.serve()  # the job id and board from AONKIT_JOB_ID and AONKIT_JOB_BOARD
torch.manual_seed(rank)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
step = 0
while True:
    stop = torch.tensor([float(os.path.exists(sys.argv[1]))])
    dist.all_reduce(stop)  # every rank stops at the same step
    if stop.item() or step >= 20000:
        break
    with torch.profiler.record_function(f"train_step_{step}"):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
    if rank >= world // 2:
        time.sleep(0.005)  # these ranks pass each step's boundary 5 ms after the others (a straggler's skew)
    opt.step()
    step += 1
    print(f"step {step}", flush=True)
    time.sleep(0.02)
print("finished", step, flush=True)
print("loaded", sorted(m for m in ("pandas", "pyarrow") if m in sys.modules), flush=True)
dist.destroy_process_group()
"""


@pytest.fixture
def live() -> Iterator[Live]:
    yield from live_world()


def _steps(proc) -> int:
    return max((int(x.split()[1]) for x in list(proc.lines) if x.startswith("step ")), default=0)


def test_a_job_on_two_nodes_is_traced_at_the_same_steps_on_every_rank_and_goes_on(live, tmp_path: Path) -> None:
    import aonkit
    from aonkit.analysis.findings import findings
    from aonkit.live.trace import JOB_MANIFEST

    script, stop, rdzv = tmp_path / "train.py", tmp_path / "stop", tmp_path / "rdzv"
    script.write_text(TRAIN)
    shared = tmp_path / "board"
    node_b = live.base / "runB"  # the second node's runtime directory: its own registry, no daemon
    live.start_daemon("--interval", "0.02")  # on the first node
    env = {"AONKIT_JOB_ID": "J7", "AONKIT_JOB_BOARD": str(shared), "WORLD_SIZE": "4", "GLOO_SOCKET_IFNAME": "lo"}
    procs = [live.spawn([str(script), str(stop), str(rdzv)], RANK=str(r), **env,
                        **({"AONKIT_RUNTIME_DIR": str(node_b)} if r >= 2 else {})) for r in range(4)]  # fmt: skip
    try:
        for p in procs:
            wait_line(p, "step 5", timeout=180)
        assert [len(list((d / "procs").glob("*.json"))) for d in (live.run_dir, node_b)] == [2, 2]
        status = live.cli("daemon", "status").stdout
        assert status.count("job J7, rank ") == 2 and status.count(f"(board {shared})") == 2  # this node's two
        out = tmp_path / "shared-out"
        r = live.cli("trace", "--job", "J7", "--board", str(shared), "--steps", "3", "--lead", "3", "--out", str(out))
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"job folder (aonkit.load_job): {out}" in r.stdout
        assert "aonkit trace: 4 ranks sent theirs; they start tracing the same step in about 3 s" in r.stderr
        assert re.search(r"aonkit trace: rank [23] passed each step's boundary [\d.]+ ms after rank [01] ", r.stdout)
        at_trace = [_steps(p) for p in procs]
        live.wait(lambda: all(_steps(p) > s + 5 for p, s in zip(procs, at_trace)))  # the job went on
        manifest = json.loads((out / JOB_MANIFEST).read_text())
        ranks = {x["rank"]: x for x in manifest["ranks"]}
        assert sorted(ranks) == [0, 1, 2, 3] and all(x["steps"] == 3 for x in ranks.values())
        assert {x["boot_id"] for x in ranks.values()} == {boot_id()}  # each rank's own record (here one node's)
        assert all(x["t0_ns"] >= manifest["start_ns"] for x in ranks.values())  # none started before the instant
        assert [ranks[k]["samples"] > 0 for k in range(4)] == [True, True, False, False]  # the daemon's node only
        assert any(m.startswith("rank 2 (") and "no aonkit daemon" in m for m in manifest["messages"]), manifest
        assert not any("may not have traced the same steps" in m for m in manifest["messages"]), manifest
        lag = {k: ranks[k]["boundary_lag_ms"] for k in range(4)}  # ranks 2 and 3 sleep 5 ms before each boundary
        assert min(lag[2], lag[3]) - max(lag[0], lag[1]) >= 2 and 0 in lag.values(), lag  # 0: the reference
        assert not (shared / "J7" / "request.json").exists() and not list(out.glob(".rank*"))  # reports and marks
        assert not (out / ".start.json").exists()
        job = aonkit.load_job(out)  # the public loader: the samples and the lags attached
        _same_steps(job)
        assert dict(zip(job.step_lags["rank"], job.step_lags["boundary_lag_ms"])) == lag
        late = findings(job).query("finding == 'late_rank'")  # the rank the others waited for (no comm kernels)
        assert late["rank"].tolist() == [max(lag, key=lag.get)] and late["value"].iloc[0] > 0
        for rank, trace in job.items():
            assert (trace.samples is not None and len(trace.samples) > 0) == (rank < 2), rank
        # WHEN more ranks are awaited than there are, THEN it says which came, and keeps what they wrote
        again = live.cli("trace", "--job", "J7", "--board", str(shared), "--ranks", "5", "--lead", "2", "--timeout",
                         "20", "--out", str(tmp_path / "short"))  # fmt: skip
        assert again.returncode == 2, again.stdout + again.stderr
        assert "4 of 5 ranks of job J7 reported within 22 s (ranks: 0, 1, 2, 3)" in again.stderr
        assert "aonkit trace: 4 of 5 ranks sent theirs; they start" in again.stderr  # the others went on without it
        kept = sorted(x.name for x in (tmp_path / "short").glob("rank*.json.gz"))
        assert kept == [f"rank{r}.json.gz" for r in range(4)]  # what the ranks that came wrote is kept
    finally:
        stop.touch()
        for p in procs:
            p.wait(timeout=120)
    assert all(p.returncode == 0 for p in procs), [p.lines[-5:] for p in procs]
    assert all("loaded []" in p.lines for p in procs), [p.lines[-3:] for p in procs]  # no pandas in the job


def _same_steps(job) -> dict[int, list[str]]:
    labels = {}
    for rank, trace in job.items():
        names = trace.events["name"].astype(str)
        labels[rank] = sorted(set(names[names.str.startswith("train_step_")]))
        assert names.str.startswith("ProfilerStep#").sum() == 3, rank
    assert len(labels[0]) >= 2 and all(v == labels[0] for v in labels.values()), labels
    return labels


def test_all_ranks_on_one_node_agree_on_their_first_step_too(live, tmp_path: Path) -> None:
    from aonkit.analysis.findings import findings
    from aonkit.live.trace import JOB_MANIFEST, load_traced_job

    script, stop, rdzv = tmp_path / "train.py", tmp_path / "stop", tmp_path / "rdzv"
    script.write_text(TRAIN)
    env = {"AONKIT_JOB_ID": "J8", "WORLD_SIZE": "2", "GLOO_SOCKET_IFNAME": "lo"}
    procs = [live.spawn([str(script), str(stop), str(rdzv)], RANK=str(r), **env) for r in range(2)]
    try:
        for p in procs:
            wait_line(p, "step 5", timeout=180)
        for k in range(3):  # rank 1 passes each boundary 5 ms after rank 0: the next-step rule split them
            out = tmp_path / f"out{k}"
            r = live.cli("trace", str(procs[1].pid), "--all-ranks", "--steps", "3", "--out", str(out))
            assert r.returncode == 0, r.stdout + r.stderr
            assert "aonkit trace: rank 1 passed each step's boundary " in r.stdout  # the latest: 5 ms late
            job = load_traced_job(out)
            _same_steps(job)
            meta = json.loads((out / JOB_MANIFEST).read_text())
            assert not any("same steps" in m for m in meta["messages"]), meta["messages"]
            lag = {x["rank"]: x["boundary_lag_ms"] for x in meta["ranks"]}
            assert lag[1] - lag[0] >= 2 and 0 in lag.values(), lag  # rank 1 passes each boundary 5 ms late
            assert findings(job).query("finding == 'late_rank'")["rank"].tolist() == [1]
    finally:
        stop.touch()
        for p in procs:
            p.wait(timeout=120)
    assert all(p.returncode == 0 for p in procs), [p.lines[-5:] for p in procs]


def test_a_request_that_is_not_private_or_malformed_is_not_taken(tmp_path: Path) -> None:
    b = tmp_path / "board"
    req = board.post(b, "J", tmp_path / "out", 3, None, lead_s=1)
    assert board.read_request(b, "J") == req
    path = b / "J" / board.REQUEST
    assert oct(path.stat().st_mode & 0o777) == "0o600" and oct((b / "J").stat().st_mode & 0o777) == "0o700"
    path.chmod(0o620)  # others may write it: anyone could have asked
    assert board.read_request(b, "J") is None
    path.chmod(0o600)
    path.write_text(json.dumps({**req, "start_ns": "soon"}))
    assert board.read_request(b, "J") is None
    path.write_text("{")
    assert board.read_request(b, "J") is None
    board.withdraw(b, "J", req["id"])  # (not the current one any more: it stays)
    assert path.exists()
    with pytest.raises(LiveError, match="cannot name a directory"):
        board.post(b, "../x", tmp_path / "out", 3, None)


def test_posting_to_a_board_of_another_user_is_refused(tmp_path: Path, monkeypatch) -> None:
    b = tmp_path / "board"
    b.mkdir()
    monkeypatch.setattr(os, "getuid", lambda: os.stat(b).st_uid + 1)  # as another user sees it
    with pytest.raises(NotOwnerError, match="belongs to uid"):
        board.post(b, "J", tmp_path / "out", 3, None)


def test_the_command_asks_for_a_process_or_a_job_and_a_board(capsys, monkeypatch) -> None:
    from aonkit.cli import main

    monkeypatch.delenv("AONKIT_JOB_BOARD", raising=False)
    assert main(["trace"]) == 2
    assert "name a process (aonkit trace PID) or a job (aonkit trace --job ID --board DIR)" in capsys.readouterr().err
    assert main(["trace", "123", "--job", "J", "--board", "/tmp"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["trace", "--job", "J"]) == 2
    assert "--job needs the job's board: --board DIR, or AONKIT_JOB_BOARD" in capsys.readouterr().err
