"""How the ranks of a job agree on the step they start tracing at (:mod:`.board`).

"Each rank starts at its first step boundary after an instant" does not give every rank the same step: the ranks
of a synchronous job pass a step's boundary some milliseconds apart (the one that waits least in the all-reduce
passes first), and an instant that falls between them splits the ranks across two steps. (It happened in CI: ranks
0 and 1 traced steps 80-82, ranks 2 and 3 steps 79-81.) No rule on one instant avoids it; the ranks have to compare
their boundaries. They do it through the request's folder, in two rounds:

1. each rank, once armed, counts its step boundaries and keeps the times of the last :data:`MARKS`; at its first
   boundary at or after the request's instant it writes them to ``.rank<N>.marks.json`` (:class:`StepCount`);
2. ``aonkit trace --job`` takes the rank whose first boundary after the instant came earliest as the reference,
   pairs each of its boundaries with the nearest of each rank's, and takes the count offset most pairs agree on as
   the same step (:func:`agree`; one boundary a rank passed late does not move it): right while the ranks pass a
   boundary less than half a step apart, and a note says when they are over a quarter of a step apart. It picks a
   step ``--lead`` seconds ahead and writes ``.start.json``: for each rank, the count of the boundary to start at;
3. each rank reads ``.start.json`` every :data:`POLL_S` and starts at its count (a rank that has already passed it
   says so: it was not told in time).
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from .paths import LiveError, NotOwnerError
from .status import read_json, write_json

MARKS = 9
"""How many of its last step boundaries a rank reports (up to its first at or after the instant)."""
POLL_S = 0.25
"""How often a rank that sent its marks reads the folder's start file."""
START = ".start.json"
AGREE_S = 0.5
"""``aonkit trace --all-ranks``: seconds from the command to the instant the ranks send their marks at."""
SOCKET_LEAD_S = 0.2
"""``aonkit trace --all-ranks``: seconds from the last rank's marks to the start (the sockets answer at once)."""


class StepCount:
    """A rank's step boundaries until the ranks agree on a start (the training thread's side: a count and a time each).

    Parameters
    ----------
    instant_ns : int
        The request's ``start_ns``: the marks are sent at the first boundary at or after it.
    """

    def __init__(self, instant_ns: int) -> None:
        self.instant_ns = instant_ns
        self.count = 0
        self.marks: deque[tuple[int, int]] = deque(maxlen=MARKS)
        self.sent: list[tuple[int, int]] | None = None  # the marks at the first boundary at or after the instant
        self.reached = threading.Event()
        self.start: int | None = None  # the boundary count to start at, once agreed

    def at_boundary(self, now_ns: int) -> bool | None:
        """Count a boundary: True to start the profiler here, None not yet, False when the start was passed."""
        self.count += 1
        self.marks.append((self.count, now_ns))
        if self.sent is None and now_ns >= self.instant_ns:
            self.sent = list(self.marks)
            self.reached.set()
        start = self.start
        if start is None or self.count < start:
            return None
        return self.count == start


def marks_path(out: Path, key: int) -> Path:
    """Where rank ``key`` (a rank, or minus its pid) writes its marks."""
    return out / f".rank{key}.marks.json"


def write_marks(out: Path, base: dict[str, Any], marks: list[tuple[int, int]]) -> None:
    """A rank's marks: ``base`` (the id, rank, pid, host, world size) and ``[count, time_ns]`` per boundary."""
    write_json(marks_path(out, base["rank"]), {**base, "marks": [list(m) for m in marks]})


def read_marks(out: Path, req_id: str, listed: list[Path] | None = None) -> dict[int, dict[str, Any]]:
    """The marks of request ``req_id`` found in ``out`` (or among ``listed``, its ``.rank*`` files), by rank.

    Files not the user's own are skipped.
    """
    found = {}
    for path in out.glob(".rank*.json") if listed is None else listed:
        if not path.match(".rank*.marks.json"):
            continue
        try:
            rep = read_json(path, "rank's step marks")
        except (OSError, NotOwnerError):
            continue
        if not isinstance(rep, dict) or rep.get("id") != req_id or not isinstance(rep.get("rank"), int):
            continue
        marks = rep.get("marks")
        if isinstance(marks, list) and marks and all(_pair(m) for m in marks):
            found[rep["rank"]] = rep
    return found


def _pair(m: object) -> bool:
    return isinstance(m, list) and len(m) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in m)


def step_ns(reports: dict[int, dict[str, Any]]) -> float | None:
    """The median time between consecutive boundaries over every rank's marks; None with no two marks."""
    gaps = [(b[1] - a[1]) / (b[0] - a[0]) for rep in reports.values()
            for a, b in zip(rep["marks"], rep["marks"][1:]) if b[0] > a[0]]  # fmt: skip
    return statistics.median(gaps) if gaps else None


def agree(reports: dict[int, dict[str, Any]], now_ns: int, lead_ns: int,
          names: dict[int, str] | None = None) -> tuple[dict[int, int], list[str], dict[int, float]]:  # fmt: skip
    """Each rank's boundary count to start at, so that all start at the same step; notes; each rank's lag.

    Parameters
    ----------
    reports : dict
        The ranks' marks (:func:`read_marks`), by rank: ``marks`` is ``[count, time_ns]`` per boundary, the last
        the rank's first at or after the instant.
    now_ns, lead_ns : int
        The start is the first step of the reference rank expected ``lead_ns`` after ``now_ns`` (at least its next).
    names : dict of int to str, optional
        What the notes call each key (default ``rank <key>``).

    Returns
    -------
    starts : dict of int to int
        By rank, the count of the boundary to start at.
    notes : list of str
        A rank whose boundaries are over a quarter of a step from the reference's (the match, and so the step, may
        be wrong), or none within half a step (it armed late: matched by the median step time instead), or no
        step time known.
    lag_ns : dict of int to float
        By rank, how long after the reference's it passes a step's boundary (the median over the paired
        boundaries; negative: before). A rank that waits least in a step's collectives passes first, so the
        latest is the one the others waited for.
    """
    ref = min(reports, key=lambda r: (reports[r]["marks"][-1][1], r))  # the first to pass a boundary after the instant
    ref_marks = reports[ref]["marks"]
    ref_count, ref_ns = ref_marks[-1]  # every rank's marks reach its boundary of the same step (or a later one)
    step = step_ns(reports)
    ahead = max(1, math.ceil((now_ns + lead_ns - ref_ns) / step)) if step else 1
    name = {k: f"rank {k}" for k in reports} | (names or {})
    starts, notes, lags = {}, [], {}
    for rank, rep in sorted(reports.items()):
        votes: dict[int, list[int]] = {}  # count offset from the reference -> the gaps of the boundaries it pairs
        for cq, tq in ref_marks:  # each of the reference's boundaries, paired with this rank's nearest
            cr, tr = min(rep["marks"], key=lambda m: abs(m[1] - tq))
            if step is None or abs(tr - tq) <= step / 2:
                votes.setdefault(cr - cq, []).append(tr - tq)
        if votes:  # the offset most pairs agree on: one boundary late (a rank descheduled) does not move it
            offset = max(sorted(votes), key=lambda o: (len(votes[o]), -abs(statistics.median(votes[o]))))
            starts[rank] = ref_count + offset + ahead
            gap = lags[rank] = statistics.median(votes[offset])
            if step and abs(gap) > step / 4:
                notes.append(f"{name[rank]}'s step boundaries are {abs(gap) / 1e6:.1f} ms from {name[ref]}'s, "
                             f"over a quarter of a step ({step / 1e6:.1f} ms): it may not have traced the same "
                             "steps")  # fmt: skip
            continue
        count, t = min(rep["marks"], key=lambda m: abs(m[1] - ref_ns))  # none within half a step of the reference's
        gap = t - ref_ns
        shift = round(gap / step)  # type: ignore[operator]
        starts[rank] = count - shift + ahead
        lags[rank] = gap - shift * step  # type: ignore[operator]
        notes.append(f"{name[rank]} passed no step boundary near {name[ref]}'s (the nearest is {gap / 1e6:.1f} "
                     "ms away: it saw the request late, or the ranks do not step together); matched "
                     f"{shift:+d} steps by the median step time ({step / 1e6:.1f} ms), it may not have traced "
                     "the same steps")  # fmt: skip
    if step is None:
        notes.append("no rank passed two step boundaries between seeing the request and the instant: each rank's first "
                     "boundary after the instant was taken as the same step (not checked)")
    return starts, notes, lags


def lag_ms(ns: float | None) -> float | None:
    """A rank's lag (:func:`agree`) in ms to the µs, as the manifests keep it (None stays None)."""
    return None if ns is None else round(ns / 1e6, 3)


def write_starts(out: Path, req_id: str, starts: dict[int, int]) -> None:
    """``.start.json``: the boundary count each rank starts at."""
    write_json(out / START, {"id": req_id, "starts": {str(k): v for k, v in starts.items()}})


def wait_start(out: Path, req_id: str, key: int, expires_ns: int) -> int | str:
    """Rank ``key``'s start count, read from ``out`` every :data:`POLL_S`; a reason (str) when none comes."""
    while time.time_ns() < expires_ns:
        try:
            got = read_json(out / START, "trace start file")
        except (OSError, NotOwnerError):
            got = None
        if isinstance(got, dict) and got.get("id") == req_id and isinstance(got.get("starts"), dict):
            start = got["starts"].get(str(key))
            if isinstance(start, int) and not isinstance(start, bool):
                return start
            return "aonkit trace --job set the ranks' start without this rank (its marks came too late)"
        time.sleep(POLL_S)
    return "no start step came from aonkit trace --job before the request expired (did the command stop?)"


class NotAgreed(LiveError):
    """The ranks traced at once over their sockets could not agree on a start (one failed, or never sent marks)."""


class Meeting:
    """The ranks of one ``aonkit trace --all-ranks``, met over their control sockets.

    Each gets its start once all have sent their marks: the same agreement as a board's (:func:`agree`), no files.

    Parameters
    ----------
    n : int
        How many ranks to wait for.
    lead_ns : int
        From the last rank's marks to the start.
    names : dict of int to str, optional
        What the notes call each key (:func:`agree`).
    """

    def __init__(self, n: int, lead_ns: int, names: dict[int, str] | None = None) -> None:
        self.n, self.lead_ns, self.names = n, lead_ns, names
        self.reports: dict[int, dict[str, Any]] = {}
        self.starts: dict[int, int] | None = None
        self.notes: list[str] = []
        self.lags: dict[int, float] = {}
        self.failed = False
        self._cond = threading.Condition()

    def start_of(self, key: int, marks: list[list[int]], timeout_s: float) -> int:
        """Rank ``key``'s start, once every rank's marks are in; :class:`NotAgreed` when one failed or timed out."""
        with self._cond:
            self.reports[key] = {"marks": marks}
            if len(self.reports) == self.n:
                self.starts, self.notes, self.lags = agree(self.reports, time.time_ns(), self.lead_ns, self.names)
                self._cond.notify_all()
            if not self._cond.wait_for(lambda: self.starts is not None or self.failed, timeout_s):
                raise NotAgreed(f"{len(self.reports)} of {self.n} ranks reached a step boundary within {timeout_s:g} s")
            if self.starts is None:
                raise NotAgreed("another rank failed before the ranks agreed on a start")
            return self.starts[key]

    def fail(self) -> None:
        """A rank failed: release the others (they withdraw)."""
        with self._cond:
            self.failed = True
            self._cond.notify_all()
