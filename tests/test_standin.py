"""The numpy stand-ins that run while a kernel is not compiled: the same answers, chosen when they should be."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.analysis import bandwidth, correlation, hta_compat, hta_counters, hta_queues, idle, kernels, queues
from aonkit.analysis.describe_stats import pandas_group_stats
from aonkit.analysis.group_order import lexsort_groups
from aonkit.analysis.key_match import sorted_first_match, sorted_match_counts
from aonkit.analysis.lane_gaps import numpy_lane_gaps
from aonkit.analysis.memo import clear
from aonkit.analysis.standin import use_standin
from aonkit.sources import first_run

from .conftest import SHARED_TRACES


@pytest.mark.parametrize("n", [0, 1, 2, 7, 1000, 20000])
def test_lexsort_groups_is_the_kernel(rng: np.random.Generator, n: int) -> None:
    from aonkit._kernels.step_series import group_time_order as kernel

    for spread in (1, 10**15):  # a compact key range (direct table) and a sparse one (hash ids)
        keys = rng.integers(-1, 5, n) * spread
        t = np.sort(rng.integers(0, 50, n))  # ties in time within a key: row order must decide
        t[n // 3 : n // 2] = rng.integers(0, 50, n // 2 - n // 3)  # a stretch out of order
        got, want = lexsort_groups(keys, t), kernel(keys, t)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype == np.int64
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n", [0, 1, 3, 500, 20000])
def test_sorted_joins_are_the_kernels(rng: np.random.Generator, n: int) -> None:
    from aonkit._kernels.keys import first_match, match_counts

    for spread in (1, 7_919_000_003):  # a compact range (direct table) and a sparse one (hash ids)
        keys = rng.integers(-1, n // 3 + 2, n) * spread  # repeats: the first position must win
        values = rng.integers(0, 10**6, n)
        probe = rng.integers(-2, n // 3 + 4, max(n, 1) * 2) * spread
        got, want = sorted_first_match(keys, values, probe), first_match(keys, values, probe)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(sorted_match_counts(keys, probe), match_counts(keys, probe))


def test_pandas_group_stats_is_the_kernel(rng: np.random.Generator) -> None:
    from aonkit._kernels.describe import group_stats

    for n in (0, 1, 2, 10, 1000, 30000):
        for spread in (1, 10**13):  # a compact key range and a sparse one
            keys = rng.integers(0, n // 20 + 2, n) * spread
            values = rng.integers(-(10**9), 10**9, n)
            for a, b in zip(pandas_group_stats(keys, values), group_stats(keys, values)):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)


def test_numpy_lane_gaps_is_the_kernel(rng: np.random.Generator) -> None:
    from aonkit._kernels.idle import lane_gaps

    for n in (1, 2, 5, 50, 3000):
        for _ in range(4):
            ts = np.cumsum(rng.integers(0, 30, n))
            ts[rng.random(n) < 0.2] -= 50  # overlaps, and ties in start time
            end = ts + rng.integers(0, 40, n)
            launch, found = ts - rng.integers(-20, 60, n), rng.random(n) < 0.8
            rows, offsets, _ = lexsort_groups(rng.integers(0, 4, n), ts)
            args = (rows, offsets, ts, end, launch, found, np.int64(25))
            for a, b in zip(numpy_lane_gaps(*args), lane_gaps(*args)):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)


def test_numpy_queue_events_are_the_kernels(rng: np.random.Generator) -> None:
    from aonkit._kernels.queues import queue_event_arrays

    for n in (0, 1, 5, 3000):
        up_ts, up_stream, g_ts, g_stream = (rng.integers(-5, 10**12, n) for _ in range(4))
        launched, counted = rng.random(n) < 0.7, rng.random(n) < 0.6
        args = (up_ts, up_stream, launched, g_ts, g_stream, counted)
        for a, b in zip(hta_queues._event_arrays(*args), queue_event_arrays(*args)):
            assert a.dtype == b.dtype == np.int64
            np.testing.assert_array_equal(a, b)


def test_numpy_launch_candidates_are_the_kernels(rng: np.random.Generator) -> None:
    from aonkit._kernels.joins import launch_candidates

    for n in (0, 1, 7, 5000):
        n_codes = 6
        codes = rng.integers(-1, n_codes, n).astype(np.int32)  # -1 (no category) reads the last flag
        is_gpu, is_launch = rng.random(n_codes + 1) < 0.4, rng.random(n_codes + 1) < 0.5
        corr = rng.integers(-3, n // 2 + 2, n)  # negative: no launch key
        for a, b in zip(correlation.numpy_launch_candidates(codes, is_gpu, is_launch, corr),
                        launch_candidates(codes, is_gpu, is_launch, corr)):  # fmt: skip
            assert a.dtype == b.dtype == np.int64
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n", [0, 1, 2, 9, 4000])
def test_numpy_queue_sweep_is_the_kernels(rng: np.random.Generator, n: int) -> None:
    from aonkit._kernels.step_series import queue_inputs, queue_levels
    from aonkit.analysis.queue_sweep import numpy_queue_inputs, numpy_queue_levels

    for span in (n // 2 + 3, 10**13):  # ties at an instant, and times far apart (the mean's rounding)
        ts = rng.integers(0, span, 3 * n)
        ts[rng.random(3 * n) < 0.05] = -1  # no time: left out
        gpu = rng.choice(3 * n, n, replace=False) if n else np.empty(0, np.int64)
        launch = np.where(rng.random(n) < 0.2, -1, rng.integers(0, 3 * n, n))  # -1: launched before the window
        device, stream = rng.integers(0, 2, 3 * n), rng.integers(0, 3, 3 * n)
        args = (gpu, launch, ts, device, stream, -1, 5)
        got, want = numpy_queue_inputs(*args), queue_inputs(*args)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
        up, down = want[0], want[1]
        keys = want[3] * 3 + want[4]
        pos = np.lexsort((up, keys))  # exits out of order within a group: sorted by the kernel and the stand-in
        offsets = np.searchsorted(keys[pos], np.arange(7)).astype(np.int64)
        for store in (True, False):
            for a, b in zip(numpy_queue_levels(up, down, pos, offsets, store),
                            queue_levels(up, down, pos, offsets, store)):  # fmt: skip
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n", [0, 1, 2, 50, 3000])
def test_numpy_pyramid_is_the_kernels(rng: np.random.Generator, n: int) -> None:
    from aonkit._kernels import pyramid
    from aonkit.timeline import index_standin as np_pyramid

    for overlap in (False, True):  # a track's events one after another, or ending before the one before ends
        sizes = rng.multinomial(n, np.ones(6) / 6) if n else np.zeros(6, np.int64)
        sizes[2] = 0  # an empty track
        m = int(sizes.sum())
        track_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        ts = np.concatenate([np.sort(rng.integers(0, 10**7, k)) for k in sizes]).astype(np.int64)
        dur = rng.integers(0, 10**6 if overlap else 300, m)
        dur[rng.random(m) < 0.1] = 0
        end = ts + dur
        args = (ts, end, track_off)
        np.testing.assert_array_equal(np_pyramid.numpy_running_max_end(*args), pyramid.running_max_end(*args))
        origin = int(ts.min()) if m else 0
        cut = pyramid.cut_scales(ts, end, track_off, origin)
        np.testing.assert_array_equal(np_pyramid.numpy_cut_scales(ts, end, track_off, origin), cut)
        for g in (1, 256, 2**20, 2**40):
            count = int(np.count_nonzero(cut >= g))
            np.testing.assert_array_equal(np_pyramid.numpy_build_level(ts, end, cut, g, count),
                                          pyramid.build_level(ts, end, cut, g, count))  # fmt: skip
    parent = np.full(n, -1, np.int64)  # a forest: each event's parent an earlier one, or none
    if n > 1:
        parent[1:] = np.where(rng.random(n - 1) < 0.8, rng.integers(0, np.arange(1, n)), -1)
    order = np.arange(n, dtype=np.int64)
    np.testing.assert_array_equal(np_pyramid.numpy_depths(parent, order), pyramid.depths(parent, order))


def test_timeline_index_with_standins_is_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    from aonkit.timeline import timeline_index

    path = SHARED_TRACES / "hta/df_index_resolver/df_index_resolver.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is not here (../shared/traces)")
    trace = aonkit.load(path)
    got = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("AONKIT_STANDINS", mode)
        got[mode] = timeline_index(trace)
    for name in ("track_off", "ts", "end", "row", "cmax", "level_ns", "item_off", "items", "depth_of", "parent_of"):
        np.testing.assert_array_equal(getattr(got["1"], name), getattr(got["0"], name), err_msg=name)


def test_numpy_time_weighted_is_the_kernel(rng: np.random.Generator) -> None:
    from aonkit._kernels.step_series import time_weighted
    from aonkit.analysis.time_weighted import numpy_time_weighted

    for n in (0, 1, 2, 500):
        sizes = rng.multinomial(n, np.ones(4) / 4) if n else np.zeros(4, np.int64)
        sizes[1] = 0  # an empty group
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        times = np.concatenate([np.sort(rng.integers(0, 10**13, k)) for k in sizes]).astype(np.int64)
        levels = rng.random(len(times)) * 1e3
        if len(levels) > 3:
            levels[3] = np.nan  # a NaN wins the peak
        for a, b in zip(numpy_time_weighted(times, levels, offsets), time_weighted(times, levels, offsets)):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n", [0, 1, 6, 3000])
def test_numpy_launch_table_is_the_kernel(rng: np.random.Generator, n: int) -> None:
    from aonkit._kernels.joins import launch_table
    from aonkit.analysis.key_match import numpy_launch_table

    for spread in (1, 7_919_000_003):  # a compact correlation range and a sparse one
        stream = np.where(rng.random(n) < 0.5, -1, rng.integers(0, 4, n))
        corr = rng.integers(-1, n // 3 + 2, n) * spread  # repeats on both sides: every pair, as pandas' merge
        ts, dur = rng.integers(0, 10**6, n), rng.integers(0, 500, n)
        codes = rng.integers(-1, 3, n).astype(np.int32)
        is_api = np.array([True, False, True, False])  # the last flag: code -1
        got = numpy_launch_table(3, stream, ts, dur, corr, codes, is_api)
        want = launch_table(3, stream, ts, dur, corr, codes, is_api)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n", [0, 1, 5, 3000])
def test_numpy_idle_gaps_is_the_kernel(rng: np.random.Generator, n: int) -> None:
    from aonkit._kernels.gpu_streams import idle_gaps
    from aonkit.analysis.lane_gaps import numpy_idle_gaps

    stream = rng.integers(0, 4, n)
    ts = rng.integers(0, 10**6, n)
    end = ts + rng.integers(0, 2000, n)  # overlaps too: negative gaps count as HTA counts them
    start = ts - rng.integers(-50, 500, n)
    found = rng.random(n) < 0.8
    pos = np.lexsort((ts, stream)).astype(np.int64)
    offsets = np.searchsorted(stream[pos], np.arange(6)).astype(np.int64)  # an empty stream at the end
    for delay in (0.0, 30.0, 1e9):
        for a, b in zip(numpy_idle_gaps(pos, offsets, ts, end, start, found, delay),
                        idle_gaps(pos, offsets, ts, end, start, found, delay)):  # fmt: skip
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 100, 20000])
def test_numpy_parents_is_the_kernel(rng: np.random.Generator, n: int) -> None:
    from aonkit._kernels.nesting import parents
    from aonkit.analysis.enclosing import numpy_parents

    for span, longest in ((1000, 50), (10**6, 50), (10**6, 10**5)):  # ties; short events; deep nesting
        thread = rng.integers(0, 4, n)
        ts = rng.integers(0, span, n)
        end = ts + rng.integers(0, longest, n)
        end[::7] = ts[::7]  # zero-length events
        order = np.lexsort((-end, ts, thread)).astype(np.int64)
        np.testing.assert_array_equal(numpy_parents(thread, ts, end, order), parents(thread, ts, end, order))


def test_use_standin_follows_the_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    import numba

    from aonkit._kernels.step_series import group_time_order as kernel

    fresh = numba.njit(lambda a: a.sum())  # no cache, never called: its call would compile
    a = np.zeros(3, np.int64)
    kernel(a, a)  # compiled here
    monkeypatch.setenv("AONKIT_BACKGROUND_COMPILE", "0")
    monkeypatch.setitem(first_run._state, "started", False)
    monkeypatch.delenv("AONKIT_STANDINS", raising=False)
    monkeypatch.setenv("AONKIT_QUICK_PARSE", "auto")
    assert not use_standin((kernel, a, a))
    assert use_standin((kernel, a, a), (fresh, a))
    assert first_run._state["started"]  # the background compilation was asked for (and declined by the env)
    assert not fresh.overloads  # deciding compiled nothing
    monkeypatch.setenv("AONKIT_QUICK_PARSE", "0")
    assert not use_standin((fresh, a))
    monkeypatch.setenv("AONKIT_QUICK_PARSE", "1")
    assert use_standin((kernel, a, a))
    monkeypatch.setenv("AONKIT_STANDINS", "0")  # its own setting wins; an unknown value defers to the parser's
    assert not use_standin((fresh, a))
    monkeypatch.setenv("AONKIT_STANDINS", "maybe")
    assert use_standin((kernel, a, a))


def test_standins_have_a_time_budget_while_nothing_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    import numba

    from aonkit.analysis import standin

    fresh = numba.njit(lambda a: a.sum())  # never compiled: the stand-in way is open
    a = np.zeros(3, np.int64)
    monkeypatch.setenv("AONKIT_STANDINS", "auto")
    monkeypatch.setenv("AONKIT_BACKGROUND_COMPILE", "0")
    monkeypatch.setitem(first_run._state, "started", True)
    compiling = [False]
    monkeypatch.setattr(first_run, "background_compiling", lambda: compiling[0])
    monkeypatch.setattr(standin, "_spent", [0.0])
    slow = lambda x: (__import__("time").sleep(0.06), -1)[1]  # noqa: E731 - a stand-in that takes its time
    monkeypatch.setattr(standin, "BUDGET_S", 0.1)
    assert standin.kernel_or_standin(fresh, slow, a) == -1  # 0.06 s spent
    assert standin.kernel_or_standin(fresh, slow, a) == -1  # 0.12 s: the budget is spent
    compiling[0] = True
    assert standin.kernel_or_standin(fresh, slow, a) == -1  # a background compilation will bring the kernel
    assert not fresh.overloads
    compiling[0] = False
    assert standin.kernel_or_standin(fresh, slow, a) == 0  # nothing will: compile it now
    assert fresh.overloads


def test_background_compiling_sees_the_lock_of_another_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    pytest.importorskip("fcntl")  # the lock is a POSIX file lock
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    ask = ("from aonkit.sources.first_run import background_compiling, _lock_path; "
           f"print(background_compiling(), _lock_path().startswith({str(tmp_path)!r}))")  # fmt: skip
    run = lambda: subprocess.run([sys.executable, "-c", ask], env=env, capture_output=True, text=True,  # noqa: E731
                                 check=True).stdout.split()  # fmt: skip
    assert run() == ["False", "True"]
    hold = ("import fcntl, os, sys, time; from aonkit.sources.first_run import _lock_path; p = _lock_path(); "
            "os.makedirs(os.path.dirname(p), exist_ok=True); f = open(p, 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
            "print('held', flush=True); sys.stdin.read()")  # fmt: skip
    holder = subprocess.Popen([sys.executable, "-c", hold], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        assert run() == ["True", "True"]
    finally:
        holder.communicate("", timeout=60)
    assert run() == ["False", "True"]


def _analyses(trace: aonkit.Trace) -> dict[str, pd.DataFrame]:
    clear(trace)
    frames = hta_compat.hta_frames(trace)
    out = dict(zip(("idle", "idle_stats"), hta_counters.idle_time_breakdown(frames)))
    out["launch_stats"] = hta_counters.cuda_kernel_launch_stats(frames)
    out["bandwidth_summary"] = bandwidth.memory_bandwidth_summary(trace)
    out["queue_summary"] = hta_queues.queue_length_summary(frames)
    for ties in hta_queues.TIES:
        out[f"queue_series_{ties}"] = hta_queues.queue_length_series(frames, ties=ties)
    out["idle_summary"] = idle.idle_summary(trace)
    out["idle_series_stream"] = idle.idle_series(trace, by="stream")
    out["queue_length"] = queues.queue_length_series(trace)
    out["queue_stats"] = queues.queue_length_summary(trace)
    out["bandwidth"] = bandwidth.memory_bandwidth_series(trace)
    out["kernel_stats"] = kernels.kernel_stats(trace)
    out["class_stats"] = kernels.kernel_stats(trace, by="class")
    out["gpu_links"] = correlation.gpu_links(trace)  # the op stack's nesting: the stack walk or its stand-in
    return out


@pytest.mark.parametrize("name", [
    "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "hta/df_index_resolver/df_index_resolver.json.gz", "tracelens/mi300/resnet_act_checkpoint.json.gz"])
def test_standins_give_the_kernels_answers_on_real_traces(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    path = SHARED_TRACES / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    trace = aonkit.load(path)
    monkeypatch.setenv("AONKIT_STANDINS", "0")
    kernels = _analyses(trace)
    monkeypatch.setenv("AONKIT_STANDINS", "1")
    monkeypatch.setenv("AONKIT_BACKGROUND_COMPILE", "0")
    standins = _analyses(trace)
    assert sum(len(v) for v in kernels.values()) > 100  # the trace exercises them
    for key, want in kernels.items():
        pd.testing.assert_frame_equal(standins[key], want, check_exact=True, obj=key)
