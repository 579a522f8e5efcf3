"""The Numba-backed HTA counters (idle time, launch stats, queue length) against slow pandas references."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aonkit._kernels.describe import describe_segment
from aonkit._kernels.keys import compact, group_rows, sort_segment
from aonkit.analysis import hta_counters as hk

from . import naive_hta as ref

API = ["cudaLaunchKernel", "cudaMemcpyAsync", "hipLaunchKernel"]
OTHER = ["aten::mm", "ProfilerStep#1", "cudaDeviceSynchronize"]


def random_frame(rng: np.random.Generator, n: int, *, sparse: bool = False, ties: bool = True) -> pd.DataFrame:
    """A frame shaped like ``hta_frames`` output: CPU rows (stream -1) and GPU rows, shuffled, with ties.

    Correlations repeat (several CPU rows, several GPU rows), go missing (-1)
    and with ``sparse`` spread over a range far wider than the row count.
    """
    n_corr = max(1, n // 3)
    corr = rng.integers(-1, n_corr, n)
    if sparse:
        corr = np.where(corr >= 0, corr * 7_919_000_003 + 11, -1)
    stream = np.where(rng.random(n) < 0.5, -1, rng.choice([3, 7, 20, 1_000_000_007 if sparse else 9], n))
    span = n // 2 + 1 if ties else 10**9
    ts = rng.integers(0, span, n)
    dur = rng.integers(0, 40, n)
    names = np.array(API + OTHER, dtype=object)[rng.integers(0, len(API) + len(OTHER), n)]
    cats = pd.Index(API + OTHER + ["unused"], dtype="str")
    return pd.DataFrame({"ts": ts, "dur": dur, "end": ts + dur, "stream": stream, "correlation": corr,
                         "name": pd.Categorical(names, categories=cats)})  # fmt: skip


HAND = pd.DataFrame(
    {  # two launches on stream 7, one on stream 9, one GPU event without a launch
        "ts": [0, 2, 10, 14, 40, 41, 100, 5],
        "dur": [1, 1, 3, 20, 5, 1, 10, 2],
        "stream": [-1, -1, 7, 7, -1, 9, 7, 9],
        "correlation": [1, 2, 1, 2, 3, 3, 99, -1],
        "name": pd.Categorical(["cudaLaunchKernel", "cudaLaunchKernel", "k", "k", "cudaLaunchKernel", "k", "k", "k"]),
    }
)
HAND["end"] = HAND["ts"] + HAND["dur"]


def test_idle_hand_made() -> None:
    out, stats = hk.idle_time_breakdown({0: HAND}, consecutive_kernel_delay=30)
    # stream 7 in time order: [10,13) [14,34) [100,110); gaps 1 (launch at 2 < 13: kernel_wait), 66 (no launch: other)
    s7 = out[out["stream"] == 7].set_index("idle_category")["idle_time"].to_dict()
    assert s7 == {"kernel_wait": 1.0, "other": 66.0}
    # stream 9: [5,7) then [41,42): the launch at 40 came after 7, so host_wait 34
    s9 = out[out["stream"] == 9].set_index("idle_category")["idle_time"].to_dict()
    assert s9 == {"host_wait": 34.0, "other": 0.0}
    assert out["stream"].tolist() == [7, 7, 9, 9]  # streams in order of first appearance
    first = stats[(stats["stream"] == 9) & (stats["idle_category"] == "other")].iloc[0]
    assert first["count"] == 0 and np.isnan(first["mean"])


def test_launch_and_queue_hand_made() -> None:
    ls = hk.cuda_kernel_launch_stats({0: HAND})
    assert ls["correlation"].tolist() == [1, 2, 3]
    assert ls["launch_delay"].tolist() == [9, 11, 0]
    q = hk.queue_length_series({0: HAND})
    assert q[q["stream"] == 7]["queue_length"].tolist() == [1, 2, 1, 0]
    assert q[q["stream"] == 9]["queue_length"].tolist() == [1, 0]


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("ties", [True, False])
def test_counters_equal_pandas_reference(rng: np.random.Generator, sparse: bool, ties: bool) -> None:
    for n in (0, 1, 2, 7, 50, 400, 3000):
        frames = {r: random_frame(rng, n, sparse=sparse, ties=ties) for r in (2, 0)}
        got, got_stats = hk.idle_time_breakdown(frames)
        want, want_stats = ref.idle_time_breakdown(frames)
        pd.testing.assert_frame_equal(got, want, check_exact=True)
        pd.testing.assert_frame_equal(got_stats, want_stats, check_exact=True)
        pd.testing.assert_frame_equal(hk.cuda_kernel_launch_stats(frames, tuple(API)),
                                      ref.cuda_kernel_launch_stats(frames, tuple(API)), check_exact=True)  # fmt: skip
        apis = tuple(API[:2])
        pd.testing.assert_frame_equal(hk.queue_length_series(frames, apis), ref.queue_length_series(frames, apis))
        pd.testing.assert_frame_equal(
            hk.queue_length_summary(frames, apis), ref.queue_length_summary(frames, apis), check_exact=True
        )


def test_name_column_without_categories(rng: np.random.Generator) -> None:
    frame = random_frame(rng, 500)
    plain = frame.assign(name=frame["name"].astype(object))
    pd.testing.assert_frame_equal(hk.cuda_kernel_launch_stats({0: plain}), hk.cuda_kernel_launch_stats({0: frame}))


def test_compact_dense_and_sparse(rng: np.random.Generator) -> None:
    dense = rng.integers(-1, 100, 1000)
    keys, lo, size = compact(dense, dense != -1)
    assert np.shares_memory(keys, dense) and lo == dense[dense != -1].min() and size == dense.max() - lo + 1
    sparse = rng.integers(0, 50, 1000) * 10**12 - 7
    mask = rng.random(1000) < 0.7
    ids, lo, size = compact(sparse, mask)
    assert lo == 0 and size == len(np.unique(sparse[mask]))
    # ids by first appearance, one per distinct key
    _, first = np.unique(sparse[mask], return_index=True)
    order = np.argsort(first)
    expected = {int(k): i for i, k in enumerate(np.unique(sparse[mask])[order])}
    assert [expected[int(k)] for k in sparse[mask]] == ids[mask].tolist()


@pytest.mark.parametrize("ascending", [True, False])
def test_group_rows_is_a_stable_group_sort(rng: np.random.Generator, ascending: bool) -> None:
    for keys in (rng.integers(0, 5, 2000), rng.integers(0, 5, 2000) * 10**15):
        ts = rng.integers(0, 300, 2000)
        rows = rng.permutation(2000)[:1500]
        out, offsets, gkeys = group_rows(keys, rows, ascending, ts, True)
        first_seen = pd.unique(keys[rows])
        want_keys = np.sort(first_seen) if ascending else first_seen
        assert gkeys.tolist() == want_keys.tolist()
        rank = {k: i for i, k in enumerate(want_keys.tolist())}
        want = sorted(range(len(rows)), key=lambda j: (rank[keys[rows[j]]], ts[rows[j]], j))
        assert out.tolist() == rows[want].tolist()
        assert np.diff(offsets).tolist() == [int((keys[rows] == k).sum()) for k in want_keys]
        kept, _, _ = group_rows(keys, rows, ascending, ts, False)  # input order within a group
        want = sorted(range(len(rows)), key=lambda j: (rank[keys[rows[j]]], j))
        assert kept.tolist() == rows[want].tolist()


def test_sort_segment_matches_stable_argsort(rng: np.random.Generator) -> None:
    for n in (0, 1, 2, 3, 17, 1000):
        keys = rng.integers(0, 20, n)
        idx = rng.permutation(n)
        got = idx.copy()
        sort_segment(keys, got, 0, n, np.empty(n, np.int64))
        assert got.tolist() == idx[np.argsort(keys[idx], kind="stable")].tolist()
    runs = np.concatenate([np.sort(rng.integers(0, 100, 500)) for _ in range(3)])  # three sorted runs
    idx = np.arange(runs.shape[0])
    sort_segment(runs, idx, 0, runs.shape[0], np.empty(runs.shape[0], np.int64))
    assert idx.tolist() == np.argsort(runs, kind="stable").tolist()


def test_describe_segment_is_pandas_describe_bit_for_bit(rng: np.random.Generator) -> None:
    for t in range(200):
        n = int(rng.integers(1, 3000)) if t % 20 else int(rng.integers(1, 200_000))
        scale = [1, 3, 1000, 10**6, 10**13][t % 5]
        vals = rng.integers(-scale, scale + 1, n)
        skip = 0 if t % 3 == 0 else -1
        s = pd.Series(vals.astype(float))
        if skip == 0:
            s.iloc[0] = np.nan
        np.testing.assert_array_equal(describe_segment(vals, 0, n, skip), s.describe().to_numpy())
    # a segment in the middle of a longer array
    vals = rng.integers(0, 50, 100)
    np.testing.assert_array_equal(describe_segment(vals, 10, 30, 10),
                                  pd.Series(np.r_[np.nan, vals[11:40]]).describe().to_numpy())  # fmt: skip
