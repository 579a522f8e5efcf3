"""The host sampler: a real thread sampling psutil into a ring buffer, read with cursors."""

from __future__ import annotations

import time

import numpy as np
import pytest

from aonkit.sources.samplers import HostSampler, RingSampler


class Counting(RingSampler):
    """A sampler whose values are the sample number, to check ring and cursor arithmetic."""

    metrics = ("n", "twice")

    def __init__(self, capacity: int) -> None:
        self.k = 0
        super().__init__(interval_s=0.001, capacity=capacity)

    def sample(self) -> np.ndarray:
        self.k += 1
        return np.array([self.k, 2 * self.k], float)


def test_host_sampler_reads_real_values() -> None:
    with HostSampler(interval_s=0.05, compiled=False) as s:  # the Python loop (tests/test_host_loop.py: compiled)
        time.sleep(0.4)
        frame, cursor = s.read()
    assert cursor >= 4 and len(frame) == 3 * cursor
    assert list(frame["metric"].cat.categories) == list(HostSampler.metrics)
    cpu = frame[frame["metric"] == "cpu_percent"]["value"]
    mem = frame[frame["metric"] == "memory_used_bytes"]["value"]
    assert np.isnan(cpu.iloc[0])  # no interval before the first sample to measure CPU time over
    assert cpu.iloc[1:].between(0, 100).all() and (mem > 0).all()
    ts = frame["ts_ns"].to_numpy()[::3]
    assert (np.diff(ts) > 0).all() and abs(ts[-1] - time.time_ns()) < 5e9
    assert (frame["device"] == -1).all()


def test_cursor_returns_only_new_samples_and_ring_drops_oldest() -> None:
    s = Counting(capacity=8)
    s.start()
    time.sleep(0.05)
    first, cursor = s.read()
    time.sleep(0.05)
    s.stop()
    later, end = s.read(cursor)
    n_first = first[first["metric"] == "n"]["value"].to_numpy()
    n_later = later[later["metric"] == "n"]["value"].to_numpy()
    assert len(n_first) <= 8 and len(n_later) <= 8  # never more than the ring holds
    assert n_first[-1] == cursor and n_later[-1] == end  # values are the sample numbers
    assert (np.diff(n_later) == 1).all() and n_later[0] == max(cursor + 1, end - 7)
    tw = later[later["metric"] == "twice"]["value"].to_numpy()
    assert (tw == 2 * n_later).all()
    assert s.read(end)[0].empty


def test_bad_settings() -> None:
    with pytest.raises(ValueError):
        Counting(capacity=0)


def test_sampler_table_is_a_timeline_counter_lane(tmp_path) -> None:  # noqa: ANN001 - pytest fixture
    # GIVEN a trace recorded now and host samples taken over the same interval
    import json

    import aonkit
    from aonkit.timeline.view import timeline_view

    with HostSampler(interval_s=0.02) as s:
        t0 = time.time_ns()
        time.sleep(0.3)
        deadline = time.monotonic() + 10  # a loaded machine may give the thread fewer samples in 0.3 s
        while s.count < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        t1 = time.time_ns()
        samples, n = s.read()
    ev = [{"ph": "X", "cat": "cpu_op", "name": "step", "pid": 1, "tid": 1, "ts": t0 / 1000, "dur": (t1 - t0) / 1000}]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": ev}))
    trace = aonkit.load(tmp_path / "t.json")
    # WHEN the samples are attached (same long form as nsys GPU_METRICS) THEN the timeline draws them as counters
    trace.samples = samples
    view = timeline_view(trace, width_px=400)
    assert "cpu_percent (host)" in view.counters and "memory_used_bytes (host)" in view.counters
    assert n >= 5 and len(view.counters["cpu_percent (host)"].data["value"]) >= 3


class Flaky(RingSampler):
    """Raises on every other sample, to check that the thread goes on."""

    metrics = ("n",)

    def __init__(self) -> None:
        self.k = 0
        super().__init__(interval_s=0.005, capacity=100)

    def sample(self) -> np.ndarray:
        self.k += 1
        if self.k % 2 == 0:
            raise OSError(f"sample {self.k} failed")
        return np.array([self.k], float)


def test_a_sample_that_raises_is_nan_and_the_thread_goes_on() -> None:
    with Flaky() as s:
        time.sleep(0.1)
    frame, n = s.read()
    v = frame["value"].to_numpy()
    assert n >= 6 and np.isnan(v[1::2]).all() and (v[::2] == np.arange(1, n + 1, 2)).all()
    assert isinstance(s.error, OSError) and s.cost_ns["n"] == n and s.cost_ns["max"] >= s.cost_ns["mean"] > 0


def test_channels_put_each_column_on_its_device() -> None:
    class TwoDevices(RingSampler):
        def sample(self) -> np.ndarray:
            return np.array([1.0, 2.0, 3.0])

    s = TwoDevices(interval_s=0.01, channels=[(0, "a"), (0, "b"), (1, "a")])
    with s:
        time.sleep(0.05)
    frame, n = s.read()
    assert s.metrics == ("a", "b") and n >= 2
    rows = list(zip(frame["device"], frame["metric"], frame["value"]))
    assert rows == [(0, "a", 1.0), (0, "b", 2.0), (1, "a", 3.0)] * n


def test_a_sample_takes_the_gil_back_quickly_and_is_stamped_at_its_start() -> None:
    """Beside a thread running Python, each GIL hand-off of a sample would wait the 5 ms switch interval."""
    import sys

    from aonkit.sources.handoffs import SAMPLE_SWITCH_S

    seen: list[tuple[float, int, int]] = []

    class Watching(RingSampler):
        metrics = ("x",)

        def sample(self) -> np.ndarray:
            t = time.time_ns()
            time.sleep(0.002)  # a reading that takes time: the stamp is its start, not its end
            seen.append((sys.getswitchinterval(), t, time.time_ns()))
            return np.array([1.0])

    before = sys.getswitchinterval()
    # two samplers at once (the host's and the GPUs' threads): a sample slower than 1 ms (one that waited on the
    # GIL) lowers the interval for the samples after it, while either samples
    with Watching(interval_s=0.005) as a, Watching(interval_s=0.007) as b:
        time.sleep(0.1)
    assert sys.getswitchinterval() == before  # restored
    lowered = [s == pytest.approx(min(SAMPLE_SWITCH_S, before), rel=1e-3) for s, _, _ in seen]
    assert len(seen) >= 20 and sum(lowered) >= len(seen) - 2  # all but each sampler's first
    # a quick sampler (nothing waits on the GIL) never touches the interval
    fast: list[float] = []

    class Quick(RingSampler):
        metrics = ("x",)

        def sample(self) -> np.ndarray:
            fast.append(sys.getswitchinterval())
            return np.array([1.0])

    with Quick(interval_s=0.002):
        time.sleep(0.05)
    assert len(fast) >= 10 and set(fast) == {before}
    stamps = np.sort(np.concatenate([a.read()[0]["ts_ns"].to_numpy(), b.read()[0]["ts_ns"].to_numpy()]))
    starts = np.sort([t for _, t, _ in seen])
    ends = np.sort([e for _, _, e in seen])
    assert len(stamps) == len(seen) and (stamps <= starts).all() and (ends - stamps >= 2_000_000).all()


def test_the_guard_turns_quick_handoffs_on_after_a_slow_sample_and_off_when_they_stop_waiting() -> None:
    import sys

    from aonkit.sources.handoffs import QUICK_SAMPLES, SAMPLE_SWITCH_S, HandoffGuard

    g, default = HandoffGuard(), sys.getswitchinterval()

    def seen() -> bool:  # is the interval lowered during this call
        return g.call(sys.getswitchinterval) < default

    assert not seen()
    g.took(500_000)  # 0.5 ms with nothing on: not slow
    assert not seen()
    g.took(2_000_000)  # slow: on for the next QUICK_SAMPLES
    on = []
    for _ in range(QUICK_SAMPLES):
        on.append(seen())
        g.took(100_000)  # quick samples that no longer wait
    assert all(on) and not seen() and sys.getswitchinterval() == default
    g.took(2_000_000)
    for _ in range(3 * QUICK_SAMPLES):  # samples that still hand the GIL over (over 2 x 0.2 ms) keep it on
        assert seen()
        g.took(int(3e9 * SAMPLE_SWITCH_S))
