"""How the ranks of a job agree on their first traced step (:mod:`aonkit.live.board_steps`).

The ranks here are simulated clocks: each passes the same training steps a few milliseconds from the others (a
synchronous job's skew), counts from when it saw the request, and feeds :class:`StepCount` as the optimizer hook
does. The instant is swept across several steps, into the gaps between the ranks' boundaries where "the first
boundary after the instant" splits the ranks.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from aonkit.analysis.step_lags import NOT_TOGETHER
from aonkit.live import board_steps as bs

MS = 1_000_000
SKEW_NS = {0: 0, 1: 1 * MS, 2: 6 * MS, 3: 7 * MS}  # ranks 2 and 3 pass each boundary later
ARMED_AT_STEP = {0: 3, 1: 5, 2: 4, 3: 8}  # the step at which each rank saw the request (its count starts there)


def _boundaries(n: int = 60, even: bool = False) -> list[int]:
    """The job's step boundaries: 30 ms steps, every 7th one 90 ms (a data-loader stall: not a steady period)."""
    t, out = 1_000 * MS, []
    for k in range(n):
        t += 90 * MS if k % 7 == 6 and not even else 30 * MS
        out.append(t)
    return out


def _run(instant_ns: int, lead_ns: int = 100 * MS, armed: dict[int, int] = ARMED_AT_STEP, even: bool = False,
         notes: int = 0) -> dict[int, int]:
    """The job step each rank starts tracing at, with marks, agreement and start as the ranks and command do them."""
    steps = _boundaries(even=even)
    counts = {r: bs.StepCount(instant_ns) for r in SKEW_NS}
    started: dict[int, int] = {}
    decided = False
    for k, t in enumerate(steps):
        for r, c in counts.items():
            if k < armed[r] or r in started:
                continue
            go = c.at_boundary(t + SKEW_NS[r])
            assert go is not False, (r, k)
            if go:
                started[r] = k
        if not decided and all(c.sent is not None for c in counts.values()):
            now = max(c.sent[-1][1] for c in counts.values()) + 5 * MS  # the command reads the last rank's marks
            sent = {r: {"marks": [list(m) for m in c.sent]} for r, c in counts.items()}
            starts, said, lags = bs.agree(sent, now, lead_ns)
            assert len(said) == notes, said
            if not notes:  # how late each rank passes a boundary, to the ns
                assert {r: lags[r] - lags[0] for r in lags} == {r: s - SKEW_NS[0] for r, s in SKEW_NS.items()}
            for r, c in counts.items():
                c.start = starts[r]
            decided = True
    assert sorted(started) == sorted(SKEW_NS), started
    return started


def _first_after(instant_ns: int) -> dict[int, int]:
    """The old rule: each rank's first boundary at or after the instant."""
    return {r: next(k for k, t in enumerate(_boundaries()) if t + s >= instant_ns) for r, s in SKEW_NS.items()}


def test_every_rank_starts_at_the_same_step_wherever_the_instant_falls() -> None:
    steps = _boundaries()
    split = 0
    for instant in range(steps[12] - 5 * MS, steps[22], MS // 2):  # across short and long steps, every 0.5 ms
        got = _run(instant)
        assert len(set(got.values())) == 1, (instant, got)
        first = min(k for k, t in enumerate(steps) if t >= instant)
        assert got[0] >= first  # never before the instant
        split += len(set(_first_after(instant).values())) > 1
    assert split > 20  # the sweep does put the instant between the ranks' boundaries, where the old rule splits them


def test_the_start_is_about_the_lead_ahead() -> None:
    steps = _boundaries()
    instant = steps[15] + 3 * MS
    near, far = _run(instant, lead_ns=10 * MS)[0], _run(instant, lead_ns=400 * MS)[0]
    assert near <= 18 and steps[far] - steps[near] >= 300 * MS


def test_a_rank_that_saw_the_request_after_the_instant_is_matched_by_the_step_time_and_named() -> None:
    steps = _boundaries(even=True)
    for instant in range(steps[12] - 5 * MS, steps[14], MS):
        got = _run(instant, armed={**ARMED_AT_STEP, 3: 16}, even=True, notes=1)  # rank 3 armed two steps after
        assert len(set(got.values())) == 1, (instant, got)
    _, notes, _ = bs.agree({0: {"marks": [[1, 0], [2, 30 * MS]]}, 1: {"marks": [[1, 91 * MS]]}}, 100 * MS, 0)
    assert notes == ["rank 1 passed no step boundary near rank 0's (the nearest is 61.0 ms away: it saw the request "
                     "late, or the ranks do not step together); matched +2 steps by the median step time (30.0 ms), "
                     "it may not have traced the same steps"]  # fmt: skip


def test_one_late_boundary_at_the_instant_does_not_move_a_rank_by_a_step() -> None:
    ref = [[k, k * 30 * MS] for k in range(1, 10)]  # rank 0: a boundary every 30 ms, the last its first after
    late = [[100 + k, k * 30 * MS + MS] for k in range(1, 9)] + [[109, 9 * 30 * MS + 31 * MS]]  # descheduled 30 ms
    starts, notes, lags = bs.agree({0: {"marks": ref}, 1: {"marks": late}}, now_ns=9 * 30 * MS, lead_ns=0)
    assert starts[1] - starts[0] == 100 and notes == []  # its nearest boundary to the reference's last is 108
    assert lags == {0: 0, 1: MS}  # it passes each boundary 1 ms after rank 0 (the late one is not the median)


def test_a_rank_told_too_late_says_it_passed_the_start() -> None:
    c = bs.StepCount(instant_ns=0)
    assert c.at_boundary(10) is None and c.sent == [(1, 10)] and c.reached.is_set()
    c.start = 3
    assert c.at_boundary(20) is None and c.at_boundary(30) is True
    late = bs.StepCount(instant_ns=0)
    for t in (10, 20, 30):
        late.at_boundary(t)
    late.start = 2
    assert late.at_boundary(40) is False


def test_ranks_further_apart_than_a_quarter_step_are_named() -> None:
    marks = {0: {"marks": [[1, 0], [2, 30 * MS], [3, 60 * MS]]}, 1: {"marks": [[4, 12 * MS], [5, 42 * MS]]}}
    starts, notes, lags = bs.agree(marks, now_ns=60 * MS, lead_ns=0)
    assert starts == {0: 3, 1: 6}  # rank 0's boundary 2 (30 ms) is nearest rank 1's 5 (42 ms, the earliest after)
    assert len(notes) == 1 and notes[0].startswith("rank 0's step boundaries are 12.0 ms from rank 1's")
    assert NOT_TOGETHER in notes[0]  # what the latest-rank rule reads: no rank is named "the latest"
    assert lags == {0: -12 * MS, 1: 0}  # rank 0 passes each 12 ms before rank 1
    _, none, _ = bs.agree({0: {"marks": [[1, 5]]}, 1: {"marks": [[7, 6]]}}, now_ns=10, lead_ns=0)
    assert "not checked" in none[0]


def test_marks_and_starts_go_through_the_folder_and_untrusted_files_are_ignored(tmp_path: Path) -> None:
    base = {"id": "R1", "rank": 2, "pid": 11, "host": "h", "world_size": 4}
    bs.write_marks(tmp_path, base, [(3, 100), (4, 200)])
    (tmp_path / ".rank5.marks.json").write_text('{"id": "R1", "rank": 5, "marks": [[1, "x"]]}')  # malformed
    bs.write_marks(tmp_path, {**base, "id": "OLD", "rank": 6}, [(1, 1)])  # another request's
    os.chmod(tmp_path / ".rank5.marks.json", 0o600)
    got = bs.read_marks(tmp_path, "R1")
    assert list(got) == [2] and got[2]["marks"] == [[3, 100], [4, 200]] and got[2]["world_size"] == 4
    os.chmod(bs.marks_path(tmp_path, 2), 0o644)  # others may read and write it: not trusted
    assert bs.read_marks(tmp_path, "R1") == {}
    def soon() -> int:
        return time.time_ns() + int(0.6e9)

    assert bs.wait_start(tmp_path, "R1", 2, soon()).startswith("no start step came")  # none written
    bs.write_starts(tmp_path, "R1", {2: 9, 3: 10})
    assert bs.wait_start(tmp_path, "R1", 3, soon()) == 10
    assert "without this rank" in bs.wait_start(tmp_path, "R1", 1, soon())
    os.chmod(tmp_path / bs.START, 0o622)
    assert bs.wait_start(tmp_path, "R1", 3, soon()).startswith("no start step came")


@pytest.mark.parametrize("marks", [[], [[1]], [[1, 2.5]], [[True, 2]], "x"])
def test_malformed_marks_are_skipped(tmp_path: Path, marks) -> None:
    from aonkit.live.status import write_json

    write_json(bs.marks_path(tmp_path, 1), {"id": "R", "rank": 1, "marks": marks})
    assert bs.read_marks(tmp_path, "R") == {}


def test_a_meeting_gives_each_rank_its_start_once_all_are_in_and_a_failure_releases_them() -> None:
    import threading

    meet, got = bs.Meeting(2, lead_ns=0, names={11: "rank 0 (pid 11)", 12: "rank 1 (pid 12)"}), {}
    t = threading.Thread(target=lambda: got.setdefault(11, meet.start_of(11, [[4, 0], [5, 30 * MS]], 5)))
    t.start()
    time.sleep(0.1)
    assert t.is_alive() and not got  # waits for the other rank
    got[12] = meet.start_of(12, [[1, 2 * MS], [2, 47 * MS]], 5)
    t.join(5)
    assert got[11] - 5 == got[12] - 2 > 0 and "rank 1 (pid 12)'s step boundaries are 9.5 ms" in meet.notes[0]
    lone = bs.Meeting(2, lead_ns=0)
    threading.Timer(0.1, lone.fail).start()
    with pytest.raises(bs.NotAgreed, match="another rank failed"):
        lone.start_of(1, [[1, 0]], 5)
    with pytest.raises(bs.NotAgreed, match="1 of 2 ranks reached a step boundary within 0.1 s"):
        bs.Meeting(2, lead_ns=0).start_of(1, [[1, 0]], 0.1)


class _Rank:
    """What :func:`trace_for_board` needs of a served process, with a thread stepping every 10 ms."""

    pid = 4242

    def __init__(self) -> None:
        import threading

        self.job, self.withdrawn, self.stop = None, False, threading.Event()
        threading.Thread(target=self._steps, daemon=True).start()

    def _steps(self) -> None:
        while not self.stop.wait(0.01):
            job = self.job
            if job is not None and job.agreed is not None and not self.withdrawn:
                job.agreed.at_boundary(time.time_ns())

    def arm(self, job) -> bool:
        self.job = job
        return True

    def withdraw(self, job) -> None:
        self.withdrawn = True


@pytest.mark.parametrize("case", ["no start file", "left out", "folder gone"])
def test_a_rank_that_gets_no_start_withdraws_and_says_why(tmp_path: Path, monkeypatch, case: str) -> None:
    import sys
    import types

    from aonkit.live.board_rank import trace_for_board

    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch") or types.ModuleType("torch"))
    now = time.time_ns()
    req = {"id": "R", "start_ns": now, "expires_ns": now + int(1.5e9), "steps": 2}
    base = {"id": "R", "rank": 1, "pid": _Rank.pid, "host": "h", "world_size": 2}
    out = tmp_path / "out"
    if case != "folder gone":
        out.mkdir()
    if case == "left out":
        bs.write_starts(out, "R", {0: 5})
    rank = _Rank()
    try:
        if case == "folder gone":
            with pytest.raises(FileNotFoundError):
                trace_for_board(rank, req, out, base)
        else:
            err = trace_for_board(rank, req, out, base)["error"]
            why = "without this rank" if case == "left out" else "no start step"
            assert err.startswith("process 4242: ") and why in err
            assert bs.read_marks(out, "R")[1]["marks"][-1][1] >= now  # its marks went out, up to the instant
    finally:
        rank.stop.set()
    assert rank.withdrawn  # the job goes on untraced


def test_the_latest_rank_is_named_only_when_the_ranks_step_together_and_differ() -> None:
    from aonkit.live.trace import latest_line

    ranks = [{"rank": 0, "boundary_lag_ms": 0.0}, {"rank": 1, "boundary_lag_ms": 0.4},
             {"rank": 2, "boundary_lag_ms": 5.1}, {"rank": 3, "boundary_lag_ms": None}]  # fmt: skip
    assert latest_line(ranks, []).startswith("rank 2 passed each step's boundary 5.1 ms after rank 0 before the")
    assert latest_line(ranks[:2], []) == ""  # within 1 ms: nobody is waited for
    assert latest_line(ranks, ["rank 2's step boundaries are ...: it may not have traced the same steps"]) == ""
    assert latest_line(ranks[2:], []) == ""  # one lag known
