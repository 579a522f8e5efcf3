"""The serving summary's statistics against numpy's, to the bit, whatever the order of the requests."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from aonkit.model import serving_summary
from aonkit.model.serving_stats import METRICS, sorted_percentiles

FINITE = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, allow_subnormal=True)
PERCENTS = st.lists(st.one_of(st.sampled_from([0, 1, 50, 90, 99, 99.9, 100]), st.floats(0, 100)), min_size=1,
                    max_size=6)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(x=arrays(np.float64, st.integers(1, 300), elements=FINITE), q=PERCENTS)
def test_sorted_percentiles_are_numpys_to_the_bit(x, q):
    # GIVEN any finite values (ties, zeros, one value) and percentiles from 0 to 100
    want = np.percentile(x, q)
    # WHEN they are taken from a sorted copy
    got = sorted_percentiles(np.sort(x), tuple(q))
    # THEN each is numpy's linear interpolation, the same double. The sign of a zero is the one thing that may
    # differ: -0.0 == 0.0 sort as ties, and numpy's partition and a sort leave ties in different orders (found by
    # hypothesis: [-0., 0., -0., ...] at 50%), so "+ 0.0" makes every zero +0.0 and changes nothing else
    assert [(float(v) + 0.0).hex() for v in want] == [(v + 0.0).hex() for v in got]


def test_sorted_percentiles_of_nothing_are_nan():
    assert all(math.isnan(v) for v in sorted_percentiles(np.empty(0), (50, 99)))


def _reference(requests: pd.DataFrame, warmup: float, qs: tuple) -> dict:
    """The summary as its docstring defines it, step by step with numpy (the slow obvious way)."""
    arr, fin, out = (requests[c].to_numpy() for c in ("arrival_s", "finish_s", "output_tokens"))
    measured = np.argsort(arr, kind="stable")[int(np.floor(warmup * arr.size)):]
    served = fin[~np.isnan(fin)]  # refused requests have no finish
    t0 = arr[measured[0]]
    window = float(served.max() - t0) if served.size else math.nan
    done = fin >= t0
    ref = {"requests": arr.size, "measured": measured.size, "rejected": int(np.isnan(fin[measured]).sum()),
           "window_s": window,
           "throughput_per_s": done.sum() / window if window > 0 else math.nan,
           "output_tokens_per_s": out[done].sum() / window if window > 0 else math.nan}  # fmt: skip
    for m in METRICS:
        x = requests[f"{m}_s"].to_numpy()[measured]
        x = x[np.isfinite(x)]
        ref[f"{m}_mean_s"] = float(np.mean(x)) if x.size else math.nan
        for q, v in zip(qs, np.percentile(x, qs) if x.size else [math.nan] * len(qs)):
            ref[f"{m}_p{q:g}_s"] = float(v)
    return ref


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 400), warmup=st.sampled_from([0.0, 0.1, 0.5, 0.99]),
       ties=st.booleans(), refused=st.sampled_from([0.0, 0.2, 1.0]))  # fmt: skip
def test_the_summary_of_a_table_in_any_order_is_the_step_by_step_one(seed, n, warmup, ties, refused):
    # GIVEN a request table in no particular order, arrival ties (or not), some one-token outputs (TPOT NaN), some
    # refused requests (no times: NaN) or all of them
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 5, n) * 0.5 if ties else rng.exponential(1.0, n)
    first = arr + rng.exponential(0.3, n)
    fin = first + rng.exponential(2.0, n)
    out = rng.integers(1, 4, n)
    gone = rng.random(n) < refused
    first[gone] = fin[gone] = np.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (fin - first) / (out - 1), np.nan)
    table = pd.DataFrame({"arrival_s": arr, "finish_s": fin, "output_tokens": out, "queue_s": first - arr - 0.1,
                          "ttft_s": first - arr, "tpot_s": tpot, "e2e_s": fin - arr})  # fmt: skip
    qs = (50, 90, 99, 99.9)
    # WHEN it is summarized
    got = serving_summary(table, warmup, qs)
    # THEN every number is the step-by-step numpy one (argsort, mask, mean, percentile), to the bit
    want = _reference(table, warmup, qs)
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert (math.isnan(v) and math.isnan(got[k])) or float(got[k]).hex() == float(v).hex(), k
