"""What live sampling costs: CPU time of the sampling thread, and time per sample and per NVML call.

Usage: ``PYTHONPATH=. python bench/overhead.py [--seconds 10] [--rates 10,100]``

(a) ``HostSampler`` at each rate, its compiled loop and its Python loop; (b) ``NvmlSampler`` on the real GPUs
(when NVML starts; else it says why and skips), then each NVML reader timed on its own
(``NvmlSampler.time_readers``): time a read and a call; (c) the
sampler over the fake NVML of the tests (2 Hopper GPUs), i.e. the sampler's own Python cost without the driver;
(d) ``aonkit.profile`` without tracing around a CPU-bound run (the magic's cost without torch), its fixed cost, and
the CPU its other threads (the sampler) used meanwhile: what the run pays for on this VM, whose speed drifts more
than the wall-time difference;
(e) with CUDA, a GPU-bound loop alone and beside the GPU sampler at 10 Hz; (f) a sample's wall time beside a
thread running Python, with and without the lowered switch interval of ``quick_handoffs``. (b) runs at each of
``--rates``.

Thread CPU is ``time.thread_time()`` of the sampling thread, from its start to its end, over the same wall time:
a percentage of one core. Cost a sample is the sampler's own ``cost_ns`` (wall time of ``sample()``).
Prints markdown tables; record them yourself (this writes no file).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aonkit.sources.nvml import NvmlSampler, open_gpu_sampler  # noqa: E402
from aonkit.sources.samplers import HostSampler, RingSampler  # noqa: E402


def timed(cls: type) -> type:
    """``cls`` whose thread keeps its CPU time (``thread_cpu_s``) and wall time (``thread_wall_s``)."""

    class Timed(cls):
        def _run(self) -> None:
            c0, w0 = time.thread_time(), time.perf_counter()
            try:
                super()._run()
            finally:
                self.thread_cpu_s, self.thread_wall_s = time.thread_time() - c0, time.perf_counter() - w0

    Timed.__name__ = cls.__name__
    return Timed


def run(sampler: RingSampler, seconds: float) -> dict:
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    c = sampler.cost_ns
    return {"samples": c["n"], "mean_us": c["mean"] / 1e3, "max_us": c["max"] / 1e3,
            "cpu_pct": 100 * sampler.thread_cpu_s / sampler.thread_wall_s, "channels": len(sampler.channel_devices)}


def row(name: str, hz: float, r: dict) -> str:
    return (f"| {name} | {hz:g} | {r['channels']} | {r['samples']} | {r['mean_us']:.1f} | {r['max_us']:.1f} | "
            f"{r['cpu_pct']:.3f} |")


def process_cpu() -> float:
    """CPU seconds of every thread of this process (user + system)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def busy_loop(n: int) -> int:
    """A CPU-bound 'cell': pure Python arithmetic."""
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def profile_overhead(n: int, repeat: int) -> None:
    """(d) ``aonkit.profile`` without tracing around a CPU-bound run, and its fixed cost on an empty run."""
    import statistics
    import tempfile

    import aonkit

    busy_loop(n // 100)
    plain, profiled, empty = [], [], []
    def alone(k: int) -> None:
        t0 = time.perf_counter()
        busy_loop(n)
        plain.append(time.perf_counter() - t0)

    others = []  # CPU of the process's other threads (the sampler) during a profiled run, as a share of its wall

    def under(k: int) -> None:
        t0, c0, m0 = time.perf_counter(), process_cpu(), time.thread_time()
        with aonkit.profile(f"{tmp}/b{k}", trace=False, gpu=False, interval_s=0.1):
            busy_loop(n)
        wall = time.perf_counter() - t0
        profiled.append(wall)
        others.append(((process_cpu() - c0) - (time.thread_time() - m0)) / wall)

    with tempfile.TemporaryDirectory() as tmp:
        for k in range(repeat):  # ABBA order: a drift of the machine's speed weighs on both alike
            for run_one in ((alone, under) if k % 2 == 0 else (under, alone)):
                run_one(k)
            t0 = time.perf_counter()
            with aonkit.profile(f"{tmp}/e{k}", trace=False, gpu=False, interval_s=0.1):
                pass
            empty.append(time.perf_counter() - t0)
    p, q = statistics.median(plain), statistics.median(profiled)
    pairs = statistics.median(b / a - 1 for a, b in zip(plain, profiled))
    print(f"\naonkit.profile(trace=False) around a CPU-bound run, {repeat} pairs in ABBA order:\n")
    print("| run alone s (median) | under aonkit.profile s (median) | added (medians) | added (median of pairs) | "
          "fixed cost of an empty run (start, stop, bundle) ms | other threads' CPU while profiled, % of a core |")
    print("|---|---|---|---|---|---|")
    print(f"| {p:.3f} | {q:.3f} | {100 * (q - p) / p:+.2f}% | {100 * pairs:+.2f}% | "
          f"{1000 * statistics.median(empty):.1f} | {100 * statistics.median(others):.3f} |")


def gpu_loop_overhead(repeat: int) -> None:
    """(e) A GPU-bound loop (bf16 matrix products, a sync every 8) alone and beside the GPU sampler at 10 Hz."""
    try:
        import torch
    except ImportError:
        print("\n(e) skipped: no torch")
        return
    if not torch.cuda.is_available():
        print("\n(e) skipped: torch sees no CUDA device")
        return
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def loop() -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(400):
            x @ x
            if i % 8 == 7:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    loop()
    alone, sampled = [], []
    for _ in range(repeat):
        alone.append(loop())
        s = NvmlSampler(interval_s=0.1)
        s.start()
        sampled.append(loop())
        s.stop()
        s.close()
    a, b = float(np.median(alone)), float(np.median(sampled))
    print(f"\n(e) GPU-bound loop (400 bf16 8192^3 products), median of {repeat} alternating pairs: alone {a:.4f} s, "
          f"beside NvmlSampler at 10 Hz {b:.4f} s: {100 * (b / a - 1):+.2f}%")


def handoff_table(seconds: float) -> None:
    """(f) A sample's wall time beside a thread running Python, with and without ``quick_handoffs``.

    Each call that releases the GIL (a ``pread``, an NVML call through ctypes) waits for the switch interval to
    get it back from a busy Python thread. Rows: the host sampler, and a stand-in for an NVML sample (30 ctypes
    calls of 20 us, ``usleep``), each with the lowered switch interval and with the default one.
    """
    import ctypes
    import threading

    import aonkit.sources.handoffs as handoffs

    libc = ctypes.CDLL(None)

    class ThirtyCalls(RingSampler):
        metrics = ("x",)

        def sample(self) -> np.ndarray:
            for _ in range(30):
                libc.usleep(20)
            return np.array([1.0])

    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            busy_loop(20_000)

    print("\n(f) a sample's wall time beside a thread running Python (GIL hand-offs)\n")
    print("| sampler | switch interval during a sample | samples | wall time a sample us (mean) | max us |")
    print("|---|---|---|---|---|")
    saved = handoffs.SAMPLE_SWITCH_S
    def python_host(interval_s: float) -> HostSampler:
        return HostSampler(interval_s, compiled=False)

    def compiled_host(interval_s: float) -> HostSampler:
        return HostSampler(interval_s, compiled=True)

    for name, cls, ways in (("HostSampler (Python loop)", python_host, (True, False)),
                            ("HostSampler (compiled loop: never takes the GIL)", compiled_host, (False,)),
                            ("30 ctypes calls of 20 us (NVML stand-in)", ThirtyCalls, (True, False))):  # fmt: skip
        for quick in ways:
            handoffs.SAMPLE_SWITCH_S = saved if quick else 1.0  # 1.0: min(1.0, default) keeps the default
            stop.clear()
            t = threading.Thread(target=busy)
            t.start()
            s = cls(interval_s=0.1)
            s.start()
            time.sleep(seconds)
            s.stop()
            stop.set()
            t.join()
            c = s.cost_ns
            how = f"{saved * 1e3:g} ms (quick_handoffs)" if quick else f"{sys.getswitchinterval() * 1e3:g} ms (default)"
            print(f"| {name} | {how} | {c['n']} | {c['mean'] / 1e3:.0f} | {c['max'] / 1e3:.0f} |", flush=True)
    handoffs.SAMPLE_SWITCH_S = saved


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rates", default="10,100", help="host sampler rates, Hz")
    ap.add_argument("--host-pairs", type=int, default=2, choices=(1, 2),
                    help="(a): compiled and Python loop once (1) or in ABBA order (2)")
    ap.add_argument("--cell", type=int, default=40_000_000, help="iterations of the CPU-bound run for (d)")
    ap.add_argument("--repeat", type=int, default=7, help="alternating runs for (d) and (e); 0: skip (d)")
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",")]

    print("| sampler | Hz | channels | samples | cost a sample us (mean) | max us | thread CPU % of a core |")
    print("|---|---|---|---|---|---|---|")
    for hz in rates:  # (a), in ABBA order: the VM's speed drifts
        for compiled in (True, False, False, True)[: 2 * args.host_pairs]:
            name = "HostSampler (compiled loop)" if compiled else "HostSampler (Python loop)"
            r = run(timed(HostSampler)(interval_s=1 / hz, compiled=compiled), args.seconds)
            print(row(name, hz, r), flush=True)

    sampler, note = open_gpu_sampler()  # (b)
    readers = None
    if sampler is None:
        print(f"| NvmlSampler | - | - | - | skipped: {note} | | |")
    else:
        sampler.close()
        for hz in rates:
            real = timed(NvmlSampler)(interval_s=1 / hz)
            print(row(f"NvmlSampler ({len(real.devices)} GPU)", hz, run(real, args.seconds)), flush=True)
            if readers is None:
                readers, left_out = real.time_readers(repeat=50), real.unsupported
            real.close()

    try:  # (c)
        from tests.fake_nvml import FakeGpu, FakeNvml
    except ImportError as exc:
        print(f"| NvmlSampler (fake NVML) | - | - | - | skipped: {exc} | | |")
    else:
        fake = timed(NvmlSampler)(interval_s=0.1, nvml=FakeNvml([FakeGpu(), FakeGpu()]), gpm_min_interval_s=0.1)
        print(row("NvmlSampler (fake NVML, 2 GPU)", 10, run(fake, args.seconds)))
        fake.close()

    handoff_table(min(args.seconds, 5.0))
    if args.repeat:
        profile_overhead(args.cell, args.repeat)
    if sampler is not None:
        gpu_loop_overhead(args.repeat or 5)

    if readers is not None:
        print("\nNVML readers, timed alone (50 reads each):\n")
        print("| GPU | metrics | NVML calls | us a read | us a call |")
        print("|---|---|---|---|---|")
        for r in readers.itertuples(index=False):
            names = r.metrics if len(r.metrics) < 60 else r.metrics[:57] + "..."
            print(f"| {r.device} | {names} | {r.nvml_calls} | {r.mean_us:.1f} | {r.mean_us / r.nvml_calls:.1f} |")
        if len(left_out):
            print("\nLeft out at the probe:\n")
            for (device, reason), g in left_out.groupby(["device", "reason"], sort=False):
                print(f"- GPU {device}: {', '.join(g['metric'])}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
