"""The host sampler's compiled loop: its /proc parsing against a plain reference, fuzzed; the loop and its
lock-free ring in a real thread; the hand-over from the Python loop."""

from __future__ import annotations

import re
import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aonkit._kernels import host_loop as hl
from aonkit.sources import host_compiled
from aonkit.sources.samplers import HostSampler

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the compiled loop reads Linux /proc")

TOTAL, AVAIL = host_compiled._key(b"MemTotal:"), host_compiled._key(b"MemAvailable:")


def ref_stat(text: bytes) -> tuple[int, int] | None:
    """(busy, total) jiffies the plain way: eight numbers (up to 18 digits) after "cpu ", and a byte after them."""
    m = re.match(rb"cpu ((?:[ \t]*\d{1,18}(?!\d)){8})", text)
    if m is None or len(text) == m.end():  # a number cut by the read's end is not trusted
        return None
    v = [int(x) for x in re.findall(rb"\d+", m.group(1))]
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
    return busy, busy + v[3] + v[4]


def ref_kb(text: bytes, key: bytes) -> int:
    """The number after the first line starting with ``key``, when a space follows it ("NNN kB"); else -1."""
    for line in text.split(b"\n"):
        if line.startswith(key):
            m = re.match(rb"[ \t]*(\d{1,18})(?!\d) ", line[len(key):])
            return int(m.group(1)) if m else -1
    return -1


def kernel_stat(text: bytes) -> tuple[int, int] | None:
    out = np.zeros(2, np.int64)
    buf = np.frombuffer(text, np.uint8).copy()
    return (int(out[0]), int(out[1])) if hl.parse_stat(buf, len(buf), out) else None


def kernel_kb(text: bytes, key: np.ndarray) -> int:
    buf = np.frombuffer(text, np.uint8).copy()
    return int(hl.meminfo_kb(buf, len(buf), key))


def test_parsing_this_machines_proc_files_matches_the_reference_and_the_python_loop() -> None:
    with open("/proc/stat", "rb") as f:
        stat = f.read(hl.READ_BYTES)
    with open("/proc/meminfo", "rb") as f:
        mem = f.read(hl.READ_BYTES)
    assert kernel_stat(stat) == ref_stat(stat) is not None
    total, avail = kernel_kb(mem, TOTAL), kernel_kb(mem, AVAIL)
    assert (total, avail) == (ref_kb(mem, b"MemTotal:"), ref_kb(mem, b"MemAvailable:")) and total > avail > 0
    # the values of one sample: the same formulas as the Python loop's HostSampler.sample
    ctl = np.zeros(hl.CTL_SIZE, np.int64)
    ctl[[hl.LAST_BUSY, hl.LAST_TOTAL]] = -1
    out = np.zeros(3)
    s_buf, m_buf = np.frombuffer(stat, np.uint8).copy(), np.frombuffer(mem, np.uint8).copy()
    assert hl.host_values(s_buf, len(s_buf), m_buf, len(m_buf), TOTAL, AVAIL, ctl, np.zeros(2, np.int64), out)
    busy, tot = ref_stat(stat)
    assert np.isnan(out[0]) and (ctl[hl.LAST_BUSY], ctl[hl.LAST_TOTAL]) == (busy, tot)  # first: no interval
    assert out[2] == (total - avail) * 1024.0 and out[1] == pytest.approx(100 * (total - avail) / total)
    ctl[hl.LAST_BUSY], ctl[hl.LAST_TOTAL] = busy - 30, tot - 120
    hl.host_values(s_buf, len(s_buf), m_buf, len(m_buf), TOTAL, AVAIL, ctl, np.zeros(2, np.int64), out)
    assert out[0] == pytest.approx(25.0)


CASES = [
    b"cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\n",
    b"cpu 1 2 3 4 5 6 7 8\n",  # an older kernel: no guest columns
    b"cpu  1 2 3 4 5 6 7\n",  # too few
    b"cpu0 1 2 3 4 5 6 7 8 9 10\n",  # not the total line
    b"cpu  1 2 3 4 5 6 7 8",  # cut by the read's end inside the eighth number
    b"cpu  1 2 3 x 5 6 7 8 9 10\n",
    b"cpu  99999999999999999999 2 3 4 5 6 7 8 9 10\n",  # would overflow
    b"",
]


@pytest.mark.parametrize("text", CASES)
def test_stat_lines(text: bytes) -> None:
    assert kernel_stat(text) == ref_stat(text)


MEM = b"MemTotal:       24634232 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\nBuffers: 1 kB\n"


@pytest.mark.parametrize("cut", range(len(MEM) + 1))
def test_every_cut_of_meminfo(cut: int) -> None:
    text = MEM[:cut]
    assert kernel_kb(text, TOTAL) == ref_kb(text, b"MemTotal:")
    assert kernel_kb(text, AVAIL) == ref_kb(text, b"MemAvailable:")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([CASES[0], MEM]), st.integers(0, 120))
def test_mutated_proc_files_never_crash(noise: bytes, base: bytes, at: int) -> None:
    """Numba reads without bounds checks: garbage in gives -1/False or the reference's answer, never a crash."""
    text = base[:at] + noise + base[at:]
    assert kernel_stat(text) == ref_stat(text)
    assert kernel_kb(text, AVAIL) == ref_kb(text, b"MemAvailable:")


def test_the_compiled_loop_samples_real_values_on_the_trace_clock_and_stops_at_once() -> None:
    s = HostSampler(interval_s=0.02, compiled=True)
    t0 = time.time_ns()
    with s:
        time.sleep(0.3)
        assert s.loop == "compiled"  # the compiled loop samples, not Python
    t1 = time.time_ns()
    frame, cursor = s.read()
    assert cursor == s.count >= 8 and len(frame) == 3 * cursor
    cpu = frame[frame["metric"] == "cpu_percent"]["value"].to_numpy()
    pct = frame[frame["metric"] == "memory_percent"]["value"].to_numpy()
    used = frame[frame["metric"] == "memory_used_bytes"]["value"].to_numpy()
    assert np.isnan(cpu[0]) and ((cpu[1:] >= 0) & (cpu[1:] <= 100)).all()
    assert ((pct > 0) & (pct < 100)).all() and (used > 0).all() and s.error is None
    ts = frame["ts_ns"].to_numpy()[::3]
    assert t0 <= ts[0] and ts[-1] <= t1 and (np.diff(ts) > 0).all()  # time.time_ns()'s clock
    assert np.median(np.diff(ts)) == pytest.approx(20e6, rel=0.25)  # on its interval
    c = s.cost_ns
    assert c["n"] == cursor and 0 < c["mean"] <= c["max"]
    # the readiness check and `aonkit warmup` compile the very types the sampler passes: no second compilation
    assert len(hl.host_loop.signatures) == 1 and len(hl.ring_read.signatures) == 1
    # a long interval: stop wakes the loop at once rather than after the interval
    slow = HostSampler(interval_s=30, compiled=True)
    slow.start()
    time.sleep(0.1)
    t = time.perf_counter()
    slow.stop()
    assert time.perf_counter() - t < 5 and slow.count == 2  # its first sample and the closing one


def test_the_lock_free_ring_loses_only_lapped_samples_and_says_so() -> None:
    s = HostSampler(interval_s=0.001, capacity=16, compiled=True)
    got: list[np.ndarray] = []
    lost = [0]

    def reader() -> None:
        cursor = 0
        while s._thread is not None or cursor < s.count:
            frame, end = s.read(cursor)
            ts = frame["ts_ns"].to_numpy()[::3]
            lost[0] += end - cursor - len(ts)
            got.append(ts)
            cursor = end
            time.sleep(0.001 * (len(got) % 7))  # sometimes slower than the ring, sometimes not

    with s:
        time.sleep(0.05)
        r = threading.Thread(target=reader)
        r.start()
        time.sleep(0.4)
    r.join()
    ts = np.concatenate(got)
    assert (np.diff(ts) > 0).all()  # each sample once, in order, none torn
    assert len(ts) + lost[0] == s.count > 100


def test_the_python_loop_hands_over_to_the_compiled_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Auto mode samples in Python until the compiled loop is ready, then carries on from the same ring."""
    ready = host_compiled.kernel
    calls = [0]

    def not_at_first(compile: bool = False):  # noqa: ANN202 - the real kernel() from the third check on
        calls[0] += 1
        return ready(compile) if calls[0] > 2 else None

    monkeypatch.setattr(host_compiled, "kernel", not_at_first)
    monkeypatch.setattr(host_compiled, "CHECK_S", 0.1)
    s = HostSampler(interval_s=0.02, capacity=64)
    with s:
        time.sleep(0.1)
        before, cursor = s.read()
        assert s.loop == "python"
        time.sleep(0.4)
    after, end = s.read(cursor)  # once stopped: its closing sample too (taken when the last is 10 ms old or more)
    assert s.loop == "compiled" and calls[0] == 3
    frame = before if after.empty else __import__("pandas").concat([before, after])
    ts = frame["ts_ns"].to_numpy()[::3]
    cpu = frame[frame["metric"] == "cpu_percent"]["value"].to_numpy()
    assert len(ts) == end == s.count and (np.diff(ts) > 0).all()
    assert np.isnan(cpu[0]) and not np.isnan(cpu[1:]).any()  # the last jiffies were carried over
    assert s.cost_ns["n"] == end


@pytest.mark.parametrize("compiled", [False, True])
def test_a_proc_file_that_does_not_parse_gives_nan_and_an_error(compiled: bool, tmp_path) -> None:  # noqa: ANN001
    import os

    s = HostSampler(interval_s=0.01, compiled=compiled)
    bad = tmp_path / "stat"
    bad.write_bytes(b"not /proc/stat\n")
    os.close(s._fds[0])
    s._fds = (os.open(bad, os.O_RDONLY), s._fds[1])
    with s:
        time.sleep(0.1)
        frame, n = s.read()
    assert s.loop == ("compiled" if compiled else "python") and n >= 3
    assert np.isnan(frame["value"]).all() and s.error is not None


def test_a_stopped_compiled_sampler_starts_again_where_it_left_off() -> None:
    s = HostSampler(interval_s=0.01, capacity=1000, compiled=True)
    with s:
        time.sleep(0.1)
    first = s.count
    with s:  # a new thread and stop pipe, the same ring and cursor space
        time.sleep(0.1)
    frame, end = s.read()
    ts = frame["ts_ns"].to_numpy()[::3]
    cpu = frame[frame["metric"] == "cpu_percent"]["value"].to_numpy()
    assert end == s.count == len(ts) > first >= 3 and (np.diff(ts) > 0).all()
    assert np.isnan(cpu[0]) and not np.isnan(cpu[1:]).any()  # after the restart, CPU % over the gap


@pytest.mark.parametrize("compiled", [False, True])
def test_a_run_has_a_sample_at_its_start_and_one_at_its_end(compiled: bool) -> None:
    """Sampling starts at once and a stop takes a closing sample (from 10 ms on): a short run is spanned."""
    for wait_s, want in ((0.0, 1), (0.05, 2)):
        s = HostSampler(interval_s=30, compiled=compiled)
        if compiled:
            host_compiled.kernel(compile=True)
        t0 = time.time_ns()
        s.start()
        assert s.wait_first(5.0) and s.count == 1
        time.sleep(wait_s)
        t1 = time.time_ns()
        s.stop()
        assert s.loop == ("compiled" if compiled else "python")
        frame, end = s.read()
        ts = frame["ts_ns"].to_numpy()[::3]
        assert end == want, (wait_s, end)
        assert t0 <= ts[0] < t1 <= ts[-1] or want == 1
        if want == 2:  # the closing sample measures CPU % over the run
            cpu = frame[frame["metric"] == "cpu_percent"]["value"].to_numpy()
            assert np.isnan(cpu[0]) and 0 <= cpu[1] <= 100
    # stopped before its thread ever ran: still one sample
    s = HostSampler(interval_s=30, compiled=compiled)
    s.start()
    s.stop()
    assert s.count == 1
