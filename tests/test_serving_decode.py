"""A replica's decode steps in closed form (``aonkit._kernels.serving_decode.decode_run``) against stepping one by one.

The whole simulation with and without closed forms is compared in ``tests/test_serving.py``; here the kernel alone,
on random step-time tables (rising, falling, flat, zero), batches, grids and stopping times.
"""

from __future__ import annotations

import math

import numpy as np

from aonkit._kernels.serving_decode import SHORT, decode_run


def stepped(tab, b, x0, h, overhead, base, d, last, end, until, ends=None):
    """The slow obvious reference: each step's duration interpolated in its cell, summed one by one.

    ``ends``, a list, gets each step's end.
    """
    m = tab.shape[1] - 1
    steps, busy = 0, 0.0
    while end < until and d < last:
        d += 1
        steps += 1
        u = (base + b * d - x0) / h
        k = min(max(int(u), 0), m - 1)
        dur = overhead + (tab[b, k] + (u - k) * (tab[b, k + 1] - tab[b, k]))
        busy += dur
        end += dur
        if ends is not None:
            ends.append(end)
    return steps, end, busy


def random_case(rng: np.random.Generator):
    batches, points = int(rng.integers(1, 9)), int(rng.integers(2, 40))
    kind = rng.integers(0, 4)
    if kind == 0:  # rising in context
        tab = np.cumsum(rng.uniform(0, 1e-3, (batches + 1, points)), axis=1)
    elif kind == 1:  # falling (a measured table may be)
        tab = np.cumsum(rng.uniform(0, 1e-3, (batches + 1, points)), axis=1)[:, ::-1].copy()
    elif kind == 2:  # flat
        tab = np.repeat(rng.uniform(0, 1e-2, (batches + 1, 1)), points, axis=1)
    else:  # anything >= 0, with zeros
        tab = rng.uniform(0, 1e-2, (batches + 1, points)) * (rng.uniform(size=(batches + 1, points)) > 0.2)
    b = int(rng.integers(1, batches + 1))
    h = float(rng.choice([0.5, 1.0, 3.0, 97.5, 1000.0]))
    overhead = float(rng.choice([0.0, 1e-3]))
    base = int(rng.integers(0, 5000))
    d = int(rng.integers(0, 100))
    last = d + int(rng.choice([0, 1, SHORT, SHORT + 1, int(rng.integers(0, 200)), int(rng.integers(0, 5000))]))
    return tab, b, 1.0, h, overhead, base, d, last, float(rng.uniform(0, 10))


def test_decode_run_agrees_with_stepping_one_by_one():
    # GIVEN 1500 random tables, batches, grids (cells of under one step to many), overheads, runs of 0 to 5,000 steps
    rng = np.random.default_rng(7)
    closed = crossed = 0
    for _ in range(1500):
        tab, b, x0, h, overhead, base, d, last, end = random_case(rng)
        ends = [end]
        stepped(tab, b, x0, h, overhead, base, d, min(last, d + 50), end, math.inf, ends)
        # WHEN the steps are summed in closed form up to the next finish, and up to an instant within the run: the
        # midpoint between two of the reference's step ends (clear of ties, which rounding would decide)
        k = int(rng.integers(0, len(ends)))
        if k + 1 < len(ends) and ends[k + 1] > ends[k]:
            until = 0.5 * (ends[k] + ends[k + 1])
        else:
            until = math.inf
        for stop in (math.inf, until):
            want = stepped(tab, b, x0, h, overhead, base, d, last, end, stop)
            got = decode_run(tab, b, x0, h, overhead, base, d, last, end, stop)
            # THEN the same steps are taken, and the end and summed durations agree up to rounding
            assert got[0] == want[0], (got, want, stop)
            assert math.isclose(got[1], want[1], rel_tol=1e-12, abs_tol=1e-300), (got, want)
            assert math.isclose(got[2], want[2], rel_tol=1e-11, abs_tol=1e-12), (got, want)
            closed += int(want[0] > 4 * SHORT)
            crossed += int(stop < math.inf and want[0] > SHORT)
    assert closed > 250 and crossed > 50  # long runs, some stopped by an instant past the first steps


def test_decode_run_at_exact_step_ends():
    # GIVEN flat binary-fraction step times (every sum exact) and an instant equal to one of the step ends
    tab = np.full((3, 5), 0.125)
    for j in (1, SHORT, SHORT + 1, 40, 399):
        until = 2.0 + j * 0.25  # overhead 0.125 + 0.125 per step
        # WHEN the steps are run up to it
        got = decode_run(tab, 2, 1.0, 100.0, 0.125, 7, 0, 1000, 2.0, until)
        # THEN the step that ends exactly then is the one in progress (the loop handles its end at that instant)
        assert got == (j, until, j * 0.25), (j, got)
    # AND a run that reaches its last step before the instant stops there
    assert decode_run(tab, 2, 1.0, 100.0, 0.125, 7, 0, 30, 2.0, 1e9) == (30, 2.0 + 30 * 0.25, 30 * 0.25)
