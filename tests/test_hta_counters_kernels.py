"""The Numba-backed HTA counters (idle time, launch stats, queue length) against slow pandas references."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aonkit._kernels.describe import describe, order_stats
from aonkit._kernels.keys import compact, first_match, group_rows
from aonkit._kernels.sorting import stable_argsort
from aonkit.analysis import hta_counters as hk
from aonkit.analysis.describe_stats import describe_run

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
    names = np.array(API + OTHER + ["Event Sync"], dtype=object)[rng.integers(0, len(API) + len(OTHER) + 1, n)]
    cats = pd.Index(API + OTHER + ["Event Sync", "unused"], dtype="str")
    # GPU rows are mostly kernels and copies; some are annotations or syncs, which HTA's idle time leaves out
    cat = np.where(stream == -1, "cuda_runtime", rng.choice(["kernel", "gpu_memcpy", "gpu_user_annotation",
                                                             "cuda_sync"], n, p=[0.6, 0.2, 0.1, 0.1]))  # fmt: skip
    return pd.DataFrame({"ts": ts, "dur": dur, "end": ts + dur, "stream": stream, "correlation": corr,
                         "name": pd.Categorical(names, categories=cats), "cat": pd.Categorical(cat)})  # fmt: skip


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


def test_idle_leaves_out_annotations_and_takes_the_last_launch() -> None:
    """HTA's idle time counts kernels and copies only, and a GPU row's launch is the last CPU row of its correlation."""
    frame = pd.DataFrame({
        "ts": [0, 50, 2, 10, 5, 60], "dur": [1, 1, 3, 100, 200, 5], "stream": [-1, -1, 7, 7, 7, 7],
        "correlation": [1, 1, 1, 2, 3, 1],  # two CPU rows with correlation 1 (ts 0 and 50)
        "name": pd.Categorical(["cudaLaunchKernel", "cudaLaunchKernel", "k", "k", "ann", "k2"]),
        "cat": pd.Categorical(["cuda_runtime", "cuda_runtime", "kernel", "kernel", "gpu_user_annotation", "kernel"]),
    })  # fmt: skip
    frame["end"] = frame["ts"] + frame["dur"]
    out, _ = hk.idle_time_breakdown({0: frame})
    # stream 7 without the annotation: [2,5) [10,110) [60,65); gaps 5 (no CPU row has corr 2: HTA takes event 0,
    # whose ts, 0, is not after 5: kernel_wait) and -50 (launch at 50, the last CPU row of corr 1, is not after 110)
    got = out.set_index("idle_category")["idle_time"].to_dict()
    assert got == {"kernel_wait": -45.0, "other": 0.0}
    frame.loc[5, "ts"], frame.loc[5, "end"] = 120, 125  # now after 110: the launch at 50 does not make it host wait
    got = hk.idle_time_breakdown({0: frame})[0].set_index("idle_category")["idle_time"].to_dict()
    assert got == {"kernel_wait": 15.0, "other": 0.0}
    frame.loc[1, "ts"] = 115  # the last CPU row of corr 1 starts after 110: host wait
    got = hk.idle_time_breakdown({0: frame})[0].set_index("idle_category")["idle_time"].to_dict()
    assert got == {"host_wait": 10.0, "kernel_wait": 5.0, "other": 0.0}


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


@pytest.mark.parametrize("standin", [False, True])  # the kernels, or the numpy stand-ins (aonkit.analysis.standin)
@pytest.mark.parametrize("in_time_order", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("ties", [True, False])
def test_counters_equal_pandas_reference(
    rng: np.random.Generator, sparse: bool, ties: bool, in_time_order: bool, standin: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AONKIT_STANDINS", "1" if standin else "0")
    monkeypatch.setenv("AONKIT_BACKGROUND_COMPILE", "0")
    for n in (0, 1, 2, 7, 50, 400, 3000):
        frames = {r: random_frame(rng, n, sparse=sparse, ties=ties) for r in (2, 0)}
        if in_time_order:  # as in real traces: launches and GPU starts each already in time order
            frames = {r: f.sort_values("ts", kind="stable", ignore_index=True) for r, f in frames.items()}
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
    keys, lo, size = compact(dense)
    assert np.shares_memory(keys, dense) and lo == dense.min() and size == dense.max() - lo + 1
    sparse = rng.integers(0, 50, 1000) * 10**12 - 7
    ids, lo, size = compact(sparse)
    assert lo == 0 and size == len(np.unique(sparse))
    order = np.argsort(pd.unique(sparse))  # ids by first appearance, one per distinct key
    expected = {int(k): i for i, k in enumerate(pd.unique(sparse))}
    assert ids.tolist() == [expected[int(k)] for k in sparse] and len(order) == size


@pytest.mark.parametrize("ascending", [True, False])
def test_group_rows_is_a_stable_group_sort(rng: np.random.Generator, ascending: bool) -> None:
    for keys in (rng.integers(0, 5, 2000), rng.integers(0, 5, 2000) * 10**15, rng.integers(0, 40, 2000)):
        out, offsets, gkeys = group_rows(keys, ascending)
        first_seen = pd.unique(keys)
        want_keys = np.sort(first_seen) if ascending else first_seen
        assert gkeys.tolist() == want_keys.tolist()
        rank = {k: i for i, k in enumerate(want_keys.tolist())}
        assert out.tolist() == sorted(range(len(keys)), key=lambda j: (rank[keys[j]], j))
        assert np.diff(offsets).tolist() == [int((keys == k).sum()) for k in want_keys]
    assert [a.tolist() for a in group_rows(np.empty(0, np.int64), True)] == [[], [0], []]


def test_first_match(rng: np.random.Generator) -> None:
    for scale in (1, 10**14):
        keys = rng.integers(0, 30, 200) * scale
        values = rng.integers(0, 10**6, 200)
        probe = rng.integers(0, 40, 300) * scale
        got, found = first_match(keys, values, probe)
        first = {}
        for k, v in zip(keys.tolist(), values.tolist()):
            first.setdefault(k, v)
        assert found.tolist() == [p in first for p in probe.tolist()]
        assert got.tolist() == [first.get(p, 0) for p in probe.tolist()]


def test_stable_argsort(rng: np.random.Generator) -> None:
    for n in (0, 1, 2, 3, 17, 31, 32, 33, 64, 65, 1000, 5000):  # block edges of the random-order path
        keys = rng.integers(0, 20, n)
        assert stable_argsort(keys).tolist() == np.argsort(keys, kind="stable").tolist()
    for n_runs in (2, 3, 63, 64, 65, 66, 300):  # the runs' starts found in one pass (up to 64) or in a second
        runs = np.concatenate([np.sort(rng.integers(0, 100, 40)) for _ in range(n_runs)])
        assert stable_argsort(runs).tolist() == np.argsort(runs, kind="stable").tolist()


def test_describe_is_pandas_describe_bit_for_bit(rng: np.random.Generator) -> None:
    for t in range(200):
        n = int(rng.integers(1, 3000)) if t % 20 else int(rng.integers(1, 200_000))
        scale = [1, 3, 1000, 10**6, 10**13][t % 5]
        vals = rng.integers(-scale, scale + 1, n)
        skip = t % 3 == 0
        s = pd.Series(vals.astype(float))
        if skip:
            s.iloc[0] = np.nan
        np.testing.assert_array_equal(describe(vals, skip), s.describe().to_numpy())
        np.testing.assert_array_equal(describe_run(vals, skip), s.describe().to_numpy())  # the stand-in


def test_order_stats(rng: np.random.Generator) -> None:
    for vals in (
        rng.integers(0, 5, 1000),
        rng.integers(-(10**15), 10**15, 5000),
        np.r_[np.zeros(999, np.int64), 10**12],
        (rng.lognormal(8, 3, 50_000)).astype(np.int64),  # heavy tail: most values in the first buckets
        np.r_[rng.integers(0, 100, 20_000), rng.integers(-(2**62), 2**62, 30)],  # a crowded bucket among far ones
    ):
        for _ in range(5):
            ks = np.sort(rng.integers(0, len(vals), 7))
            ks[1] = ks[2]  # two ks in one bucket, and at one rank
            assert order_stats(vals, ks).tolist() == np.sort(vals)[ks].tolist()


def test_match_counts(rng: np.random.Generator) -> None:
    from aonkit._kernels.keys import match_counts

    for scale in (1, 10**14):
        keys = rng.integers(-1, 30, 300) * scale
        probe = rng.integers(-1, 40, 200) * scale
        got = match_counts(keys, probe)
        assert got.tolist() == [int((keys == p).sum()) for p in probe]
    assert match_counts(np.empty(0, np.int64), np.array([1, 2])).tolist() == [0, 0]


def test_pair_codes(rng: np.random.Generator) -> None:
    from aonkit._kernels.keys import pair_codes

    for scale in (1, 1000, 2**40):
        a = rng.integers(-3, 4, 500) * scale
        b = rng.integers(-50, 50, 500)
        keys, a_lo, b_lo, width, ok = pair_codes(a, b)
        assert ok
        order = sorted(range(500), key=lambda i: (a[i], b[i]))  # keys order the pairs as tuples do
        assert all(keys[order[k]] <= keys[order[k + 1]] for k in range(499))
        assert ((keys // width + a_lo) == a).all() and ((keys % width + b_lo) == b).all()
    assert not pair_codes(np.array([0, 2**40]), np.array([0, 2**30]))[4]  # the product of ranges would overflow
    assert not pair_codes(np.array([-(2**62), 2**62]), np.array([0, 0]))[4]  # a range past int64 itself
    assert pair_codes(np.empty(0, np.int64), np.empty(0, np.int64))[0].shape == (0,)


def test_codes_seen(rng: np.random.Generator) -> None:
    from aonkit._kernels.keys import codes_seen

    for dtype in (np.int8, np.int16):
        codes = rng.integers(-1, 20, 3000).astype(dtype)
        stream = rng.choice([-1, 7], 3000)
        wanted = rng.random(21) < 0.5  # per code + 1
        seen = codes_seen(codes, wanted, stream)
        want = [bool(wanted[c + 1]) and bool(((codes == c) & (stream == -1)).any()) for c in range(-1, 20)]
        assert seen.tolist() == want


def test_hta_kernel_types_include_other() -> None:
    """HTA 0.5.0's ``get_kernel_type``: syncs and names with Memcpy inside are neither compute nor memory."""
    from aonkit.analysis import hta_compat as hc

    assert hc.kernel_type("Stream Sync") == hc.kernel_type("Context Sync") == hc.OTHER
    assert hc.kernel_type("void at::native::copyMemcpyKernel<float>()") == hc.OTHER
    assert hc.kernel_type("Memset (Device)") == hc.kernel_type("Memcpy DtoH (Device -> Pinned)") == hc.MEMORY
    assert hc.kernel_type("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)") == hc.COMMUNICATION
    assert hc.kernel_type("ampere_sgemm_128x64_tn") == hc.COMPUTATION
    # a sync row overlapping nothing is GPU time but not compute: non-compute, as HTA's temporal breakdown says
    frame = pd.DataFrame({"ts": [0, 10], "dur": [5, 3], "stream": [7, 7], "correlation": [1, 2],
                          "name": ["ampere_sgemm_128x64_tn", "Stream Sync"]})  # fmt: skip
    frame["end"] = frame["ts"] + frame["dur"]
    frame["kernel_type"] = frame["name"].map(hc.kernel_type)
    tb = hc.temporal_breakdown({0: frame}).iloc[0]
    assert (tb["compute_time(us)"], tb["non_compute_time(us)"], tb["idle_time(us)"]) == (5, 3, 5)
